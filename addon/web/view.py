"""The tooltap content view: a flow's verdicts as text, the finding first, then the detail.

Only what the verdict holds is shown (never a header), and the arguments as
tooltap_log_arguments lets the log show them. Verdicts come from the flow's
annotations (tooltap web); a flow without them is read on the spot, alone.
"""

from __future__ import annotations

from textwrap import wrap
from typing import Any

from mitmproxy import contentviews, http
from mitmproxy.contentviews import Metadata

from tooltap.core import Verdict
from tooltap.core.findings import DEFAULT, findings
from tooltap.core.wire import detect_api, detect_socket

from ..handover.record import Record
from ..inspection.flows import flow_exchange, socket_turns
from ..inspection.scrub import scrub
from ..inspection.session import Session
from ..inspection.sockets import socket_verdict
from ..sinks.redaction import ArgumentPolicy
from ..sinks.timing import seconds, tokens

# The flow's metadata: {"arguments": the policy, "verdicts": [Verdict as JSON], "ends": [the
# timestamp of the socket message that ended each turn, None over HTTP]}.
KEY = "tooltap"
WIDTH = 88  # the prose is wrapped to fit beside the flow list; arguments are shown whole


def severity(verdicts: list[Verdict]) -> str | None:
    """`error` when a finding fails an audit, `warning` for one that is only reported, or for
    an error the API sent inside a 200 stream (the client read a stream that finished)."""
    found = {name for verdict in verdicts for name in findings(verdict)}
    if found & DEFAULT:
        return "error"
    return "warning" if found or any(v.stream_errors for v in verdicts) else None


def headline(verdict: Verdict) -> str:
    """One line: the findings, else the state; or why the turn was not inspected."""
    if verdict.outcome != "inspected":
        return f"{verdict.outcome}: {verdict.reason or 'no reason given'}"
    names = list(dict.fromkeys(findings(verdict)))
    # What kind of exchange it was: a turn's state, or the methods a tool server was sent.
    kind = verdict.state or ", ".join(verdict.rpc) or "not a turn"
    said = ", ".join(names) if names else f"no finding ({kind})"
    failures = sum(1 for result in verdict.tool_results if result.outcome == "error")
    errors = len(verdict.stream_errors)
    return (
        said
        + (f", {failures} tool failure(s)" if failures else "")
        + (f", {errors} stream error(s)" if errors else "")
    )


def describe(verdicts: list[Verdict], arguments: str) -> str:
    """The text of the view for one flow's verdicts (one per turn on a WebSocket)."""
    if not verdicts:
        return "tooltap: no turn finished on this flow yet"
    blocks = []
    turns = sum(1 for verdict in verdicts if verdict.scope == "turn")
    number = 0
    for verdict in verdicts:
        if verdict.scope == "session":
            title = "the session: "
        else:
            number += 1
            title = f"turn {number} of {turns}: " if turns > 1 else ""
        blocks.append(f"tooltap {title}{headline(verdict)}\n\n{_detail(verdict, arguments)}")
    return "\n\n".join(blocks)


def _detail(verdict: Verdict, arguments: str) -> str:
    lines: list[str] = []

    def field(name: str, value: Any) -> None:
        if value not in (None, "", [], {}):
            lines.extend(wrap(f"{name:<10} {value}", WIDTH, subsequent_indent=" " * 11))

    field("api", f"{verdict.api} over {verdict.transport}")
    field("server", verdict.server)
    field("session", verdict.session)
    field("methods", ", ".join(verdict.rpc))
    field("model", verdict.model)
    field("response", verdict.response_id)
    field("status", verdict.status)
    field("reason", verdict.reason)
    if verdict.state is not None:
        field("state", f"{verdict.state}: {verdict.detail}" if verdict.detail else verdict.state)
    if verdict.format_state is not None:
        fmt = verdict.format_state
        field("format", f"{fmt}: {verdict.format_detail}" if verdict.format_detail else fmt)
    lines += _times(verdict)
    if verdict.rejected is not None:
        rejected = verdict.rejected
        lines.append("")
        lines += wrap(f"REJECTED  {rejected.status} {rejected.type}: {rejected.message}", WIDTH)
        for blocker in rejected.blockers:
            lines += wrap(f"  blocker: {blocker}", WIDTH, subsequent_indent="    ")
    if verdict.loop_errors:
        lines += ["", "LOOP ERRORS"]
        for error in verdict.loop_errors:
            lines.append(f"  {error.rule}  {', '.join(error.ids)}  at {error.where}")
            lines += wrap(f"    repair: {error.repair}", WIDTH, subsequent_indent="      ")
    if verdict.calls:
        lines += ["", f"CALLS ({len(verdict.calls)})"]
        for call in verdict.calls:
            lines.append(f"  {call.call_id or '(no id)'}  {call.name}  [{call.type}]")
            shown = call.arguments_raw if arguments != "omit" else None
            lines.append(f"    arguments: {shown}" if shown else "    arguments: (not shown)")
            if call.parse_error is not None:
                lines.append(
                    f"    parse error: {call.parse_error.type}: {call.parse_error.message}"
                )
            for broken in call.schema_errors:
                lines.append(f"    schema error at {broken.path}: {broken.message}")
            if call.schema_problem:
                lines.append(f"    schema not applied: {call.schema_problem}")
    if verdict.tool_results:
        lines += ["", "TOOL RESULTS"]
        for result in verdict.tool_results:
            failed = "  (a tool failure)" if result.outcome == "error" else ""
            lines.append(f"  {result.call_id}  {result.outcome} at {result.where}{failed}")
            for broken in result.schema_errors:
                lines.append(f"    outputSchema error at {broken.path}: {broken.message}")
    if verdict.tool_changes:
        lines += ["", "TOOL DEFINITIONS CHANGED"]
        for change in verdict.tool_changes:
            against = "the lock" if change.against == "lock" else "the first seen"
            announced = ", announced" if change.announced else ""
            lines += wrap(
                f"  {change.tool}  {change.change} against {against}{announced}: {change.source}",
                WIDTH,
                subsequent_indent="    ",
            )
            for detail in change.details:
                lines += wrap(f"    {detail}", WIDTH, subsequent_indent="      ")
    if verdict.hidden_text:
        lines += ["", "HIDDEN TEXT"]
        for hidden in verdict.hidden_text:
            spelled = f", spelling {hidden.spelled!r}" if hidden.spelled else ""
            lines += wrap(
                f"  {hidden.part} of {hidden.tool} at {hidden.where}: {hidden.count} "
                f"{hidden.kind} ({', '.join(hidden.chars)}){spelled}",
                WIDTH,
                subsequent_indent="    ",
            )
    if verdict.stream_errors:
        lines += ["", "STREAM ERRORS"]
        lines += [f"  {e.type}: {e.message}" for e in verdict.stream_errors]
    if verdict.repairs:
        lines += ["", "REPAIRS"]
        for repair in verdict.repairs:
            lines += wrap(f"  - {repair}", WIDTH, subsequent_indent="    ")
    if arguments != "raw":
        lines += ["", f"(arguments as tooltap_log_arguments={arguments} shows them)"]
    return "\n".join(lines)


def _times(v: Verdict) -> list[str]:
    """The TIME block: only what was measured (a flow loaded from a file has no stream's
    pieces, so no first token; a call answered here but issued before tooltap saw it, no
    wait)."""
    lines = []
    if v.duration_ms is not None:
        what = "model" if v.scope == "turn" else "exchange"
        lines.append(
            f"  {what:<12}{seconds(v.duration_ms)}, request's first byte to the response's last"
        )
    if v.first_token_ms is not None:
        lines.append(f"  {'first token':<12}{seconds(v.first_token_ms)} after the request's end")
    if v.scope == "turn" and (counted := tokens(v, detail=True)):
        lines.append(f"  {'tokens':<12}{counted}")
    if v.tool_wait_ms is not None:
        lines.append(f"  {'tool wait':<12}{seconds(v.tool_wait_ms)}, the longest of the calls this "
                     "request answers:")  # fmt: skip
    for timed in v.tool_times:
        ran = f", ran {seconds(timed.ran_ms)} on {timed.server}" if timed.ran_ms is not None else ""
        late = " (late: past the tool deadline)" if timed.late else ""
        lines += wrap(f"    {timed.call_id}  {timed.name or ''}  waited {seconds(timed.waited_ms)}"
                      f"{ran}{late}", WIDTH, subsequent_indent="      ")  # fmt: skip
    serial = [e for e in v.loop_errors if e.rule == "serial-execution"]
    if serial:
        lines.append("  the calls ran one after another: see LOOP ERRORS (serial-execution)")
    return ["", "TIME", *lines] if lines else []


def stored_verdicts(flow: Any, ended_at: float | None = None) -> tuple[list[Verdict], str] | None:
    """The verdicts stored on the flow (ended_at: only the turns a socket message ended), and
    the arguments policy they were stored under."""
    stored = flow.metadata.get(KEY)
    if not isinstance(stored, dict):
        return None
    pairs = zip(stored["verdicts"], stored["ends"], strict=True)
    verdicts = [v for v, end in pairs if ended_at is None or end == ended_at]
    return [Verdict.model_validate(v) for v in verdicts], stored["arguments"]


def read_alone(flow: http.HTTPFlow, policy: ArgumentPolicy) -> list[Verdict]:
    """A flow no one annotated, inspected on its own (no earlier turn to follow)."""
    session = Session()
    if flow.websocket is not None:
        turns = socket_turns(flow)
        verdicts = [socket_verdict(session, turn) for turn in turns]
    elif flow.response is not None or flow.error is not None:
        verdicts = [session.inspect(flow_exchange(flow))]
    else:
        verdicts = []
    credentials = request_credentials(flow)
    return [policy.verdict(scrub(v, credentials)) for v in verdicts]


def request_credentials(flow: http.HTTPFlow) -> tuple[str, ...]:
    """The credentials the flow's request carries, to be kept out of anything shown."""
    return Record.of(None, flow.request).credentials()


def is_model_call(flow: Any) -> bool:
    if not isinstance(flow, http.HTTPFlow):
        return False
    if flow.websocket is not None:
        return detect_socket(flow.request.path) is not None
    # A flow read from a file may be MCP, which only its JSON-RPC body says.
    request = flow.request
    return detect_api(request.method, request.path, request.raw_content or b"") is not None


class TooltapContentview(contentviews.Contentview):
    """Chosen for the requests, responses and socket messages of the model APIs."""

    name = "tooltap"

    def __init__(self, arguments: str = "raw") -> None:
        self.arguments = arguments  # the policy for flows read on the spot

    def render_priority(self, data: bytes, metadata: Metadata) -> float:
        flow = metadata.flow
        if flow is None or not (KEY in flow.metadata or is_model_call(flow)):
            return -1
        message = metadata.websocket_message
        if message is not None:  # only on the message that ended a turn
            stored = stored_verdicts(flow, message.timestamp)
            return 2 if stored is not None and stored[0] else -1
        return 2  # above JSON's 1: the verdict first, the body one click away

    def prettify(self, data: bytes, metadata: Metadata) -> str:
        flow = metadata.flow
        if not isinstance(flow, http.HTTPFlow):
            raise ValueError("not an HTTP flow")
        message = metadata.websocket_message
        stored = stored_verdicts(flow, message.timestamp if message is not None else None)
        if stored is not None:
            return describe(*stored)
        if message is not None:
            return "tooltap: no turn ended at this message"
        verdicts = read_alone(flow, ArgumentPolicy(self.arguments))
        return describe(verdicts, self.arguments)
