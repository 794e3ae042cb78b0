"""WebSocket transports through a real `tooltap run`: the official openai SDK as the client.

The upstream is the loopback replay server speaking WebSocket through the
`websockets` package (the SDK's own transport), replaying the real recordings
and turns built on them (tests/support/sockets.py). Each test checks that the client received exactly
the frames the upstream sent, and the exact log events and /metrics values.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import openai
import pytest
from support.captures import WIRE
from support.prom import sample, scrape, scrape_until
from support.sockets import (
    RESPONSES_CASSETTE,
    call_item,
    realtime_session,
    realtime_turn,
    recording,
    responses_error,
    responses_turn,
    script,
    steps_of,
    text_item,
)
from support.tls import regular_proxy, upstream_tls
from websockets.exceptions import ConnectionClosed

from tooltap.addon.harness.launch import Proxy
from tooltap.addon.harness.replay import ReplayServer, Reply
from tooltap.addon.harness.sockets import Close
from tooltap.addon.sinks.log import JOIN_KEYS, SOCKET_KEYS

SECRET = "sk-test-SOCKET-0123456789"
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Look up the weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
}
STRICT_WEATHER = WEATHER | {"strict": True}
FAN = "resp_0a76d7cc9190bb9d0069c5b9d1743c81a182203d3de7d50f01"
FOLLOW = "resp_0a76d7cc9190bb9d0069c5b9d1743c81a182203d3de7d50f02"
PARIS = call_item(
    "fc_0a76d7cc01", "call_NnDOtgBLcomuxMOH1WLzvbU1", "get_weather", '{"city":"Paris"}'
)
ROME = call_item("fc_0a76d7cc02", "call_NnDOtgBLcomuxMOH1WLzvbU2", "get_weather", '{"city":"Rome"}')
R1, R2, R3, R4 = (f"resp_Dz2piW4z2Mvytwhum8N0{n}" for n in range(1, 5))
REALTIME_CALLS = [
    ("call_9ghqokxJmZFwiA01", "get_weather", '{"city":"Paris"}'),
    ("call_9ghqokxJmZFwiA02", "get_weather", '{"city":"Rome"}'),
]
ERROR_STREAM = [
    line.decode()
    for line in (WIRE / "responses_stream_error_nested_then_failed.jsonl").read_bytes().splitlines()
    if line.strip()
]
NOT_FOUND = responses_error(
    400,
    "previous_response_not_found",
    "Previous response with id 'resp_abc' not found.",
    "previous_response_id",
)


def scripts(path: str, _headers: dict[str, str]):
    scenario = path.partition("scenario=")[2].partition("&")[0]
    created, updated = realtime_session([WEATHER])
    fan_out = responses_turn(FAN, [PARIS, ROME])
    return {
        "recorded": lambda: steps_of(recording(RESPONSES_CASSETTE)),
        "fanout": lambda: script(
            (None, []),
            ("response.create", fan_out),
            ("response.create", responses_turn(FOLLOW, [text_item("msg_f2", "Mild.")], FAN)),
        ),
        "errors": lambda: script(
            (None, []), ("response.create", [NOT_FOUND]), ("response.create", ERROR_STREAM)
        ),
        "cut": lambda: script((None, []), ("response.create", [*fan_out[:6], Close(None)])),
        "hang": lambda: script((None, []), ("response.create", fan_out[:6])),
        "frames": lambda: script(
            (None, [b"\x00\x01 binary from the server", "not json at all"]),
            ("response.create", [*fan_out, b"\xff" * 70_000]),
        ),
        "realtime": lambda: script(
            (None, [created]),
            ("session.update", [updated]),
            ("response.create", realtime_turn(R1, REALTIME_CALLS)),
            ("response.create", realtime_turn(R2, [], "Paris 12C, Rome 18C.")),
        ),
        # The Agents SDK's order: each tool's output and a response.create as it finishes,
        # and the user speaking while the slower one runs.
        "agents": lambda: script(
            (None, [created]),
            ("session.update", [updated]),
            ("response.create", realtime_turn(R1, REALTIME_CALLS)),
            ("response.create", realtime_turn(R2, [], "Paris is 12C; Rome is coming.")),
            ("response.create", realtime_turn(R3, [], "Madrid next, once Rome is in.")),
            ("response.create", realtime_turn(R4, [], "Rome is 18C.")),
        ),
        "hangup": lambda: script(
            (None, [created]),
            ("session.update", [updated]),
            ("response.create", realtime_turn(R1, REALTIME_CALLS)),
        ),
    }[scenario]()


def no_http(_seen) -> Reply:
    return Reply(404, chunks=[b'{"error": {"message": "WebSocket only"}}'])


@pytest.fixture(scope="module")
def upstream():
    with ReplayServer(no_http, sockets=scripts) as server:
        yield server


@pytest.fixture
def proxy(upstream):
    with Proxy.tooltap([upstream.url], "--log-format", "json") as running:
        yield running


def client(proxy: Proxy) -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy.url + "/v1", api_key=SECRET, max_retries=0)


def until(connection, *final: str) -> list[bytes]:
    """The raw frames received, up to and with the first of these types."""
    frames = []
    while True:
        raw = connection.recv_bytes()
        frames.append(raw)
        if json.loads(raw)["type"] in final:
            return frames


def sent_by(upstream: ReplayServer, scenario: str) -> list[bytes]:
    (connection,) = [c for c in upstream.connections if f"scenario={scenario}" in c.path]
    connection.closed.wait(5)
    return [m.encode() if isinstance(m, str) else m for m in connection.sent]


def forget(upstream: ReplayServer, scenario: str) -> None:
    upstream.connections[:] = [
        c for c in upstream.connections if f"scenario={scenario}" not in c.path
    ]


# What changes from run to run, and the turn's time and tokens (tests/core/test_time.py and
# the time tests of tests/system tell them).
TIME = ("duration_ms", "first_token_ms", "input_tokens", "output_tokens", "cached_input_tokens",
        "reasoning_tokens", "tool_wait_ms")  # fmt: skip
NOISE = ("timestamp", "inspect_ms", "repairs", *TIME)
# The keys every line carries to join its exchange (checked on their own in test_websocket.py),
# left out of the lines that did not carry them for their own sake, so that these expectations
# are each event's own fields.
OWN = {"turn": {"response_id", "model", "path"}, "tool_call": {"response_id"},
       "stream_error": {"response_id"}, "no_tool_call": {"response_id"}}  # fmt: skip


def quiet(event: dict) -> dict:
    joined = {*JOIN_KEYS, *SOCKET_KEYS} - OWN.get(event.get("event", ""), set())
    return {k: v for k, v in event.items() if k not in NOISE and k not in joined}


def by_event(proxy: Proxy, name: str, count: int) -> list[dict]:
    return [quiet(e) for e in proxy.wait_for(name, count)]


DONE = ("response.completed", "response.failed", "response.incomplete", "error")


def test_the_recorded_session_through_responses_connect(upstream, proxy):
    forget(upstream, "recorded")
    creates = [event for direction, event in recording(RESPONSES_CASSETTE) if direction == "sent"]
    received = []
    with client(proxy).responses.connect(extra_query={"scenario": "recorded"}) as connection:
        for create in creates:
            connection.response.create(**{k: v for k, v in create.items() if k != "type"})
            received += until(connection, *DONE)
    assert received == sent_by(upstream, "recorded")
    turns = by_event(proxy, "turn", 2)
    base = {"api": "responses", "transport": "websocket", "host": "127.0.0.1",
            "path": "/v1/responses", "status": 200, "stream": True,
            "model": "gpt-4o-mini-2024-07-18", "outcome": "inspected", "reason": None,
            "state": "strict-at-risk", "format_state": "free-text", "duplicates": {},
            "findings": ["strict-at-risk"], "unchecked": [], "event": "turn"}  # fmt: skip
    assert turns == [
        base | {"response_id": "resp_0a76d7cc9190bb9d0069c5b9d1743c81a182203d3de7d50b2d",
                "calls": 1, "level": "info"},
        base | {"response_id": "resp_0123ba578f5e03220069c5b9d2ecd481a2b2e77235daabd270",
                "calls": 0, "level": "info"},
    ]  # fmt: skip
    assert by_event(proxy, "tool_call", 1) == [
        {"api": "responses", "transport": "websocket",
         "response_id": "resp_0a76d7cc9190bb9d0069c5b9d1743c81a182203d3de7d50b2d",
         "call_id": "call_NnDOtgBLcomuxMOH1WLzvbUR", "name": "get_temperature",
         "arguments_raw": '{"city":"Paris"}', "parse_error": None, "schema_errors": [],
         "schema_problem": None, "event": "tool_call", "level": "info"}
    ]  # fmt: skip
    values = scrape(proxy)
    model = {"api": "responses", "model": "gpt-4o-mini-2024-07-18"}
    assert sample(values, "tooltap_turns_total", **model, state="strict-at-risk") == 2
    assert sample(values, "tooltap_tool_calls_total", **model) == 1
    assert sample(values, "tooltap_tool_results_total", api="responses", outcome="ok") == 1
    assert sample(values, "tooltap_flows_total", api="responses", outcome="inspected") == 2


def test_a_fan_out_under_strict_tools_then_a_follow_up_that_leaves_one_call_unanswered(
    upstream, proxy
):
    forget(upstream, "fanout")
    received = []
    with client(proxy).responses.connect(extra_query={"scenario": "fanout"}) as connection:
        connection.response.create(
            model="gpt-4o-mini", input="Paris and Rome?", tools=[STRICT_WEATHER]
        )
        received += until(connection, *DONE)
        connection.response.create(
            model="gpt-4o-mini",
            previous_response_id=FAN,
            tools=[STRICT_WEATHER],
            input=[{"type": "function_call_output", "call_id": PARIS["call_id"], "output": "12C"}],
        )
        received += until(connection, *DONE)
    assert received == sent_by(upstream, "fanout")
    fan, follow = by_event(proxy, "turn", 2)
    assert (fan["state"], fan["calls"], fan["duplicates"], fan["level"]) == (
        "strict-void", 2, {"get_weather": 2}, "warning",
    )  # fmt: skip
    assert (follow["response_id"], follow["state"], follow["calls"]) == (
        FOLLOW,
        "strict-at-risk",
        0,
    )
    (error,) = by_event(proxy, "loop_error", 1)
    assert {k: v for k, v in error.items() if k != "repair"} == {
        "api": "responses", "rule": "unanswered-call", "ids": [ROME["call_id"]],
        "where": f"previous_response_id {FAN}", "event": "loop_error", "level": "warning",
    }  # fmt: skip
    # The lines join without their order: the socket's session on each, each turn's number,
    # and the loop error and the calls under the turn they belong to.
    raw_fan, raw_follow = proxy.wait_for("turn", 2)
    session = raw_fan["session"]
    assert (raw_fan["turn"], raw_fan["exchange"]) == (1, f"{session}.1")
    assert (raw_follow["session"], raw_follow["turn"]) == (session, 2)
    (raw_error,) = proxy.wait_for("loop_error", 1)
    assert {k: raw_error[k] for k in ("exchange", "session", "turn", "response_id", "path")} == {
        "exchange": f"{session}.2", "session": session, "turn": 2, "response_id": FOLLOW,
        "path": "/v1/responses",
    }  # fmt: skip
    calls = proxy.wait_for("tool_call", 2)
    assert {(c["exchange"], c["response_id"]) for c in calls} == {(f"{session}.1", FAN)}
    values = scrape(proxy)
    model = {"api": "responses", "model": "gpt-4o-mini-2024-07-18"}
    assert sample(values, "tooltap_turns_total", **model, state="strict-void") == 1
    assert sample(values, "tooltap_unguaranteed_arguments_total", **model) == 2
    assert sample(values, "tooltap_loop_errors_total", api="responses", rule="unanswered-call") == 1


def test_error_events_are_a_rejected_request_and_an_error_inside_a_turn(upstream, proxy):
    forget(upstream, "errors")
    received = []
    with client(proxy).responses.connect(extra_query={"scenario": "errors"}) as connection:
        connection.response.create(model="gpt-4o-mini", previous_response_id="resp_abc", input=[])
        received += until(connection, "error")
        connection.response.create(model="gpt-4o-mini", input="hi")
        received += until(connection, "response.failed")
    assert received == sent_by(upstream, "errors")
    (rejected,) = by_event(proxy, "request_rejected", 1)
    assert rejected == {
        "api": "responses", "status": 400, "type": "previous_response_not_found",
        "message": "Previous response with id 'resp_abc' not found.", "blockers": [],
        "event": "request_rejected", "level": "warning",
    }  # fmt: skip
    (stream_error,) = by_event(proxy, "stream_error", 1)
    assert (stream_error["type"], stream_error["response_id"]) == (
        "insufficient_quota",
        "resp_05500b38c2cd9bfc00691c7c9d222481a3b595421266dab424",
    )
    values = scrape(proxy)
    assert sample(values, "tooltap_rejected_requests_total", api="responses", status="400") == 1
    assert sample(values, "tooltap_flows_total", api="responses", outcome="inspected") == 2


def test_a_socket_the_server_drops_mid_turn_is_reported_as_the_upstreams_failure(upstream, proxy):
    forget(upstream, "cut")
    with client(proxy).responses.connect(extra_query={"scenario": "cut"}) as connection:
        connection.response.create(
            model="gpt-4o-mini", input="Paris and Rome?", tools=[STRICT_WEATHER]
        )
        with pytest.raises(ConnectionClosed):
            until(connection, *DONE)
    (turn,) = by_event(proxy, "turn", 1)
    assert turn["outcome"] == "upstream_error"
    assert turn["reason"].startswith("the upstream failed: ")
    assert (turn["transport"], turn["calls"]) == ("websocket", 1)
    assert (
        sample(scrape(proxy), "tooltap_flows_total", api="responses", outcome="upstream_error") == 1
    )
    assert proxy.alive()


def test_a_client_that_closes_mid_turn_gets_the_turn_reported_with_its_doing(upstream, proxy):
    forget(upstream, "hang")
    with client(proxy).responses.connect(extra_query={"scenario": "hang"}) as connection:
        connection.response.create(
            model="gpt-4o-mini", input="Paris and Rome?", tools=[STRICT_WEATHER]
        )
        for _ in range(6):
            connection.recv_bytes()
    (turn,) = by_event(proxy, "turn", 1)
    assert (turn["outcome"], turn["calls"]) == ("inspected", 1)
    assert turn["reason"] == (
        "the turn ended before its final event (the client closed the socket (code 1000))"
    )


def test_text_and_binary_frames_both_ways_go_by_unchanged_and_in_order(upstream, proxy):
    from websockets.sync.client import connect

    forget(upstream, "frames")
    url = proxy.url.replace("http://", "ws://") + "/v1/responses?scenario=frames"
    create = json.dumps({"type": "response.create", "model": "m", "tools": [STRICT_WEATHER]})
    received: list[str | bytes] = []
    with connect(url, proxy=None, max_size=None, compression=None) as ws:
        received += [ws.recv(), ws.recv()]
        ws.send(b"\x00 binary from the client")
        ws.send(create)
        while len(received) < len(sent_by_script("frames")):
            received.append(ws.recv(timeout=10))
    (connection,) = [c for c in upstream.connections if "scenario=frames" in c.path]
    connection.closed.wait(5)
    assert received == connection.sent  # str stays text, bytes stay binary
    assert connection.received == [b"\x00 binary from the client", create]
    (turn,) = by_event(proxy, "turn", 1)
    assert (turn["state"], turn["calls"]) == ("strict-void", 2)
    skipped = {"api": "responses", "reason": "binary"}
    # The last binary frame came after the turn: it is counted with the socket's last batch.
    values = scrape_until(
        proxy, lambda v: sample(v, "tooltap_websocket_messages_skipped_total", **skipped) >= 3
    )
    assert sample(values, "tooltap_websocket_messages_skipped_total", **skipped) == 3
    assert (
        sample(
            values, "tooltap_websocket_messages_skipped_total", api="responses", reason="not_json"
        )
        == 1
    )


def sent_by_script(scenario: str) -> list:
    return [f for step in scripts(f"/v1/responses?scenario={scenario}", {}) for f in step.frames]


def realtime_through(proxy: Proxy, scenario: str, actions: list[tuple[str, str]]) -> list[bytes]:
    """A Realtime session driven by the official SDK: ("say", text), ("output", call_id) and
    ("respond", ""), which waits for its response.done. The socket closes at the end."""
    received = []
    realtime = client(proxy).realtime
    with realtime.connect(model="gpt-realtime", extra_query={"scenario": scenario}) as connection:
        received += until(connection, "session.created")
        connection.session.update(session={"type": "realtime", "tools": [WEATHER]})
        received += until(connection, "session.updated")
        for action, value in actions:
            if action == "say":
                connection.conversation.item.create(
                    item={
                        "type": "message",
                        "role": "user",
                        "content": [{"type": "input_text", "text": value}],
                    }
                )
            elif action == "output":
                connection.conversation.item.create(
                    item={"type": "function_call_output", "call_id": value, "output": "12C"}
                )
            else:
                connection.response.create()
                received += until(connection, "response.done")
    return received


def realtime_session_through(proxy: Proxy, answered: list[str]) -> list[bytes]:
    """livekit's order: every output of the response, then one response.create."""
    outputs = [("output", call_id) for call_id in answered]
    return realtime_through(
        proxy, "realtime", [("say", "Paris and Rome?"), ("respond", ""), *outputs, ("respond", "")]
    )


def test_a_realtime_session_with_two_calls_both_answered(upstream, proxy):
    forget(upstream, "realtime")
    received = realtime_session_through(proxy, [c for c, _, _ in REALTIME_CALLS])
    assert received == sent_by(upstream, "realtime")
    first, second = by_event(proxy, "turn", 2)
    assert (first["api"], first["transport"], first["model"], first["path"]) == (
        "realtime", "websocket", "gpt-realtime", "/v1/realtime?model=gpt-realtime",
    )  # fmt: skip
    assert (first["response_id"], first["state"], first["calls"]) == (R1, "fanout-no-strict", 2)
    assert (second["response_id"], second["state"], second["calls"]) == (
        R2,
        "no-strict-declared",
        0,
    )
    calls = by_event(proxy, "tool_call", 2)
    assert [(c["call_id"], c["arguments_raw"], c["schema_errors"]) for c in calls] == [
        (call_id, arguments, []) for call_id, _, arguments in REALTIME_CALLS
    ]
    assert proxy.wait_for("loop_error", timeout=0.5) == []
    values = scrape(proxy)
    model = {"api": "realtime", "model": "gpt-realtime"}
    assert sample(values, "tooltap_turns_total", **model, state="fanout-no-strict") == 1
    assert sample(values, "tooltap_tool_calls_total", **model) == 2
    assert sample(values, "tooltap_tool_results_total", api="realtime", outcome="ok") == 2
    assert sample(values, "tooltap_loop_errors_total", api="realtime", rule="unanswered-call") == 0


def test_the_agents_sdk_order_with_a_user_turn_while_a_tool_runs_is_clean(upstream, proxy):
    forget(upstream, "agents")
    paris, rome = (call_id for call_id, _, _ in REALTIME_CALLS)
    received = realtime_through(
        proxy,
        "agents",
        [
            ("say", "Paris and Rome?"),
            ("respond", ""),
            ("output", paris),  # the faster tool, then a response
            ("respond", ""),
            ("say", "And Madrid?"),  # the user speaks while Rome's tool runs
            ("respond", ""),
            ("output", rome),  # the slower tool, then a response
            ("respond", ""),
        ],
    )
    assert received == sent_by(upstream, "agents")
    turns = by_event(proxy, "turn", 4)
    assert [(t["response_id"], t["calls"]) for t in turns] == [(R1, 2), (R2, 0), (R3, 0), (R4, 0)]
    assert proxy.wait_for("loop_error", timeout=1) == []
    values = scrape(proxy)
    assert sample(values, "tooltap_tool_results_total", api="realtime", outcome="ok") == 2
    for rule in ("unanswered-call", "unanswered-at-close", "orphan-result"):
        assert sample(values, "tooltap_loop_errors_total", api="realtime", rule=rule) == 0


def test_a_call_never_answered_while_the_conversation_went_on_is_reported_at_the_close(
    upstream, proxy
):
    forget(upstream, "realtime")
    received = realtime_session_through(proxy, [REALTIME_CALLS[0][0]])
    assert received == sent_by(upstream, "realtime")
    (error,) = by_event(proxy, "loop_error", 1)
    assert (error["api"], error["rule"], error["ids"], error["where"], error["level"]) == (
        "realtime", "unanswered-call", [REALTIME_CALLS[1][0]],
        f"the socket's close, after {R2}", "warning",
    )  # fmt: skip
    values = scrape(proxy)
    assert sample(values, "tooltap_loop_errors_total", api="realtime", rule="unanswered-call") == 1
    assert sample(values, "tooltap_tool_results_total", api="realtime", outcome="ok") == 1
    # The close is no turn: two turns, two flows.
    assert len(proxy.wait_for("turn", 3, timeout=1)) == 2
    assert sample(values, "tooltap_flows_total", api="realtime", outcome="inspected") == 2


def test_a_hang_up_while_the_tools_run_is_reported_at_info(upstream, proxy):
    forget(upstream, "hangup")
    received = realtime_through(proxy, "hangup", [("say", "Paris and Rome?"), ("respond", "")])
    assert received == sent_by(upstream, "hangup")
    (error,) = by_event(proxy, "loop_error", 1)
    assert (error["rule"], error["ids"], error["level"]) == (
        "unanswered-at-close",
        [call_id for call_id, _, _ in REALTIME_CALLS],
        "info",
    )
    values = scrape(proxy)
    assert (
        sample(values, "tooltap_loop_errors_total", api="realtime", rule="unanswered-at-close") == 1
    )


def test_a_fault_in_the_websocket_hook_leaves_the_socket_working(upstream):
    script_path = Path(__file__).parents[1] / "support" / "faulty_tap.py"
    forget(upstream, "fanout")
    with Proxy.mitmdump(
        upstream.url,
        "-s",
        str(script_path),
        "--set",
        "tooltap_metrics_port=0",
        "--set",
        "tooltap_log_format=json",
        has_metrics=True,
        env={"TOOLTAP_FAULT": "hook"},
    ) as faulty:
        received = []
        with client(faulty).responses.connect(extra_query={"scenario": "fanout"}) as connection:
            connection.response.create(model="m", input="Paris and Rome?", tools=[STRICT_WEATHER])
            received += until(connection, *DONE)
        assert received == sent_by(upstream, "fanout")
        # Every hook on the flow raised: the upgrade's request, responseheaders and
        # response, then websocket_start, each message both ways, websocket_end.
        expected = 3 + 1 + (1 + len(received)) + 1
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            errors = sample(scrape(faulty), "tooltap_internal_errors_total", where="hook")
            if errors >= expected:
                break
            time.sleep(0.05)
        assert errors == expected
        assert faulty.alive()


def test_regular_mode_over_tls_with_the_mitmproxy_ca(tmp_path):
    upstream_ca, server_tls = upstream_tls(tmp_path)
    with (
        ReplayServer(no_http, tls=server_tls, sockets=scripts) as tls_upstream,
        regular_proxy(upstream_ca) as (regular, trusted),
    ):
        sdk = openai.OpenAI(base_url=tls_upstream.url + "/v1", api_key=SECRET, max_retries=0)
        options = {"proxy": regular.url, "ssl": trusted}
        received = []
        with sdk.responses.connect(
            extra_query={"scenario": "fanout"}, websocket_connection_options=options
        ) as connection:
            connection.response.create(model="m", input="Paris and Rome?", tools=[STRICT_WEATHER])
            received += until(connection, *DONE)
        assert received == sent_by(tls_upstream, "fanout")
        (turn,) = regular.wait_for("turn")
    assert (turn["host"], turn["transport"], turn["state"], turn["calls"]) == (
        "127.0.0.1", "websocket", "strict-void", 2,
    )  # fmt: skip


def test_audit_reads_the_sockets_of_a_flow_file_with_the_live_proxys_findings(upstream, tmp_path):
    import subprocess
    import sys

    flows = tmp_path / "flows.mitm"
    forget(upstream, "fanout")
    forget(upstream, "realtime")
    extra = ("--set", f"save_stream_file={flows}")
    with Proxy.tooltap([upstream.url], "--log-format", "json", extra=extra) as recording_proxy:
        with client(recording_proxy).responses.connect(extra_query={"scenario": "fanout"}) as conn:
            conn.response.create(model="m", input="Paris and Rome?", tools=[STRICT_WEATHER])
            until(conn, *DONE)
            conn.response.create(
                model="m",
                previous_response_id=FAN,
                input=[
                    {"type": "function_call_output", "call_id": PARIS["call_id"], "output": "12C"}
                ],
            )
            until(conn, *DONE)
        realtime_session_through(recording_proxy, [REALTIME_CALLS[0][0]])
        live = recording_proxy.wait_for("turn", 4)
        # one after the follow-up on the Responses socket, one at the Realtime socket's close
        live_errors = recording_proxy.wait_for("loop_error", 2)
    audit = subprocess.run(
        [sys.executable, "-m", "tooltap.addon.commands.cli", "audit", "-r", str(flows),
         "--format", "json"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert audit.returncode == 1, audit.stderr  # findings
    rows = [json.loads(line) for line in audit.stdout.splitlines()]
    summary = rows.pop()
    assert (summary["summary"], summary["read"]) == (True, 5)
    (said,) = [r for r in rows if r["scope"] == "session"]
    rows.remove(said)

    def key(v):
        return (v["api"], v["transport"], v["response_id"], v["state"], v["outcome"])

    assert sorted(key(r) for r in rows) == sorted(key(t) for t in live)
    audited_errors = [
        (e["rule"], e["ids"], e["where"]) for r in [*rows, said] for e in r["loop_errors"]
    ]
    assert sorted(audited_errors) == sorted((e["rule"], e["ids"], e["where"]) for e in live_errors)
    assert [r["label"] for r in rows] == [
        "WS /v1/responses #1", "WS /v1/responses #2", "WS /v1/realtime #1", "WS /v1/realtime #2",
    ]  # fmt: skip
    assert said["label"] == "WS /v1/realtime (session)"
