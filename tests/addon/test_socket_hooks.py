"""The WebSocket hooks with mitmproxy's test flows: bookkeeping only, messages never change."""

from __future__ import annotations

import copy
import json

from support.flows import relay, socket_flow
from support.sockets import (
    REALTIME_CASSETTE,
    RESPONSES_CASSETTE,
    frame,
    realtime_session,
    realtime_turn,
    recording,
    responses_turn,
    text_item,
)

import tooltap.addon.proxy.addon as addon_module
from tooltap.addon.handover.record import SocketBatch
from tooltap.addon.harness import live
from tooltap.addon.inspection.sockets import Sockets

LIVE_PATH = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
RECORDED = [
    (direction == "sent", frame(event)) for direction, event in recording(RESPONSES_CASSETTE)
]


def states(flow):
    return [copy.deepcopy(m.get_state()) for m in flow.websocket.messages]


async def test_a_recorded_socket_is_inspected_turn_by_turn_and_its_messages_never_change(harness):
    flow = socket_flow("/v1/responses")
    harness.addon.websocket_start(flow)
    relay(harness.addon, flow, RECORDED)
    before = states(flow)
    flow.websocket.closed_by_client = True
    flow.websocket.close_code = 1000
    harness.addon.websocket_end(flow)
    assert harness.addon.flush(5)
    assert states(flow) == before
    assert [(m.from_client, m.text) for m in flow.websocket.messages] == RECORDED
    assert not any(m.dropped or m.injected for m in flow.websocket.messages)

    events = harness.events()
    turns = [e for e in events if e["event"] == "turn"]
    assert [(t["api"], t["transport"], t["state"], t["calls"]) for t in turns] == [
        ("responses", "websocket", "strict-at-risk", 1),
        ("responses", "websocket", "strict-at-risk", 0),
    ]
    assert turns[0]["path"] == "/v1/responses" and turns[0]["host"] == "api.openai.com"
    (call,) = [e for e in events if e["event"] == "tool_call"]
    assert (call["transport"], call["name"], call["arguments_raw"]) == (
        "websocket",
        "get_temperature",
        '{"city":"Paris"}',
    )
    assert harness.value("tooltap_flows_total", api="responses", outcome="inspected") == 2
    assert harness.addon.budget.used == 0


async def test_only_what_a_turn_needs_is_held_and_audio_and_binary_never_are(harness):
    flow = socket_flow("/v1/realtime?model=gpt-realtime")
    harness.addon.websocket_start(flow)
    tap = harness.addon._sockets[flow.id]
    created, _ = realtime_session([])
    audio = frame({"type": "response.output_audio.delta", "delta": "UklGR" * 2000})
    relay(
        harness.addon,
        flow,
        [
            (False, created),
            (True, frame({"type": "input_audio_buffer.append", "audio": "AAAA" * 4000})),
            (False, b"\x00\x01binary"),
            (False, audio),
            (False, frame({"type": "response.output_text.delta", "delta": "hi"})),
        ],
    )
    assert tap.messages == [created.encode()]  # the session, nothing else
    assert tap.skipped == {"binary": 1}
    harness.addon.websocket_end(flow)
    assert harness.addon.flush(5)
    assert (
        harness.value("tooltap_websocket_messages_skipped_total", api="realtime", reason="binary")
        == 1
    )


async def test_a_message_past_the_memory_budget_skips_its_turn_and_is_counted(harness):
    flow = socket_flow("/v1/realtime")
    harness.addon.websocket_start(flow)
    created, _ = realtime_session([])
    turn = realtime_turn("resp_budget000001", [("call_b", "get_weather", '{"city":"Oslo"}')])
    relay(harness.addon, flow, [(False, created), (True, frame({"type": "response.create"}))])
    relay(harness.addon, flow, [(False, m) for m in turn[:2]])
    harness.addon.budget.limit = harness.addon.budget.used  # full from here on
    relay(harness.addon, flow, [(False, m) for m in turn[2:]])
    harness.addon.budget.limit = 1 << 30
    harness.addon.websocket_end(flow)
    assert harness.addon.flush(5)
    (turn_event,) = [e for e in harness.events() if e["event"] == "turn"]
    assert (turn_event["outcome"], turn_event["reason"], turn_event["transport"]) == (
        "skipped",
        "messages of this turn were not kept for inspection",
        "websocket",
    )
    assert (
        harness.value(
            "tooltap_websocket_messages_skipped_total", api="realtime", reason="over_budget"
        )
        == len(turn) - 2
    )
    assert harness.addon.budget.used == 0


async def test_a_fault_in_the_websocket_hook_is_counted_and_the_message_goes_by(harness):
    flow = socket_flow("/v1/responses")
    harness.addon.websocket_start(flow)
    harness.faults.add("hook")
    relay(harness.addon, flow, RECORDED[:3])
    harness.addon.websocket_end(flow)
    harness.faults.clear()
    assert [(m.from_client, m.text) for m in flow.websocket.messages] == RECORDED[:3]
    assert harness.value("tooltap_internal_errors_total", where="hook") == 4


async def test_a_socket_on_another_path_or_host_is_left_alone(harness):
    for flow in (socket_flow("/ws"), socket_flow("/v1/responses", host="example.com")):
        harness.addon.websocket_start(flow)
        relay(harness.addon, flow, RECORDED)
        harness.addon.websocket_end(flow)
    assert harness.addon.flush(5)
    assert harness.events() == [] and harness.addon._sockets == {}


async def test_past_the_socket_limit_the_oldest_is_let_go_and_its_turn_in_flight_skipped(
    harness,
):
    assert addon_module.MAX_SOCKETS == 10_000  # the README's figure
    first = socket_flow("/v1/responses")
    harness.addon.websocket_start(first)
    relay(harness.addon, first, RECORDED[:6])  # a turn under way
    others = [socket_flow("/v1/responses") for _ in range(addon_module.MAX_SOCKETS)]
    for flow in others:
        harness.addon.websocket_start(flow)
    assert len(harness.addon._sockets) == addon_module.MAX_SOCKETS
    assert first.id not in harness.addon._sockets and others[0].id in harness.addon._sockets
    relay(harness.addon, first, RECORDED[6:])  # no longer followed
    assert harness.addon.flush(5)
    # Not read as cut short: the turn went on, unseen.
    (turn,) = [e for e in harness.events() if e["event"] == "turn"]
    assert (turn["outcome"], turn["reason"]) == (
        "skipped",
        "tooltap stopped following the socket: more than 10000 were open",
    )
    assert harness.addon.budget.used == 0


async def test_the_realtime_recording_through_the_hooks(harness):
    flow = socket_flow("/v1/realtime?model=gpt-realtime")
    harness.addon.websocket_start(flow)
    messages = [(d == "sent", frame(e)) for d, e in recording(REALTIME_CASSETTE)]
    relay(harness.addon, flow, messages)
    harness.addon.websocket_end(flow)
    assert harness.addon.flush(5)
    turns = [e for e in harness.events() if e["event"] == "turn"]
    assert [(t["api"], t["model"], t["state"], t["calls"]) for t in turns] == [
        ("realtime", "gpt-realtime", "no-strict-declared", 1),
        ("realtime", "gpt-realtime", "no-strict-declared", 0),
    ]
    assert turns[0]["path"] == "/v1/realtime?model=gpt-realtime"
    assert harness.value("tooltap_tool_results_total", api="realtime", outcome="ok") == 1


async def test_a_sockets_last_batch_refused_by_a_full_hand_over_is_counted_dropped(harness):
    harness.tctx.configure(harness.addon, tooltap_queue_size=1)
    await harness.addon.restarting
    harness.addon.inspection.worker.stop()  # nothing drains the queue now
    flow = socket_flow("/v1/responses")
    harness.addon.websocket_start(flow)
    relay(harness.addon, flow, RECORDED)  # its turns fill the queue, the rest is refused
    harness.addon.websocket_end(flow)
    assert harness.value("tooltap_flows_total", api="responses", outcome="dropped") == 1


async def test_messages_refused_by_a_full_hand_over_are_counted_as_queue_full(harness):
    harness.tctx.configure(harness.addon, tooltap_queue_size=1)
    await harness.addon.restarting
    worker = harness.addon.inspection.worker
    worker.stop()  # nothing drains the queue now
    flow = socket_flow("/v1/responses")
    harness.addon.websocket_start(flow)
    first_turn = next(i for i, (_, m) in enumerate(RECORDED, 1) if "response.completed" in m)
    relay(harness.addon, flow, RECORDED[:first_turn])  # its batch takes the one place
    relay(harness.addon, flow, RECORDED[first_turn:])  # refused: 6 messages a turn needs
    worker.start()
    assert worker.wait_idle(5)
    harness.addon.websocket_end(flow)  # the next batch carries the count
    assert harness.addon.flush(5)
    assert (
        harness.value(
            "tooltap_websocket_messages_skipped_total", api="responses", reason="queue_full"
        )
        == 6  # response.create, .created, .in_progress, .output_item.added/.done, .completed
    )
    turns = [e for e in harness.events() if e["event"] == "turn"]
    assert [t["outcome"] for t in turns] == ["inspected"]  # the second was lost, not misread


async def test_a_live_socket_the_server_closes_with_an_error_code_is_a_session_error(harness):
    flow = socket_flow(LIVE_PATH, host="generativelanguage.googleapis.com")
    harness.addon.websocket_start(flow)
    setup = {"setup": {"model": "models/gemini-live-2.5-flash-preview"}}
    relay(harness.addon, flow, [(True, json.dumps(setup)), (False, live.setup_complete())])
    flow.websocket.closed_by_client, flow.websocket.close_code = False, 1008
    flow.websocket.close_reason = "API key not valid. Please pass a valid API key."
    harness.addon.websocket_end(flow)
    assert harness.addon.flush(5)
    (error,) = [e for e in harness.events() if e["event"] == "session_error"]
    assert (error["api"], error["type"], error["message"]) == (
        "gemini_live",
        "policy_violation",
        "the server closed the socket with 1008 (policy violation): "
        "API key not valid. Please pass a valid API key.",
    )
    labels = {"api": "gemini_live", "type": "policy_violation"}
    assert harness.value("tooltap_session_errors_total", **labels) == 1
    assert harness.value("tooltap_flows_total", api="gemini_live", outcome="inspected") == 0


def test_one_socket_holding_more_than_the_limit_lets_go_of_its_turn_in_flight():
    sockets = Sockets(max_turn=1 << 20, limit=2_000)
    created, updated = realtime_session([])
    turn = realtime_turn(
        "resp_large0000001", [("call_l", "get_weather", '{"city":"' + "x" * 3_000 + '"}')]
    )
    messages = [created.encode(), updated.encode(), frame({"type": "response.create"}).encode()]
    messages += [m.encode() for m in turn[:-1]]
    sources = bytes([0, 0, 1] + [0] * (len(turn) - 1))
    batch = SocketBatch("socket", sources)
    ((key, number, lost),) = sockets.read(
        "realtime", "wss://api.openai.com/v1/realtime", batch, messages
    )
    assert (key, number) == ("socket", 1)
    assert lost.skipped == "messages of this turn were not kept for inspection"
    assert sockets.held == 0 and len(sockets) == 1
    assert sockets.skipped[("realtime", "lost")] == 0  # its request had been answered


def test_a_running_turns_request_counts_toward_the_limit_the_readers_are_trimmed_on():
    sockets = Sockets(max_turn=1 << 20, limit=2_000)
    request = frame({"type": "response.create", "input": "x" * 3_000}).encode()
    started = responses_turn("resp_a", [text_item("msg_a", "ok")])[0].encode()
    batch = SocketBatch("socket", bytes([1, 0]))
    ((_, _, lost),) = sockets.read(
        "responses", "wss://api.openai.com/v1/responses", batch, [request, started]
    )
    assert lost.skipped == "messages of this turn were not kept for inspection"
    assert sockets.held == 0


async def test_each_turn_on_a_socket_is_a_span_of_its_own_timed_by_its_messages(harness):
    from support.otlp import Receiver, attributes

    with Receiver() as collector:
        harness.tctx.configure(harness.addon, tooltap_otlp=collector.url.removesuffix("/v1/traces"))
        await harness.addon.restarting
        flow = socket_flow("/v1/responses")
        harness.addon.websocket_start(flow)
        relay(harness.addon, flow, RECORDED)
        harness.addon.websocket_end(flow)
        assert harness.addon.flush(5)
        harness.addon.inspection.inspector.traces.provider.force_flush(10_000)
        spans = collector.wait_spans(2)
    assert [(s.name, attributes(s.attributes)["tooltap.transport"]) for s in spans] == [
        ("chat gpt-4o-mini", "websocket"),
        ("chat gpt-4o-mini", "websocket"),
    ]
    times = [m.timestamp for m in flow.websocket.messages]
    for span in spans:
        assert min(times) * 1e9 - 1e6 <= span.start_time_unix_nano <= span.end_time_unix_nano
        assert span.end_time_unix_nano <= max(times) * 1e9 + 1e6


async def test_gemini_live_binary_frames_are_held_audio_is_not_and_a_tool_call_goes_at_once(
    harness,
):
    from tooltap.addon.harness import live

    path = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
    flow = socket_flow(path, host="generativelanguage.googleapis.com")
    harness.addon.websocket_start(flow)
    tap = harness.addon._sockets[flow.id]
    setup = frame({"setup": {"model": "models/gemini-live-2.5-flash-preview",
                             "tools": [{"functionDeclarations": [{"name": "get_weather"}]}]}})  # fmt: skip
    audio_in = frame({"realtime_input": {"audio": {"data": live.SILENCE * 10}}})
    relay(harness.addon, flow, [(True, setup), (False, live.setup_complete()), (True, audio_in)])
    relay(harness.addon, flow, [(False, live.audio()), (False, live.audio())])
    assert tap.messages == [setup.encode()]
    assert tap.skipped == {}  # binary frames hold Gemini Live's JSON: none skipped as binary
    relay(harness.addon, flow, [(False, live.tool_call(("fc_1", "get_weather", {})))])
    assert tap.messages == []  # the batch went at the call
    before = states(flow)
    harness.addon.websocket_end(flow)
    assert harness.addon.flush(5)
    assert states(flow) == before
    (turn,) = [e for e in harness.events() if e["event"] == "turn"]
    assert (turn["api"], turn["calls"], turn["model"]) == (
        "gemini_live", 1, "gemini-live-2.5-flash-preview",
    )  # fmt: skip
    (owed,) = [e for e in harness.events() if e["event"] == "loop_error"]
    assert (owed["rule"], owed["ids"], owed["level"]) == ("unanswered-at-close", ["fc_1"], "info")
    assert harness.value("tooltap_flows_total", api="gemini_live", outcome="inspected") == 1
    assert harness.addon.budget.used == 0
