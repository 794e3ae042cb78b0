"""MCP's reading (core/dialects/mcp.py) through inspect(): a session's memory built exchange by
exchange, and each finding with the conditions that keep it from being a false alarm. The
bodies have the shapes the SDK's server sends (tests/system/test_mcp_clients.py drives the real
one)."""

from __future__ import annotations

import json
from typing import Any

from tooltap.core import Exchange, ToolServer, detect_api, inspect
from tooltap.core.dialects import mcp, mcp_streams
from tooltap.core.findings import findings
from tooltap.core.served import ListedTool, session_tag

URL = "http://tools.example.com/mcp"
Q = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
N = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def tool(name: str, output: bool = True) -> dict[str, Any]:
    return {"name": name, "inputSchema": Q} | ({"outputSchema": N} if output else {})


def exchange(
    request: Any, answer: Any = None, *, sse: bool = False, status: int = 200, session: str = "s1"
) -> Exchange:
    if answer is None:
        body = b""
    elif sse:
        answers = answer if isinstance(answer, list) else [answer]
        body = b"".join(
            b"event: message\ndata: " + json.dumps(a).encode() + b"\n\n" for a in answers
        )
    else:
        body = json.dumps(answer).encode()
    kind = "text/event-stream" if sse else "application/json"
    return Exchange(
        method="POST",
        url=URL,
        request_body=json.dumps(request).encode(),
        request_headers={"mcp-session-id": session},
        status=status,
        response_headers={"content-type": kind},
        response_body=body,
        api="mcp",
    )


def rpc(method: str, id_: int | None = 1, **params: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if id_ is not None:
        message["id"] = id_
    if params:
        message["params"] = params
    return message


def answer(id_: int, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "result": result}


def initialized(list_changed: bool = False) -> ToolServer:
    result = {
        "protocolVersion": "2025-11-25",
        "capabilities": {"tools": {"listChanged": list_changed}},
        "serverInfo": {"name": "paged", "version": "9.9"},
    }
    verdict = inspect(exchange(rpc("initialize"), answer(1, result), sse=True))
    assert verdict.tool_server is not None
    return verdict.tool_server


def listed(
    server: ToolServer, tools: list[dict], cursor: str | None = None, next_: str | None = None
):
    params = {"cursor": cursor} if cursor else {}
    result: dict[str, Any] = {"tools": tools} | ({"nextCursor": next_} if next_ else {})
    return inspect(exchange(rpc("tools/list", 2, **params), answer(2, result)), tool_server=server)


def call(server: ToolServer | None, name: str, arguments: Any, result: Any = None, **kw: Any):
    request = rpc("tools/call", 3, name=name, arguments=arguments)
    if arguments is None:
        request["params"].pop("arguments")
    reply = answer(
        3, result if result is not None else {"content": [], "structuredContent": {"n": 1}}
    )
    return inspect(exchange(request, reply, **kw), tool_server=server)


def test_initialize_names_the_server_and_whether_its_list_is_fixed():
    assert initialized() == ToolServer(server="paged 9.9", name="paged", fixed=True)
    assert initialized(list_changed=True) == ToolServer(
        server="paged 9.9", name="paged", fixed=False
    )


def test_a_whole_list_read_page_by_page_is_complete_and_a_page_out_of_its_chain_is_not():
    server = initialized()
    first = listed(server, [tool("t0"), tool("t1")], next_="p2")
    assert first.listed_tools == ["t0", "t1"]
    assert first.tool_server is not None
    assert (first.tool_server.complete, first.tool_server.next_cursor) == (False, "p2")
    whole = listed(first.tool_server, [tool("t2")], cursor="p2").tool_server
    assert whole is not None
    assert (whole.complete, whole.next_cursor, list(whole.tools)) == (
        True,
        None,
        ["t0", "t1", "t2"],
    )
    stray = listed(server, [tool("t2")], cursor="p2").tool_server  # its first page never seen
    assert stray is not None
    assert (stray.complete, list(stray.tools)) == (False, ["t2"])
    again = listed(whole, [tool("t9")]).tool_server  # listed anew from the first page
    assert again is not None
    assert (again.complete, list(again.tools)) == (True, ["t9"])


def test_arguments_are_validated_against_the_listed_schema_and_absent_ones_read_as_empty():
    server = listed(initialized(), [tool("t0")]).tool_server
    bad = call(server, "t0", {"q": 1})
    assert [(c.call_id, c.name, c.type, c.arguments_raw) for c in bad.calls] == [
        ("3", "t0", "tools/call", '{"q":1}')
    ]
    assert [(e.path, e.message) for e in bad.calls[0].schema_errors] == [
        ("$.q", '1 is not of type "string"')
    ]
    assert findings(bad) == ["argument-schema"]
    assert bad.repairs == [
        "call 3: send arguments that match the inputSchema the server listed; the server may "
        "refuse them, or run the tool on what it guessed."
    ]
    absent = call(server, "t0", None)
    assert absent.calls[0].arguments_raw == "{}"
    assert [e.path for e in absent.calls[0].schema_errors] == ["$"]  # q is required
    assert (absent.scope, absent.state, absent.server, absent.rpc) == (
        "tool",
        None,
        "paged 9.9",
        ["tools/call"],
    )


def test_a_result_is_held_to_the_output_schema_unless_it_is_flagged_as_an_error():
    server = listed(initialized(), [tool("t0"), tool("t1", output=False)]).tool_server
    off = call(server, "t0", {"q": "a"}, {"content": [], "structuredContent": {"n": "x"}})
    (result,) = off.tool_results
    assert (result.call_id, result.outcome, result.where) == ("3", "ok", "result")
    assert [(e.path, e.message) for e in result.schema_errors] == [
        ("$.n", '"x" is not of type "integer"')
    ]
    assert findings(off) == ["result-schema"]
    none = call(server, "t0", {"q": "a"}, {"content": [{"type": "text", "text": "3"}]})
    assert [e.message for e in none.tool_results[0].schema_errors] == [mcp.NO_STRUCTURED]
    failed = call(server, "t0", {"q": "a"}, {"content": [], "isError": True})
    assert (failed.tool_results[0].outcome, failed.tool_results[0].schema_errors) == ("error", [])
    assert findings(failed) == []
    free = call(server, "t1", {"q": "a"}, {"content": []})  # no outputSchema declared
    assert free.tool_results[0].schema_errors == []


def test_a_call_is_unlisted_only_against_a_whole_fixed_list():
    fixed = listed(initialized(), [tool("t0")]).tool_server
    unlisted = call(fixed, "zz", {})
    assert [(e.rule, e.ids, e.where) for e in unlisted.loop_errors] == [
        ("unlisted-tool", ["3"], "params.name")
    ]
    changing = listed(initialized(list_changed=True), [tool("t0")]).tool_server
    partial = listed(initialized(), [tool("t0")], next_="p2").tool_server
    # Each call says the reason that held: the true one, not one for all.
    for server, why in (
        (changing, "zz is not in the list seen, and the server says its list may change "
                   "(tools.listChanged)"),
        (partial, "this session's tools/list was not seen whole"),
        (None, "nothing of this session was seen before (or it was forgotten)"),
        (initialized(), "no tools/list answer was seen in this session"),
    ):  # fmt: skip
        verdict = call(server, "zz", {})
        assert verdict.loop_errors == []
        assert verdict.unchecked == [f"call 3: arguments not validated, {why}"]


def test_a_list_changed_notification_forgets_the_list():
    server = listed(initialized(), [tool("t0")]).tool_server
    notice = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    reply = answer(3, {"content": [], "structuredContent": {"n": 1}})
    verdict = inspect(
        exchange(rpc("tools/call", 3, name="t0", arguments={"q": "a"}), [notice, reply], sse=True),
        tool_server=server,
    )
    assert verdict.calls[0].schema_errors == []  # checked against the list it had
    assert verdict.tool_server == ToolServer(
        server="paged 9.9", name="paged", fixed=True, announced=True
    )


def test_a_json_rpc_error_is_a_rejection_with_its_code_and_name():
    error = {"jsonrpc": "2.0", "id": 3, "error": {"code": -32602, "message": "Unknown tool: zz"}}
    verdict = inspect(exchange(rpc("tools/call", 3, name="zz", arguments={}), error))
    assert verdict.rejected is not None
    assert (verdict.rejected.status, verdict.rejected.type, verdict.rejected.message) == (
        -32602,
        "invalid_params",
        "Unknown tool: zz",
    )
    assert verdict.tool_results == []
    odd = {"jsonrpc": "2.0", "id": 3, "error": {"code": -1, "message": "no"}}
    assert inspect(exchange(rpc("tools/call", 3, name="a"), odd)).rejected.type == ""  # type: ignore[union-attr]


def test_the_http_layer_a_refusal_a_failure_a_cut_stream_and_a_bad_body():
    refused = inspect(
        exchange(rpc("tools/list", 2), {"error": {"message": "Missing session ID"}}, status=400)
    )
    assert refused.rejected is not None
    assert (refused.rejected.status, refused.rejected.message) == (400, "Missing session ID")
    failed = inspect(exchange(rpc("tools/list", 2), {"error": "down"}, status=502))
    assert (failed.outcome, failed.reason) == ("upstream_error", "502 : down")
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
    cut = inspect(exchange(rpc("tools/call", 3, name="t0", arguments={}), [progress], sse=True))
    assert (cut.outcome, cut.reason, cut.stream) == (
        "inspected",
        "the stream ended before its response",
        True,
    )
    bad = Exchange(method="POST", url=URL, request_body=b"{nope", status=200, api="mcp")
    assert (inspect(bad).outcome, inspect(bad).reason) == (
        "unparseable",
        "request body is not a JSON object",
    )
    notified = inspect(exchange(rpc("notifications/initialized", None), status=202))
    assert (notified.outcome, notified.rpc, notified.calls) == (
        "inspected",
        ["notifications/initialized"],
        [],
    )


def test_a_batch_answers_each_call_by_its_id():
    server = listed(initialized(), [tool("t0")]).tool_server
    batch = [
        rpc("tools/call", 7, name="t0", arguments={"q": "a"}),
        rpc("tools/call", "x8", name="t0", arguments={"q": 2}),
    ]
    answers = [
        answer(7, {"content": [], "structuredContent": {"n": 1}}),
        {"jsonrpc": "2.0", "id": "x8", "result": {"content": [], "isError": True}},
    ]
    verdict = inspect(exchange(batch, answers), tool_server=server)
    assert [(c.call_id, bool(c.schema_errors)) for c in verdict.calls] == [
        ("7", False),
        ("x8", True),
    ]
    assert [(r.call_id, r.outcome) for r in verdict.tool_results] == [("7", "ok"), ("x8", "error")]


def test_mcp_is_recognised_by_its_json_rpc_body_whatever_the_path():
    body = json.dumps(rpc("tools/list")).encode()
    assert detect_api("POST", URL, body) == "mcp"
    assert detect_api("POST", URL) is None  # the proxy asks with no body
    assert detect_api("GET", URL, body) is None
    # The legacy transport POSTs to .../messages: JSON-RPC is no Anthropic request.
    assert detect_api("POST", "http://tools.example.com/messages/?session_id=ab", body) == "mcp"
    assert detect_api("POST", "https://api.anthropic.com/v1/messages", body) == "mcp"
    # A model request that merely holds the word (a tool's property) stays the path's.
    named = {"model": "m", "tools": [{"input_schema": {"properties": {"jsonrpc": {}}}}]}
    assert detect_api("POST", "https://x/v1/messages", json.dumps(named).encode()) == "messages"
    assert detect_api("POST", URL, b'{"model": "x"}') is None
    assert mcp.looks_like_jsonrpc(b'  [{"jsonrpc": "2.0"}]')
    assert not mcp.looks_like_jsonrpc(b'"jsonrpc"')


def test_the_session_is_logged_as_a_digest_never_as_its_id():
    verdict = inspect(exchange(rpc("tools/list", 2), answer(2, {"tools": []}), session="secret-1"))
    assert verdict.session == session_tag("secret-1")
    assert verdict.session is not None and len(verdict.session) == 16
    assert "secret-1" not in verdict.model_dump_json()
    assert session_tag("") is None


def test_a_list_past_the_bound_is_kept_in_part_and_never_whole():
    tools = [tool(f"t{i}") for i in range(mcp.MAX_LISTED + 1)]
    server = listed(initialized(), tools).tool_server
    assert server is not None
    assert (len(server.tools), server.complete) == (mcp.MAX_LISTED, False)
    assert isinstance(next(iter(server.tools.values())), ListedTool)


def test_a_streamed_answer_reads_as_the_same_answer_in_json_and_says_it_is_whole():
    server = listed(initialized(), [tool("t0")]).tool_server
    results = {"content": [], "structuredContent": {"n": "x"}}
    as_json = call(server, "t0", {"q": 1}, results)
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
    request = rpc("tools/call", 3, name="t0", arguments={"q": 1})
    streamed = inspect(
        exchange(request, [progress, answer(3, results)], sse=True), tool_server=server
    )
    assert (streamed.stream, streamed.reason, as_json.reason) == (True, None, None)
    keep = {"calls", "tool_results", "repairs", "rejected", "loop_errors", "unchecked"}
    assert streamed.model_dump(include=keep) == as_json.model_dump(include=keep)
    error = {"jsonrpc": "2.0", "id": 3, "error": {"code": -32602, "message": "no"}}
    refused = inspect(exchange(request, [progress, error], sse=True), tool_server=server)
    assert (refused.reason, refused.rejected is not None) == (None, True)


def test_what_no_answer_is_a_server_request_an_id_free_call_and_odd_ids_and_codes():
    server = listed(initialized(), [tool("t0")]).tool_server
    # The client's answer to a server request first, then a call; a server request that
    # reuses the call's id, and a message with neither result nor error, answer nothing.
    batch = [
        {"jsonrpc": "2.0", "id": 90, "result": {}},
        rpc("tools/call", 3, name="t0", arguments={"q": "a"}),
    ]
    noise = [
        {"jsonrpc": "2.0", "id": 3, "method": "sampling/createMessage", "result": {}},
        {"jsonrpc": "2.0", "id": 3},
    ]
    verdict = inspect(exchange(batch, noise), tool_server=server)
    assert [(c.call_id, c.name) for c in verdict.calls] == [("3", "t0")]
    assert verdict.tool_results == []
    assert verdict.rpc == ["tools/call"]
    # A call without an id (a notification, which no one answers), and one with a boolean id.
    for odd in (None, True):
        request = rpc("tools/call", None, name="t0", arguments={"q": "a"})
        if odd is not None:
            request["id"] = odd
        reply = answer(3, {"content": []})
        found = inspect(exchange(request, reply), tool_server=server)
        assert ([c.call_id for c in found.calls], found.tool_results) == ([""], [])
    strange = {"jsonrpc": "2.0", "id": 3, "error": {"code": "E1", "message": "odd"}}
    rejected = inspect(exchange(rpc("tools/call", 3, name="t0"), strange)).rejected
    assert rejected is not None
    assert (rejected.status, rejected.type) == (0, "")


def test_a_batch_names_where_each_call_sits_and_a_result_with_nothing_structured_is_said_at_the_root():
    server = listed(initialized(), [tool("t0")]).tool_server
    batch = [
        rpc("tools/call", 7, name="t0", arguments={"q": "a"}),
        rpc("tools/call", 8, name="zz", arguments={}),
    ]
    replies = [answer(7, {"content": []}), answer(8, {"content": []})]
    verdict = inspect(exchange(batch, replies), tool_server=server)
    assert [(e.rule, e.where) for e in verdict.loop_errors] == [("unlisted-tool", "1.params.name")]
    (result, _) = verdict.tool_results
    assert [(e.path, e.message) for e in result.schema_errors] == [("$", mcp.NO_STRUCTURED)]
    assert result.schema_problem is None
    assert verdict.repairs == [
        "result of 7: the server must return structuredContent that conforms to the tool's "
        "outputSchema (MCP specification); fix the tool, or the schema it declares. Clients "
        "that validate (the SDKs do) refuse the result."
    ]
    both = inspect(
        exchange(
            [rpc("tools/call", 7, name="t0", arguments={"q": 1}), batch[0] | {"id": 9}],
            [answer(7, {"content": []}), answer(9, {"content": []})],
        ),
        tool_server=server,
    )
    assert [r.split(":")[0] for r in both.repairs] == ["call 7", "result of 7, 9"]


def test_a_schema_that_is_not_one_checks_nothing_and_is_not_said_to_be_missing():
    odd = {"name": "t0", "inputSchema": "any", "outputSchema": ["n"]}
    server = listed(initialized(), [odd]).tool_server
    assert server is not None
    assert server.tools["t0"] == ListedTool(name="t0")
    verdict = call(server, "t0", {"q": 1}, {"content": []})
    assert (verdict.calls[0].schema_errors, verdict.tool_results[0].schema_errors) == ([], [])


def test_a_page_out_of_its_chain_never_leads_to_a_whole_list_nor_does_a_change_midway():
    server = initialized()
    stray = listed(server, [tool("t2")], cursor="p2", next_="p3").tool_server
    assert stray is not None and stray.next_cursor is None
    after = listed(stray, [tool("t3")], cursor="p3").tool_server
    assert after is not None and after.complete is False
    first = listed(server, [tool("t0")], next_="p2").tool_server
    notice = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    changed = inspect(
        exchange(rpc("ping", 5), [notice, answer(5, {})], sse=True), tool_server=first
    ).tool_server
    assert changed == ToolServer(server="paged 9.9", name="paged", fixed=True, announced=True)
    resumed = listed(changed, [tool("t1")], cursor="p2").tool_server  # type: ignore[arg-type]
    assert resumed is not None and resumed.complete is False


def test_a_list_of_exactly_the_bound_is_whole():
    tools = [tool(f"t{i}") for i in range(mcp.MAX_LISTED)]
    server = listed(initialized(), tools).tool_server
    assert server is not None
    assert (len(server.tools), server.complete) == (mcp.MAX_LISTED, True)


def test_the_body_look_reads_two_kib_and_a_session_id_of_any_text_has_a_digest():
    padded = b" " * 2039 + b'{"jsonrpc": "2.0"}'  # its closing quote is byte 2,049
    assert not mcp.looks_like_jsonrpc(padded)  # past the head the proxy reads
    assert mcp.looks_like_jsonrpc(b" " * 2030 + b'{"jsonrpc"}')
    assert session_tag("\udc80") == session_tag("?")  # an unpaired surrogate, replaced
    assert mcp.DIALECT.read_turn({}, {}).api == "mcp"


def test_a_stream_is_whole_only_once_a_response_came():
    request = rpc("tools/call", 3, name="t0", arguments={"q": "a"})
    for events in (
        [{"jsonrpc": "2.0", "id": 3}],  # neither result nor error: no response
        [{"jsonrpc": "2.0", "id": 9, "method": "roots/list", "result": {}}],  # a request
    ):
        cut = inspect(exchange(request, events, sse=True))
        assert cut.reason == "the stream ended before its response"
    other = [{"jsonrpc": "2.0", "id": 4, "error": {"code": -32603, "message": "x"}}]
    assert inspect(exchange(request, other, sse=True)).reason is None  # a response, if not ours
    empty = exchange(request).model_copy(
        update={
            "response_body": b": keep-alive\n\n",
            "response_headers": {"content-type": "text/event-stream"},
        }
    )
    # A keep-alive comment, or the priming event a 2025-11-25 server opens each stream with (an
    # id and an empty data line), is no message: a stream of nothing else was cut before its
    # response (the client cancelled), and nothing in it is malformed.
    for said in (b": keep-alive\n\n", b"id: 0\ndata: \n\n", b"id: e1\nretry: 500\ndata:\n\n"):
        cut = inspect(empty.model_copy(update={"response_body": said}))
        assert (cut.outcome, cut.reason, cut.stream, cut.stream_errors) == (
            "inspected",
            "the stream ended before its response",
            True,
            [],
        )
        assert [c.name for c in cut.calls] == ["t0"]


def test_a_priming_event_before_the_answer_is_no_error():
    # The TypeScript SDK's server (protocol 2025-11-25) primes every SSE answer this way.
    request = rpc("tools/call", 3, name="t0", arguments={"q": "a"})
    body = (
        b"id: 5b1e_0\ndata: \n\nretry: 1000\n\n: ping\n\nevent: message\nid: 5b1e_1\ndata: "
        + json.dumps(answer(3, {"content": []})).encode()
        + b"\n\n"
    )
    primed = exchange(request).model_copy(
        update={"response_body": body, "response_headers": {"content-type": "text/event-stream"}}
    )
    verdict = inspect(primed)
    assert (verdict.outcome, verdict.reason, verdict.stream_errors) == ("inspected", None, [])
    assert [r.outcome for r in verdict.tool_results] == ["ok"]


def test_an_output_schema_that_cannot_be_applied_is_said_and_two_bad_calls_are_named():
    remote = {"type": "object", "properties": {"n": {"$ref": "https://example.com/n.json"}}}
    server = listed(initialized(), [tool("t0") | {"outputSchema": remote}]).tool_server
    result = call(server, "t0", {"q": "a"}).tool_results[0]
    assert (result.schema_errors, (result.schema_problem or "")[:34]) == (
        [],
        "the declared schema is invalid: Re",
    )
    batch = [rpc("tools/call", 7, name="t0", arguments={"q": 1}), rpc("tools/call", 8, name="t0")]
    both = inspect(exchange(batch, [answer(7, {"content": []})]), tool_server=server)
    assert both.repairs[0].startswith("call 7, 8: send arguments")


def test_a_server_without_sessions_never_makes_a_call_unlisted():
    def sessionless(request: Any, reply: Any, server: ToolServer | None):
        plain = exchange(request, reply).model_copy(update={"request_headers": {}})
        return inspect(plain, tool_server=server)

    init = {
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": {"name": "stateless", "version": "1"},
    }
    server = sessionless(rpc("initialize"), answer(1, init), None).tool_server
    server = sessionless(
        rpc("tools/list", 2), answer(2, {"tools": [tool("t0")]}), server
    ).tool_server
    assert server is not None and (server.complete, server.fixed) == (True, True)
    # Another client of the same endpoint may have been listed other tools.
    verdict = sessionless(rpc("tools/call", 3, name="zz", arguments={}), answer(3, {}), server)
    assert (verdict.session, verdict.loop_errors) == (None, [])
    assert verdict.unchecked == [
        "call 3: arguments not validated, zz is not in the list seen, which may be another "
        "client's: the server keeps no sessions"
    ]
    checked = sessionless(
        rpc("tools/call", 4, name="t0", arguments={"q": 1}), answer(4, {}), server
    )
    assert [e.path for e in checked.calls[0].schema_errors] == ["$.q"]


# --- calls that span several requests: tasks, and retries after input_required -------------

# The TypeScript SDK's everything server (2025-11-25), as it answers its task tool.
TASK = {
    "taskId": "tk-1",
    "status": "working",
    "ttl": 300000,
    "createdAt": "2026-12-04T16:29:21.651Z",
    "lastUpdatedAt": "2026-12-04T16:29:21.651Z",
    "pollInterval": 1000,
    "statusMessage": "Gathering sources...",
}
OFF = {"content": [], "structuredContent": {"n": "three"}}  # breaks t0's outputSchema


def fetched(server: ToolServer | None, method: str, id_: int, result: Any, task: str = "tk-1"):
    return inspect(
        exchange(rpc(method, id_, taskId=task), answer(id_, result), sse=True), tool_server=server
    )


def test_a_call_answered_with_a_task_is_no_result_and_tasks_result_is_checked_as_its_result():
    server = listed(initialized(), [tool("t0")]).tool_server
    handles = (
        {"task": TASK},  # the specification's CreateTaskResult
        {"_meta": {"modelcontextprotocol.io/task": TASK}, "content": [], "isError": False},
        {"resultType": "task", "taskId": "tk-1", "status": "working"},  # the 2026 extension
    )
    for handle in handles:
        made = call(server, "t0", {"q": "a"}, handle)
        assert (made.tool_results, findings(made), len(made.calls)) == ([], [], 1)
        assert made.unchecked == [
            "call 3: answered with task tk-1, not its result: the result is checked when "
            "tasks/result (or tasks/get) returns it"
        ]
        after = made.tool_server
        assert after is not None and after.tasks["tk-1"].name == "t0"
        got = fetched(after, "tasks/result", 4, OFF)
        (result,) = got.tool_results
        assert (result.call_id, result.name, findings(got)) == ("3", "t0", ["result-schema"])
        # Fetched again: the same result, not counted again.
        again = fetched(got.tool_server, "tasks/result", 5, OFF)
        assert (again.tool_results, again.unchecked) == (
            [],
            ["task tk-1: its result was checked when first fetched"],
        )


def test_a_tasks_get_status_is_never_a_result_and_tasks_result_brings_it_once():
    # 2025-11-25, as the TypeScript client polls the everything server: tasks/get until a
    # terminal status, `completed` with no result in it, then tasks/result.
    server = listed(initialized(), [tool("t0")]).tool_server
    server = call(server, "t0", {"q": "a"}, {"task": TASK}, sse=True).tool_server
    for id_, status in enumerate(("working", "input_required", "completed"), start=4):
        polled = fetched(server, "tasks/get", id_, TASK | {"status": status})
        assert (polled.tool_results, polled.unchecked, findings(polled)) == ([], [], [])
        server = polled.tool_server
    got = fetched(server, "tasks/result", 7, OFF)
    assert [(r.call_id, r.name, r.outcome) for r in got.tool_results] == [("3", "t0", "ok")]
    assert findings(got) == ["result-schema"]  # checked against t0's outputSchema, once
    # Polled after its result: a status still, and nothing more.
    late = fetched(got.tool_server, "tasks/get", 8, TASK | {"status": "completed"})
    assert (late.tool_results, late.unchecked) == ([], [])


def test_a_failed_status_is_no_result_either_and_the_result_it_announces_is_the_error():
    # 2025-11-25: a tool result flagged isError fails the task; tasks/result returns that result.
    server = listed(initialized(), [tool("t0")]).tool_server
    server = call(server, "t0", {"q": "a"}, {"task": TASK}).tool_server
    failed = TASK | {"status": "failed", "statusMessage": "Tool execution failed: rate limit"}
    polled = fetched(server, "tasks/get", 4, failed)
    assert (polled.tool_results, findings(polled)) == ([], [])
    got = fetched(polled.tool_server, "tasks/result", 5, {"content": [], "isError": True})
    assert [(r.call_id, r.name, r.outcome, r.schema_errors) for r in got.tool_results] == [
        ("3", "t0", "error", [])
    ]


def test_the_tasks_extension_brings_the_result_or_the_error_on_tasks_get():
    server = listed(initialized(), [tool("t0")]).tool_server
    handle = {"resultType": "task", "taskId": "tk-1", "status": "working", "ttlMs": 60000}
    made = call(server, "t0", {"q": "a"}, handle).tool_server
    shape = {"resultType": "complete", "taskId": "tk-1", "ttlMs": 60000, "pollIntervalMs": 500}
    working = fetched(made, "tasks/get", 4, shape | {"status": "working"})
    assert (working.tool_results, working.unchecked) == ([], [])
    done = shape | {"status": "completed", "result": {"content": [], "structuredContent": {"n": 2}}}
    finished = fetched(working.tool_server, "tasks/get", 5, done)
    assert [(r.call_id, r.name, r.outcome, r.schema_errors) for r in finished.tool_results] == [
        ("3", "t0", "ok", [])
    ]
    again = fetched(finished.tool_server, "tasks/get", 6, done)
    assert (again.tool_results, again.unchecked) == (
        [],
        ["task tk-1: its result was checked when first fetched"],
    )
    error = {"code": -32603, "message": "API rate limit exceeded"}
    failed = fetched(made, "tasks/get", 5, shape | {"status": "failed", "error": error})
    assert [(r.call_id, r.outcome) for r in failed.tool_results] == [("3", "error")]


def test_a_task_of_no_seen_call_is_said_when_its_result_comes_and_not_when_polled():
    server = listed(initialized(), [tool("t0")]).tool_server
    polled = fetched(server, "tasks/get", 4, TASK | {"status": "completed"}, task="tk-9")
    assert (polled.tool_results, polled.unchecked) == ([], [])
    stray = fetched(server, "tasks/result", 6, {"content": []}, task="tk-9")
    assert (stray.tool_results, stray.unchecked) == (
        [],
        ["task tk-9: its result is not checked, the tools/call that made it was not seen in "
         "this session (or was forgotten)"],
    )  # fmt: skip


def test_tasks_remembered_are_bounded():
    server = listed(initialized(), [tool("t0")]).tool_server
    for n in range(mcp.MAX_TASKS + 2):
        server = call(server, "t0", {"q": "a"}, {"task": {"taskId": f"k{n}"}}).tool_server
    assert server is not None and len(server.tasks) == mcp.MAX_TASKS
    assert "k0" not in server.tasks and f"k{mcp.MAX_TASKS + 1}" in server.tasks


# --- protocol 2026-07-28 ---------------------------------------------------------------


META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "mcp", "version": "2.3.0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
STAMP = {"io.modelcontextprotocol/serverInfo": {"name": "modern", "version": "2.3.0"}}
ROOTS = {"w": {"method": "roots/list"}}
ROOTED = {"w": {"roots": [{"uri": "file:///work", "name": "work"}]}}


def discovered() -> ToolServer:
    discover = inspect(
        exchange(
            rpc("server/discover", 1, _meta=META),
            answer(1, {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
                       "_meta": STAMP, "resultType": "complete"}),
            session="",
        )
    )  # fmt: skip
    assert (discover.server, discover.session) == ("modern 2.3.0", None)
    server = discover.tool_server
    assert server is not None and server.fixed
    listing = answer(2, {"tools": [tool("t0")], "_meta": STAMP, "resultType": "complete"})
    verdict = inspect(exchange(rpc("tools/list", 2, _meta=META), listing, session=""),
                      tool_server=server)  # fmt: skip
    assert verdict.tool_server is not None
    return verdict.tool_server


def asked(state: str | None = None) -> dict[str, Any]:
    """An input_required answer, as the `mcp` 2.x server gives it (with its requestState)."""
    said = {"resultType": "input_required", "inputRequests": ROOTS, "_meta": STAMP}
    return said | ({"requestState": state} if state is not None else {})


def retried(server: ToolServer | None, id_: int, result: Any, *, arguments: Any = None, **kw):
    params = {"name": "t0", "arguments": arguments or {"q": "a"}, "inputResponses": ROOTED}
    request = rpc("tools/call", id_, **params, **kw, _meta=META)
    return inspect(exchange(request, answer(id_, result), session=""), tool_server=server)


def test_server_discover_names_the_server_and_an_input_required_answer_is_no_result():
    first = call(discovered(), "t0", {"q": "a"}, asked("v1.sealed"), session="")
    assert (first.tool_results, findings(first), len(first.calls)) == ([], [], 1)
    assert first.unchecked == [
        "call 3: answered resultType input_required, not a result (protocol 2026-07-28): the "
        "client calls again with what the server asked for"
    ]
    # Without a session the list may be another client's: an unknown name is no finding.
    unknown = call(first.tool_server, "zz", {}, session="")
    assert (unknown.loop_errors, unknown.server) == ([], "modern 2.3.0")


def test_the_retry_after_input_required_is_the_same_call_logged_once_its_result_named():
    # The `mcp` 2.x client: a new id, the same name and arguments, inputResponses, and the
    # requestState echoed; the server asks twice here, with a new requestState each time.
    first = call(discovered(), "t0", {"q": "a"}, asked("v1.one"), session="")
    assert [(c.call_id, c.name) for c in first.calls] == [("3", "t0")]
    again = retried(first.tool_server, 4, asked("v1.two"), requestState="v1.one")
    assert (again.calls, again.tool_results, findings(again)) == ([], [], [])
    assert again.unchecked == [
        "call 3: answered resultType input_required, not a result (protocol 2026-07-28): the "
        "client calls again with what the server asked for"
    ]
    done = retried(again.tool_server, 5, OFF | {"resultType": "complete"}, requestState="v1.two")
    assert done.calls == []  # counted once, when first sent
    assert [(r.call_id, r.name, r.outcome) for r in done.tool_results] == [("3", "t0", "ok")]
    assert (findings(done), done.unchecked) == (["result-schema"], [])  # checked, once
    assert done.tool_server is not None and done.tool_server.retries == {}


def test_a_retry_without_request_state_is_tied_by_its_tool_and_arguments_when_one_call_waits():
    server = discovered()
    first = call(server, "t0", {"q": "a", "n": 1}, asked(), session="")
    # The same arguments, in another key order: the same call.
    done = retried(first.tool_server, 4, {"content": [], "structuredContent": {"n": 1}},
                   arguments={"n": 1, "q": "a"})  # fmt: skip
    assert [(r.call_id, r.name) for r in done.tool_results] == [("3", "t0")]
    assert (done.calls, done.unchecked) == ([], [])
    # Two calls alike wait: a retry is told apart from neither, and stands for its own call.
    one = call(server, "t0", {"q": "a"}, asked(), session="")
    two = inspect(exchange(rpc("tools/call", 9, name="t0", arguments={"q": "a"}),
                           answer(9, asked()), session=""), tool_server=one.tool_server)  # fmt: skip
    told = retried(two.tool_server, 10, {"content": [], "structuredContent": {"n": 1}})
    assert [(r.call_id, r.name) for r in told.tool_results] == [("10", "t0")]
    assert (told.calls, told.unchecked) == (
        [],
        ["call 10: a retry with the input the server asked for, of a call it cannot be tied to "
         "(more than one call waits): no new call; its answer is logged under this id"],
    )  # fmt: skip


def test_a_retry_whose_first_request_was_not_seen_is_no_new_call_and_names_its_tool():
    done = retried(discovered(), 8, OFF | {"resultType": "complete"}, requestState="v1.lost")
    assert done.calls == []
    assert [(r.call_id, r.name) for r in done.tool_results] == [("8", "t0")]
    assert findings(done) == ["result-schema"]  # the endpoint's list still checks it
    assert done.unchecked == [
        "call 8: a retry with the input the server asked for, of a call it cannot be tied to "
        "(its first request was not seen): no new call; its answer is logged under this id"
    ]


def test_calls_awaiting_their_retry_are_bounded():
    server: ToolServer | None = discovered()
    for n in range(mcp.MAX_RETRIES + 2):
        server = call(server, "t0", {"q": "a"}, asked(f"s{n}"), session="").tool_server
    assert server is not None and len(server.retries) == mcp.MAX_RETRIES


# --- the legacy HTTP+SSE transport: Channels pairs POSTs with the stream's responses -------


BASE = "http://tools.example.com:8000"
POSTS = f"{BASE}/messages/?session_id=ab12"


def posted(message: dict[str, Any]) -> tuple[Exchange, dict[str, Any]]:
    post = Exchange(
        method="POST",
        url=POSTS,
        request_body=json.dumps(message).encode(),
        status=202,
        response_headers={"content-type": "text/plain"},
        response_body=b"Accepted",
        api="mcp",
    )
    return post, message


def event(message: dict[str, Any], name: str = "message") -> bytes:
    return f"event: {name}\ndata: {json.dumps(message)}\n\n".encode()


ENDPOINT = b"event: endpoint\ndata: /messages/?session_id=ab12\n\n"


def test_a_post_and_its_answer_on_the_stream_pair_whichever_comes_first():
    init = rpc("initialize", 1)
    reply = answer(1, {"serverInfo": {"name": "legacy", "version": "1"}, "capabilities": {}})
    for post_first in (True, False):
        channels = mcp_streams.Channels()
        assert channels.stream("get", f"{BASE}/sse", b": ping\n\n" + ENDPOINT) == []
        if post_first:
            assert channels.posted(*posted(init)) == []
            wire = event(reply)  # cut anywhere: the answer is whole only with its last byte
            assert channels.stream("get", f"{BASE}/sse", wire[:9]) == []
            (pair,) = channels.stream("get", f"{BASE}/sse", wire[9:])
        else:
            assert channels.stream("get", f"{BASE}/sse", event(reply)) == []
            (pair,) = channels.posted(*posted(init))
        assert pair.unanswered is None and len(channels) == 0
        verdict = inspect(pair.exchange)
        assert (verdict.rpc, verdict.server, verdict.stream, verdict.status) == (
            ["initialize"],
            "legacy 1",
            True,
            202,
        )
        assert verdict.session == session_tag("ab12")  # the session the POST's query names


def test_a_notification_is_its_202_and_a_request_never_answered_is_said_when_the_stream_ends():
    channels = mcp_streams.Channels()
    channels.stream("get", f"{BASE}/sse", ENDPOINT)
    notice = rpc("notifications/initialized", None)
    assert channels.posted(*posted(notice)) is None  # inspected as it is: 202 is all of it
    alone = inspect(posted(notice)[0])
    assert (alone.outcome, alone.reason, alone.rpc) == (
        "inspected",
        None,
        ["notifications/initialized"],
    )
    assert channels.posted(*posted(rpc("tools/call", 7, name="t0", arguments={}))) == []
    # The server's own messages on the stream answer nothing of the client's.
    request = {"jsonrpc": "2.0", "id": 7, "method": "roots/list"}
    assert channels.stream("get", f"{BASE}/sse", event(request)) == []
    (cut,) = channels.stream("get", f"{BASE}/sse", b"", ended=True)
    assert cut.unanswered == mcp_streams.NEVER_ANSWERED
    assert [c.name for c in inspect(cut.exchange).calls] == ["t0"]
    assert len(channels) == 0


def test_a_recording_pairs_posts_stored_before_their_stream_and_what_waits_is_said_at_close():
    channels = mcp_streams.Channels()
    for n in (1, 2, 3):
        assert channels.posted(*posted(rpc("tools/call", n, name="t0", arguments={}))) == []
    stream = ENDPOINT + event(answer(2, {"content": []})) + event(answer(1, {"content": []}))
    paired = channels.stream(f"{BASE}/sse", f"{BASE}/sse", stream)
    assert [json.loads(p.exchange.request_body)["id"] for p in paired] == [2, 1]  # stream order
    (left,) = channels.close()
    assert (json.loads(left.exchange.request_body)["id"], left.unanswered) == (
        3,
        mcp_streams.NEVER_ANSWERED,
    )


def test_a_post_the_client_hung_up_on_pairs_with_its_answer_even_after_the_stream_ended():
    # The mcp SDK's SSE client exits right after its last result: the POST's 202 is never read
    # (no status), and the GET stream's end may be recorded before the POST.
    call_ = rpc("tools/call", 7, name="t0", arguments={})
    hung_up = posted(call_)[0].model_copy(update={"status": None, "response_body": b""})
    for stream_ends_first in (False, True):
        channels = mcp_streams.Channels()
        channels.stream("get", f"{BASE}/sse", ENDPOINT)
        if stream_ends_first:
            said = channels.stream("get", f"{BASE}/sse", event(answer(7, {})), ended=True)
            assert said == []
            (pair,) = channels.posted(hung_up, call_)
        else:
            assert channels.posted(hung_up, call_) == []
            (pair,) = channels.stream("get", f"{BASE}/sse", event(answer(7, {})))
        verdict = inspect(pair.exchange)
        assert (pair.unanswered, verdict.outcome, verdict.status) == (None, "inspected", 202)
        assert [c.name for c in verdict.calls] == ["t0"] and len(channels) == 0
    # Where no session's stream serves the endpoint, it is read as it is.
    assert mcp_streams.Channels().posted(hung_up, call_) is None
    channels = mcp_streams.Channels()
    channels.stream("get", f"{BASE}/sse", ENDPOINT)
    assert channels.posted(hung_up, call_) == []
    (never,) = channels.stream("get", f"{BASE}/sse", b"", ended=True)
    assert (never.unanswered, never.exchange.status) == (mcp_streams.NEVER_ANSWERED, None)


def test_what_waits_is_bounded_and_a_lost_piece_restarts_the_reading():
    channels = mcp_streams.Channels(waiting=2)
    said = [p for n in range(4) for p in channels.posted(*posted(rpc("ping", n))) or []]
    assert [p.unanswered for p in said] == [mcp_streams.LET_GO] * 2 and len(channels) == 2
    channels = mcp_streams.Channels()
    channels.stream("get", f"{BASE}/sse", ENDPOINT + b'event: message\ndata: {"jsonr')
    channels.posted(*posted(rpc("ping", 5)))
    (pair,) = channels.stream("get", f"{BASE}/sse", event(answer(5, {})), lost=True)
    assert pair.unanswered is None


NOTICE = event(rpc("notifications/tools/list_changed", None))


def test_a_list_change_on_a_get_stream_is_said_however_it_is_cut_and_its_other_events_are_not():
    log = event(rpc("notifications/message", None, level="info", data="tools/list_changed"))
    wire = b"id: 0\ndata: \n\n" + log + event(rpc("roots/list", 9)) + NOTICE + log
    for cut in range(len(wire) + 1):
        channels = mcp_streams.Channels()
        said = channels.stream("get", URL, wire[:cut])
        said += channels.stream("get", URL, wire[cut:], ended=True)
        assert said == [
            mcp_streams.Changed(URL)
        ]  # Streamable HTTP: said for the stream's own session


def test_a_list_change_on_a_legacy_stream_follows_the_responses_that_came_before_it():
    channels = mcp_streams.Channels()
    channels.stream("get", f"{BASE}/sse", ENDPOINT)
    # The list's answer came before the change, and before the inspector had the list's POST;
    # the ping's answer came after the change.
    wire = event(answer(2, {"tools": []})) + NOTICE + event(answer(4, {}))
    assert channels.stream("get", f"{BASE}/sse", wire) == []
    assert channels.posted(*posted(rpc("ping", 4))) != []  # the change does not wait for it
    pair, change = channels.posted(*posted(rpc("tools/list", 2)))
    assert isinstance(pair, mcp_streams.Paired) and change == mcp_streams.Changed(POSTS)
    assert channels.stream("get", f"{BASE}/sse", NOTICE) == [
        mcp_streams.Changed(POSTS)
    ]  # none waits
    # A change still waiting when the stream ends, or the recording does, is said then.
    assert channels.stream("get", f"{BASE}/sse", event(answer(5, {})) + NOTICE) == []
    assert channels.stream("get", f"{BASE}/sse", b"", ended=True) == [mcp_streams.Changed(POSTS)]
    channels.stream("again", f"{BASE}/sse", ENDPOINT + event(answer(6, {})) + NOTICE)
    assert channels.close() == [mcp_streams.Changed(POSTS)]
    # Past the bound, the response it waits for is let go, and it is said.
    channels = mcp_streams.Channels(waiting=1)
    channels.stream("get", f"{BASE}/sse", ENDPOINT + event(answer(7, {})) + NOTICE)
    assert channels.stream("get", f"{BASE}/sse", event(answer(8, {}))) == [
        mcp_streams.Changed(POSTS)
    ]


def test_a_call_after_a_list_change_says_its_list_was_not_read_again():
    server = listed(initialized(list_changed=True), [tool("t0")]).tool_server
    assert server is not None
    verdict = call(mcp.list_changed(server), "t0", {"q": 1})
    assert verdict.calls[0].schema_errors == []  # not checked against the list it had
    assert verdict.unchecked == [
        "call 3: arguments not validated, the server said its tool list changed "
        "(notifications/tools/list_changed), and it was not listed again since"
    ]
