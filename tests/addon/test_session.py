"""One inspect-and-remember session: bounded memory of the calls and of the counted responses."""

import json

from support.captures import JSON, URLS
from support.corpora import FOLDER
from support.corpora import exchange as recorded
from support.revalidated import revalidated

from tooltap.addon.inspection.session import OPEN_CALL, Session, ToolServers
from tooltap.addon.inspection.state import RecentCalls
from tooltap.core import Exchange
from tooltap.core.served import session_tag


def responses(response_id, calls=(), method="POST", status="completed"):
    body = {
        "id": response_id,
        "status": status,
        "output": [
            {"type": "function_call", "call_id": c, "name": "f", "arguments": "{}"} for c in calls
        ],
        "tools": [{"type": "function", "name": "f"}],
    }
    url = URLS["responses"] + ("" if method == "POST" else f"/{response_id}")
    return Exchange(
        method=method,
        url=url,
        request_body=b"{}" if method == "POST" else b"",
        status=200,
        response_headers=JSON,
        response_body=json.dumps(body).encode(),
    )


def test_recent_calls_keep_the_newest_responses_only():
    recent = RecentCalls(size=2)
    for n in range(3):
        recent.remember(f"resp_{n}", [f"call_{n}"])
    assert list(recent) == ["resp_1", "resp_2"]
    recent.remember("resp_1", ["call_x"])  # seen again: the newest now
    assert list(recent.items()) == [("resp_2", ["call_2"]), ("resp_1", ["call_x"])]


def test_the_session_remembers_calls_for_follow_ups_and_counts_a_response_once():
    session = Session(size=2)
    assert session.inspect(responses("resp_a", ["call_1"])).state == "no-strict-declared"
    assert session.state.open_calls("resp_a") == ["call_1"]
    again = session.inspect(responses("resp_a", ["call_1"], method="GET"))
    assert (again.state, again.calls) == (None, [])
    for n in range(2):  # resp_a is pushed out of the bounded memory
        session.inspect(responses(f"resp_{n}"))
    assert session.inspect(responses("resp_a", method="GET")).state == "no-strict-declared"


def mcp(request: dict, answer: dict, session: str) -> Exchange:
    return Exchange(
        method="POST",
        url="http://tools.example.com/mcp",
        request_body=json.dumps(request).encode(),
        request_headers={"mcp-session-id": session},
        status=200,
        response_headers={"content-type": "application/json"},
        response_body=json.dumps(answer).encode(),
        api="mcp",
    )


def listing(session: str, names: list[str], cursor: str | None = None, next_: str | None = None):
    tools = [{"name": n, "inputSchema": {"type": "object", "required": ["q"]}} for n in names]
    params = {"cursor": cursor} if cursor else {}
    result = {"tools": tools} | ({"nextCursor": next_} if next_ else {})
    request = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": params}
    return mcp(request, {"jsonrpc": "2.0", "id": 2, "result": result}, session)


def call(session: str) -> Exchange:
    request = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "t0"}}
    return mcp(request, {"jsonrpc": "2.0", "id": 3, "result": {"content": []}}, session)


def test_mcp_sessions_are_remembered_up_to_their_count_and_the_bytes_of_their_lists():
    session = Session()
    session.tool_servers = ToolServers(sessions=2)
    for name in ("a", "b", "c"):
        session.inspect(listing(name, ["t0"]))
    assert len(session.tool_servers) == 2
    assert session.inspect(call("a")).unchecked == [  # forgotten: not validated, and said so
        "call 3: arguments not validated, nothing of this session was seen before (or it was "
        "forgotten)"
    ]
    assert [e.path for e in session.inspect(call("c")).calls[0].schema_errors] == ["$"]

    one = len(listing("a", ["t0"]).response_body)
    session = Session()
    session.tool_servers = ToolServers(limit=one + one // 2)
    session.inspect(listing("a", ["t0"]))
    assert session.tool_servers.held == one
    session.inspect(listing("b", ["t0"]))  # two lists are past the limit: the oldest goes
    assert (len(session.tool_servers), session.tool_servers.held) == (1, one)
    endpoint = "http://tools.example.com/mcp"
    assert session.tool_servers.get((endpoint, session_tag("a"))) is None
    assert session.tool_servers.get((endpoint, session_tag("b"))) is not None


def test_a_later_page_adds_its_bytes_and_a_first_page_starts_them_anew():
    session = Session()
    first = listing("a", ["t0", "t1"], next_="p2")
    second = listing("a", ["t2"], cursor="p2")
    for exchange in (first, second):
        session.inspect(exchange)
    assert session.tool_servers.held == len(first.response_body) + len(second.response_body)
    again = listing("a", ["t9"])
    session.inspect(again)
    assert session.tool_servers.held == len(again.response_body)


NOTICE = b'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n\n'
UNCHECKED = (
    "call 3: arguments not validated, the server said its tool list changed "
    "(notifications/tools/list_changed), and it was not listed again since"
)


def get_stream(session: str, body: bytes) -> Exchange:
    """A piece of a session's GET stream (Streamable HTTP), as the inspector is handed it."""
    return Exchange(
        method="GET",
        url="http://tools.example.com/mcp",
        request_headers={"mcp-session-id": session},
        status=200,
        response_headers={"content-type": "text/event-stream"},
        response_body=body,
        api="mcp",
    )


def test_a_list_change_on_the_get_stream_forgets_that_sessions_list_until_it_is_listed_again():
    session = Session()
    for name in ("a", "b"):
        session.inspect(listing(name, ["t0"]))
    assert session.stream("get-a", get_stream("a", NOTICE[:30])) == []
    assert session.stream("get-a", get_stream("a", NOTICE[30:])) == []
    assert session.inspect(call("a")).unchecked == [UNCHECKED]
    # The other session's list holds, and only its bytes are held.
    assert [e.path for e in session.inspect(call("b")).calls[0].schema_errors] == ["$"]
    assert session.tool_servers.held == len(listing("b", ["t0"]).response_body)
    session.inspect(listing("a", ["t0"]))  # listed again: checked again
    assert [e.path for e in session.inspect(call("a")).calls[0].schema_errors] == ["$"]


def test_a_list_change_on_a_legacy_stream_forgets_the_list_of_the_session_its_endpoint_names():
    base = "http://tools.example.com:8000"

    def posted(message: dict) -> Exchange:
        return Exchange(
            method="POST",
            url=f"{base}/messages/?session_id=ab12",
            request_body=json.dumps(message).encode(),
            status=202,
            response_body=b"Accepted",
            api="mcp",
        )

    def event(message: dict) -> bytes:
        return b"event: message\ndata: " + json.dumps(message).encode() + b"\n\n"

    session = Session()
    listed = json.loads(listing("x", ["t0"]).response_body)
    # A recording: the POSTs first, then the stream that answered them, the change between.
    assert session.read(posted(json.loads(listing("x", ["t0"]).request_body))) == []
    assert session.read(posted(json.loads(call("x").request_body))) == []
    stream = (
        b"event: endpoint\ndata: /messages/?session_id=ab12\n\n"
        + event(listed)
        + NOTICE
        + event({"jsonrpc": "2.0", "id": 3, "result": {"content": []}})
    )
    recorded = Exchange(
        method="GET",
        url=f"{base}/sse",
        status=200,
        response_headers={"content-type": "text/event-stream"},
        response_body=stream,
    )
    (_, listing_read), (_, call_read) = session.read(recorded)
    assert listing_read.listed_tools == ["t0"]
    assert call_read.unchecked == [UNCHECKED]


def test_a_legacy_post_the_client_hung_up_on_is_logged_with_its_answer_or_said_client_gone():
    base = "http://tools.example.com:8000"
    hung_up = Exchange(
        method="POST",
        url=f"{base}/messages/?session_id=ab12",
        request_body=call("x").request_body,
        api="mcp",
    )  # no status: the client exited before it read the 202

    def stream(body: bytes) -> Exchange:
        return Exchange(method="GET", url=f"{base}/sse", status=200, response_body=body)

    session = Session()
    assert (
        session.stream("get", stream(b"event: endpoint\ndata: /messages/?session_id=ab12\n\n"))
        == []
    )
    assert session.read(hung_up) == []  # its answer comes on the stream
    answered = b'event: message\ndata: {"jsonrpc": "2.0", "id": 3, "result": {"content": []}}\n\n'
    ((_, verdict),) = session.stream("get", stream(answered))
    assert (verdict.outcome, [c.name for c in verdict.calls]) == ("inspected", ["t0"])
    assert session.read(hung_up) == []
    ((_, gone),) = session.stream("get", stream(b""), ended=True)
    assert gone.outcome == "client_gone"  # as any MCP POST with no answer is
    assert gone.reason.startswith("the client hung up before the answer; its response never came")


# --- where the calls ran: a model's batch linked to the MCP runs it caused -------------------

T0 = 1_764_480_000.0
CITIES = ("Paris", "Rome", "Oslo")


def fan_out() -> Exchange:
    """A Chat response calling get_weather for three cities at once, at T0 + 1."""
    calls = [
        {"id": f"call_{c}", "type": "function",
         "function": {"name": "get_weather", "arguments": json.dumps({"city": c})}}
        for c in CITIES
    ]  # fmt: skip
    body = {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": None,
                         "tool_calls": calls}, "finish_reason": "tool_calls"}]}  # fmt: skip
    request = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Weather?"}]}
    return Exchange(
        method="POST", url=URLS["chat"], request_body=json.dumps(request).encode(), status=200,
        response_headers=JSON, response_body=json.dumps(body).encode(), request_start=T0,
        response_end=T0 + 1,
    )  # fmt: skip


def ran(city: str, start: float, end: float, rpc: int, session: str = "s1") -> Exchange:
    """The application runs get_weather(city) on an MCP server behind tooltap (session: ""
    for none, as the protocol's stateless version sends)."""
    request = {"jsonrpc": "2.0", "id": rpc, "method": "tools/call",
               "params": {"name": "get_weather", "arguments": {"city": city}}}  # fmt: skip
    result = {"content": [{"type": "text", "text": "12C"}], "isError": False}
    exchange = mcp(request, {"jsonrpc": "2.0", "id": rpc, "result": result}, session)
    return exchange.model_copy(update={"request_start": T0 + start, "response_end": T0 + end})


def answered(at: float) -> Exchange:
    first = json.loads(fan_out().response_body)["choices"][0]["message"]
    messages = [{"role": "user", "content": "Weather?"}, first] + [
        {"role": "tool", "tool_call_id": f"call_{c}", "content": "12C"} for c in CITIES
    ]
    body = {"id": "chatcmpl-2", "object": "chat.completion", "model": "gpt-4o",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Mild."},
                         "finish_reason": "stop"}]}  # fmt: skip
    return Exchange(
        method="POST", url=URLS["chat"],
        request_body=json.dumps({"model": "gpt-4o", "messages": messages}).encode(),
        status=200, response_headers=JSON, response_body=json.dumps(body).encode(),
        request_start=T0 + at, response_end=T0 + at + 1,
    )  # fmt: skip


def loop(
    runs: list[tuple[float, float]], sessions: tuple[str, ...] = ("s1",) * 3
) -> tuple[list, list]:
    times, errors = timed(runs, sessions)
    return times, [(e.rule, e.ids) for e in errors]


def timed(runs: list[tuple[float, float]], sessions: tuple[str, ...]) -> tuple[list, list]:
    session = Session()
    session.inspect(fan_out())
    for rpc, (city, (start, end), mcp_session) in enumerate(
        zip(CITIES, runs, sessions, strict=False), 1
    ):
        session.inspect(ran(city, start, end, rpc, mcp_session))
    verdict = session.inspect(answered(10))
    times = [(t.call_id, t.waited_ms, t.ran_ms, t.server) for t in verdict.tool_times]
    return times, verdict.loop_errors


def test_calls_run_one_after_another_over_mcp_are_a_serial_batch_with_each_run_timed():
    times, errors = loop([(2, 3), (3.5, 5), (5.5, 6)])
    assert times == [
        ("call_Paris", 9000.0, 1000.0, None),
        ("call_Rome", 9000.0, 1500.0, None),
        ("call_Oslo", 9000.0, 500.0, None),
    ]
    assert errors == [("serial-execution", ["call_Paris", "call_Rome", "call_Oslo"])]


def test_a_serial_batch_names_one_client_as_its_possible_cause_only_where_it_could_be():
    one_after_another = [(2, 3), (3.5, 5), (5.5, 6)]
    for sessions, said in [
        (("s1",) * 3, "All of them went over one MCP session: if your runtime starts"),
        (("",) * 3, "All of them went to one MCP server, in no session: if your runtime starts"),
    ]:
        _, (error,) = timed(one_after_another, sessions)
        assert said in error.repair and "MCPServerStreamableHttp" in error.repair
    _, (error,) = timed(one_after_another, ("s1", "s2", "s3"))  # a session per call
    assert "MCP client" not in error.repair


def test_calls_run_together_are_timed_and_no_finding():
    times, errors = loop([(2, 4), (2.1, 3), (2.2, 5)])
    assert [t[2] for t in times] == [2000.0, 900.0, 2800.0] and errors == []


def test_the_tool_times_of_the_real_corpus_are_the_ones_validation_would_build():
    """The clock builds its tool times without validating them (core/built.py): on the real
    corpus read in order, one exchange a second, every one is what validation would build."""
    session, times = Session(), []
    for path in sorted(FOLDER.glob("realworld/exchanges*.jsonl")):
        records = map(json.loads, filter(str.strip, path.read_text(encoding="utf-8").splitlines()))
        for index, record in enumerate(records):
            at = T0 + index
            read = recorded(record).model_copy(
                update={"request_start": at, "request_end": at + 0.01, "response_end": at + 0.2}
            )
            times += [t for _, verdict in session.read(read) for t in verdict.tool_times]
    assert len(times) > 100
    assert {problem for t in times for problem in revalidated(t)} == set()
    assert all(t.waited_ms > 0 and t.name for t in times)


def test_a_batch_one_of_whose_runs_was_not_seen_is_never_called_serial():
    times, errors = loop([(2, 3), (3.5, 5)])  # Oslo's ran where tooltap does not see
    assert [t[2] for t in times] == [1000.0, 1500.0, None] and errors == []


# --- a call over several requests runs until its last one ---------------------------------


def rpc_at(request: dict, result: dict, session: str, start: float, end: float) -> Exchange:
    exchange = mcp(request, {"jsonrpc": "2.0", "id": request["id"], "result": result}, session)
    return exchange.model_copy(update={"request_start": T0 + start, "response_end": T0 + end})


def weather(rpc: int, city: str, **more: object) -> dict:
    params = {"name": "get_weather", "arguments": {"city": city}, **more}
    return {"jsonrpc": "2.0", "id": rpc, "method": "tools/call", "params": params}


def test_a_task_runs_until_tasks_result_and_a_retried_call_until_the_retry_is_answered():
    session = Session()
    session.inspect(fan_out())
    done = {"content": [{"type": "text", "text": "12C"}], "isError": False}
    session.inspect(rpc_at(weather(1, "Paris"), done, "s1", 2, 6))
    # Rome runs as a task (2025-11-25): made at 2, its tasks/get says `completed` at 4.1 (a
    # status, no result), and its result comes with tasks/result at 5.
    task = {"taskId": "tk-1", "status": "working", "ttl": 60000, "pollInterval": 1000}
    session.inspect(rpc_at(weather(2, "Rome"), {"task": task}, "s1", 2, 2.1))
    polled = {"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"taskId": "tk-1"}}
    session.inspect(rpc_at(polled, task | {"status": "completed"}, "s1", 4, 4.1))
    fetch = {"jsonrpc": "2.0", "id": 4, "method": "tasks/result", "params": {"taskId": "tk-1"}}
    session.inspect(rpc_at(fetch, done, "s1", 4.2, 5))
    # Oslo, on protocol 2026-07-28 (no session): made at 3, answered input_required at 3.1;
    # the client's retry (another id) is answered at 5.5.
    asked = {"resultType": "input_required", "inputRequests": {"w": {"method": "roots/list"}},
             "requestState": "v1.sealed"}  # fmt: skip
    session.inspect(rpc_at(weather(7, "Oslo"), asked, "", 3, 3.1))
    retry = weather(8, "Oslo", inputResponses={"w": {"roots": []}}, requestState="v1.sealed")
    session.inspect(rpc_at(retry, done | {"resultType": "complete"}, "", 4.5, 5.5))
    verdict = session.inspect(answered(10))
    assert [(t.call_id, t.ran_ms) for t in verdict.tool_times] == [
        ("call_Paris", 4000.0),
        ("call_Rome", 3000.0),
        ("call_Oslo", 2500.0),
    ]
    assert verdict.loop_errors == []  # each began before any ended


def test_the_calls_a_session_keeps_open_count_against_the_bytes_of_its_memory():
    session = Session()
    session.tool_servers = ToolServers(limit=OPEN_CALL * 3)
    for name in ("a", "b"):
        for rpc in (5, 6):  # two tasks each
            request = {"jsonrpc": "2.0", "id": rpc, "method": "tools/call",
                       "params": {"name": "t0", "arguments": {"q": "x"}}}  # fmt: skip
            handle = {"task": {"taskId": f"{name}{rpc}", "status": "working"}}
            session.inspect(mcp(request, {"jsonrpc": "2.0", "id": rpc, "result": handle}, name))
        if name == "a":
            assert session.tool_servers.held == OPEN_CALL * 2
    # Four open calls are past the limit: the oldest session goes, with its tasks.
    endpoint = "http://tools.example.com/mcp"
    assert session.tool_servers.get((endpoint, session_tag("a"))) is None
    assert session.tool_servers.held == OPEN_CALL * 2
    fetch = {"jsonrpc": "2.0", "id": 7, "method": "tasks/result", "params": {"taskId": "a5"}}
    forgotten = session.inspect(mcp(fetch, {"jsonrpc": "2.0", "id": 7, "result": {}}, "a"))
    assert forgotten.unchecked == [
        "task a5: its result is not checked, the tools/call that made it was not seen in this "
        "session (or was forgotten)"
    ]
