"""Whether spans are exported, and where, decided before OpenTelemetry is imported: its SDK and
OTLP exporter take a tenth of a second to import, which only a process that exports pays."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .traces import TraceSink

ENDPOINT_ENV = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


def endpoint(option: str) -> str | None:
    """Where spans go: the option's collector (its /v1/traces), else the standard variables."""
    if option:
        return (
            option
            if option.rstrip("/").endswith("/v1/traces")
            else option.rstrip("/") + "/v1/traces"
        )
    if any(os.environ.get(name) for name in ENDPOINT_ENV):
        return ""  # the exporter reads the variables itself
    return None


def traces(settings: dict[str, Any], count: Callable[[str, int], None]) -> TraceSink | None:
    """The trace sink these settings ask for, or None when export is off."""
    where = endpoint(settings["tooltap_otlp"])
    if where is None:
        return None
    from .traces import TraceSink  # noqa: PLC0415 - OpenTelemetry only when spans are exported

    return TraceSink(where, settings["tooltap_log_arguments"], count)
