"""The Gemini Live API through a real `tooltap run`, with google-genai's own live client
(`client.aio.live.connect()`, which always speaks wss://: mitmproxy answers TLS on the proxy's
port, the client trusting its CA) against a loopback WebSocket upstream that answers in the
Live API's documented message shapes, as Google sends them: pretty-printed JSON in binary
frames.

Each test checks that both ends saw exactly the other's frames (text stays text, binary stays
binary), that the cadence is kept (the upstream answers only after the client's next message,
which the client sends only once the previous answer reached it: a proxy that held a frame
back would hang the session), and the exact log lines and /metrics values for: a call
answered, one cancelled, a NON_BLOCKING one answered turns later, one never answered before
the socket closed, arguments off their schema, and a socket the server closes with 1008 and a
reason (a session error, as google-genai raises it). The last test audits the flow file a
recording proxy saved (`tooltap audit -r`, run in this process) and finds what the live proxy
found, the server's close included. One upstream and one proxy serve the module.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import ssl
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from google import genai
from google.genai import errors, types
from support.prom import sample, scrape

from tooltap.addon.audit.command import main as audit
from tooltap.addon.commands.cli import parser
from tooltap.addon.commands.demo_live import ask, until_call, until_turn_complete
from tooltap.addon.harness import live
from tooltap.addon.harness.launch import Proxy
from tooltap.addon.harness.replay import ReplayServer, Reply
from tooltap.addon.harness.sockets import Close
from tooltap.addon.sinks.log import JOIN_KEYS, SOCKET_KEYS

PATH = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
WEATHER, BOOKING = live.WEATHER, live.BOOKING
PARIS = ("fc_6b1p0paris", "get_weather", {"city": "Paris", "units": "c"})
ROME = ("fc_6b1p0rome", "get_weather", {"city": "Rome", "units": "kelvin"})
TICKET = ("fc_6b1p0ticket", "book_ticket", {"flight": "LH1234"})
# A model a scenario, so that each test reads its own metrics.
MODELS = {
    "answered": "gemini-live-2.5-flash-preview",
    "cancelled": "gemini-2.5-flash-native-audio-preview-09-2025",
    "late": "gemini-2.0-flash-live-001",
    "unanswered": "gemini-3.1-flash-live-preview",
    "off-schema": "gemini-live-2.5-flash",
    "refused": "gemini-2.5-flash-preview-native-audio-dialog",
}
QUOTA = "You exceeded your current quota, please check your plan and billing details."
SCRIPTS = {
    "answered": live.script(
        ("clientContent", [live.tool_call(PARIS)]),
        ("toolResponse", live.answer("Paris is 12C.", 230, 9)),
    ),
    # The user speaks over the model while its call runs: the server takes the call back.
    "cancelled": live.script(
        ("clientContent", [live.tool_call(PARIS)]),
        (
            "clientContent",
            [
                live.interrupted(),
                live.cancellation(PARIS[0]),
                live.turn_complete(),
                *live.answer("Sure, Rome then."),
                live.go_away("9s"),
            ],
        ),
    ),
    # The model talks on while the booking runs; its response comes two turns later.
    "late": live.script(
        ("clientContent", [live.tool_call(TICKET), *live.answer("Booking it now.")]),
        ("clientContent", live.answer("It is noon in New York.")),
        ("toolResponse", live.answer("Your flight is booked.")),
    ),
    # The client never answers; the user moves on and the model with them.
    "unanswered": live.script(
        ("clientContent", [live.tool_call(PARIS)]),
        ("clientContent", live.answer("Why did the scarecrow win an award?")),
    ),
    "off-schema": live.script(
        ("clientContent", [live.tool_call(PARIS, ROME)]),
        ("toolResponse", live.answer("Paris is 12C; Rome I could not read.")),
    ),
    # The Live API's way of saying most session errors: a close with a code and a reason.
    "refused": live.script(("clientContent", [live.text("Let me check."), Close(1008, QUOTA)])),
}


def scripts(path: str, headers: dict[str, str]) -> list[Any]:
    return SCRIPTS[headers["x-scenario"]]


@pytest.fixture(scope="module")
def upstream():
    with ReplayServer(lambda _seen: Reply(404, chunks=[b"WebSocket only"]), sockets=scripts) as up:
        yield up


@pytest.fixture(scope="module")
def proxy(upstream):
    with Proxy.tooltap([upstream.url], "--log-format", "json") as running:
        yield running


def connect(proxy: Proxy, scenario: str) -> genai.Client:
    trust = ssl.create_default_context(cafile=os.path.join(proxy.confdir, "mitmproxy-ca-cert.pem"))
    options = types.HttpOptions(
        base_url=proxy.url,
        api_version="v1beta",
        headers={"x-scenario": scenario},
        async_client_args={"ssl": trust},
    )
    return genai.Client(api_key="AIza-dummy-not-a-real-key", http_options=options)


Play = Callable[[Any, list[bytes]], Coroutine[Any, Any, None]]


def session(
    proxy: Proxy, scenario: str, play: Play, declarations=(WEATHER, BOOKING)
) -> list[bytes]:
    """One Live session driven by google-genai; the frames its socket received, raw."""
    received: list[bytes] = []

    async def run() -> None:
        config = {"response_modalities": ["TEXT"],
                  "tools": [{"function_declarations": list(declarations)}]}  # fmt: skip
        client = connect(proxy, scenario)
        async with client.aio.live.connect(model=MODELS[scenario], config=config) as live_session:
            socket = live_session._ws
            recv = socket.recv

            async def recording(*args: Any, **kwargs: Any) -> Any:
                raw = await recv(*args, **kwargs)
                received.append(raw)
                return raw

            socket.recv = recording
            await play(live_session, received)

    asyncio.run(run())
    return received


def connection_of(upstream: ReplayServer, scenario: str) -> Any:
    (connection,) = [c for c in upstream.connections if c.headers.get("x-scenario") == scenario]
    assert connection.closed.wait(5)
    upstream.connections.remove(connection)
    return connection


def both_ways(upstream: ReplayServer, scenario: str, received: list[bytes]) -> list[Any]:
    """The frames match: what the upstream sent after the setup's answer is what the client
    received, binary as binary; what the client sent reached the upstream as text. The
    client's messages, parsed."""
    connection = connection_of(upstream, scenario)
    assert received == connection.sent[1:]  # the first, setupComplete, went to connect()
    assert all(isinstance(frame, bytes) for frame in connection.sent)
    assert all(isinstance(message, str) for message in connection.received)
    return [json.loads(message) for message in connection.received]


# What changes from run to run, and the turn's time and tokens (tests/core/test_time.py and
# the time tests of tests/system tell them).
TIME = ("duration_ms", "first_token_ms", "input_tokens", "output_tokens", "cached_input_tokens",
        "reasoning_tokens", "tool_wait_ms")  # fmt: skip
NOISE = ("timestamp", "inspect_ms", "repair", "repairs", *TIME)
# The keys every line carries to join its exchange (checked on their own in test_websocket.py),
# left out of the lines that did not carry them for their own sake, so that these expectations
# are each event's own fields.
OWN = {"turn": {"response_id", "model", "path"}, "tool_call": {"response_id"},
       "stream_error": {"response_id"}, "no_tool_call": {"response_id"}}  # fmt: skip


def quiet(event: dict) -> dict:
    joined = {*JOIN_KEYS, *SOCKET_KEYS} - OWN.get(event.get("event", ""), set())
    return {k: v for k, v in event.items() if k not in NOISE and k not in joined}


def events(proxy: Proxy, since: int, name: str, count: int) -> list[dict]:
    return [quiet(e) for e in proxy.wait_for(name, count, since=since)]


def turn(
    model: str,
    calls: int,
    state: str = "no-strict-declared",
    level: str = "info",
    findings: tuple[str, ...] = (),
) -> dict:
    return {"api": "gemini_live", "transport": "websocket", "host": "127.0.0.1",
            "path": PATH, "status": 200, "stream": True, "model": model, "response_id": None,
            "outcome": "inspected", "reason": None, "state": state, "format_state": "free-text",
            "findings": list(findings), "calls": calls,
            "duplicates": {"get_weather": 2} if calls == 2 else {},
            "unchecked": [], "event": "turn", "level": level}  # fmt: skip


def tool_call(call: tuple[str, str, dict], errors: list | None = None) -> dict:
    call_id, name, args = call
    return {"api": "gemini_live", "transport": "websocket", "response_id": None,
            "call_id": call_id, "name": name,
            "arguments_raw": json.dumps(args, separators=(",", ":")), "parse_error": None,
            "schema_errors": errors or [], "schema_problem": None, "event": "tool_call",
            "level": "warning" if errors else "info"}  # fmt: skip


class Delta:
    """Counters read before and after a test: what this test added."""

    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy
        self.before = scrape(proxy)

    def __call__(self, name: str, **labels: str) -> float:
        return sample(scrape(self.proxy), name, **labels) - sample(self.before, name, **labels)


def test_a_call_answered_is_two_turns_a_result_and_no_loop_error(upstream, proxy):
    since, delta = proxy.mark(), Delta(proxy)

    async def play(s: Any, received: list[bytes]) -> None:
        await ask(s, "Weather in Paris?")
        (call,) = await until_call(s)
        await s.send_tool_response(
            function_responses=types.FunctionResponse(
                id=call.id, name=call.name, response={"temperature": 12}
            )
        )
        await until_turn_complete(s)

    received = session(proxy, "answered", play)
    sent = both_ways(upstream, "answered", received)
    assert [next(iter(m)) for m in sent] == ["setup", "client_content", "tool_response"]
    model = MODELS["answered"]
    assert events(proxy, since, "turn", 2) == [turn(model, 1), turn(model, 0)]
    assert events(proxy, since, "tool_call", 1) == [tool_call(PARIS)]
    assert proxy.wait_for("loop_error", since=since, timeout=0.5) == []
    assert delta("tooltap_turns_total", api="gemini_live", model=model, state="no-strict-declared") == 2  # fmt: skip
    assert delta("tooltap_tool_calls_total", api="gemini_live", model=model) == 1
    assert delta("tooltap_tool_results_total", api="gemini_live", outcome="ok") == 1
    assert delta("tooltap_flows_total", api="gemini_live", outcome="inspected") == 2
    assert delta("tooltap_websocket_messages_skipped_total", api="gemini_live", reason="binary") == 0  # fmt: skip


def test_a_call_cancelled_when_the_user_spoke_over_it_is_owed_nothing(upstream, proxy):
    since, delta = proxy.mark(), Delta(proxy)

    async def play(s: Any, received: list[bytes]) -> None:
        await ask(s, "Weather in Paris?")
        await until_call(s)
        await ask(s, "No wait, Rome.")  # the server interrupts and cancels the call
        await until_turn_complete(s)  # the interrupted turn
        await until_turn_complete(s)  # the answer
        async for message in s.receive():  # goAway
            if message.go_away:
                break

    received = session(proxy, "cancelled", play)
    both_ways(upstream, "cancelled", received)
    model = MODELS["cancelled"]
    calling, interrupted, answer = events(proxy, since, "turn", 3)
    assert (calling["calls"], interrupted["calls"], answer["calls"]) == (1, 0, 0)
    (away,) = events(proxy, since, "session_error", 1)
    assert away == {"api": "gemini_live", "transport": "websocket", "type": "goAway",
                    "message": "time left: 9s", "event": "session_error", "level": "info"}  # fmt: skip
    assert proxy.wait_for("loop_error", since=since, timeout=0.5) == []
    assert delta("tooltap_turns_total", api="gemini_live", model=model, state="no-strict-declared") == 3  # fmt: skip
    assert delta("tooltap_session_errors_total", api="gemini_live", type="goAway") == 1
    for rule in ("unanswered-call", "unanswered-at-close", "orphan-result"):
        assert delta("tooltap_loop_errors_total", api="gemini_live", rule=rule) == 0


def test_a_non_blocking_call_answered_two_turns_later_is_clean(upstream, proxy):
    since, delta = proxy.mark(), Delta(proxy)

    async def play(s: Any, received: list[bytes]) -> None:
        await ask(s, "Book LH1234.")
        (call,) = await until_call(s)
        await until_turn_complete(s)  # the model talks on while the booking runs
        await ask(s, "What time is it in New York?")
        await until_turn_complete(s)
        await s.send_tool_response(
            function_responses=types.FunctionResponse(
                id=call.id,
                name=call.name,
                response={"status": "booked"},
                scheduling=types.FunctionResponseScheduling.WHEN_IDLE,
            )
        )
        await until_turn_complete(s)

    received = session(proxy, "late", play)
    sent = both_ways(upstream, "late", received)
    declared = sent[0]["setup"]["tools"][0]["functionDeclarations"][1]
    assert declared["behavior"] == "NON_BLOCKING"
    assert sent[-1]["tool_response"]["functionResponses"][0]["scheduling"] == "WHEN_IDLE"
    model = MODELS["late"]
    assert events(proxy, since, "turn", 4) == [
        turn(model, 1), turn(model, 0), turn(model, 0), turn(model, 0)
    ]  # fmt: skip
    assert events(proxy, since, "tool_call", 1) == [tool_call(TICKET)]
    assert proxy.wait_for("loop_error", since=since, timeout=0.5) == []
    assert delta("tooltap_tool_results_total", api="gemini_live", outcome="ok") == 1
    for rule in ("unanswered-call", "unanswered-at-close"):
        assert delta("tooltap_loop_errors_total", api="gemini_live", rule=rule) == 0


def test_a_call_never_answered_before_the_socket_closed_is_reported_at_the_close(upstream, proxy):
    since, delta = proxy.mark(), Delta(proxy)

    async def play(s: Any, received: list[bytes]) -> None:
        await ask(s, "Weather in Paris?")
        await until_call(s)
        await ask(s, "Never mind. Tell me a joke.")
        await until_turn_complete(s)

    received = session(proxy, "unanswered", play)
    both_ways(upstream, "unanswered", received)
    (error,) = events(proxy, since, "loop_error", 1)
    assert error == {"api": "gemini_live", "rule": "unanswered-call", "ids": [PARIS[0]],
                     "where": "the socket's close, after 2 turn(s)", "event": "loop_error",
                     "level": "warning"}  # fmt: skip
    assert delta("tooltap_loop_errors_total", api="gemini_live", rule="unanswered-call") == 1
    # The close is no turn: two turns, two flows.
    assert len(proxy.wait_for("turn", 3, since=since, timeout=1)) == 2
    assert delta("tooltap_flows_total", api="gemini_live", outcome="inspected") == 2


def test_arguments_off_their_schema_and_an_error_response_are_reported(upstream, proxy):
    since, delta = proxy.mark(), Delta(proxy)

    async def play(s: Any, received: list[bytes]) -> None:
        await ask(s, "Weather in Paris and Rome?")
        paris, rome = await until_call(s)
        await s.send_tool_response(
            function_responses=[
                types.FunctionResponse(id=paris.id, name=paris.name, response={"t": 12}),
                types.FunctionResponse(
                    id=rome.id, name=rome.name, response={"error": "units must be c or f"}
                ),
            ]
        )
        await until_turn_complete(s)

    received = session(proxy, "off-schema", play, declarations=(WEATHER,))
    both_ways(upstream, "off-schema", received)
    model = MODELS["off-schema"]
    fan, answer = events(proxy, since, "turn", 2)
    assert fan == turn(
        model, 2, "fanout-no-strict", "warning", ("fanout-no-strict", "argument-schema")
    )
    assert answer == turn(model, 0)
    errors = [{"path": "$.units", "message": '"kelvin" is not one of "c" or "f"'}]
    assert events(proxy, since, "tool_call", 2) == [tool_call(PARIS), tool_call(ROME, errors)]
    (failure,) = events(proxy, since, "tool_result_error", 1)
    assert failure == {"api": "gemini_live", "call_id": ROME[0], "where": "functionResponses.1",
                       "event": "tool_result_error", "level": "warning"}  # fmt: skip
    assert delta("tooltap_argument_errors_total", api="gemini_live", model=model, kind="schema") == 1  # fmt: skip
    assert delta("tooltap_turns_total", api="gemini_live", model=model, state="fanout-no-strict") == 1  # fmt: skip
    assert delta("tooltap_tool_results_total", api="gemini_live", outcome="error") == 1
    assert delta("tooltap_tool_results_total", api="gemini_live", outcome="ok") == 1


async def refused(s: Any, received: list[bytes]) -> None:
    """Ask, and read until the server's close: google-genai raises it as an APIError."""
    await ask(s, "Weather in Paris?")
    with pytest.raises(errors.APIError) as raised:
        async for _message in s.receive():
            pass
    assert (raised.value.code, raised.value.details) == (1008, QUOTA)


def test_a_server_close_with_an_error_code_is_a_session_error_as_the_client_raised_it(
    upstream, proxy
):
    since, delta = proxy.mark(), Delta(proxy)
    received = session(proxy, "refused", refused)
    both_ways(upstream, "refused", received)
    (said,) = events(proxy, since, "session_error", 1)
    assert said == {"api": "gemini_live", "transport": "websocket", "type": "policy_violation",
                    "message": f"the server closed the socket with 1008 (policy violation): {QUOTA}",
                    "event": "session_error", "level": "info"}  # fmt: skip
    (cut,) = events(proxy, since, "turn", 1)  # the turn it cut says so, as before
    assert (cut["outcome"], cut["reason"]) == (
        "upstream_error",
        f"the upstream failed: the server closed the socket (code 1008: {QUOTA})",
    )
    assert delta("tooltap_session_errors_total", api="gemini_live", type="policy_violation") == 1
    assert delta("tooltap_flows_total", api="gemini_live", outcome="upstream_error") == 1


def test_audit_of_the_flow_file_finds_what_the_live_proxy_found(upstream, tmp_path):
    flows = tmp_path / "live.mitm"
    extra = ("--set", f"save_stream_file={flows}")
    with Proxy.tooltap([upstream.url], "--log-format", "json", extra=extra) as recording:

        async def unanswered(s: Any, received: list[bytes]) -> None:
            await ask(s, "Weather in Paris?")
            await until_call(s)
            await ask(s, "Never mind.")
            await until_turn_complete(s)

        async def off_schema(s: Any, received: list[bytes]) -> None:
            await ask(s, "Paris and Rome?")
            paris, rome = await until_call(s)
            await s.send_tool_response(
                function_responses=[
                    types.FunctionResponse(id=c.id, name=c.name, response={"t": 1})
                    for c in (paris, rome)
                ]
            )
            await until_turn_complete(s)

        session(recording, "unanswered", unanswered)
        session(recording, "off-schema", off_schema, declarations=(WEATHER,))
        session(recording, "refused", refused)
        live_turns = recording.wait_for("turn", 5)
        live_calls = recording.wait_for("tool_call", 3)
        (live_error,) = recording.wait_for("loop_error", 1)
        (live_close,) = recording.wait_for("session_error", 1)
    for scenario in ("unanswered", "off-schema", "refused"):
        connection_of(upstream, scenario)
    out = io.StringIO()  # `tooltap audit -r live.mitm --format json`, in this process
    code = audit(parser().parse_args(["audit", "-r", str(flows), "--format", "json"]), out)
    assert code == 1  # findings
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    summary = rows.pop()
    assert (summary["summary"], summary["read"]) == (True, 7)
    said, closed = [r for r in rows if r["scope"] == "session"]
    rows.remove(said)
    rows.remove(closed)
    assert sorted((r["model"], r["state"], len(r["calls"]), r["outcome"]) for r in rows) == sorted(
        (t["model"], t["state"], t["calls"], t["outcome"]) for t in live_turns
    )
    # mitmproxy keeps the close's code and reason in the flow: the same session error.
    assert [(e["type"], e["message"]) for e in closed["session_errors"]] == [
        (live_close["type"], live_close["message"])
    ]
    audited_calls = [(c["call_id"], c["schema_errors"]) for r in rows for c in r["calls"]]
    assert sorted(audited_calls, key=str) == sorted(
        ((c["call_id"], c["schema_errors"]) for c in live_calls), key=str
    )
    assert [(e["rule"], e["ids"], e["where"]) for e in said["loop_errors"]] == [
        (live_error["rule"], live_error["ids"], live_error["where"])
    ]
