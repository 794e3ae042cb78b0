"""The structured log: DESIGN.md's events, JSON lines by default, console for people.

Events are data: `turn`, `tool_call`, `loop_error`, `request_rejected`,
`stream_error`, `tool_result_error` and `no_tool_call`. No header value is
ever logged, and with `redact`, `hash` or `omit` neither is anything
secret-looking in the arguments or in messages that could echo them.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import os
import re
import secrets
import sys
from collections.abc import Mapping
from typing import IO, Any

import orjson
import structlog

from tooltap.core import Verdict
from tooltap.core.jsontext import loads

LOG_FORMATS = ("json", "console", "auto")
ARGUMENT_MODES = ("raw", "redact", "hash", "omit")

SECRET_KEY = re.compile(
    r"pass(word|wd|phrase)?|secret|token|api[_-]?key|apikey|auth|credential|private[_-]?key"
    r"|session|cookie|bearer|access[_-]?key|signature|ssn|card[_-]?number|cvv",
    re.IGNORECASE,
)
# Credentials that look like credentials wherever they appear in free text.
SECRET_TEXT = re.compile(
    r"(sk-[A-Za-z0-9_\-]{8,}|sk-ant-[A-Za-z0-9_\-]{8,}|Bearer\s+[A-Za-z0-9._\-]{8,}|eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-.]+)"
)
REDACTED = "[redacted]"
FINDINGS = {"strict-void", "fanout-no-strict", "advisory-schema", "no-schema", "advisory-tools"}


def _redact_value(value: Any) -> Any:
    """Replace the values under secret-looking keys, at any depth (iteratively)."""
    root: list[Any] = [value]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        parent, key = stack.pop()
        node = parent[key]
        if isinstance(node, dict):
            for name in node:
                if SECRET_KEY.search(str(name)):
                    node[name] = REDACTED
                else:
                    stack.append((node, name))
        elif isinstance(node, list):
            stack.extend((node, i) for i in range(len(node)))
        elif isinstance(node, str):
            parent[key] = SECRET_TEXT.sub(REDACTED, node)
    return root[0]


def redact_text(text: str) -> str:
    """Arguments with secret-looking fields masked; unparseable text is scrubbed by pattern."""
    value, error = loads(text)
    if error is not None:
        masked = re.sub(
            r'("(?:[^"\\]|\\.)*"\s*:\s*)"(?:[^"\\]|\\.)*"?',
            lambda m: m.group(1) + f'"{REDACTED}"' if SECRET_KEY.search(m.group(1)) else m.group(0),
            text,
        )
        return SECRET_TEXT.sub(REDACTED, masked)
    return orjson.dumps(_redact_value(value)).decode()


class ArgumentPolicy:
    """How much of the arguments (and of text that could echo them) reaches the log."""

    def __init__(self, mode: str, key: bytes | None = None) -> None:
        self.mode = mode
        # Keyed, so a short secret cannot be recovered by hashing guesses; set
        # TOOLTAP_HASH_KEY to make hashes comparable across replicas.
        env = os.environ.get("TOOLTAP_HASH_KEY")
        self._key = key or (env.encode() if env else secrets.token_bytes(32))

    def arguments(self, raw: str) -> str | None:
        if self.mode == "raw":
            return raw
        if self.mode == "omit":
            return None
        if self.mode == "hash":
            digest = hmac.new(
                self._key, raw.encode("utf-8", "surrogatepass"), hashlib.sha256
            ).hexdigest()
            return "hmac-sha256:" + digest[:32]
        return redact_text(raw)

    def message(self, text: str) -> str:
        return text if self.mode == "raw" else SECRET_TEXT.sub(REDACTED, text)

    def schema_error(self, error: Mapping[str, Any]) -> dict[str, Any]:
        # Validator messages quote the offending value: keep only the path
        # unless the arguments themselves may be logged.
        if self.mode == "raw":
            return dict(error)
        if self.mode == "redact" and not SECRET_KEY.search(str(error["path"])):
            return {"path": error["path"], "message": self.message(str(error["message"]))}
        return {"path": error["path"], "message": REDACTED}


def _renderer(log_format: str, stream: IO[str]) -> Any:
    if log_format == "auto":
        log_format = "console" if stream.isatty() else "json"
    if log_format == "console":
        return structlog.dev.ConsoleRenderer(
            colors=stream.isatty() or os.environ.get("FORCE_COLOR") == "1"
        )
    return structlog.processors.JSONRenderer(serializer=lambda v, **_: orjson.dumps(v).decode())


class LogSink:
    def __init__(
        self, log_format: str = "json", arguments: str = "raw", stream: IO[str] | None = None
    ) -> None:
        self._stream = stream or sys.stdout
        self.policy = ArgumentPolicy(arguments)
        # An exchange's lines are gathered here and written to the stream at once:
        # one write per exchange, so lines from elsewhere cannot land between them.
        self._lines = io.StringIO()
        self._log = structlog.wrap_logger(
            structlog.PrintLogger(self._lines),
            processors=[
                structlog.processors.add_log_level,
                structlog.processors.TimeStamper(fmt="iso", utc=True),
                _renderer(log_format, self._stream),
            ],
            context_class=dict,
        )

    def emit(self, verdict: Verdict, host: str, path: str, inspect_ms: float) -> None:
        """Log one exchange: its calls and findings first, then the `turn` line that sums it up."""
        try:
            self._events(verdict, host, path, inspect_ms)
            self._stream.write(self._lines.getvalue())
            self._stream.flush()
        finally:
            self._lines.seek(0)
            self._lines.truncate()

    def _events(self, verdict: Verdict, host: str, path: str, inspect_ms: float) -> None:
        log = self._log
        policy = self.policy
        bad_calls = False
        for call in verdict.calls:
            errors = [policy.schema_error(e.model_dump()) for e in call.schema_errors]
            bad = call.parse_error is not None or bool(errors)
            bad_calls = bad_calls or bad
            (log.warning if bad else log.info)(
                "tool_call",
                api=verdict.api,
                response_id=verdict.response_id,
                call_id=call.call_id,
                name=call.name,
                arguments_raw=policy.arguments(call.arguments_raw),
                parse_error=call.parse_error.model_dump() if call.parse_error else None,
                schema_errors=errors,
                schema_problem=call.schema_problem,
            )
        for error in verdict.loop_errors:
            log.warning(
                "loop_error",
                api=verdict.api,
                rule=error.rule,
                ids=error.ids,
                where=error.where,
                repair=error.repair,
            )
        if verdict.rejected is not None:
            log.warning(
                "request_rejected",
                api=verdict.api,
                status=verdict.rejected.status,
                type=verdict.rejected.type,
                message=policy.message(verdict.rejected.message),
                blockers=verdict.rejected.blockers,
            )
        for failure in verdict.stream_errors:
            # The API's own error, sent inside a 200 stream (Anthropic's
            # overloaded_error, a Responses `error` event): its words, as for a 4xx.
            log.warning(
                "stream_error",
                api=verdict.api,
                response_id=verdict.response_id,
                type=failure.get("type", ""),
                message=policy.message(failure.get("message", "")),
            )
        for result in verdict.tool_results:
            if result.outcome == "error":
                log.warning(
                    "tool_result_error", api=verdict.api, call_id=result.call_id, where=result.where
                )
        if verdict.state not in (None, "no-tools") and not verdict.calls:
            log.info(
                "no_tool_call",
                api=verdict.api,
                response_id=verdict.response_id,
                output_types=verdict.output_types,
            )
        finding = (
            verdict.state in FINDINGS
            or verdict.format_state in FINDINGS
            or bad_calls
            or bool(verdict.loop_errors)
            or verdict.rejected is not None
            or bool(verdict.stream_errors)
            or verdict.outcome != "inspected"
        )
        (log.warning if finding else log.info)(
            "turn",
            api=verdict.api,
            host=host,
            path=path,
            status=verdict.status,
            stream=verdict.stream,
            model=verdict.model,
            response_id=verdict.response_id,
            outcome=verdict.outcome,
            reason=verdict.reason,
            state=verdict.state,
            format_state=verdict.format_state,
            calls=len(verdict.calls),
            duplicates=verdict.duplicates,
            repairs=verdict.repairs,
            inspect_ms=round(inspect_ms, 3),
        )
