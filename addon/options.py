"""tooltap's options, declared once: mitmproxy's `--set`, the inspector's settings, `tooltap run`.

Each option has its type, default, help, allowed values and bounds here. The
addon registers them with mitmproxy and checks them; the ones the inspection
side reads travel to it as data (a change restarts it); `tooltap run` turns
the ones with a flag into command-line options.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tooltap.core.lock import read_lock

from .sinks.log import LOG_FORMATS
from .sinks.redaction import ARGUMENT_MODES

INSPECTORS = ("process", "thread")
# The first-party places these APIs are served: OpenAI, Anthropic, Azure OpenAI, Anthropic
# on Azure AI Foundry and on AWS, Bedrock, Vertex AI, the Gemini API and Cohere.
DEFAULT_HOSTS = [
    "api.openai.com",
    "api.anthropic.com",
    "*.openai.azure.com",
    "*.services.ai.azure.com",
    "aws-external-anthropic.*.api.aws",
    "bedrock-mantle.*.api.aws",
    "bedrock-runtime.*.amazonaws.com",
    "aiplatform.googleapis.com",
    "*-aiplatform.googleapis.com",
    "aiplatform.*.rep.googleapis.com",
    "generativelanguage.googleapis.com",
    "api.cohere.com",
    "api.cohere.ai",
]


@dataclass(frozen=True)
class Option:
    name: str
    type: Any  # str, int or Sequence[str]: what mitmproxy's --set can parse
    default: Any
    help: str
    choices: tuple[str, ...] | None = None
    minimum: int | None = None
    maximum: int | None = None
    inspection: bool = False  # read by the inspection side: a change restarts it
    flag: str | None = None  # the `tooltap run` flag that sets it
    metavar: str | None = None  # what the flag's value is called in its help
    check: Callable[[Any], str | None] | None = None  # a further check: why a value is not allowed

    def problem(self, value: Any) -> str | None:
        """Why value is not allowed, or None."""
        if self.choices is not None and value not in self.choices:
            return f"{self.name} must be one of {', '.join(self.choices)}"
        if self.minimum is not None and value < self.minimum:
            return f"{self.name} must be {self.minimum} or more, not {value}"
        if self.maximum is not None and value > self.maximum:
            return f"{self.name} must be {self.maximum} or less, not {value}"
        return self.check(value) if self.check is not None else None


def state_problem(url: str) -> str | None:
    """Why tooltap_state cannot be used: not a Redis URL, or no Redis client installed."""
    if not url:
        return None
    if not url.startswith(("redis://", "rediss://")):
        return "tooltap_state must be a redis://host:port/db or rediss://host:port/db URL"
    if importlib.util.find_spec("redis") is None:
        return "tooltap_state needs the Redis client: pip install 'tooltap[redis]'"
    return None


def host_port(text: str, option: str = "tooltap_health") -> tuple[str, int]:
    """HOST:PORT as (host, port); a bracketed IPv6 host loses its brackets. Raises ValueError."""
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{option} wants HOST:PORT, not {text!r}")
    return host.strip("[]"), int(port)


def address_problem(text: str) -> str | None:
    """Why an address option (empty: off) cannot be used, or None."""
    try:
        text and host_port(text)
    except ValueError as exc:
        return str(exc)
    return None


def lock_problem(path: str) -> str | None:
    """Why a tools lock cannot be used, or None (an empty path: no lock)."""
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            read_lock(handle.read())
    except OSError as exc:
        return f"tooltap_tools_lock: cannot read {path}: {exc.strerror or exc}"
    except ValueError as exc:
        return f"tooltap_tools_lock: {path} is not a usable tools lock: {exc}"
    return None


OPTIONS = (
    Option(
        "tooltap_hosts",
        Sequence[str],
        DEFAULT_HOSTS,
        "Hosts whose traffic is inspected (fnmatch patterns of host or host:port; '*' for all). "
        "Reverse-mode traffic always is.",
    ),
    Option(
        "tooltap_mcp_hosts",
        Sequence[str],
        [],
        "MCP servers whose traffic is inspected (fnmatch patterns of host or host:port): a "
        "POST there with a JSON-RPC body is read as MCP. `tooltap run --upstream mcp:URL` adds "
        "its host.",
    ),
    Option(
        "tooltap_max_body",
        int,
        8 * 1024 * 1024,
        "Bodies, and a WebSocket turn's events, larger than this many bytes pass through uninspected (counted as skipped).",
        minimum=1,
        inspection=True,
    ),
    Option(
        "tooltap_memory_budget",
        int,
        256 * 1024 * 1024,
        "Bytes tooltap may hold for inspection at once (stream copies, and bodies until the inspector has handled them); past it, exchanges pass through uninspected and are counted as skipped. The inspector holds its WebSocket turns in flight to the same number.",
        minimum=1024 * 1024,
        inspection=True,
    ),
    Option(
        "tooltap_metrics_host",
        str,
        "127.0.0.1",
        "Address of the Prometheus /metrics endpoint. Loopback by default: do not expose it publicly.",
        inspection=True,
    ),
    Option(
        "tooltap_metrics_port",
        int,
        9464,
        "Port of the /metrics endpoint (0: any free port).",
        minimum=0,
        maximum=65535,
        inspection=True,
    ),
    Option(
        "tooltap_health",
        str,
        "",
        "HOST:PORT where the proxy process itself answers /livez and /readyz (plain HTTP, on "
        "its event loop; up while the inspector restarts). Empty: off. `tooltap run` turns it "
        "on at 127.0.0.1:9465.",
        check=address_problem,
    ),
    Option(
        "tooltap_tls_cert",
        str,
        "",
        "A PEM file with the certificate (then its chain) the reverse listeners present to "
        "clients that speak TLS; a plain-HTTP request is then refused with a 400, never sent "
        "upstream. Given to mitmproxy's certs option. Off: the listeners speak plain HTTP.",
        flag="--tls-cert",
        metavar="FILE",
    ),
    Option(
        "tooltap_tls_key",
        str,
        "",
        "A PEM file with tooltap_tls_cert's private key (unencrypted), when it is not in the "
        "certificate's file (a Kubernetes TLS Secret mounts tls.crt and tls.key apart).",
        flag="--tls-key",
        metavar="FILE",
    ),
    Option(
        "tooltap_log_format",
        str,
        "auto",
        "json, console, or auto (console on a terminal, JSON lines otherwise).",
        choices=LOG_FORMATS,
        inspection=True,
        flag="--log-format",
    ),
    Option(
        "tooltap_log_file",
        str,
        "",
        "Append the log to this file instead of stdout (with plain mitmdump, stdout also carries mitmproxy's own lines).",
        inspection=True,
    ),
    Option(
        "tooltap_log_arguments",
        str,
        "raw",
        "How tool arguments are logged: raw, redact (mask secret-looking keys), hash (keyed), omit.",
        choices=ARGUMENT_MODES,
        inspection=True,
        flag="--log-arguments",
    ),
    Option(
        "tooltap_model_labels",
        int,
        50,
        "Distinct model label values kept in metrics; later models count as 'other'.",
        minimum=0,
        inspection=True,
        flag="--model-labels",
    ),
    Option(
        "tooltap_otlp",
        str,
        "",
        "Export each verdict as an OpenTelemetry span to this OTLP/HTTP collector (e.g. "
        "http://collector:4318); OTEL_EXPORTER_OTLP_ENDPOINT does the same. Off when neither is set.",
        inspection=True,
        flag="--otlp",
        metavar="URL",
    ),
    Option(
        "tooltap_inspector",
        str,
        "process",
        "Where inspection runs: process (a child process, beside the proxy) or thread (inside it).",
        choices=INSPECTORS,
        inspection=True,
    ),
    Option(
        "tooltap_state",
        str,
        "",
        "Share what inspection remembers across exchanges (the calls a Responses turn left open, "
        "the response ids already counted) with the other replicas, in Redis: "
        "redis://host:6379/0 or rediss://... Needed with more than one replica. Off: each "
        "process remembers on its own.",
        inspection=True,
        flag="--state",
        metavar="URL",
        check=state_problem,
    ),
    Option(
        "tooltap_state_ttl",
        int,
        3600,
        "Seconds a response id stays in the shared state (tooltap_state): a follow-up or a poll "
        "later than that is not matched across replicas.",
        minimum=1,
        inspection=True,
    ),
    Option(
        "tooltap_tool_deadline",
        int,
        60,
        "Seconds a tool call may wait for its answer: past it, a call something still waits "
        "for (an open Realtime, Gemini Live or Responses WebSocket session, an MCP tools/call "
        "still running) gets one tool_overdue warning, and an answer that comes later is "
        "marked late.",
        minimum=1,
        inspection=True,
    ),
    Option(
        "tooltap_tools_lock",
        str,
        "",
        "A tools lock (JSON, written by `tooltap audit --write-tools-lock`): the approved tool "
        "definitions. A definition that differs from its entry is a tool-changed from its first "
        "sight. Off: each definition is trusted the first time it is seen.",
        inspection=True,
        flag="--tools-lock",
        metavar="FILE",
        check=lock_problem,
    ),
    Option(
        "tooltap_app_header",
        str,
        "x-tooltap-app",
        "A request header whose value names the application, which its declared tools are "
        "pinned under; without it, an application is told apart by a keyed hash of its "
        "credential (TOOLTAP_HASH_KEY). Empty: credentials only.",
        inspection=True,
    ),
    Option(
        "tooltap_pins_ttl",
        int,
        30 * 24 * 3600,
        "Seconds a tool definition's pin stays in the shared state (tooltap_state) after it was "
        "last seen; after that, the next definition seen is trusted anew.",
        minimum=60,
        inspection=True,
    ),
    Option(
        "tooltap_queue_size",
        int,
        1000,
        "Exchanges waiting for inspection; when full, new ones are dropped and counted.",
        minimum=1,
        inspection=True,
    ),
)
BY_NAME = {option.name: option for option in OPTIONS}


def add_options(loader: Any) -> None:
    """Declare every option with mitmproxy (an addon's `load`)."""
    for option in OPTIONS:
        loader.add_option(option.name, option.type, option.default, option.help, option.choices)


def problems(values: Any, names: Iterable[str]) -> list[str]:
    """Why the named options' current values are not allowed (values: mitmproxy's options)."""
    found = (BY_NAME[name].problem(getattr(values, name)) for name in names if name in BY_NAME)
    return [problem for problem in found if problem is not None]


def settings(values: Any) -> dict[str, Any]:
    """What the inspection side reads, as data: option name -> value."""
    return {option.name: getattr(values, option.name) for option in OPTIONS if option.inspection}


def defaults() -> dict[str, Any]:
    """The inspection settings at their defaults."""
    return {option.name: option.default for option in OPTIONS if option.inspection}
