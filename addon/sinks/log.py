"""The structured log: DESIGN.md's events, JSON lines by default, console for people.

Events are data: `turn`, `tool_call`, `loop_error`, `request_rejected`,
`stream_error`, `tool_result_error`, `no_tool_call`, `tool_time`, `tool_changed` (a
definition's diff, never a call's arguments) and `hidden_text`, and for a tool server's
exchange (MCP) `tool_result`, with the server and session on each line. No header value is
ever logged, and with `redact`, `hash` or `omit` neither is anything
secret-looking in the arguments or in messages that could echo them.
"""

from __future__ import annotations

import io
import os
import sys
from typing import IO, Any

import orjson
import structlog

from tooltap.core import Verdict
from tooltap.core.findings import DEFAULT, findings

from .redaction import ARGUMENT_MODES, ArgumentPolicy

LOG_FORMATS = ("json", "console", "auto")
__all__ = ["ARGUMENT_MODES", "LOG_FORMATS", "LogSink"]


def _renderer(log_format: str, stream: IO[str]) -> Any:
    if log_format == "auto":
        log_format = "console" if stream.isatty() else "json"
    if log_format == "console":
        return structlog.dev.ConsoleRenderer(
            colors=stream.isatty() or os.environ.get("FORCE_COLOR") == "1"
        )
    return structlog.processors.JSONRenderer(serializer=lambda v, **_: orjson.dumps(v).decode())


class LogSink:
    """Verdicts as log events, rendered at the edge: JSON lines, or console lines for people.

    processors replaces the renderer (structlog's LogCapture, in tests, sees the
    events as data); the log level and the timestamp are added before them.
    """

    def __init__(
        self,
        log_format: str = "json",
        arguments: str = "raw",
        stream: IO[str] | None = None,
        processors: list[Any] | None = None,
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
                *(processors or [_renderer(log_format, self._stream)]),
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

    def tool_overdue(self, **fields: Any) -> None:
        """A call still unanswered past tooltap_tool_deadline while something waits for it:
        said once, as the deadline passes."""
        try:
            self._log.warning("tool_overdue", **fields)
            self._stream.write(self._lines.getvalue())
            self._stream.flush()
        finally:
            self._lines.seek(0)
            self._lines.truncate()

    def _events(self, verdict: Verdict, host: str, path: str, inspect_ms: float) -> None:
        log = self._log
        policy = self.policy
        # A tool server's lines say which server and session (a model's say which response).
        served = (
            {"server": verdict.server, "session": verdict.session}
            if verdict.scope == "tool"
            else {}
        )
        for call in verdict.calls:
            errors = [policy.schema_error(e.model_dump()) for e in call.schema_errors]
            bad = call.parse_error is not None or bool(errors)
            (log.warning if bad else log.info)(
                "tool_call",
                api=verdict.api,
                transport=verdict.transport,
                response_id=verdict.response_id,
                call_id=call.call_id,
                name=call.name,
                arguments_raw=policy.arguments(call.arguments_raw),
                parse_error=call.parse_error.model_dump() if call.parse_error else None,
                schema_errors=errors,
                schema_problem=call.schema_problem,
                **served,
                # A call the provider ran (hosted MCP) says so, and on which server.
                **({"hosted": True, "server": call.server} if call.hosted else {}),
            )
        for error in verdict.loop_errors:
            (log.warning if error.rule in DEFAULT else log.info)(
                "loop_error",
                api=verdict.api,
                rule=error.rule,
                ids=error.ids,
                where=error.where,
                repair=error.repair,
                **served,
            )
        if verdict.rejected is not None:
            log.warning(
                "request_rejected",
                api=verdict.api,
                status=verdict.rejected.status,
                type=verdict.rejected.type,
                message=policy.message(verdict.rejected.message),
                blockers=verdict.rejected.blockers,
                **served,
            )
        for failure in verdict.stream_errors:
            # The API's own error, sent inside a 200 stream (Anthropic's
            # overloaded_error, a Responses `error` event): its words, as for a 4xx.
            log.warning(
                "stream_error",
                api=verdict.api,
                response_id=verdict.response_id,
                type=failure.type,
                message=policy.message(failure.message),
            )
        for failure in verdict.session_errors:
            # The session's own error, refusing no request (an empty audio buffer committed).
            log.info(
                "session_error",
                api=verdict.api,
                transport=verdict.transport,
                type=failure.type,
                message=policy.message(failure.message),
            )
        names = {call.call_id: call.name for call in verdict.calls}
        for result in verdict.tool_results:
            if served:
                errors = [policy.schema_error(e.model_dump()) for e in result.schema_errors]
                bad = result.outcome == "error" or bool(errors)
                (log.warning if bad else log.info)(
                    "tool_result",
                    api=verdict.api,
                    call_id=result.call_id,
                    name=result.name or names.get(result.call_id),
                    outcome=result.outcome,
                    schema_errors=errors,
                    schema_problem=result.schema_problem,
                    **served,
                )
            elif result.outcome == "error":
                log.warning(
                    "tool_result_error", api=verdict.api, call_id=result.call_id, where=result.where
                )
        for timed in verdict.tool_times:
            # How long the application's tool took to answer the call: info, or a warning
            # when it came past the deadline.
            (log.warning if timed.late else log.info)(
                "tool_time", api=verdict.api, transport=verdict.transport, **timed.model_dump()
            )
        for change in verdict.tool_changes:
            log.warning("tool_changed", api=verdict.api, **(change.model_dump() | served))
        for hidden in policy.hidden(verdict.hidden_text):
            log.warning("hidden_text", api=verdict.api, **(hidden.model_dump() | served))
        if verdict.state not in (None, "no-tools") and not verdict.call_count:
            log.info(
                "no_tool_call",
                api=verdict.api,
                response_id=verdict.response_id,
                output_types=verdict.output_types,
            )
        if verdict.scope == "session":
            return  # no turn: the session's own lines above are the whole of it
        # A finding, or an exchange that could not be read whole, is worth a warning; one no
        # dialect reads (a model list, a family without tool calls) is said, and no more.
        warn = (
            any(name in DEFAULT for name in findings(verdict))
            or bool(verdict.stream_errors)
            or verdict.outcome not in ("inspected", "not_read")
        )
        (log.warning if warn else log.info)(
            "turn",
            api=verdict.api,
            transport=verdict.transport,
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
            calls=verdict.call_count,
            duplicates=verdict.duplicates,
            repairs=verdict.repairs,
            unchecked=verdict.unchecked,
            inspect_ms=round(inspect_ms, 3),
            duration_ms=verdict.duration_ms,
            first_token_ms=verdict.first_token_ms,
            input_tokens=verdict.usage.get("input_tokens"),
            output_tokens=verdict.usage.get("output_tokens"),
            # The counts some APIs break out, where they do.
            **{
                k: verdict.usage[k]
                for k in ("cached_input_tokens", "reasoning_tokens")
                if k in verdict.usage
            },
            **({"tool_wait_ms": verdict.tool_wait_ms} if verdict.tool_times else {}),
            **(served and served | {"rpc": verdict.rpc, "listed_tools": verdict.listed_tools}),
        )
