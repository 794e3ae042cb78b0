"""MCP's reading (core/dialects/mcp.py) through inspect(): a session's memory built exchange by
exchange, and each finding with the conditions that keep it from being a false alarm. The
bodies have the shapes the SDK's server sends (tests/system/test_mcp_clients.py drives the real
one)."""

from __future__ import annotations

import json
from typing import Any

from tooltap.core import Exchange, ToolServer, detect_api, inspect
from tooltap.core.dialects import mcp
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
    for server in (changing, partial, None):
        verdict = call(server, "zz", {})
        assert verdict.loop_errors == []
        assert verdict.unchecked == [
            "call 3: arguments not validated, this session's tools/list was not seen whole"
        ]


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


def test_mcp_is_recognised_by_its_body_only_where_no_path_names_an_api():
    body = json.dumps(rpc("tools/list")).encode()
    assert detect_api("POST", URL, body) == "mcp"
    assert detect_api("POST", URL) is None  # the proxy asks with no body
    assert detect_api("GET", URL, body) is None
    assert detect_api("POST", "https://api.openai.com/v1/responses", body) == "responses"
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
    assert (inspect(empty).outcome, inspect(empty).reason) == (
        "unparseable",
        "stream carried no JSON events",
    )


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
        "call 3: zz is not in the list, which may be another client's: the server keeps no sessions"
    ]
    checked = sessionless(
        rpc("tools/call", 4, name="t0", arguments={"q": 1}), answer(4, {}), server
    )
    assert [e.path for e in checked.calls[0].schema_errors] == ["$.q"]
