"""MCP over Streamable HTTP (api "mcp"): the tool server's half of the tool loop, read passively.

The client POSTs JSON-RPC 2.0 to one endpoint (a message, or a batch in protocol 2025-03-26);
the server answers with application/json, or with a text/event-stream of JSON-RPC messages in
which its own requests and notifications may come before the response. No path says MCP: the
proxy watches the hosts it is told are MCP servers, and `looks_like_jsonrpc` on the request.

An exchange is no model turn: a tools/call is one call and its result. What checks it was said
earlier in the session (initialize named the server, tools/list gave the schemas), which the
caller keeps as a ToolServer and passes in. The readings are the ones that cannot raise a false
alarm:
- arguments are validated only against a schema the session listed;
- a call is reported as `unlisted-tool` only when the session's whole list was seen (its first
  page, then every nextCursor), initialize said the list does not change (`tools.listChanged`
  not true), and the server keeps sessions: a list that may change can change on a stream
  tooltap does not read, or on another replica, and a server without sessions may list other
  tools to another client;
- a result is checked against the tool's outputSchema unless it is flagged isError, as the
  SDK's own client does (the specification binds structured results, not failures).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..arguments import SchemaError, ValidatorCache, diagnose, validate
from ..definitions import listed
from ..errors import ApiError
from ..hidden import scan
from ..jsontext import dumps
from ..loop import REPAIRS, LoopError, LoopReport, ToolResult
from ..served import ListedTool, Served, ToolServer
from ..shapes import as_dict, as_list, as_str
from ..turn import Tool, ToolCall, Turn
from .base import Dialect, Prior

MAX_LISTED = 10_000  # tools remembered per session; a list past it is not known whole
STREAMED = "tooltap:messages"  # the assembled stream's key: no JSON-RPC message has it
NO_STRUCTURED = "the tool declares an outputSchema and its result has no structuredContent"
# JSON-RPC's codes, and MCP's own, by name (the `type` of a rejection).
CODES = {
    -32700: "parse_error",
    -32600: "invalid_request",
    -32601: "method_not_found",
    -32602: "invalid_params",
    -32603: "internal_error",
    -32002: "resource_not_found",
    -32042: "url_elicitation_required",
}


def looks_like_jsonrpc(body: bytes) -> bool:
    """Is a request body a JSON-RPC 2.0 message or batch? A cheap look, no parsing. Pure."""
    head = body[:2048].lstrip()
    return head[:1] in (b"{", b"[") and b'"jsonrpc"' in head


def recognise_body(method: str, body: bytes) -> bool:
    """A POST whose body is JSON-RPC. Pure."""
    return method.upper() == "POST" and looks_like_jsonrpc(body)


def messages_of(value: Any) -> list[Mapping[str, Any]]:
    """The JSON-RPC messages in a body: one object, or a batch's objects. Pure."""
    if isinstance(value, dict):
        return [value]
    return [m for m in as_list(value) if isinstance(m, dict)]


def _id(message: Mapping[str, Any]) -> str | None:
    value = message.get("id")
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return str(value)
    return None


def _schema(tool: Mapping[str, Any], name: str) -> Any:
    value = tool.get(name)
    return value if isinstance(value, dict | bool) else None


def _initialized(result: Mapping[str, Any]) -> ToolServer:
    """A new session, as initialize's result describes its server."""
    info = as_dict(result.get("serverInfo"))
    named = " ".join(filter(None, (as_str(info.get("name")), as_str(info.get("version")))))
    tools = as_dict(as_dict(result.get("capabilities")).get("tools"))
    return ToolServer(
        server=named or None,
        name=as_str(info.get("name")) or None,
        fixed=tools.get("listChanged") is not True,
    )


def _listed(server: ToolServer, cursor: str | None, result: Mapping[str, Any]) -> ToolServer:
    """The session after a page of tools/list: a list read from its first page to one without
    nextCursor is whole; a page from a list not seen from its start is kept, not whole."""
    page = {
        name: ListedTool(
            name=name,
            input_schema=_schema(tool, "inputSchema"),
            output_schema=_schema(tool, "outputSchema"),
        )
        for tool in map(as_dict, as_list(result.get("tools")))
        if (name := as_str(tool.get("name")))
    }
    next_cursor = as_str(result.get("nextCursor")) or None
    continues = cursor is not None and cursor == server.next_cursor
    tools = page if cursor is None else {**server.tools, **page}
    whole = (cursor is None or continues) and len(tools) <= MAX_LISTED
    if len(tools) > MAX_LISTED:
        tools = dict(list(tools.items())[:MAX_LISTED])
    return server.model_copy(
        update={
            "tools": tools,
            "complete": whole and next_cursor is None,
            "next_cursor": next_cursor if whole else None,
        }
    )


def _call(
    index: str,
    call_id: str,
    params: Mapping[str, Any],
    served: Served,
    *,
    validators: ValidatorCache | None,
    own: bool,
) -> ListedTool | None:
    """A tools/call's arguments, checked against the tool the session listed."""
    name = as_str(params.get("name"))
    arguments = params.get("arguments")
    # An absent or null arguments is an empty object to the server (the SDKs read it so).
    raw = "{}" if arguments is None else dumps(arguments)
    call = ToolCall(call_id=call_id, name=name, type="tools/call", arguments_raw=raw)
    server = served.server
    tool = server.tools.get(name)
    schema = tool.input_schema if tool is not None else None
    served.calls.append(diagnose(call, Tool(name=name, parameters=schema), validators))
    if tool is not None:
        return tool
    if server.complete and server.fixed and own:
        served.loop_errors.append(
            LoopError(
                rule="unlisted-tool",
                ids=[call_id],
                where=f"{index}params.name",
                repair=REPAIRS["unlisted-tool"],
            )
        )
    elif server.complete and server.fixed:
        served.unchecked.append(
            f"call {call_id or name}: {name} is not in the list, which may be another "
            "client's: the server keeps no sessions"
        )
    else:
        served.unchecked.append(
            f"call {call_id or name}: arguments not validated, this session's tools/list "
            "was not seen whole"
        )
    return None


def _result(
    call_id: str,
    result: Mapping[str, Any],
    tool: ListedTool | None,
    validators: ValidatorCache | None,
) -> ToolResult:
    failed = result.get("isError") is True
    errors: list[SchemaError] = []
    problem = None
    if not failed and tool is not None and tool.output_schema is not None:
        if "structuredContent" in result:
            errors, problem = validate(result["structuredContent"], tool.output_schema, validators)
        else:
            errors = [SchemaError(path="$", message=NO_STRUCTURED)]
    said = {key: value for key, value in result.items() if key != "_meta"}
    return ToolResult(
        call_id=call_id,
        where="result",
        outcome="error" if failed else "ok",
        schema_errors=errors,
        schema_problem=problem,
        hidden=scan(said)[0],
    )


def serve(
    request: Any,
    response: Any,
    server: ToolServer | None,
    validators: ValidatorCache | None = None,
    session: str | None = None,
) -> Served:
    """One exchange with a tool server: the request's body, the response's (a JSON body, the
    assembled stream, or None for a 202), the session so far, and the session's id (None from
    a server that keeps no sessions). Pure and total."""
    sent = messages_of(request)
    streamed = isinstance(response, dict) and STREAMED in response
    received = messages_of(response[STREAMED] if streamed else response)
    by_id = {
        key: m
        for m in received
        if (key := _id(m)) is not None and ("result" in m or "error" in m) and "method" not in m
    }
    served = Served(server=server or ToolServer())
    for position, message in enumerate(sent):
        method = message.get("method")
        if not isinstance(method, str):
            continue  # the client's answer to a server request
        served.methods.append(method)
        message_id = _id(message)
        answer = by_id.get(message_id) if message_id is not None else None
        error = as_dict(answer.get("error")) if answer is not None else {}
        if error and served.error is None:
            code = error.get("code")
            code = code if isinstance(code, int) and not isinstance(code, bool) else 0
            said = ApiError(type=CODES.get(code, ""), message=as_str(error.get("message")))
            served.error = (code, said)
        result = as_dict(answer.get("result")) if answer is not None and not error else None
        params = as_dict(message.get("params"))
        index = f"{position}." if isinstance(request, list) else ""
        if method == "initialize" and result is not None:
            served.server = _initialized(result)
        elif method == "tools/list" and result is not None:
            cursor = as_str(params.get("cursor")) or None
            served.announced = served.announced or served.server.announced
            served.server = _listed(served.server, cursor, result)
            if served.server.complete:
                served.server = served.server.model_copy(update={"announced": False})
            served.listed.extend(
                as_str(as_dict(t).get("name")) for t in as_list(result.get("tools"))
            )
            served.definitions.extend(map(dict, listed(result.get("tools"))))
        elif method == "tools/call":
            own = session is not None
            tool = _call(index, message_id or "", params, served, validators=validators, own=own)
            if result is not None:
                served.results.append(_result(message_id or "", result, tool, validators))
    served.repairs = _repairs(served)
    if any(m.get("method") == "notifications/tools/list_changed" for m in received):
        # The list changed: what was listed is no longer known to hold.
        served.server = served.server.model_copy(
            update={"tools": {}, "complete": False, "next_cursor": None, "announced": True}
        )
    return served


def _repairs(served: Served) -> list[str]:
    bad_calls = [c.call_id or c.name for c in served.calls if c.parse_error or c.schema_errors]
    bad_results = [r.call_id for r in served.results if r.schema_errors]
    return [
        *(
            [
                f"call {', '.join(bad_calls)}: send arguments that match the inputSchema the "
                "server listed; the server may refuse them, or run the tool on what it guessed."
            ]
            if bad_calls
            else []
        ),
        *(
            [
                f"result of {', '.join(bad_results)}: the server must return structuredContent "
                "that conforms to the tool's outputSchema (MCP specification); fix the tool, or "
                "the schema it declares. Clients that validate (the SDKs do) refuse the result."
            ]
            if bad_results
            else []
        ),
    ]


class Assembler:
    """An SSE response's JSON-RPC messages, in order; complete once a response is among them."""

    def __init__(self) -> None:
        self.errors: list[ApiError] = []
        self._messages: list[dict[str, Any]] = []
        self._answered = False

    @property
    def complete(self) -> bool:
        return self._answered

    def event(self, event: Mapping[str, Any]) -> None:
        self._messages.append(dict(event))
        self._answered = self._answered or (
            "method" not in event and ("result" in event or "error" in event)
        )

    def done_marker(self) -> None:
        pass

    def result(self) -> dict[str, Any]:
        return {STREAMED: self._messages}


def _no_path(method: str, path: str) -> bool:
    return False  # an MCP endpoint is any path: the proxy names its hosts


def _no_turn(request: Mapping[str, Any], response: Mapping[str, Any]) -> Turn:
    return Turn(api="mcp")


def _no_loop(request: Mapping[str, Any], prior: Prior = None) -> LoopReport:
    return LoopReport()


def _no_finish(response: Mapping[str, Any]) -> list[str]:
    return []


DIALECT = Dialect(
    api="mcp",
    recognise=_no_path,
    read_turn=_no_turn,
    assembler=Assembler,
    check_loop=_no_loop,
    finish_reasons=_no_finish,
    recognise_body=recognise_body,
    serve=serve,
)
