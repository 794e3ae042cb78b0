"""inspect(exchange) -> Verdict: the one entry point the proxy, audit and demo share.

An Exchange is what crossed the wire, bytes as sent (possibly content-encoded,
possibly a stream). The Verdict is everything the rules found, and its
to_dict() keys are the fields of the structured log.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from . import parallel, schema, subsets
from .arguments import ValidatorCache, diagnose
from .definitions import DefinitionCache, declared_in, hidden_in, served_in
from .dialects import Routes, detect_routed, dialect, path_of, route, streamed_path
from .dialects.base import Serve
from .encoding import DEFAULT_MAX_DECODED, DecodeError, decode
from .eventstream import looks_like_eventstream
from .exchange import REQUEST_HEADERS, RESPONSE_HEADERS, Exchange, Transport
from .jsontext import loads
from .loop import LoopReport, build_result
from .records import Call, HiddenText, Limits, ParseError, ToolResult
from .schema import SEED_LIMITS
from .served import SESSION_HEADER, ToolServer, query_session, session_tag
from .shapes import as_dict, header
from .stream import ApiError, Framing, StreamReader, api_error
from .timing import milliseconds
from .unread import unread_reason
from .verdict import Outcome, Rejected, Scope, Verdict, build_verdict, verdict_of
from .wire import Api, Turn, read_turn

__all__ = [
    "REQUEST_HEADERS",
    "RESPONSE_HEADERS",
    "Exchange",
    "Outcome",
    "Rejected",
    "Scope",
    "Transport",
    "Verdict",
    "header",
    "inspect",
    "served_session",
]

EVENTSTREAM = "application/vnd.amazon.eventstream"
NDJSON = "application/x-ndjson"
# The work on one exchange is bounded: one pathological response must not stall the rest.
MAX_CALLS = 500  # calls validated and listed one by one


def _looks_like_sse(body: bytes) -> bool:
    return body.lstrip()[:6].startswith((b"data:", b"event:", b":", b"id:"))


class _Body:
    """A response body as read: its JSON value, or what kept it from being read."""

    # Written out, not a dataclass: compiled (setup.py), a dataclass's generated __init__ stays
    # interpreted, and every exchange reads a body.
    def __init__(
        self,
        value: Any = None,
        *,
        problem: str | None = None,
        stream: bool = False,
        complete: bool = True,
        errors: list[ApiError] | None = None,
        dropped: int = 0,  # stream events that could not be read at all
        note: str | None = None,  # what was read leniently, for the turn's reason
        empty: bool = False,  # a stream that carried no event at all (a priming event only)
        first_output_at: float | None = None,  # when the first event carrying output arrived
    ) -> None:
        self.value = value
        self.problem = problem
        self.stream = stream
        self.complete = complete
        self.errors: list[ApiError] = [] if errors is None else errors
        self.dropped = dropped
        self.note = note
        self.empty = empty
        self.first_output_at = first_output_at


def _read_request(exchange: Exchange, batch: bool = False) -> tuple[Any, str | None]:
    """The request body's JSON value, and what kept it from being read (then the value is
    None)."""
    if exchange.method.upper() == "GET":
        return {}, None  # a retrieval carries no body; the response echoes the settings
    try:
        text = decode(exchange.request_body, header(exchange.request_headers, "content-encoding"))
    except DecodeError as exc:
        return None, f"request body could not be decoded: {exc}"
    value, error = loads(text)
    # Told apart without narrowing `value`: compiled (mypyc), a narrowed name is checked.
    readable = isinstance(value, dict) or (batch and isinstance(value, list))
    if error is not None or not readable:
        return None, "request body is not a JSON object"
    return value, None


def _read_stream(
    api: Api,
    body: bytes,
    encoding: str | None,
    max_decoded: int,
    framing: Framing = "sse",
    *,
    arrivals: Sequence[tuple[int, float]] = (),
) -> _Body:
    reader = StreamReader(api, encoding, max_decoded, framing)
    start = 0
    for end, at in arrivals:  # the pieces as they came, each with its time, up to the one
        if reader.output_dated:  # that dates the first output; the rest is read at once
            break
        reader.feed(body[start:end], at)
        start = end
    reader.feed(body[start:])
    result = reader.close()
    if result.decode_error is not None:
        return _Body(stream=True, problem=f"stream could not be decoded: {result.decode_error}")
    if result.events == 0:
        # Nothing at all (no bad event either) is a stream cut before its first message.
        empty = not result.bad_events and not result.errors
        return _Body(stream=True, problem="stream carried no JSON events", empty=empty)
    errors = list(result.errors)
    said = [
        f"{count} stream event(s) {what}"
        for count, what in (
            (result.bad_events, "could not be read and were dropped"),
            (
                result.repaired_events,
                "held invalid UTF-8 or raw control characters, read leniently",
            ),
        )
        if count
    ]
    note = "; ".join(said) or None
    if note:
        errors.append(ApiError(type="malformed_event", message=note))
    return _Body(
        value=result.response,
        stream=True,
        complete=result.complete,
        errors=errors,
        dropped=result.bad_events,
        note=note,
        first_output_at=result.first_output_at,
    )


def _read_response(api: Api, exchange: Exchange, max_decoded: int) -> _Body:
    content_type = header(exchange.response_headers, "content-type").lower()
    encoding = header(exchange.response_headers, "content-encoding")
    body, arrivals = exchange.response_body, exchange.arrivals
    if "text/event-stream" in content_type:
        return _read_stream(api, body, encoding, max_decoded, "sse", arrivals=arrivals)
    if EVENTSTREAM in content_type:
        return _read_stream(api, body, encoding, max_decoded, "eventstream", arrivals=arrivals)
    if NDJSON in content_type:
        return _read_stream(api, body, encoding, max_decoded, "ndjson", arrivals=arrivals)
    try:
        body = decode(exchange.response_body, encoding, max_decoded)
    except DecodeError as exc:
        return _Body(problem=f"response body could not be decoded: {exc}")
    arrivals = () if encoding else arrivals  # the offsets are the encoded body's
    if "json" not in content_type and _looks_like_sse(body):
        return _read_stream(api, body, None, max_decoded, "sse", arrivals=arrivals)
    if "json" not in content_type and looks_like_eventstream(body):  # recorded without its type
        return _read_stream(api, body, None, max_decoded, "eventstream", arrivals=arrivals)
    if body.lstrip()[:1] == b"[" and streamed_path(api, exchange.url):
        return _read_stream(api, body, None, max_decoded, "jsonarray", arrivals=arrivals)
    # Strict, as the client's own JSON parser is: a body it cannot read is unparseable.
    value, error = loads(body)
    if error is not None and dialect(api).framing == "ndjson" and body.lstrip()[:1] == b"{":
        # A stream not typed as one (ollama.com sends its NDJSON as application/json).
        return _read_stream(api, body, None, max_decoded, "ndjson", arrivals=arrivals)
    if error is not None:
        text = body[:300].decode("utf-8", "replace").strip()
        return _Body(value=text or None, problem=f"response body is not JSON ({error.message})")
    return _Body(value)  # by position: CPython 3.12 gathers a class call's keywords in a dict


def _ms(start: float | None, end: float | None) -> float | None:
    """The time between two moments, in milliseconds; None when either is not known."""
    if start is None or end is None or end < start:
        return None
    return milliseconds(end - start)


def _blockers(turn: Turn, limits: Limits) -> list[str]:
    """Why strict tools or a strict format could have been refused, by the API's own rules. Pure."""
    # A server that holds schemas whatever strict says has its own subset, not the API's.
    found: list[str] = []
    for tool in [] if turn.calls_held else turn.tools:
        if tool.strict is True and tool.parameters is not None:
            found.extend(
                f"tool {tool.name}: {b}"
                for b in subsets.blockers(turn.api, tool.parameters, limits)
            )
    kind, name, strict, declared = schema.format_declared(turn.applied_format())
    if kind == "json_schema" and strict is True and not turn.format_held:
        label = f"format {name}" if name else "format"
        found.extend(
            f"{label}: {b}" for b in subsets.blockers(turn.api, declared, limits, tool=False)
        )
    return found


def _held_details(
    turn: Turn, state: str, detail: str, format_state: str, format_detail: str
) -> tuple[str, str]:
    """The states' explanations where the server holds schemas whatever strict says: no tool
    or format need be declared strict for it to hold them. Pure."""
    if turn.calls_held and state == "strict-serialised":
        detail = (
            "the provider holds every call to its tool's schema, strict or not, and documents "
            "no conflict with parallel calls. The guarantee holds."
        )
    if turn.format_held and format_state == "enforced":
        format_detail = "the server holds a json_schema format to its schema, strict or not."
    return detail, format_detail


def _lost_arguments(calls: list[Call]) -> list[Call]:
    """Calls whose arguments may sit in a stream event that could not be read.

    An empty argument string there is not known to be empty, so it is not
    reported as empty.
    """
    lost = ParseError(
        type="StreamError",
        message="the arguments are unknown: an event of this stream could not be read",
    )
    return [c.model_copy(update={"parse_error": lost}) if not c.arguments_raw else c for c in calls]


def _argument_repair(calls: Sequence[Call], api: Api) -> list[str]:
    # The client answers only its own calls; the provider answers hosted ones.
    bad = [
        c.call_id or c.name for c in calls if not c.hosted and (c.parse_error or c.schema_errors)
    ]
    if not bad:
        return []
    return [dialect(api).argument_repair.format(calls=", ".join(bad))]


def _hidden_results(results: Sequence[ToolResult]) -> list[HiddenText]:
    return [
        HiddenText(**hidden.model_dump(), part="result", tool=result.call_id)
        for result in results
        for hidden in result.hidden
    ]


def served_session(exchange: Exchange) -> str | None:
    """The tool-server session an exchange is in, as logged (a SHA-256 prefix of its id: the
    request names it, or the response to initialize sets it, or, on the legacy HTTP+SSE
    transport, the query of the path the session POSTs to). Pure."""
    named = header(exchange.request_headers, SESSION_HEADER)
    named = named or header(exchange.response_headers, SESSION_HEADER)
    return session_tag(named or query_session(exchange.url))


def _streamed(exchange: Exchange) -> bool:
    return "text/event-stream" in header(exchange.response_headers, "content-type").lower()


def _inspect_served(
    api: Api,
    exchange: Exchange,
    serve: Serve,
    *,
    server: ToolServer | None,
    validators: ValidatorCache | None,
    max_decoded: int,
    definition_cache: DefinitionCache | None,
) -> Verdict:
    """An exchange with a tool server: its calls checked against what the session listed."""
    found: dict[str, Any] = {
        "api": api,
        "outcome": "inspected",
        "scope": "tool",
        "transport": exchange.transport,
        "status": exchange.status,
        "session": served_session(exchange),
        "server": server.server if server is not None else None,
        "tool_server": server,
        "duration_ms": _ms(exchange.request_start, exchange.response_end),
    }
    request, problem = _read_request(exchange, batch=True)
    if problem is not None:
        return verdict_of(found | {"outcome": "unparseable", "reason": problem})
    if exchange.status is None:
        return verdict_of(
            found | {"outcome": "upstream_error", "reason": "no response from the upstream"}
        )
    # 202 Accepted is the whole answer to a notification, and to a legacy POST whose response
    # comes on the session's stream; its short body ("Accepted") is no JSON-RPC to read.
    accepted = exchange.status == 202 and not _streamed(exchange)
    read = exchange.response_body and not accepted
    response = _read_response(api, exchange, max_decoded) if read else _Body()
    if response.empty:  # a client that cancelled, or a server cut off: not an unreadable answer
        response = _Body(stream=True, complete=False)
    found["stream"] = response.stream
    if exchange.status >= 500:
        error = api_error(response.value)
        reason = f"{exchange.status} {error.type}: {error.message}".strip()
        return verdict_of(found | {"outcome": "upstream_error", "reason": reason})
    served = serve(request, response.value, server, validators, found["session"])
    definitions = served_in(served, exchange.url, definition_cache)
    found |= {
        "definitions": definitions,
        "hidden_text": [*hidden_in(definitions.declared), *_hidden_results(served.results)],
        "server": served.server.server,
        "tool_server": served.server,
        "rpc": served.methods,
        "listed_tools": served.listed,
        "calls": served.calls[:MAX_CALLS],
        "more_calls": max(0, len(served.calls) - MAX_CALLS),
        "tool_results": served.results,
        "loop_errors": served.loop_errors,
        "unchecked": served.unchecked,
        "repairs": served.repairs,
        "stream_errors": response.errors,
    }
    if served.error is not None:
        code, said = served.error
        found["rejected"] = Rejected(status=code, type=said.type, message=said.message)
    elif exchange.status >= 400:  # refused before JSON-RPC: no session, a bad header, ...
        error = api_error(response.value)
        found["rejected"] = Rejected(status=exchange.status, type=error.type, message=error.message)
    elif response.problem is not None:
        found |= {"outcome": "unparseable", "reason": response.problem}
    elif not response.complete:
        found["reason"] = "the stream ended before its response"
    return verdict_of(found)


def _not_read(exchange: Exchange, why: str | None, model: str | None = None) -> Verdict:
    """An exchange no dialect reads: said, with why, and counted; its bodies are not read."""
    content_type = header(exchange.response_headers, "content-type").lower()
    return build_verdict(
        api=None,
        outcome="not_read",
        reason=why,
        status=exchange.status,
        stream="text/event-stream" in content_type or EVENTSTREAM in content_type,
        model=model,
        request_model=model,
    )


def inspect(
    exchange: Exchange,
    prior: Mapping[str, Sequence[str]] | None = None,
    *,
    limits: Limits = SEED_LIMITS,
    validators: ValidatorCache | None = None,
    max_decoded: int = DEFAULT_MAX_DECODED,
    tool_server: ToolServer | None = None,
    definition_cache: DefinitionCache | None = None,
    routes: Routes | None = None,
) -> Verdict:
    """Classify one exchange. Pure and total: any bytes give a Verdict.

    prior maps a response id to the call ids it returned, for requests that
    continue it with previous_response_id; tool_server is what an MCP session said
    before this exchange (the proxy owns both memories). validators,
    definition_cache and routes keep what one exchange compiled, read or looked up
    for the next: the verdict is the same without them.
    """
    parsed = path_of(exchange.url)  # once: the routing below reads the path, not the URL
    path = parsed or ""
    routed = (
        None
        if exchange.api or parsed is None
        else (routes.route if routes is not None else route)(exchange.method, parsed)
    )
    shared = routed[0] if routed is not None else None
    if shared is not None:  # the model the path names, or the body's shape, says who reads it
        request, problem = _read_request(exchange)
        chosen = shared.reading(path, request if isinstance(request, dict) else None)
        if chosen.api is None and chosen.why is None:
            return build_verdict(api=None, outcome="unparseable", reason=problem)
        if chosen.api is None:
            return _not_read(exchange, chosen.why, chosen.model)
        api, named = chosen.api, chosen.model
    else:
        known = exchange.api or (
            None
            if routed is None or parsed is None
            else detect_routed(exchange.method, parsed, exchange.request_body, *routed)
        )
        if known is None:
            return _not_read(exchange, unread_reason(path))
        api = known
        serve = dialect(api).serve
        if serve is not None:
            return _inspect_served(
                api, exchange, serve, server=tool_server, validators=validators,
                max_decoded=max_decoded, definition_cache=definition_cache,
            )  # fmt: skip
        request, problem = _read_request(exchange)
        in_path = dialect(api).model_in_path
        named = in_path(path) if in_path is not None else None
    if named and isinstance(request, dict):  # the path says which model, whatever the body
        request = {**request, "model": named}
    reading = dialect(api)  # once: every step below asks the dialect
    loop = reading.check_loop(as_dict(request), prior) if request is not None else LoopReport()
    # The Verdict's fields are gathered here and made into one at the end (verdict_of:
    # each value typed here, not validated again), not set one by one as they are found.
    found: dict[str, Any] = {
        "api": api,
        "outcome": "inspected",
        "transport": exchange.transport,
        "status": exchange.status,
        "loop_errors": loop.errors,
        "tool_results": loop.results,
        "unchecked": loop.unchecked,
        "hidden_text": _hidden_results(loop.results) if loop.results else [],
        "duration_ms": _ms(exchange.request_start, exchange.response_end),
    }
    if exchange.status is None:
        return verdict_of(
            found | {"outcome": "upstream_error", "reason": "no response from the upstream"}
        )

    response = _read_response(api, exchange, max_decoded)
    found["stream"] = response.stream
    if response.stream:
        asked = exchange.request_end if exchange.request_end is not None else exchange.request_start
        found["first_token_ms"] = _ms(asked, response.first_output_at)
    if exchange.status >= 400:
        if response.value is None:  # an error sent as JSON under a stream's content type
            response = _read_response(api, exchange.model_copy(update={"response_headers": {}}),
                                      max_decoded)  # fmt: skip
        said = [e for e in response.errors if e.type != "malformed_event"]
        error = said[0] if said else api_error(response.value)  # a stream's error, or the body
        if not error.type:  # AWS names the error in a header ("ValidationException:<namespace>")
            aws_type = header(exchange.response_headers, "x-amzn-errortype").partition(":")[0]
            error = error.model_copy(update={"type": aws_type})
        if exchange.status >= 500:
            reason = f"{exchange.status} {error.type}: {error.message}".strip()
            return verdict_of(found | {"outcome": "upstream_error", "reason": reason})
        turn = read_turn(api, request, {})
        explain = reading.request_blockers
        rejected = Rejected(
            status=exchange.status,
            type=error.type,
            message=error.message,
            blockers=explain(as_dict(request), path) if explain else _blockers(turn, limits),
        )
        found["request_model"] = turn.request_model
        return verdict_of(found | {"model": turn.model, "rejected": rejected})

    if response.problem is not None or not isinstance(response.value, dict):
        reason = response.problem or "response body is not a JSON object"
        return verdict_of(found | {"outcome": "unparseable", "reason": reason})

    turn = read_turn(api, request, response.value)
    found |= {
        "model": turn.model,
        "response_id": turn.response_id,
        "request_model": turn.request_model,
        "finish_reasons": turn.finish_reasons,
        "usage": turn.usage,
    }
    unfinished = reading.unfinished
    if unfinished and unfinished(
        exchange.method, request, turn.status, response.stream, response.complete
    ):
        reason = (
            f"the response is {turn.status}"
            if not response.stream
            else "the stream ended before the response reached a final status"
        )
        reason += ": a background response is classified once, when it reaches a final status"
        return verdict_of(found | {"reason": reason, "stream_errors": response.errors})
    listed = turn.calls[:MAX_CALLS]
    calls = [diagnose(call, turn.tool(call), validators) for call in listed]
    if len(turn.calls) > MAX_CALLS:
        found["more_calls"] = len(turn.calls) - MAX_CALLS
        found["unchecked"] = [
            *loop.unchecked,
            f"{len(turn.calls) - MAX_CALLS} call(s) past the first {MAX_CALLS} were counted, "
            "not validated nor logged one by one",
        ]
    # Hosted calls follow the client's: logged and counted as calls, marked so that nothing
    # reading the turn's own calls (its state, count, repairs) takes them for the client's.
    calls += [
        diagnose(call, turn.hosted_tool(call), validators, hosted=True)
        for call in turn.hosted_calls[:MAX_CALLS]
    ]
    if response.dropped:
        calls = _lost_arguments(calls)
    # A name is called twice only in a turn of two calls or more.
    duplicates = (
        parallel.duplicate_names({"name": c.name} for c in turn.calls)
        if len(turn.calls) > 1
        else {}
    )
    hosted_results = [
        build_result(
            call_id=r.call_id, where=r.where, outcome="error" if r.failed else "ok", hidden=r.hidden
        )
        for r in turn.hosted_results
    ]
    # What the model read of the tools: the request's declarations (an echo may restate them),
    # with the lists hosted servers gave inside the turn. A retrieval (GET) declares nothing new.
    declared: Turn | None = turn
    echoed = reading.declared_tools
    if exchange.method.upper() == "GET":
        declared = None
    elif echoed is not None:
        declared = Turn(api=api, tools=echoed(as_dict(request)))
    instructions = reading.instructions
    definitions = declared_in(
        declared, turn, url=exchange.url, cache=definition_cache,
        instructions=lambda: instructions(as_dict(request)),
    )  # fmt: skip
    found["definitions"] = definitions
    # Most turns hide nothing anywhere: each part is asked only when it has something to scan.
    found["hidden_text"] = [
        *(hidden_in(definitions.declared) if definitions.declared else ()),
        *found["hidden_text"],  # the loop's results'
        *(_hidden_results(hosted_results) if hosted_results else ()),
    ]
    found["calls"] = calls
    found["tool_results"] = [*loop.results, *hosted_results] if hosted_results else loop.results
    found["output_types"] = turn.output_types
    found["awaiting"] = turn.awaiting
    found["stream_errors"] = response.errors
    found["duplicates"] = duplicates
    ended = "the stream" if exchange.transport == "http" else "the turn"
    reasons = [
        *([] if response.complete else [f"{ended} ended before its final event"]),
        *([response.note] if response.note else []),
    ]
    if reasons:
        found["reason"] = "; ".join(reasons)
    if problem is not None:
        return verdict_of(found | {"outcome": "unparseable", "reason": problem})

    state, detail = parallel.classify_turn(
        turn, parallel_voids_strict=reading.parallel_voids_strict and not turn.calls_held
    )
    if state == "no-tools" and turn.tools and not turn.callable_tools():
        detail = (
            f"tool_choice leaves none of the {len(turn.tools)} declared tool(s) callable, "
            "so no call could be at risk"
        )
    applied = turn.applied_format()
    format_state, format_detail = schema.judge(schema.format_declared(applied), turn.loose_tools)
    if turn.calls_held or turn.format_held:
        detail, format_detail = _held_details(turn, state, detail, format_state, format_detail)
    loose = (
        [(t.name, t.parameters) for t in turn.callable_tools()
         if t.type == "function" and t.strict is not True]
        if format_state == "advisory-tools"
        else []
    )  # fmt: skip
    duplicate = parallel.duplicate_line(duplicates) if duplicates else None
    repairs = [
        *reading.state_repairs(state),
        *reading.format_repairs({"text": {"format": applied}}, format_state, loose, limits),
        *([duplicate] if duplicate else []),
        *(_argument_repair(calls, api) if calls else ()),
    ]
    found["state"], found["detail"] = state, detail
    found["format_state"], found["format_detail"] = format_state, format_detail
    found["repairs"] = repairs
    return verdict_of(found)
