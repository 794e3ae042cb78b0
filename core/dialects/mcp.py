"""MCP (api "mcp"): the tool server's half of the tool loop, read passively.

Streamable HTTP: the client POSTs JSON-RPC 2.0 to one endpoint (a message, or a batch in
protocol 2025-03-26); the server answers with application/json, or with a text/event-stream of
JSON-RPC messages in which its own requests and notifications may come before the response.
The legacy HTTP+SSE transport (2024-11-05) answers each POST 202 and sends the response on the
session's GET stream: Channels (tooltap.core.dialects.mcp_streams) pairs the two halves into the
same exchange. No path says MCP: the proxy watches the hosts it is told are MCP servers, and on a
recording a JSON-RPC body says it (`is_jsonrpc`), whatever its path.

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
  SDK's own client does (the specification binds structured results, not failures);
- an answer that is not yet the result is no result, and a status is never one. A task handle
  (the 2025-11-25 CreateTaskResult, fastmcp 2.14's `_meta`, the 2026 tasks extension): its
  result comes later and is checked then, once, as the call's, against the same tool. On
  2025-11-25 tasks/get says only the status (`completed` too) and tasks/result returns the
  result; in the 2026 extension tasks/get carries the result (`completed`) or the JSON-RPC error
  (`failed`). Protocol 2026-07-28's `resultType: input_required`: the client calls again with
  inputResponses or requestState, and that retry is the same call, counted once, its answer the
  call's (see _awaited for how a retry finds its call).
Protocol 2026-07-28 has no initialize and no session: server/discover, and the serverInfo each
result carries in `_meta`, name the server, and the endpoint's list is what calls are checked
against (never unlisted-tool: another client may be listed other tools).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..arguments import ValidatorCache, diagnose, validate
from ..assembly import StreamAssembler
from ..definitions import canonical, fingerprint, listed
from ..errors import ApiError
from ..hidden import scan
from ..jsontext import dumps, loads
from ..loop import REPAIRS, LoopReport
from ..records import LoopError, SchemaError, ToolResult
from ..served import ListedTool, OpenCall, Served, ToolServer
from ..shapes import as_dict, as_list, as_str
from ..turn import Tool, ToolCall, Turn
from .base import Dialect, Prior

MAX_LISTED = 10_000  # tools remembered per session; a list past it is not known whole
MAX_TASKS = 1_000  # tasks remembered per session; past it the oldest is forgotten
MAX_RETRIES = 1_000  # calls awaiting their retry (input_required) per session, likewise
# Where a result names its server (protocol 2026-07-28, on every result), and where a
# tools/call answered with a task carries it: the 2025-11-25 CreateTaskResult's `task`, the
# 2026 tasks extension's (`resultType: "task"`), and fastmcp 2.14's `_meta` (SEP-1686's draft).
SERVER_INFO = "io.modelcontextprotocol/serverInfo"
TASK_META = "modelcontextprotocol.io/task"
STREAMED = "tooltap:messages"  # the assembled stream's key: no JSON-RPC message has it
LIST_CHANGED = "notifications/tools/list_changed"
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


JSONRPC_WITHIN = 2048  # bytes: where a JSON-RPC body names "jsonrpc", as looks_like_jsonrpc reads


def looks_like_jsonrpc(body: bytes) -> bool:
    """Is a request body a JSON-RPC 2.0 message or batch? A cheap look, no parsing. Pure."""
    # A model request opens `{"model"...` and names no "jsonrpc": found by a search of the
    # first 2 kB in place, before any copy (whitespace holds no quote, so an indent moves
    # nothing).
    if body.find(b'"jsonrpc"', 0, JSONRPC_WITHIN) < 0:
        return False
    return body[:JSONRPC_WITHIN].lstrip()[:1] in (b"{", b"[")


def recognise_body(method: str, body: bytes) -> bool:
    """A POST whose body is JSON-RPC. Pure."""
    return method.upper() == "POST" and looks_like_jsonrpc(body)


def is_jsonrpc(method: str, body: bytes) -> bool:
    """A POST whose body parses as a JSON-RPC 2.0 message or batch: what no model API sends,
    so it is MCP whatever its path says (the legacy transport POSTs to .../messages). Pure."""
    if not recognise_body(method, body):
        return False
    value, error = loads(body)
    return error is None and any(m.get("jsonrpc") == "2.0" for m in messages_of(value))


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


def _named(info: Any) -> str | None:
    """An Implementation (name, version) as logged: "name version". Pure."""
    info = as_dict(info)
    return " ".join(filter(None, (as_str(info.get("name")), as_str(info.get("version"))))) or None


def _name(info: Any) -> str | None:
    """An Implementation's name alone: what its tools' pins are kept under. Pure."""
    return as_str(as_dict(info).get("name")) or None


def _fixed(result: Mapping[str, Any]) -> bool:
    """The server says its tool list does not change (tools.listChanged is not true)."""
    tools = as_dict(as_dict(result.get("capabilities")).get("tools"))
    return tools.get("listChanged") is not True


def _initialized(result: Mapping[str, Any]) -> ToolServer:
    """A new session, as initialize's result describes its server."""
    info = result.get("serverInfo")
    return ToolServer(server=_named(info), name=_name(info), fixed=_fixed(result))


def _discovered(server: ToolServer, result: Mapping[str, Any]) -> ToolServer:
    """The endpoint as server/discover describes it (2026-07-28: no initialize, no session);
    what it listed before stays its list."""
    info = as_dict(result.get("_meta")).get(SERVER_INFO)
    named = _named(info) or server.server
    name = _name(info) or server.name
    return server.model_copy(update={"server": named, "name": name, "fixed": _fixed(result)})


def _task_id(result: Mapping[str, Any]) -> str | None:
    """The task a tools/call was answered with instead of its result, if it was. Pure."""
    meta = as_dict(result.get("_meta")).get(TASK_META)
    for holder in (
        result.get("task"),
        meta,
        result if result.get("resultType") == "task" else None,
    ):
        task_id = as_dict(holder).get("taskId")
        if isinstance(task_id, str | int) and not isinstance(task_id, bool) and str(task_id):
            return str(task_id)
    return None


def _deferred(call_id: str, result: Mapping[str, Any], task: str | None) -> str | None:
    """Why a tools/call's answer is not the tool's result, when it is not. Pure."""
    if task is not None:
        return (
            f"call {call_id}: answered with task {task}, not its result: the result is "
            "checked when tasks/result (or tasks/get) returns it"
        )
    kind = result.get("resultType")
    if isinstance(kind, str) and kind not in ("complete", ""):
        return (
            f"call {call_id}: answered resultType {kind}, not a result (protocol "
            "2026-07-28): the client calls again with what the server asked for"
        )
    return None


def _awaited(params: Mapping[str, Any], state: Any) -> str:
    """What ties a retry to the call answered input_required (2026-07-28): the answer's
    requestState, which the retry must echo exactly (the SDKs' servers send one); without one,
    the tool and its arguments, which the retry repeats. A digest: ids only are kept. Pure."""
    if isinstance(state, str):
        return fingerprint(canonical({"requestState": state}))
    arguments = params.get("arguments")
    said = {"name": as_str(params.get("name")), "arguments": {} if arguments is None else arguments}
    return fingerprint(canonical(said))


def _remember(held: dict[str, Any], key: str, value: Any, bound: int) -> dict[str, Any]:
    """A memory of calls with one more, the oldest forgotten past its bound. Pure."""
    held = {**held, key: value}
    while len(held) > bound:
        del held[next(iter(held))]
    return held


def list_changed(server: ToolServer) -> ToolServer:
    """The session after its server said its tool list changed: what was listed is no longer
    known to hold until it is listed again, and that next list was announced. Pure."""
    return server.model_copy(
        update={"tools": {}, "complete": False, "next_cursor": None, "announced": True}
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
        return None
    # Each reason that keeps an unknown name from being a finding, the first that holds.
    if not served.known:
        why = "nothing of this session was seen before (or it was forgotten)"
    elif not server.tools and server.announced:
        why = (
            "the server said its tool list changed (notifications/tools/list_changed), and it "
            "was not listed again since"
        )
    elif not server.tools and not server.complete:
        why = "no tools/list answer was seen in this session"
    elif not server.complete:
        why = "this session's tools/list was not seen whole"
    elif not server.fixed:
        why = (
            f"{name} is not in the list seen, and the server says its list may change "
            "(tools.listChanged)"
        )
    else:
        why = (
            f"{name} is not in the list seen, which may be another client's: the server "
            "keeps no sessions"
        )
    served.unchecked.append(f"call {call_id or name}: arguments not validated, {why}")
    return None


def _result(
    call_id: str,
    result: Mapping[str, Any],
    tool: ListedTool | None,
    validators: ValidatorCache | None,
    name: str | None = None,
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
        name=name,
        hidden=scan(said)[0],
    )


def _carried(status: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The call's answer a tasks/get carries, if it carries one (the 2026 tasks extension):
    `completed` with the `result`, `failed` with the JSON-RPC `error` the call ended in (read as
    a failed result). On 2025-11-25 tasks/get says the status alone, `completed` included: the
    result is tasks/result's. Pure."""
    if status.get("status") == "completed" and isinstance(status.get("result"), dict):
        return as_dict(status.get("result"))
    if status.get("status") == "failed" and isinstance(status.get("error"), dict):
        return {"isError": True}
    return None


def _task_result(
    served: Served,
    message_id: str,
    method: str,
    params: Mapping[str, Any],
    result: Mapping[str, Any],
    *,
    validators: ValidatorCache | None,
) -> None:
    """tasks/result, or a tasks/get: the result of the tools/call that made the task, checked
    as that call's would have been, once; a tasks/get that says only a status, nothing."""
    task = as_str(params.get("taskId"))
    if method == "tasks/get":
        carried = _carried(result)
        if carried is None:
            return  # a status: working, input_required, completed (2025-11-25), ...
        result = carried
    call = served.server.tasks.get(task)
    if call is None:
        served.unchecked.append(
            f"task {task or message_id}: its result is not checked, the tools/call that made "
            "it was not seen in this session (or was forgotten)"
        )
        return
    if call.fetched:
        served.unchecked.append(f"task {task}: its result was checked when first fetched")
        return
    tool = served.server.tools.get(call.name)
    served.results.append(_result(call.call_id, result, tool, validators, name=call.name))
    fetched = call.model_copy(update={"fetched": True})
    served.server = served.server.model_copy(
        update={"tasks": {**served.server.tasks, task: fetched}}
    )


def _retried(served: Served, call_id: str, name: str, params: Mapping[str, Any]) -> OpenCall:
    """The call a retry after input_required continues (2026-07-28), taken from those waiting.
    A retry is never a new call: the call was logged and counted when first sent. One that
    cannot be tied to its call (none waits under what it carries, or more than one does) stands
    for it from here, under its own id."""
    key = _awaited(params, params.get("requestState"))
    waiting = served.server.retries
    call = waiting.get(key)
    if call is not None:
        rest = {k: v for k, v in waiting.items() if k != key}
        served.server = served.server.model_copy(update={"retries": rest})
        return call
    why = "more than one call waits" if key in waiting else "its first request was not seen"
    served.unchecked.append(
        f"call {call_id}: a retry with the input the server asked for, of a call it cannot be "
        f"tied to ({why}): no new call; its answer is logged under this id"
    )
    return OpenCall(name=name, call_id=call_id)


def _tools_call(
    served: Served,
    index: str,
    call_id: str,
    params: Mapping[str, Any],
    result: Mapping[str, Any] | None,
    *,
    validators: ValidatorCache | None,
    own: bool,
) -> None:
    """A tools/call: a new call, or the retry of one answered input_required (it carries
    inputResponses or requestState); its answer brings its result, or says where it will come."""
    name = as_str(params.get("name"))
    if "inputResponses" in params or "requestState" in params:
        call = _retried(served, call_id, name, params)
        tool = served.server.tools.get(name)
    else:
        call = OpenCall(name=name, call_id=call_id)
        tool = _call(index, call_id, params, served, validators=validators, own=own)
    if result is None:  # no answer came, or a JSON-RPC error did (a request_rejected)
        return
    task = _task_id(result)
    deferred = _deferred(call.call_id, result, task)
    if deferred is not None:
        served.unchecked.append(deferred)
        server = served.server
        if task is not None:
            tasks = _remember(server.tasks, task, call, MAX_TASKS)
            served.server = server.model_copy(update={"tasks": tasks})
        elif result.get("resultType") == "input_required":
            key = _awaited(params, result.get("requestState"))
            waits = None if key in server.retries else call  # two alike: neither is told apart
            retries = _remember(server.retries, key, waits, MAX_RETRIES)
            served.server = server.model_copy(update={"retries": retries})
        return
    served.results.append(_result(call.call_id, result, tool, validators, name=name))


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
    served = Served(server=server or ToolServer(), known=server is not None)
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
        info = as_dict(result.get("_meta")).get(SERVER_INFO) if result else None
        named = _named(info)
        if named is not None and named != served.server.server:  # 2026-07-28: on each result
            served.server = served.server.model_copy(update={"server": named, "name": _name(info)})
        if method == "initialize" and result is not None:
            served.server = _initialized(result)
        elif method == "server/discover" and result is not None:
            served.server = _discovered(served.server, result)
        elif method in ("tasks/result", "tasks/get") and result is not None:
            _task_result(served, message_id or "", method, params, result, validators=validators)
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
            call_id = message_id or ""
            _tools_call(served, index, call_id, params, result, validators=validators, own=own)
    served.repairs = _repairs(served)
    if any(m.get("method") == LIST_CHANGED for m in received):
        served.server = list_changed(served.server)
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


class Assembler(StreamAssembler):
    """An SSE response's JSON-RPC messages, in order; complete once a response is among them."""

    def __init__(self) -> None:
        super().__init__()
        self._messages: list[dict[str, Any]] = []

    def event(self, event: Mapping[str, Any]) -> None:
        self._messages.append(dict(event))
        self.done = self.done or ("method" not in event and ("result" in event or "error" in event))

    def result(self) -> dict[str, Any]:
        return {STREAMED: self._messages}


# A tool server's exchange is no model turn: what a turn's fields ask of it is nothing.


def recognise(method: str, path: str) -> bool:
    return False  # an MCP endpoint is any path: the proxy names its hosts


def read_turn(request: Mapping[str, Any], response: Mapping[str, Any]) -> Turn:
    return Turn(api="mcp")


def check_loop(request: Mapping[str, Any], prior: Prior = None) -> LoopReport:
    return LoopReport()


def finish_reasons(response: Mapping[str, Any]) -> list[str]:
    return []


DIALECT = Dialect.from_names(
    globals(),
    api="mcp",
)
