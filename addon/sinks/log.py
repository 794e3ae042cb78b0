"""The structured log: JSON lines by default, console for people.

Events are data: `turn`, `tool_call`, `loop_error`, `request_rejected`,
`stream_error`, `tool_result_error`, `no_tool_call`, `tool_time`, `tool_changed` (a
definition's diff, never a call's arguments) and `hidden_text`, and for a tool server's
exchange (MCP) `tool_result`, with the server and session on each line. No header value is
ever logged, and with `redact`, `hash` or `omit` neither is anything
secret-looking in the arguments or in messages that could echo them.

Lines join by their exchange: `emit` gives an exchange's keys (JOIN_KEYS: `exchange`, its
`response_id`, `model` and `path`, and on a socket its `session` and `turn`) to the logger
every line of that exchange is written through, so an event added to `_events` carries them
with no more code. Lines written outside an exchange must carry the same keys (`joined`).

Each line is a structlog event dict run through one processor chain, made once per sink:
structlog's `add_log_level`, the timestamp (as structlog's `TimeStamper(fmt="iso",
utc=True)` writes it), then the renderer, or the processors a test passes (structlog's
`LogCapture`). The chain is run by `_Exchange`, as structlog's bound loggers run theirs (the
context, then the call's keywords, then `event`; `DropEvent` drops the line), without their
cost per line and without a bound logger assembled per exchange: the log is part of the
inspector's CPU per flow.
"""

from __future__ import annotations

import datetime
import os
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any

import orjson
import structlog
from structlog.typing import EventDict, Processor

from tooltap.core import Verdict
from tooltap.core.findings import DEFAULT, findings

from .redaction import ARGUMENT_MODES, ArgumentPolicy

LOG_FORMATS = ("json", "console", "auto")
JOIN_KEYS = ("exchange", "response_id", "model", "path")  # on every line of an exchange
SOCKET_KEYS = ("session", "turn")  # and on a socket's lines
__all__ = ["ARGUMENT_MODES", "JOIN_KEYS", "LOG_FORMATS", "ExchangeIds", "LogSink", "short_id"]


def short_id(flow: str) -> str:
    """An exchange's id in the log: the first 12 hex digits of its flow's id (mitmproxy's
    UUID, so a flow file or mitmweb finds it), or 12 fresh ones when there is no flow (an
    upstream that refused the connection before any request)."""
    digits = flow.replace("-", "")[:12]
    return digits if len(digits) == 12 else uuid.uuid4().hex[:12]


@dataclass(frozen=True, slots=True)
class ExchangeIds:
    """What ties a line to its exchange: the exchange's short id; on a WebSocket, the socket's
    id (`session`) and the turn's number on it, from 1 (`exchange` is then `session.turn`; what
    a session says outside its turns has no turn)."""

    exchange: str
    session: str | None = None
    turn: int | None = None

    @classmethod
    def of_flow(cls, flow: str) -> ExchangeIds:
        return cls(short_id(flow))

    @classmethod
    def of_socket(cls, flow: str, turn: int | None) -> ExchangeIds:
        session = short_id(flow)
        return cls(session if turn is None else f"{session}.{turn}", session, turn)


def joined(ids: ExchangeIds, verdict: Verdict, path: str) -> dict[str, Any]:
    """The keys every line of one exchange carries (JOIN_KEYS, and SOCKET_KEYS on a socket)."""
    keys: dict[str, Any] = {
        "exchange": ids.exchange,
        "response_id": verdict.response_id,
        "model": verdict.model,
        "path": path,
    }
    if ids.session is not None:
        keys |= {"session": ids.session, "turn": ids.turn}
    return keys


def _json(_logger: Any, _level: str, event_dict: EventDict) -> bytes:
    """The JSON renderer: the event dict as orjson writes it, keys in their order."""
    return orjson.dumps(event_dict)


def _renderer(log_format: str, stream: IO[str]) -> Processor:
    if log_format == "auto":
        log_format = "console" if stream.isatty() else "json"
    if log_format == "console":
        return structlog.dev.ConsoleRenderer(
            colors=stream.isatty() or os.environ.get("FORCE_COLOR") == "1"
        )
    return _json


def _timestamper() -> Processor:
    """`timestamp`, as structlog's TimeStamper(fmt="iso", utc=True) writes it: datetime's
    isoformat in UTC with Z for +00:00, `2026-12-05T18:07:50.123456Z`, and no fraction on the
    second itself. Its date and time are formatted once a second, the microseconds (floored,
    as datetime.now floors them) on each line: a third of TimeStamper's cost."""
    cached = (-1, "", "")  # a second, its stamp, and its stamp's format with a fraction

    def stamp(_logger: Any, _level: str, event_dict: EventDict) -> EventDict:
        nonlocal cached
        now = time.time_ns() // 1000  # µs
        second, whole, fraction = cached  # one read: never one second with another's stamp
        if now // 1_000_000 != second:
            second = now // 1_000_000
            at = datetime.datetime.fromtimestamp(second, datetime.UTC)
            whole = at.isoformat().replace("+00:00", "Z")
            fraction = whole[:-1] + ".%06dZ"
            cached = (second, whole, fraction)
        micro = now % 1_000_000
        event_dict["timestamp"] = fraction % micro if micro else whole
        return event_dict

    return stamp


def _level(name: str) -> Callable[..., None]:
    """A logging method of _Exchange, for one level (structlog's method names: info, warning)."""

    def log(self: _Exchange, event: str, **fields: Any) -> None:
        event_dict: Any = {**self.keys, **fields}  # as structlog's: the context, then keywords
        event_dict["event"] = event
        try:
            # No wrapped logger (None): add_log_level, the renderers and LogCapture never read it.
            for processor in self.chain:
                event_dict = processor(None, name, event_dict)
        except structlog.DropEvent:
            return
        self.lines.append(event_dict)

    log.__name__ = name
    return log


class _Exchange:
    """The logger of one exchange's lines: each event with the exchange's keys first, through
    the sink's processor chain; its rendered line kept for the exchange's one write."""

    __slots__ = ("chain", "keys", "lines")

    def __init__(self, keys: dict[str, Any], chain: Sequence[Processor], lines: list[Any]) -> None:
        self.keys, self.chain, self.lines = keys, chain, lines

    info = _level("info")
    warning = _level("warning")


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
        self._chain: tuple[Processor, ...] = (
            structlog.processors.add_log_level,
            _timestamper(),
            *(processors or [_renderer(log_format, self._stream)]),
        )

    def emit(
        self,
        verdict: Verdict,
        host: str,
        path: str,
        inspect_ms: float,
        ids: ExchangeIds | None = None,
    ) -> None:
        """Log one exchange: its calls and findings first, then the `turn` line that sums it up,
        every line with the exchange's keys (ids: its flow's; a fresh id when not given)."""
        ids = ids or ExchangeIds(short_id(""))
        lines: list[Any] = []
        self._events(
            _Exchange(joined(ids, verdict, path), self._chain, lines), verdict, host, inspect_ms
        )
        self._write(lines)

    def tool_overdue(self, ids: ExchangeIds, **fields: Any) -> None:
        """A call still unanswered past tooltap_tool_deadline while something waits for it:
        said once, as the deadline passes, under the id of what waits (the tools/call's own
        exchange, or the socket)."""
        keys: dict[str, Any] = {"exchange": ids.exchange}
        if ids.session is not None:
            keys |= {"session": ids.session, "turn": ids.turn}
        lines: list[Any] = []
        _Exchange(keys, self._chain, lines).warning("tool_overdue", **fields)
        self._write(lines)

    def _write(self, lines: list[Any]) -> None:
        """An exchange's lines in one write, so that lines from elsewhere cannot land between
        them (the JSON renderer's are bytes, decoded once here; the console's are text)."""
        if not lines:
            return  # the processors dropped them (LogCapture)
        if isinstance(lines[0], bytes):
            text = b"\n".join(lines).decode() + "\n"
        else:
            text = "\n".join(lines) + "\n"
        self._stream.write(text)
        self._stream.flush()

    def _events(self, log: _Exchange, verdict: Verdict, host: str, inspect_ms: float) -> None:
        """The exchange's lines, each through `log`, which carries the exchange's keys."""
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
        names = {call.call_id: call.name for call in verdict.calls} if verdict.tool_results else {}
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
        calls = verdict.call_count  # a sum over the calls: once
        if verdict.state not in (None, "no-tools") and not calls:
            log.info(
                "no_tool_call",
                api=verdict.api,
                output_types=verdict.output_types,
            )
        if verdict.scope == "session":
            return  # no turn: the session's own lines above are the whole of it
        # A finding, or an exchange that could not be read whole, is worth a warning; one no
        # dialect reads (a model list, a family without tool calls) is said, and no more.
        found = list(dict.fromkeys(findings(verdict)))  # each finding's name once, in order
        warn = (
            any(name in DEFAULT for name in found)
            or bool(verdict.stream_errors)
            or verdict.outcome not in ("inspected", "not_read")
        )
        (log.warning if warn else log.info)(
            "turn",
            api=verdict.api,
            transport=verdict.transport,
            host=host,
            status=verdict.status,
            stream=verdict.stream,
            outcome=verdict.outcome,
            reason=verdict.reason,
            state=verdict.state,
            format_state=verdict.format_state,
            findings=found,
            calls=calls,
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
