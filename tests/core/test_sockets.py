"""The WebSocket transports read as turns (each dialect's socket reader), on real recordings.

A turn off a socket must give the Verdict the same turn gives over HTTP; the
Realtime loop is checked per response.create; and whatever arrives (errors,
junk, a socket cut mid-turn, requests sent without waiting) is read without
raising and without a finding that is not true.
"""

from __future__ import annotations

import json
from collections import OrderedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.captures import SSE, WIRE
from support.sockets import (
    REALTIME_CASSETTE,
    RESPONSES_CASSETTE,
    call_item,
    frame,
    read_to_the_close,
    realtime_session,
    realtime_turn,
    recording,
    responses_error,
    responses_turn,
    text_item,
)

from tooltap.addon.inspection.session import Session
from tooltap.core import Exchange, inspect
from tooltap.core.dialects import socket_reader, socket_reading
from tooltap.core.findings import DEFAULT, findings
from tooltap.core.sockets import (
    MAX_LANES,
    MAX_OPEN,
    MAX_WAITING,
    SocketClose,
    SocketTurn,
    framed,
    leading_type,
    remember,
    sse,
)

RESPONSES_URL = "https://api.openai.com/v1/responses"
REALTIME_URL = "https://api.openai.com/v1/realtime?model=gpt-realtime"
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Look up the weather for a city.",
    "parameters": {
        "additionalProperties": False,
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "type": "object",
    },
}


def feed(reader, messages, session=None):
    """Messages as (from_client, event or raw bytes); the verdicts of the turns, and the turns."""
    session = session or Session()
    turns: list[SocketTurn] = []
    for from_client, message in messages:
        raw = message if isinstance(message, bytes) else frame(message).encode()
        turns += reader.feed(raw, from_client)
    return turns, session


def verdicts(turns, session=None):
    session = session or Session()
    return [t.said or session.inspect(t.exchange, t.prior) for t in turns if t.skipped is None]


def recorded(name):
    return [(direction == "sent", event) for direction, event in recording(name)]


def loop(verdict):
    return [(e.rule, e.ids, e.where) for e in verdict.loop_errors]


# --- the Responses WebSocket mode ---------------------------------------------


def test_a_recorded_responses_socket_gives_the_verdicts_of_the_same_turns_over_http():
    reader = socket_reader("responses", RESPONSES_URL, 8 << 20)
    turns, _ = feed(reader, recorded(RESPONSES_CASSETTE))
    assert reader.held == 0 and not reader.skipped
    assert len(turns) == 2
    session = Session()
    first, second = (session.inspect(t.exchange, t.prior) for t in turns)
    assert first.transport == second.transport == "websocket"
    assert (first.state, [c.name for c in first.calls]) == ("strict-at-risk", ["get_temperature"])
    assert first.calls[0].arguments_raw == '{"city":"Paris"}'
    assert (second.loop_errors, [r.call_id for r in second.tool_results]) == (
        [],
        ["call_NnDOtgBLcomuxMOH1WLzvbUR"],
    )
    # The same request and events over HTTP: a POST and its SSE stream.
    creates = [e for sent, e in recorded(RESPONSES_CASSETTE) if sent]
    streams: list[list[dict]] = []
    for sent, event in recorded(RESPONSES_CASSETTE):
        if sent:
            streams.append([])
        else:
            streams[-1].append(event)
    http = Session()
    for create, events, socket_verdict in zip(creates, streams, (first, second), strict=True):
        body = {k: v for k, v in create.items() if k != "type"} | {"stream": True}
        over_http = http.inspect(
            Exchange(
                method="POST",
                url=RESPONSES_URL,
                request_body=json.dumps(body).encode(),
                status=200,
                response_headers=SSE,
                response_body=sse([frame(e).encode() for e in events]),
            )
        )
        assert socket_verdict.model_dump(exclude={"transport"}) == over_http.model_dump(
            exclude={"transport"}
        )


def test_a_fan_out_under_strict_tools_on_a_socket_is_strict_void():
    tools = [WEATHER | {"strict": True}]
    calls = [
        call_item("fc_01", "call_01", "get_weather", '{"city":"Paris"}'),
        call_item("fc_02", "call_02", "get_weather", '{"city":"Rome"}'),
    ]
    reader = socket_reader("responses", RESPONSES_URL, 8 << 20)
    create = {"type": "response.create", "model": "gpt-4o-mini", "tools": tools, "input": "hi"}
    turns, _ = feed(reader, [(True, create)])
    turns += [t for m in responses_turn("resp_fan", calls) for t in reader.feed(m.encode(), False)]
    (verdict,) = verdicts(turns)
    assert (verdict.state, verdict.call_count, verdict.duplicates) == (
        "strict-void",
        2,
        {"get_weather": 2},
    )


def test_a_follow_up_on_the_socket_is_checked_against_the_calls_of_the_response_it_continues():
    reader = socket_reader("responses", RESPONSES_URL, 8 << 20)
    session = Session()
    calls = [
        call_item("fc_01", "call_01", "get_weather", '{"city":"Paris"}'),
        call_item("fc_02", "call_02", "get_weather", '{"city":"Rome"}'),
    ]
    messages = [
        (True, {"type": "response.create", "model": "m", "tools": [WEATHER], "input": "hi"})
    ]
    turns, _ = feed(reader, messages)
    for m in responses_turn("resp_one", calls):
        turns += reader.feed(m.encode(), False)
    follow_up = {
        "type": "response.create",
        "model": "m",
        "previous_response_id": "resp_one",
        "input": [{"type": "function_call_output", "call_id": "call_01", "output": "12C"}],
    }
    turns += reader.feed(frame(follow_up).encode(), True)
    for m in responses_turn("resp_two", [text_item("msg_2", "Paris is 12C.")], "resp_one"):
        turns += reader.feed(m.encode(), False)
    first, second = verdicts(turns, session)
    assert first.awaiting == ["call_01", "call_02"]
    assert loop(second) == [("unanswered-call", ["call_02"], "previous_response_id resp_one")]


def test_an_error_event_in_a_turn_is_reported_as_in_a_broken_http_stream():
    # The real stream: `error` (insufficient_quota), then response.failed.
    recorded_stream = WIRE / "responses_stream_error_nested_then_failed.jsonl"
    events = [line for line in recorded_stream.read_bytes().splitlines() if line.strip()]
    reader = socket_reader("responses", RESPONSES_URL, 8 << 20)
    turns = reader.feed(
        frame({"type": "response.create", "model": "m", "input": "hi"}).encode(), True
    )
    for event in events:
        turns += reader.feed(event, False)
    (verdict,) = verdicts(turns)
    over_http = inspect(
        Exchange(
            method="POST",
            url=RESPONSES_URL,
            request_body=b'{"model": "m", "input": "hi", "stream": true}',
            status=200,
            response_headers=SSE,
            response_body=sse(events),
        )
    )
    assert [(e.type, e.message[:25]) for e in verdict.stream_errors] == [
        ("insufficient_quota", "You exceeded your current")
    ]
    assert verdict.model_dump(exclude={"transport"}) == over_http.model_dump(exclude={"transport"})


def test_an_error_event_alone_ends_the_turn_when_the_next_response_starts():
    reader = socket_reader("responses", RESPONSES_URL, 8 << 20)
    turns = reader.feed(frame({"type": "response.create", "input": "a"}).encode(), True)
    events = responses_turn("resp_a", [text_item("msg_a", "partial")])
    for m in events[:3]:
        turns += reader.feed(m.encode(), False)
    error = {
        "type": "error",
        "sequence_number": 3,
        "error": {"type": "server_error", "message": "boom"},
    }
    turns += reader.feed(frame(error).encode(), False)
    assert turns == []  # the response's own response.failed may still come
    turns += reader.feed(frame({"type": "response.create", "input": "b"}).encode(), True)
    turns += reader.feed(responses_turn("resp_b", [text_item("msg_b", "ok")])[0].encode(), False)
    (verdict,) = verdicts(turns)
    assert verdict.reason == "the turn ended before its final event"
    assert [e.type for e in verdict.stream_errors] == ["server_error"]


def test_a_request_the_api_refuses_is_a_rejected_request_with_the_apis_words():
    reader = socket_reader("responses", RESPONSES_URL, 8 << 20)
    create = {
        "type": "response.create",
        "model": "m",
        "previous_response_id": "resp_abc",
        "input": [],
    }
    turns = reader.feed(frame(create).encode(), True)
    turns += reader.feed(
        responses_error(
            400,
            "previous_response_not_found",
            "Previous response with id 'resp_abc' not found.",
            "previous_response_id",
        ).encode(),
        False,
    )
    (verdict,) = verdicts(turns)
    assert verdict.rejected is not None
    assert (verdict.rejected.status, verdict.rejected.type, verdict.rejected.message) == (
        400,
        "previous_response_not_found",
        "Previous response with id 'resp_abc' not found.",
    )
    assert verdict.loop_errors == []  # resp_abc was never seen: nothing is known about its calls


def test_a_second_request_sent_without_waiting_is_answered_in_order_or_refused():
    reader = socket_reader("responses", RESPONSES_URL, 8 << 20)
    turns = reader.feed(frame({"type": "response.create", "input": "a"}).encode(), True)
    turns += reader.feed(frame({"type": "response.create", "input": "b"}).encode(), True)
    first = responses_turn("resp_a", [text_item("msg_a", "one")])
    turns += reader.feed(first[0].encode(), False)
    # The API refuses the second while the first runs: the error names no sequence number.
    turns += reader.feed(
        responses_error(400, "response_already_in_progress", "A response is in progress.").encode(),
        False,
    )
    for m in first[1:]:
        turns += reader.feed(m.encode(), False)
    assert [t.exchange.request_body for t in turns] == [
        frame({"type": "response.create", "input": "b"}).encode(),
        frame({"type": "response.create", "input": "a"}).encode(),
    ]
    refused, answered = verdicts(turns)
    assert refused.rejected is not None and refused.rejected.type == "response_already_in_progress"
    assert answered.rejected is None and answered.stream_errors == []


def test_lanes_are_matched_by_stream_id():
    reader = socket_reader("responses", RESPONSES_URL, 8 << 20)
    turns = []
    for lane in ("x", "y"):
        create = {"type": "response.create", "stream_id": lane, "input": lane}
        turns += reader.feed(frame(create).encode(), True)
    x = responses_turn("resp_x", [text_item("msg_x", "from x")], stream_id="x")
    y = responses_turn("resp_y", [call_item("fc_y", "call_y", "get_weather", "{}")], stream_id="y")
    for a, b in zip(x, y, strict=False):  # interleaved
        turns += reader.feed(a.encode(), False) + reader.feed(b.encode(), False)
    for rest in (x[len(y) :], y[len(x) :]):
        for m in rest:
            turns += reader.feed(m.encode(), False)
    by_id = {v.response_id: v for v in verdicts(turns)}
    requests = {t.exchange.request_body for t in turns}
    assert set(by_id) == {"resp_x", "resp_y"} and len(requests) == 2
    assert by_id["resp_y"].calls[0].call_id == "call_y" and by_id["resp_x"].calls == []


def test_past_64_lanes_a_new_lane_is_skipped_and_the_running_ones_read_on():
    assert MAX_LANES == 64  # the README's figure
    reader = socket_reader("responses", RESPONSES_URL, 8 << 20)
    for lane in range(MAX_LANES + 1):
        create = {"type": "response.create", "stream_id": f"lane{lane}", "input": "hi"}
        reader.feed(frame(create).encode(), True)
    assert reader.skipped == {"too_many_lanes": 1}
    answers = {
        lane: responses_turn(
            f"resp_lane{lane}", [text_item(f"msg_{lane}", "hi")], stream_id=f"lane{lane}"
        )
        for lane in (MAX_LANES, 0, MAX_LANES - 1)  # the 65th first, while all 64 are taken
    }
    turns = [
        t for answer in answers.values() for m in answer for t in reader.feed(m.encode(), False)
    ]
    assert [v.response_id for v in verdicts(turns)] == ["resp_lane0", "resp_lane63"]
    # The 65th lane's request, then each event of its response.
    assert reader.skipped["too_many_lanes"] == 1 + len(answers[MAX_LANES])


def test_past_1000_results_between_two_requests_the_rest_are_counted_and_none_is_an_orphan():
    from tooltap.core.sockets import MAX_ITEMS

    assert MAX_ITEMS == 1_000  # the README's figure
    reader = realtime_started()
    calls = [(f"call_{n:04d}", "get_weather", '{"city":"Paris"}') for n in range(MAX_ITEMS + 1)]
    messages = [
        (True, {"type": "response.create"}),
        *realtime_events("resp_many00000001", calls),
        *(realtime_output(call_id) for call_id, _, _ in calls),
        (True, {"type": "response.create"}),
        *realtime_events("resp_many00000002"),
    ]
    turns, session = feed(reader, messages)
    first, second = verdicts(turns + reader.close(), session)
    assert reader.skipped["too_many_items"] == 1
    assert (first.call_count, len(second.tool_results), second.loop_errors) == (1001, 1000, [])


def test_a_socket_closed_mid_turn_gives_the_cut_turn_and_the_request_left_unanswered():
    reader = socket_reader("responses", RESPONSES_URL, 8 << 20)
    turns = reader.feed(frame({"type": "response.create", "input": "a"}).encode(), True)
    events = responses_turn(
        "resp_a", [call_item("fc_a", "call_a", "get_weather", '{"city":"Oslo"}')]
    )
    for m in events[:-1]:  # all but response.completed
        turns += reader.feed(m.encode(), False)
    turns += reader.feed(frame({"type": "response.create", "input": "b"}).encode(), True)
    turns += reader.close()
    assert [t.cut for t in turns] == [True, True] and reader.held == 0
    cut, never = verdicts(turns)
    assert cut.reason == "the turn ended before its final event"
    assert [(c.name, c.arguments_raw) for c in cut.calls] == [("get_weather", '{"city":"Oslo"}')]
    assert (never.outcome, never.reason) == ("upstream_error", "no response from the upstream")


@pytest.mark.parametrize("api", ["responses", "realtime"])
def test_an_openai_socket_closed_with_an_error_code_says_it_on_the_cut_turn_only(api):
    # OpenAI's APIs state their errors in `error` events: the close itself is no session error.
    reader = realtime_started() if api == "realtime" else socket_reader(api, RESPONSES_URL, 8 << 20)
    if api == "realtime":
        messages = [(True, {"type": "response.create"}), *realtime_events("resp_cut000000001")]
    else:
        create = (True, {"type": "response.create", "input": "a"})
        messages = [create, *((False, m.encode()) for m in responses_turn("resp_a", []))]
    turns, _ = feed(reader, messages[:-1])  # cut before the response's final event
    turns += reader.close(SocketClose(1011, "Internal error occurred.", by_client=False))
    (cut,) = verdicts(turns)
    assert (cut.scope, cut.reason, cut.session_errors) == (
        "turn",
        "the turn ended before its final event",
        [],
    )


def test_junk_is_counted_and_a_server_message_that_is_not_json_is_a_malformed_event():
    reader = socket_reader("responses", RESPONSES_URL, 8 << 20)
    turns = reader.feed(b"not json", True)
    turns += reader.feed(frame({"type": "response.create", "input": "a"}).encode(), True)
    events = responses_turn("resp_a", [call_item("fc_a", "call_a", "get_weather", "")])
    turns += reader.feed(events[0].encode(), False)
    turns += reader.feed(b"\x00garbage{", False)
    for m in events[1:]:
        turns += reader.feed(m.encode(), False)
    assert reader.skipped == {"not_json": 1}
    (verdict,) = verdicts(turns)
    assert [e.type for e in verdict.stream_errors] == ["malformed_event"]


def test_a_turn_past_the_byte_bound_is_skipped_and_lets_go_of_its_events():
    reader = socket_reader("responses", RESPONSES_URL, 2_000)
    turns = reader.feed(frame({"type": "response.create", "input": "a"}).encode(), True)
    for m in responses_turn("resp_a", [text_item("msg_a", "x" * 3_000)]):
        turns += reader.feed(m.encode(), False)
        assert reader.held <= 2_000
    (turn,) = turns
    assert turn.skipped == "the turn's events passed tooltap_max_body"
    assert reader.held == 0 and reader.skipped == {"turn_too_large": 1}


def test_requests_waiting_past_the_bound_are_counted_not_kept():
    reader = socket_reader("responses", RESPONSES_URL, 8 << 20)
    for n in range(MAX_WAITING + 5):
        reader.feed(frame({"type": "response.create", "input": str(n)}).encode(), True)
    assert sum(len(q) for q in reader.waiting.values()) == MAX_WAITING
    assert reader.skipped == {"too_many_waiting": 5}


def test_joining_late_reads_the_first_response_from_its_echo_and_checks_no_loop():
    reader = socket_reader("responses", RESPONSES_URL, 8 << 20, late=True)
    # A request seen before the first response may not be the one it answers.
    turns = reader.feed(frame({"type": "response.create", "input": "?"}).encode(), True)
    for m in responses_turn("resp_a", [call_item("fc_a", "call_a", "get_weather", "{}")]):
        turns += reader.feed(m.encode(), False)
    (turn,) = turns
    assert turn.exchange.request_body == b"{}" and reader.skipped == {"joined_late": 1}
    (verdict,) = verdicts(turns)
    # The settings come from the response's own echo: the recorded strict tool.
    assert (verdict.state, verdict.loop_errors) == ("strict-at-risk", [])


def test_joining_late_forgets_each_lane_once_and_then_matches_in_order():
    reader = socket_reader("responses", RESPONSES_URL, 8 << 20, late=True)
    for lane in range(MAX_LANES + 6):
        stream = f"lane{lane}"
        reader.feed(frame({"type": "response.create", "stream_id": stream}).encode(), True)
        for m in responses_turn(f"resp_{lane}", [], stream_id=stream):
            reader.feed(m.encode(), False)
    # A request on each lane first seen late was dropped, not left waiting.
    assert reader.waiting == {} and reader.held == 0
    assert reader.skipped == {"joined_late": MAX_LANES + 1}
    # Past that many lanes, every lane running was seen: requests are matched again.
    request = frame({"type": "response.create", "stream_id": "new", "input": "x"}).encode()
    turns = reader.feed(request, True)
    for m in responses_turn("resp_new", [], stream_id="new"):
        turns += reader.feed(m.encode(), False)
    (turn,) = turns
    assert turn.exchange.request_body == request


def test_a_request_past_the_byte_bound_keeps_its_place_and_its_turn_is_skipped():
    reader = socket_reader("responses", RESPONSES_URL, 20_000)
    reader.feed(frame({"type": "response.create", "input": "x" * 30_000}).encode(), True)
    small = frame({"type": "response.create", "input": "hi"}).encode()
    reader.feed(small, True)
    turns = []
    for response_id in ("resp_big", "resp_small"):
        for m in responses_turn(response_id, [text_item("msg_" + response_id, "ok")]):
            turns += reader.feed(m.encode(), False)
    big, answered = turns
    assert big.skipped == "the request passed tooltap_max_body"
    assert (answered.skipped, answered.exchange.request_body) == (None, small)
    assert reader.held == 0


def test_a_running_turns_request_counts_in_what_the_reader_holds_until_the_turn_ends():
    reader = socket_reader("responses", RESPONSES_URL, 8 << 20)
    request = frame({"type": "response.create", "input": "x" * 5_000}).encode()
    reader.feed(request, True)
    started, *rest = (m.encode() for m in responses_turn("resp_a", [text_item("msg_a", "ok")]))
    reader.feed(started, False)
    assert reader.held == len(request) + len(started)
    turns = [turn for m in rest for turn in reader.feed(m, False)]
    assert len(turns) == 1 and reader.held == 0


# --- the Realtime API ---------------------------------------------------------


def test_the_recorded_realtime_session_gives_a_turn_per_response_and_a_clean_loop():
    reader = socket_reader("realtime", REALTIME_URL, 8 << 20)
    turns, _ = feed(reader, recorded(REALTIME_CASSETTE))
    first, second = verdicts(turns)
    assert (first.api, first.transport, first.model) == ("realtime", "websocket", "gpt-realtime")
    assert first.state == "no-strict-declared"  # Realtime function tools have no strict mode
    (call,) = first.calls
    assert (call.name, call.call_id, call.parse_error, call.schema_errors) == (
        "get_weather",
        "call_9ghqokxJmZFwiAM0",
        None,
        [],
    )
    assert call.arguments_raw == '{  \n  "city": "London" \n} \n'
    assert second.loop_errors == []
    assert [(r.call_id, r.outcome) for r in second.tool_results] == [
        ("call_9ghqokxJmZFwiAM0", "ok")
    ]
    assert reader.held == 0


def test_a_running_realtime_turns_request_counts_in_what_the_reader_holds_until_it_ends():
    reader = socket_reader("realtime", REALTIME_URL, 8 << 20)
    created, updated = realtime_session([WEATHER])
    reader.feed(created.encode(), False)
    reader.feed(updated.encode(), False)
    reader.feed(frame({"type": "response.create"}).encode(), True)
    (request,) = (create.request for create in reader.waiting)
    started, *rest = (m.encode() for m in realtime_turn("resp_held0000001", [], "Mild."))
    reader.feed(started, False)
    assert reader.held == len(request) + len(started)
    turns = [turn for m in rest for turn in reader.feed(m, False)]
    assert len(turns) == 1 and reader.held == 0


def realtime_messages(
    answered, tools=(WEATHER,), second_call=("call_two", "get_weather", '{"city":"Rome"}')
):
    created, updated = realtime_session(list(tools))
    calls = [("call_one", "get_weather", '{"city":"Paris"}'), second_call]
    messages = [
        (False, created.encode()),
        (True, {"type": "session.update", "session": {"type": "realtime", "tools": list(tools)}}),
        (False, updated.encode()),
        (
            True,
            {
                "type": "conversation.item.create",
                "item": {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "Paris and Rome?"}],
                },
            },
        ),
        (True, {"type": "response.create"}),
        *((False, m.encode()) for m in realtime_turn("resp_Dz2pi00000001", calls)),
        *(
            (
                True,
                {
                    "type": "conversation.item.create",
                    "item": {"type": "function_call_output", "call_id": c, "output": "12C"},
                },
            )
            for c in answered
        ),
        (True, {"type": "response.create"}),
        *((False, m.encode()) for m in realtime_turn("resp_Dz2pi00000002", [], "Both mild.")),
    ]
    return messages


def test_a_realtime_response_with_two_calls_both_answered_is_clean():
    reader = socket_reader("realtime", REALTIME_URL, 8 << 20)
    turns, _ = feed(reader, realtime_messages(["call_one", "call_two"]))
    first, second = verdicts(turns)
    assert (first.state, first.call_count) == ("fanout-no-strict", 2)
    assert any("no strict mode" in r for r in first.repairs)
    assert second.loop_errors == [] and len(second.tool_results) == 2


def test_a_response_asked_for_while_a_call_is_still_owed_is_no_finding():
    reader = socket_reader("realtime", REALTIME_URL, 8 << 20)
    turns, _ = feed(reader, realtime_messages(["call_one"]))
    _, second = verdicts(turns)
    assert loop(second) == []
    assert [(r.call_id, r.outcome) for r in second.tool_results] == [("call_one", "ok")]


def test_a_call_never_answered_after_the_conversation_went_on_is_found_at_the_close():
    reader = socket_reader("realtime", REALTIME_URL, 8 << 20)
    feed(reader, realtime_messages(["call_one"]))
    (said,) = verdicts(reader.close())
    assert (said.scope, said.state, said.outcome) == ("session", None, "inspected")
    assert loop(said) == [
        ("unanswered-call", ["call_two"], "the socket's close, after resp_Dz2pi00000002")
    ]
    assert "API rejects" not in said.loop_errors[0].repair
    assert said.loop_errors[0].repair.startswith("send a function_call_output")


def test_a_hang_up_while_a_tool_runs_is_reported_and_fails_nothing_by_default():
    reader = realtime_started()
    feed(
        reader,
        [(True, {"type": "response.create"}), *realtime_events("resp_hang00000001", [PARIS])],
    )
    (said,) = verdicts(reader.close())
    assert loop(said) == [
        ("unanswered-at-close", ["call_one"], "the socket's close, after resp_hang00000001")
    ]
    assert findings(said) == ["unanswered-at-close"]
    assert not set(findings(said)) & DEFAULT


def test_the_agents_sdk_order_is_clean():
    # openai-agents (Python and JS), pipecat: a response's tools run concurrently; each, as it
    # finishes, sends its output and asks for a response; the user may speak meanwhile.
    reader = realtime_started()
    rome = ("call_two", "get_weather", '{"city":"Rome"}')
    messages = [
        (True, {"type": "response.create"}),
        *realtime_events("resp_fanout000001", [PARIS, rome]),
        realtime_output("call_one"),  # the fast tool
        (True, {"type": "response.create"}),
        *realtime_events("resp_partial00001"),
        (True, {"type": "input_audio_buffer.commit"}),  # the user speaks while Rome runs
        *realtime_events("resp_spoken000001"),  # started by voice activity
        realtime_output("call_two"),  # the slow tool
        (True, {"type": "response.create"}),
        *realtime_events("resp_final0000001"),
    ]
    turns, session = feed(reader, messages)
    found = verdicts(turns + reader.close(), session)
    assert [v.response_id for v in found] == [
        "resp_fanout000001",
        "resp_partial00001",
        "resp_spoken000001",
        "resp_final0000001",
    ]
    assert [loop(v) for v in found] == [[], [], [], []]
    assert [[r.call_id for r in v.tool_results] for v in found] == [
        [],
        ["call_one"],
        [],
        ["call_two"],
    ]


def test_the_livekit_order_is_clean():
    # livekit/agents: every output first, then one response.create.
    reader = realtime_started()
    turns, session = feed(reader, realtime_messages(["call_one", "call_two"])[2:])
    found = verdicts(turns + reader.close(), session)
    assert [loop(v) for v in found] == [[], []]


def test_a_sideband_socket_logs_and_validates_calls_and_judges_no_loop():
    reader = socket_reader("realtime", REALTIME_URL + "&call_id=rtc_u1_9c6", 8 << 20)
    messages = [
        m
        for m in realtime_messages(["call_ghost"])
        if not (m[0] and m[1].get("type") == "session.update")
    ]
    turns, session = feed(reader, messages)
    found = verdicts(turns + reader.close(), session)
    assert [(v.call_count, loop(v)) for v in found] == [(2, []), (0, [])]
    assert [bool(c.schema_errors) for c in found[0].calls] == [False, False]


def test_a_realtime_result_for_a_call_never_made_is_an_orphan():
    reader = socket_reader("realtime", REALTIME_URL, 8 << 20)
    turns, _ = feed(reader, realtime_messages(["call_one", "call_two", "call_ghost"]))
    _, second = verdicts(turns)
    assert loop(second) == [("orphan-result", ["call_ghost"], "conversation.item.create.2")]


def test_realtime_arguments_are_validated_against_the_session_tools():
    reader = socket_reader("realtime", REALTIME_URL, 8 << 20)
    messages = realtime_messages(
        ["call_one", "call_two"], second_call=("call_two", "get_weather", '{"town":"Rome"}')
    )
    turns, _ = feed(reader, messages)
    first, _ = verdicts(turns)
    assert [bool(c.schema_errors) for c in first.calls] == [False, True]


def test_realtime_errors_answer_the_waiting_request_or_the_session():
    reader = socket_reader("realtime", REALTIME_URL, 8 << 20)
    created, _ = realtime_session([])
    error = {
        "type": "error",
        "event_id": "event_BAOUEYFdp4UdmFlPv6ADs",
        "error": {
            "type": "invalid_request_error",
            "code": "invalid_value",
            "message": "Invalid value: 'text'.",
            "param": "item.type",
            "event_id": None,
        },
    }
    turns = reader.feed(created.encode(), False)
    turns += reader.feed(frame(error).encode(), False)  # nothing waits: the session's
    turns += reader.feed(frame({"type": "response.create", "event_id": "c1"}).encode(), True)
    answer = error | {"error": error["error"] | {"event_id": "c1", "message": "busy"}}
    turns += reader.feed(frame(answer).encode(), False)
    session_error, refused = verdicts(turns)
    assert (session_error.scope, session_error.rejected) == ("session", None)
    assert [(e.type, e.message) for e in session_error.session_errors] == [
        ("invalid_value", "Invalid value: 'text'.")
    ]
    assert refused.rejected is not None and refused.rejected.message == "busy"
    assert reader.waiting == type(reader.waiting)()


def test_an_error_that_refuses_a_tool_result_is_a_rejected_request():
    reader = realtime_started()
    output = {
        "type": "conversation.item.create",
        "event_id": "out_1",
        "item": {"type": "function_call_output", "call_id": "call_nowhere", "output": "x"},
    }
    refusal = {
        "type": "error",
        "event_id": "event_refusal",
        "error": {
            "type": "invalid_request_error",
            "code": "invalid_value",
            "message": "Tool call ID 'call_nowhere' not found in conversation.",
            "param": "item.call_id",
            "event_id": "out_1",
        },
    }
    turns, session = feed(reader, [(True, output), (False, refusal)])
    (refused,) = verdicts(turns, session)
    assert refused.scope == "turn" and refused.rejected is not None
    assert (refused.rejected.status, refused.rejected.message) == (
        400,
        "Tool call ID 'call_nowhere' not found in conversation.",
    )


def test_out_of_band_responses_owe_nothing_and_are_not_owed_to():
    reader = socket_reader("realtime", REALTIME_URL, 8 << 20)
    created, updated = realtime_session([WEATHER])
    turns = reader.feed(created.encode(), False) + reader.feed(updated.encode(), False)
    oob = {"type": "response.create", "response": {"conversation": "none"}}
    turns += reader.feed(frame(oob).encode(), True)
    for m in realtime_turn("resp_oob000000001", [("call_oob", "get_weather", "{}")]):
        turns += reader.feed(m.encode(), False)
    turns += reader.feed(frame({"type": "response.create"}).encode(), True)
    for m in realtime_turn("resp_next00000001", [], "hello"):
        turns += reader.feed(m.encode(), False)
    found = verdicts(turns)
    assert len(found) == 2 and all(v.loop_errors == [] for v in found)


def realtime_events(response_id, calls=()):
    return [(False, m.encode()) for m in realtime_turn(response_id, list(calls))]


def realtime_output(call_id):
    item = {"type": "function_call_output", "call_id": call_id, "output": "12C"}
    return (True, {"type": "conversation.item.create", "item": item})


def realtime_started(late=False):
    reader = socket_reader("realtime", REALTIME_URL, 8 << 20, late=late)
    _, updated = realtime_session([WEATHER])
    reader.feed(updated.encode(), False)
    return reader


PARIS = ("call_one", "get_weather", '{"city":"Paris"}')


def test_a_response_asked_for_before_the_last_one_finished_is_refused_and_owes_nothing():
    # The client answers the call and asks again before response.done: the API refuses.
    reader = realtime_started()
    first = realtime_events("resp_first0000001", [PARIS])
    busy = {
        "type": "error",
        "event_id": "event_busy",
        "error": {
            "type": "invalid_request_error",
            "code": "conversation_already_has_active_response",
            "message": "Conversation already has an active response in progress.",
            "param": None,
            "event_id": "early",
        },
    }
    messages = [
        (True, {"type": "response.create"}),
        *first[:-1],
        realtime_output("call_one"),
        (True, {"type": "response.create", "event_id": "early"}),
        (False, busy),
        first[-1],
        (True, {"type": "response.create"}),
        *realtime_events("resp_second000001"),
    ]
    turns, session = feed(reader, messages)
    refused, first_verdict, second = verdicts(turns, session)
    assert first_verdict.call_count == 1
    assert refused.rejected is not None and refused.rejected.status == 400
    # The result written early answers the call owed when the next request is made.
    assert second.loop_errors == [] and len(second.tool_results) == 1


def test_after_joining_late_a_call_owed_is_checked_from_the_next_request_on():
    reader = realtime_started(late=True)
    messages = [
        *realtime_events("resp_seen00000001", [PARIS]),  # its request went by unseen
        realtime_output("call_one"),
        (True, {"type": "response.create"}),
        *realtime_events("resp_seen00000002"),
        (True, {"type": "response.create"}),
        *realtime_events("resp_seen00000003"),
    ]
    turns, session = feed(reader, messages)
    # Not one reported unanswered twice, nor its result an orphan.
    assert [v.loop_errors for v in verdicts(turns, session)] == [[], [], []]


def test_an_out_of_band_response_beside_one_in_the_conversation_keeps_them_apart():
    reader = realtime_started()
    in_conversation = realtime_events("resp_conv00000001", [PARIS])
    out_of_band = realtime_events("resp_oob000000001")
    oob = {"type": "response.create", "response": {"conversation": "none"}}
    messages = [
        (True, {"type": "response.create"}),
        in_conversation[0],
        (True, oob),
        out_of_band[0],
        *in_conversation[1:-1],
        out_of_band[-1],
        in_conversation[-1],
        realtime_output("call_one"),
        (True, {"type": "response.create"}),
        *realtime_events("resp_conv00000002"),
    ]
    turns, session = feed(reader, messages)
    out, conversation, follow_up = verdicts(turns, session)
    assert (out.response_id, out.call_count) == ("resp_oob000000001", 0)
    assert (conversation.response_id, conversation.call_count) == ("resp_conv00000001", 1)
    assert follow_up.loop_errors == [] and len(follow_up.tool_results) == 1
    assert reader.held == 0


def test_a_session_error_without_an_event_id_leaves_the_request_waiting():
    reader = realtime_started()
    empty = {
        "type": "error",
        "event_id": "event_empty",
        "error": {
            "type": "invalid_request_error",
            "code": "input_audio_buffer_commit_empty",
            "message": "buffer too small",
            "param": None,
            "event_id": None,
        },
    }
    messages = [
        (True, {"type": "input_audio_buffer.commit"}),
        (True, {"type": "response.create"}),
        (False, empty),
        *realtime_events("resp_after0000001", [PARIS]),
    ]
    turns, session = feed(reader, messages)
    session_error, answered = verdicts(turns, session)
    assert (session_error.scope, session_error.rejected) == ("session", None)
    assert [(e.type, e.message) for e in session_error.session_errors] == [
        ("input_audio_buffer_commit_empty", "buffer too small")
    ]
    assert findings(session_error) == ["session-error"]
    # The response answers the request: its tools are the session's.
    assert (answered.response_id, answered.call_count) == ("resp_after0000001", 1)
    assert json.loads(answered_request(turns[1]))["tools"] == [WEATHER]


def answered_request(turn):
    return turn.exchange.request_body


def test_a_realtime_item_is_held_only_when_it_may_be_a_call_or_a_result():
    def item(body):
        return b'{"type":"conversation.item.create","item":' + body + b"}"

    kind = "conversation.item.create"
    assert socket_reading("realtime").needed(
        item(b'{"type":"function_call_output","call_id":"c"}'), kind
    )
    assert socket_reading("realtime").needed(
        item(b'{"id":"i","type":"function_call","call_id":"c"}'), kind
    )
    assert not socket_reading("realtime").needed(
        item(b'{"type":"message","role":"user","content":[]}'), kind
    )
    # The type not in the head: held unless it carries media.
    assert socket_reading("realtime").needed(
        item(b'{"content":[{"text":"hi"}],"type":"message"}'), kind
    )


def test_audio_and_images_are_never_held():
    assert leading_type(b'{"type":"response.output_audio.delta","delta":"AAAA"}') == (
        "response.output_audio.delta"
    )
    assert not socket_reading("realtime").needed(
        b'{"type": "input_audio_buffer.append", "audio": "AAAA"}',
        "input_audio_buffer.append",
    )
    assert not socket_reading("realtime").needed(
        b'{"type":"response.output_audio.delta"}', "response.output_audio.delta"
    )
    assert not socket_reading("responses").needed(
        b'{"type":"response.output_text.delta"}', "response.output_text.delta"
    )
    image = b'{"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_image","image_url":"data:image/png;base64,AAAA'
    assert not socket_reading("realtime").needed(image, "conversation.item.create")
    output = b'{"type":"conversation.item.create","item":{"type":"function_call_output","call_id":"c","output":"x"}}'
    assert socket_reading("realtime").needed(output, "conversation.item.create")
    # The type not first: held, and the reader decides.
    assert leading_type(b'{"event_id":"e","type":"response.done"}') is None
    assert socket_reading("realtime").needed(b'{"event_id":"e","type":"response.done"}', None)


@settings(max_examples=200, deadline=None)
@given(
    api=st.sampled_from(["responses", "realtime"]),
    messages=st.lists(
        st.tuples(
            st.booleans(),
            st.one_of(
                st.binary(max_size=40),
                st.builds(
                    lambda kind, extra: frame({"type": kind, **extra}).encode(),
                    st.sampled_from(
                        [
                            "response.create",
                            "response.created",
                            "response.done",
                            "error",
                            "response.completed",
                            "response.output_item.done",
                            "session.update",
                            "conversation.item.create",
                            "session.updated",
                            "response.failed",
                        ]
                    ),
                    st.dictionaries(
                        st.sampled_from(
                            ["response", "item", "session", "stream_id", "status", "error"]
                        ),
                        st.one_of(
                            st.none(),
                            st.integers(),
                            st.text(max_size=5),
                            st.fixed_dictionaries({"id": st.text(max_size=3)}),
                        ),
                        max_size=3,
                    ),
                ),
            ),
        ),
        max_size=30,
    ),
)
def test_any_messages_in_any_order_are_read_without_raising(api, messages):
    read_to_the_close(socket_reader(api, REALTIME_URL, 4_096), messages)


@pytest.mark.parametrize("api", ["responses", "realtime"])
def test_messages_lost_in_flight_make_the_turn_skipped_not_misread(api):
    reader = socket_reader(api, REALTIME_URL, 8 << 20)
    if api == "realtime":
        created, updated = realtime_session([WEATHER])
        reader.feed(created.encode(), False)
        reader.feed(updated.encode(), False)
        events = realtime_turn("resp_lost00000001", [("call_l", "get_weather", "{}")])
    else:
        events = responses_turn("resp_lost", [call_item("fc_l", "call_l", "get_weather", "{}")])
    reader.feed(frame({"type": "response.create"}).encode(), True)
    for m in events[:2]:
        reader.feed(m.encode(), False)
    (turn,) = reader.lost()
    assert turn.skipped == "messages of this turn were not kept for inspection"
    assert reader.held == 0


def test_a_result_for_a_call_of_a_response_not_followed_is_not_an_orphan():
    reader = realtime_started()
    done_only = realtime_events("resp_unseen000001", [PARIS])[-1:]  # its start went unread
    messages = [
        *done_only,
        realtime_output("call_one"),
        (True, {"type": "response.create"}),
        *realtime_events("resp_after0000002"),
    ]
    turns, session = feed(reader, messages)
    (after,) = verdicts(turns, session)
    assert after.loop_errors == []


def test_an_error_about_cancelling_a_response_does_not_take_the_waiting_request():
    reader = realtime_started()
    not_active = {
        "type": "error",
        "event_id": "event_cancel",
        "error": {
            "type": "invalid_request_error",
            "code": "response_cancel_not_active",
            "message": "Cancellation failed: no active response found",
            "param": None,
            "event_id": None,
        },
    }
    messages = [
        (True, {"type": "response.create"}),
        (True, {"type": "response.cancel"}),
        (False, not_active),
        *realtime_events("resp_asked0000001", [PARIS]),
    ]
    turns, session = feed(reader, messages)
    _, answered = verdicts(turns, session)
    # The response answers the request that waited: its loop is checked (here: clean).
    assert answered.response_id == "resp_asked0000001"
    assert json.loads(answered.model_dump_json())["rejected"] is None
    assert turns[1].prior == {"(the session's start)": []}


def test_a_call_cut_off_by_a_cancelled_realtime_response_is_not_an_argument_error():
    reader = realtime_started()
    events = [json.loads(m) for m in realtime_turn("resp_cancel000001", [PARIS])]
    done = events[-1]
    done["response"]["status"] = "cancelled"
    done["response"]["output"][0] |= {"status": "incomplete", "arguments": '{"city": "Pa'}
    messages = [(True, {"type": "response.create"}), (False, events[0]), (False, done)]
    turns, session = feed(reader, messages)
    (verdict,) = verdicts(turns, session)
    assert verdict.calls == [] and verdict.finish_reasons == ["cancelled"]


# --- the readers' shared parts, and the bounds of what they read ------------------------------


def test_a_type_is_read_from_the_head_only_and_any_bytes_in_it_without_raising():
    assert leading_type(b" " * 300 + b'{"type":"response.done"}') is None
    assert leading_type(b'{"type":"r\xc3\xa9ponse.done"}') == "r\ufffd\ufffdponse.done"


def test_a_reading_wants_a_message_only_in_a_frame_that_can_hold_its_json():
    done = b'{"type":"response.done"}'
    assert socket_reading("realtime").wanted(done, True)
    assert not socket_reading("realtime").wanted(done, False)
    assert socket_reading("responses").wanted(b'{"type":"response.completed"}', True)


def test_the_events_a_turn_needs_are_held_and_its_end_hands_the_batch_over():
    responses, realtime = socket_reading("responses"), socket_reading("realtime")
    for kind in ("response.created", "response.completed", "error"):
        assert responses.needed(b"{}", kind)
    assert responses.needed(b"{}", None)  # the type not first: the reader decides
    for kind in ("response.completed", "response.incomplete", "response.failed", "error"):
        assert responses.ends_turn(b"{}", kind)
    assert not responses.ends_turn(b"{}", "response.output_item.done")
    for kind in ("session.updated", "response.create", "response.done", "error"):
        assert realtime.needed(b"{}", kind)
    assert realtime.ends_turn(b"{}", "response.done") and realtime.ends_turn(b"{}", "error")
    assert not realtime.ends_turn(b"{}", "response.output_item.done")


def test_a_refused_request_reads_as_the_json_error_the_same_request_gets_over_http():
    reader = socket_reader("responses", RESPONSES_URL, 8 << 20)
    create = frame({"type": "response.create", "model": "m", "input": "a"}).encode()
    refusal = responses_error(400, "invalid_value", "Invalid value.", "input").encode()
    turns = reader.feed(create, True, 100.0)
    turns += reader.feed(refusal, False, 100.25)
    (turn,) = turns
    exchange = turn.exchange
    assert (exchange.status, exchange.response_headers, exchange.response_body) == (
        400,
        {"content-type": "application/json"},
        refusal,
    )
    assert (exchange.request_body, exchange.request_start, exchange.response_end) == (
        create,
        100.0,
        100.25,
    )


def test_an_error_of_a_type_with_no_http_status_is_an_error_in_the_refused_requests_stream():
    reader = socket_reader("responses", RESPONSES_URL, 8 << 20)
    create = frame({"type": "response.create", "model": "m", "input": "a"}).encode()
    error = {"type": "error", "error": {"type": "overloaded", "message": "try later"}}
    turns = reader.feed(create, True, 100.0)
    turns += reader.feed(frame(error).encode(), False, 101.5)
    (turn,) = turns
    assert (turn.exchange.status, turn.exchange.request_body) == (200, create)
    assert (turn.exchange.request_start, turn.exchange.response_end) == (100.0, 101.5)
    (verdict,) = verdicts(turns)
    assert (verdict.rejected, verdict.outcome) == (None, "inspected")
    assert [(e.type, e.message) for e in verdict.stream_errors] == [("overloaded", "try later")]


def test_an_error_no_request_waits_for_is_refused_from_the_moment_it_came():
    reader = socket_reader("responses", RESPONSES_URL, 8 << 20)
    refusal = responses_error(429, "rate_limit_exceeded", "Slow down.").encode()
    (turn,) = reader.feed(refusal, False, 100.0)
    assert (turn.exchange.request_body, turn.exchange.request_start) == (b"{}", 100.0)
    (verdict,) = verdicts([turn])
    assert verdict.rejected is not None
    assert (verdict.rejected.status, verdict.rejected.type) == (429, "rate_limit_exceeded")


def test_an_error_inside_a_running_response_is_its_own_not_the_waiting_requests():
    reader = socket_reader("responses", RESPONSES_URL, 8 << 20)
    turns = reader.feed(frame({"type": "response.create", "input": "a"}).encode(), True)
    second = frame({"type": "response.create", "input": "b"}).encode()
    turns += reader.feed(second, True)
    events = responses_turn("resp_a", [text_item("msg_a", "partial")])
    for m in events[:3]:
        turns += reader.feed(m.encode(), False)
    error = {
        "type": "error",
        "sequence_number": 3,
        "error": {"type": "server_error", "message": "x"},
    }
    turns += reader.feed(frame(error).encode(), False)
    assert turns == [] and [c.request for c in reader.waiting[""]] == [second]
    # Closed there: the error ended the turn, as it ends an HTTP stream; it was not cut.
    (ended, never) = reader.close()
    assert (ended.cut, never.cut) == (False, True)
    assert [e.type for e in verdicts([ended])[0].stream_errors] == ["server_error"]


def test_junk_is_counted_each_time():
    reader = socket_reader("responses", RESPONSES_URL, 8 << 20)
    for _ in range(3):
        reader.feed(b"not json", True)
    assert reader.skipped == {"not_json": 3}


def test_requests_in_flight_when_messages_go_by_unread_are_counted_each_time():
    reader = socket_reader("responses", RESPONSES_URL, 8 << 20)
    for expected in (2, 4):
        for lane in ("x", "y"):
            create = {"type": "response.create", "stream_id": lane, "input": "hi"}
            reader.feed(frame(create).encode(), True)
        assert reader.lost() == [] and reader.skipped == {"lost": expected}


def test_after_messages_go_by_unread_the_first_response_on_a_lane_is_read_from_its_echo():
    reader = socket_reader("responses", RESPONSES_URL, 8 << 20)
    reader.lost()
    turns = reader.feed(frame({"type": "response.create", "input": "?"}).encode(), True)
    for m in responses_turn("resp_a", [text_item("msg_a", "ok")]):
        turns += reader.feed(m.encode(), False)
    (turn,) = turns
    assert turn.exchange.request_body == b"{}" and reader.skipped["joined_late"] == 1


def test_an_error_alone_is_not_a_lanes_first_response_after_joining_late():
    reader = socket_reader("responses", RESPONSES_URL, 8 << 20, late=True)
    reader.feed(responses_error(500, "server_error", "boom").encode(), False)
    turns = reader.feed(frame({"type": "response.create", "input": "?"}).encode(), True)
    for m in responses_turn("resp_a", [text_item("msg_a", "ok")]):
        turns += reader.feed(m.encode(), False)
    (turn,) = turns
    assert turn.exchange.request_body == b"{}" and reader.skipped == {"joined_late": 1}


# --- the Realtime socket: its close, its losses, its errors --------------------------------------


def test_a_realtime_close_cuts_the_running_turn_and_the_request_left_waiting_keeps_what_was_owed():
    reader = realtime_started()
    messages = [
        (True, {"type": "response.create"}),
        *realtime_events("resp_first0000001", [PARIS]),
        (True, {"type": "response.create"}),
        realtime_events("resp_second000001")[0],  # started, then the socket closes
        (True, {"type": "response.create", "response": {"conversation": "none"}}),
    ]
    feed(reader, messages)
    running, waiting, owed = reader.close()
    assert (running.cut, waiting.cut) == (True, True)
    assert waiting.prior is None  # out of band: it owes nothing and is owed nothing
    assert running.prior == {"resp_first0000001": ["call_one"]}
    assert owed.said is not None and loop(owed.said) == [
        ("unanswered-at-close", ["call_one"], "the socket's close, after resp_first0000001")
    ]


def test_a_realtime_request_cut_by_the_close_keeps_the_calls_owed_when_it_was_made():
    reader = realtime_started()
    messages = [
        (True, {"type": "response.create"}),
        *realtime_events("resp_first0000001", [PARIS]),
        (True, {"type": "response.create"}),
    ]
    feed(reader, messages)
    never, _ = reader.close()
    assert never.cut and never.prior == {"resp_first0000001": ["call_one"]}


def test_realtime_requests_in_flight_when_messages_go_by_unread_are_counted_each_time():
    reader = realtime_started()
    for expected in (1, 2):
        reader.feed(frame({"type": "response.create"}).encode(), True)
        assert reader.lost() == [] and reader.skipped == {"lost": expected}
    # What was held went with them: a request made now holds only itself.
    request = frame({"type": "response.create"}).encode()
    reader.feed(request, True)
    (waiting,) = reader.waiting
    assert reader.held == len(waiting.request)


def test_after_messages_go_by_unread_the_realtime_tools_are_unknown_until_the_session_says_them():
    reader = realtime_started()
    reader.lost()
    turns, _ = feed(
        reader, [(True, {"type": "response.create"}), *realtime_events("resp_after0000001")]
    )
    (turn,) = turns
    assert turn.skipped == "the session's tools were set before tooltap followed this socket"
    _, updated = realtime_session([WEATHER])
    reader.feed(updated.encode(), False)
    turns, _ = feed(
        reader, [(True, {"type": "response.create"}), *realtime_events("resp_after0000002")]
    )
    assert [t.skipped for t in turns] == [None]


def test_a_result_for_a_call_made_while_messages_went_by_unread_is_no_orphan():
    reader = realtime_started()
    reader.lost()
    _, updated = realtime_session([WEATHER])
    messages = [
        (False, updated.encode()),  # the tools said again
        realtime_output("call_unseen"),  # its call was among the messages unread
        (True, {"type": "response.create"}),
        *realtime_events("resp_after0000001"),
    ]
    turns, session = feed(reader, messages)
    (after,) = verdicts(turns, session)
    assert after.loop_errors == []


def test_a_call_owed_when_messages_went_by_unread_is_owed_nothing_after():
    reader = realtime_started()
    messages = [
        (True, {"type": "response.create"}),
        *realtime_events("resp_first0000001", [PARIS]),
    ]
    feed(reader, messages)
    reader.lost()  # its result may have been among them
    _, updated = realtime_session([WEATHER])
    messages = [
        (False, updated.encode()),  # the tools said again
        (True, {"type": "response.create"}),
        *realtime_events("resp_after0000001"),
        realtime_output("call_one"),  # late, or again: no orphan either way
        (True, {"type": "response.create"}),
        *realtime_events("resp_after0000002"),
    ]
    turns, session = feed(reader, messages)
    assert [v.loop_errors for v in verdicts(turns + reader.close(), session)] == [[], []]


def realtime_error(code, param=None, event_id=None, message="refused"):
    error = {"type": "invalid_request_error", "code": code, "message": message,
             "param": param, "event_id": event_id}  # fmt: skip
    return (False, {"type": "error", "event_id": "event_err", "error": error})


@pytest.mark.parametrize(
    ("code", "param"),
    [("conversation_already_has_active_response", None), ("invalid_value", "response.tools")],
)
def test_an_error_naming_no_event_that_refuses_a_new_response_refuses_the_oldest_request(
    code, param
):
    reader = realtime_started()
    second = {
        "type": "response.create",
        "event_id": "second",
        "response": {"tool_choice": "required"},
    }
    messages = [
        (True, {"type": "response.create", "event_id": "first"}),
        (True, second),
        realtime_error(code, param),
    ]
    turns, session = feed(reader, messages)
    (refused,) = verdicts(turns, session)
    assert refused.scope == "turn" and refused.rejected is not None
    assert (refused.rejected.status, refused.rejected.message) == (400, "refused")
    assert [c.event_id for c in reader.waiting] == ["second"]
    assert reader.held == len(reader.waiting[0].request)


def test_a_refused_realtime_request_keeps_the_calls_owed_when_it_was_made():
    reader = realtime_started()
    messages = [
        (True, {"type": "response.create"}),
        *realtime_events("resp_first0000001", [PARIS]),
        (True, {"type": "response.create", "event_id": "again"}),
    ]
    feed(reader, messages)
    for kind in ("invalid_request_error", "unknown_error"):  # a 400, and an error in its stream
        reader.feed(frame({"type": "response.create", "event_id": "again"}).encode(), True)
        error = {"type": kind, "code": "x", "message": "no", "event_id": "again"}
        (refused,) = reader.feed(frame({"type": "error", "error": error}).encode(), False)
        assert refused.prior == {"resp_first0000001": ["call_one"]}


def test_a_refused_tool_result_is_timed_from_the_refusal_and_reads_the_sessions_settings():
    reader = realtime_started()
    output = {"type": "function_call_output", "call_id": "call_nowhere", "output": "x"}
    reader.feed(frame({"type": "conversation.item.create", "event_id": "out_1",
                       "item": output}).encode(), True, 100.0)  # fmt: skip
    error = {"type": "invalid_request_error", "code": "invalid_value", "message": "no",
             "event_id": "out_1"}  # fmt: skip
    (refused,) = reader.feed(frame({"type": "error", "error": error}).encode(), False, 100.5)
    assert refused.exchange.request_start == 100.5
    assert json.loads(refused.exchange.request_body)["tools"] == [WEATHER]


def test_a_session_error_says_its_code_in_its_reason():
    reader = realtime_started()
    turns, session = feed(reader, [realtime_error("input_audio_buffer_commit_empty")])
    (said,) = verdicts(turns, session)
    assert said.reason == (
        "the session sent an error that refused no request: input_audio_buffer_commit_empty"
    )


def test_a_call_the_client_wrote_itself_may_be_answered_without_being_owed():
    reader = realtime_started()
    replayed = {"type": "function_call", "call_id": "call_old", "name": "get_weather",
                "arguments": "{}"}  # fmt: skip
    messages = [
        (True, {"type": "conversation.item.create", "item": replayed}),
        realtime_output("call_old"),
        (True, {"type": "response.create"}),
        *realtime_events("resp_after0000001"),
    ]
    turns, session = feed(reader, messages)
    (after,) = verdicts(turns, session)
    assert after.loop_errors == [] and [r.call_id for r in after.tool_results] == []


def test_results_past_the_byte_bound_are_counted_and_the_next_request_calls_none_an_orphan():
    output = frame(realtime_output("call_ghost")[1]).encode()
    reader = socket_reader("realtime", REALTIME_URL, 2 * len(output))
    _, updated = realtime_session([WEATHER])
    reader.feed(updated.encode(), False)
    for count in (0, 0, 1, 2):  # two fit the bound exactly; each past it is counted
        reader.feed(output, True)
        assert reader.skipped["too_many_items"] == count
    reader.feed(frame({"type": "response.create"}).encode(), True)
    (waiting,) = reader.waiting
    assert waiting.prior == {}  # results went uncounted: none can be called an orphan


def test_a_response_with_its_own_input_or_out_of_band_owes_nothing_and_is_owed_nothing():
    for params in ({"input": []}, {"conversation": "none"}):
        reader = realtime_started()
        messages = [
            (True, {"type": "response.create", "response": params}),
            *realtime_events("resp_aside0000001", [PARIS]),
        ]
        turns, _ = feed(reader, messages)
        (turn,) = turns
        assert turn.prior is None
        assert reader.close() == []  # its call is owed nothing at the close


def test_a_response_that_did_not_complete_in_the_conversation_owes_nothing():
    reader = realtime_started()
    events = [json.loads(m) for m in realtime_turn("resp_failed000001", [PARIS])]
    events[-1]["response"]["status"] = "failed"
    feed(reader, [(True, {"type": "response.create"}), *((False, e) for e in events)])
    assert reader.close() == []


def test_realtime_requests_waiting_past_the_bound_are_counted_and_let_go():
    reader = realtime_started()
    for _ in range(MAX_WAITING + 2):
        reader.feed(frame({"type": "response.create"}).encode(), True)
    assert len(reader.waiting) == MAX_WAITING
    assert reader.skipped == {"too_many_waiting": 2}
    assert reader.held == sum(len(c.request) for c in reader.waiting)


def test_past_64_realtime_responses_running_a_new_one_is_skipped():
    reader = realtime_started()
    for n in range(MAX_LANES + 2):
        reader.feed(
            frame({"type": "response.created", "response": {"id": f"resp_{n}"}}).encode(), False
        )
    assert len(reader.turns) == MAX_LANES
    assert reader.skipped == {"too_many_lanes": 2}


def test_two_realtime_responses_running_hold_both_their_requests():
    reader = realtime_started()
    conversation = realtime_events("resp_conv00000001", [PARIS])
    out_of_band = realtime_events("resp_oob000000001")
    oob = {"type": "response.create", "response": {"conversation": "none"}}
    feed(reader, [(True, {"type": "response.create"}), (True, oob)])
    requests = sum(len(c.request) for c in reader.waiting)
    feed(reader, [conversation[0], out_of_band[0]])
    assert reader.held == requests + len(conversation[0][1]) + len(out_of_band[0][1])


def test_a_realtime_turn_is_timed_from_its_request_or_from_its_first_event():
    reader = realtime_started()
    reader.feed(frame({"type": "response.create"}).encode(), True, 100.0)
    asked = []
    for at, m in zip((101.0, 102.0), realtime_turn("resp_asked0000001", []), strict=True):
        asked += reader.feed(m.encode(), False, at)
    voiced = []  # started by the server (voice activity): no request
    for at, m in zip((200.0, 201.0), realtime_turn("resp_voice0000001", []), strict=True):
        voiced += reader.feed(m.encode(), False, at)
    assert [t.exchange.request_start for t in asked + voiced] == [100.0, 200.0]
    assert json.loads(voiced[0].exchange.request_body)["tools"] == [WEATHER]


def test_a_realtime_close_owing_calls_says_why_and_after_which_response():
    reader = realtime_started()
    feed(
        reader,
        [(True, {"type": "response.create"}), *realtime_events("resp_hang00000001", [PARIS])],
    )
    (said,) = reader.close()
    assert said.said.reason == "calls still owed at the close"
    # A result written but never sent with a request still answers its call.
    reader = realtime_started()
    feed(reader, [(True, {"type": "response.create"}), *realtime_events("resp_hang00000001", [PARIS]),
                  realtime_output("call_one")])  # fmt: skip
    assert reader.close() == []


def test_a_table_of_ids_keeps_the_newest_up_to_its_bound():
    table: OrderedDict[str, None] = OrderedDict()
    for n in range(MAX_OPEN):
        remember(table, f"call_{n}")
    assert len(table) == MAX_OPEN and next(iter(table)) == "call_0"
    remember(table, "call_0")  # again: newest now
    remember(table, "call_new")
    assert len(table) == MAX_OPEN
    assert ("call_1" in table, "call_0" in table, "call_new" in table) == (False, True, True)


def test_a_session_finding_is_the_sockets_own():
    reader = realtime_started()
    turns, _ = feed(reader, [realtime_error("input_audio_buffer_commit_empty")])
    (said,) = verdicts(turns)
    assert (said.api, said.transport, said.scope) == ("realtime", "websocket", "session")


def test_frames_end_where_each_events_sse_ends():
    body, ends = framed([b'{"a":1}', b"", b"x\ny"])
    assert body == b'data: {"a":1}\n\ndata: \n\ndata: x\ndata: y\n\n'
    assert ends == [15, 23, len(body)]
    assert sse([b""]) == b"data: \n\n"


def test_a_turn_at_the_byte_bound_exactly_is_kept_and_each_past_it_counted():
    events = [m.encode() for m in responses_turn("resp_a", [text_item("msg_a", "ok")])]
    size = sum(len(m) for m in events)
    for bound, skipped in ((size, {}), (size - 1, {"turn_too_large": 2})):
        reader = socket_reader("responses", RESPONSES_URL, bound)
        for _ in range(2):
            reader.feed(frame({"type": "response.create", "input": "a"}).encode(), True)
            turns = [t for m in events for t in reader.feed(m, False)]
            assert [t.skipped is None for t in turns] == [not skipped]
        assert reader.skipped == skipped


def test_a_turn_cut_by_the_close_ends_at_its_last_event_and_its_request_was_sent_when_asked():
    reader = socket_reader("responses", RESPONSES_URL, 8 << 20)
    reader.feed(frame({"type": "response.create", "input": "a"}).encode(), True, 100.0)
    reader.feed(responses_turn("resp_a", [])[0].encode(), False, 101.0)
    reader.feed(frame({"type": "response.create", "input": "b"}).encode(), True, 150.0)
    cut, _ = reader.close()
    assert (cut.exchange.request_start, cut.exchange.request_end) == (100.0, 100.0)
    assert cut.exchange.response_end == 101.0


def test_a_new_response_on_a_lane_ends_the_one_left_open_there():
    reader = socket_reader("responses", RESPONSES_URL, 8 << 20)
    turns = reader.feed(frame({"type": "response.create", "input": "a"}).encode(), True)
    turns += reader.feed(responses_turn("resp_a", [])[0].encode(), False)  # no final event
    turns += reader.feed(frame({"type": "response.create", "input": "b"}).encode(), True)
    for m in responses_turn("resp_b", [text_item("msg_b", "ok")]):
        turns += reader.feed(m.encode(), False)
    left_open, answered = verdicts(turns)
    assert left_open.reason == "the turn ended before its final event"
    assert (answered.response_id, answered.reason) == ("resp_b", None)


def test_an_automatic_successor_is_not_matched_to_a_request_that_names_another_response():
    reader = socket_reader("responses", RESPONSES_URL, 8 << 20)
    create = {"type": "response.create", "previous_response_id": "resp_1", "input": "x"}
    reader.feed(frame(create).encode(), True)
    turns = [
        t for m in responses_turn("resp_auto", [], "resp_0") for t in reader.feed(m.encode(), False)
    ]
    (turn,) = turns
    assert turn.exchange.request_body == b"{}" and len(reader.waiting[""]) == 1


def test_a_request_past_the_byte_bound_still_names_the_response_it_continues():
    reader = socket_reader("responses", RESPONSES_URL, 20_000)
    create = {"type": "response.create", "previous_response_id": "resp_0", "input": "x" * 30_000}
    reader.feed(frame(create).encode(), True)
    assert reader.held == 2  # its place in the line, not its bytes
    turns = [
        t for m in responses_turn("resp_1", [], "resp_0") for t in reader.feed(m.encode(), False)
    ]
    (turn,) = turns
    assert turn.skipped == "the request passed tooltap_max_body"


def test_two_lanes_running_hold_both_their_requests():
    reader = socket_reader("responses", RESPONSES_URL, 8 << 20)
    sizes = 0
    for lane in ("x", "y"):
        create = frame({"type": "response.create", "stream_id": lane, "input": lane}).encode()
        started = responses_turn(f"resp_{lane}", [], stream_id=lane)[0].encode()
        reader.feed(create, True)
        reader.feed(started, False)
        sizes += len(create) + len(started)
    assert reader.held == sizes


def test_json_that_is_no_object_is_counted_as_junk():
    for api in ("responses", "realtime"):
        reader = socket_reader(api, REALTIME_URL, 8 << 20)
        assert reader.feed(b"[1]", True) + reader.feed(b'"x"', False) == []
        assert reader.skipped == {"not_json": 2}


def test_a_realtime_session_update_sets_the_tools_without_its_echo():
    reader = socket_reader("realtime", REALTIME_URL, 8 << 20, late=True)
    update = {"type": "session.update", "session": {"type": "realtime", "tools": [WEATHER]}}
    messages = [
        (True, update),
        (True, {"type": "response.create"}),
        *realtime_events("resp_upd000000001"),
    ]
    (turn,), _ = feed(reader, messages)
    assert turn.skipped is None
    assert json.loads(turn.exchange.request_body) | {"input": []} == {
        "model": "gpt-realtime", "tools": [WEATHER], "previous_response_id": "(the session's start)",
        "input": [],
    }  # fmt: skip


def test_a_realtime_session_echo_says_the_whole_session_tools_or_none():
    created, _ = realtime_session([WEATHER])
    for echo in (json.loads(created), {"type": "session.updated", "session": {"model": "m"}}):
        reader = socket_reader("realtime", "wss://api.openai.com/v1/realtime", 8 << 20, late=True)
        messages = [
            (False, echo),
            (True, {"type": "response.create"}),
            *realtime_events("resp_echo00000001"),
        ]
        (turn,), _ = feed(reader, messages)
        assert turn.skipped is None


def test_a_realtime_session_with_no_settings_seen_reads_the_model_from_its_address():
    reader = socket_reader("realtime", REALTIME_URL, 8 << 20)
    messages = [(True, {"type": "response.create"}), *realtime_events("resp_bare00000001")]
    (turn,), _ = feed(reader, messages)
    assert (
        turn.skipped is None and json.loads(turn.exchange.request_body)["model"] == "gpt-realtime"
    )


def test_an_error_naming_an_item_that_is_no_tool_result_is_the_sessions():
    reader = realtime_started()
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    messages = [
        (True, {"type": "conversation.item.create", "event_id": "msg_1", "item": item}),
        realtime_error("invalid_value", "item.content", event_id="msg_1"),
    ]
    turns, session = feed(reader, messages)
    (said,) = verdicts(turns, session)
    assert (said.scope, said.rejected) == ("session", None)


def test_each_realtime_event_goes_to_the_response_it_names():
    reader = realtime_started()
    conversation = realtime_events("resp_conv00000001", [PARIS])
    out_of_band = realtime_events("resp_oob000000001", [("call_oob", "get_weather", "{}")])
    oob = {"type": "response.create", "response": {"conversation": "none"}}
    messages = [(True, {"type": "response.create"}), (True, oob)]
    messages += [m for pair in zip(conversation, out_of_band, strict=False) for m in pair]
    messages += conversation[len(out_of_band) :]  # interleaved, then the longer one's rest
    turns, _ = feed(reader, messages)
    assert sorted(t.exchange.response_body.count(b"data: ") for t in turns) == [
        len(out_of_band), len(conversation)
    ]  # fmt: skip


def test_a_call_of_a_response_not_followed_is_owed_nothing_at_the_close():
    reader = realtime_started()
    feed(reader, realtime_events("resp_unseen000001", [PARIS])[-1:])  # its start went unread
    assert reader.close() == []


def test_a_result_sent_again_for_a_call_already_answered_is_not_read_again():
    reader = realtime_started()
    messages = [
        (True, {"type": "response.create"}),
        *realtime_events("resp_first0000001", [PARIS]),
        realtime_output("call_one"),
        (True, {"type": "response.create"}),
        *realtime_events("resp_second000001"),
        realtime_output("call_one"),  # again
        (True, {"type": "response.create"}),
        *realtime_events("resp_third0000001"),
    ]
    turns, session = feed(reader, messages)
    assert [loop(v) for v in verdicts(turns, session)] == [[], [], []]


def test_a_socket_turn_is_the_post_and_sse_stream_the_same_request_makes_over_http():
    reader = socket_reader("responses", RESPONSES_URL, 8 << 20)
    turns = reader.feed(frame({"type": "response.create", "input": "a"}).encode(), True)
    for m in responses_turn("resp_a", []):
        turns += reader.feed(m.encode(), False)
    (turn,) = turns
    exchange = turn.exchange
    assert (exchange.method, exchange.url, exchange.status) == ("POST", RESPONSES_URL, 200)
    assert exchange.response_headers == {"content-type": "text/event-stream"}
    assert (exchange.api, exchange.transport, turn.cut) == ("responses", "websocket", False)


def test_a_responses_socket_owes_only_a_completed_responses_client_calls():
    custom = {"type": "custom_tool_call", "call_id": "call_c", "name": "run", "input": "ls"}
    call = {"type": "function_call", "call_id": "call_f", "name": "f", "arguments": "{}"}
    for status, owed in (("completed", {"call_c", "call_f"}), ("incomplete", set())):
        reader = socket_reader("responses", RESPONSES_URL, 8 << 20)
        response = {"id": "resp_1", "status": "in_progress", "output": []}
        final = response | {"status": status, "output": [custom, call]}
        for message, from_client in (
            ({"type": "response.create", "input": "hi"}, True),
            ({"type": "response.created", "response": response}, False),
            ({"type": f"response.{status}", "response": final}, False),
        ):
            reader.feed(frame(message).encode(), from_client, 100.0)
        assert set(reader.owed_calls()) == owed


def test_a_socket_remembers_the_newest_calls_owed_up_to_its_bound():
    calls = [{"type": "function_call", "call_id": f"call_{n}", "name": "f", "arguments": "{}"}
             for n in range(MAX_OPEN + 1)]  # fmt: skip
    reader = socket_reader("responses", RESPONSES_URL, 64 << 20)
    response = {"id": "resp_1", "status": "in_progress", "output": []}
    for message, from_client in (
        ({"type": "response.create", "input": "hi"}, True),
        ({"type": "response.created", "response": response}, False),
        ({"type": "response.completed", "response": response | {"status": "completed", "output": calls}}, False),
    ):  # fmt: skip
        reader.feed(frame(message).encode(), from_client, 100.0)
    owed = reader.owed_calls()
    assert len(owed) == MAX_OPEN and "call_0" not in owed and f"call_{MAX_OPEN}" in owed


def test_a_realtime_session_remembers_the_newest_calls_owed_up_to_its_bound():
    reader = realtime_started()
    calls = [{"type": "function_call", "call_id": f"call_{n}", "name": "get_weather",
              "arguments": "{}", "status": "completed"} for n in range(MAX_OPEN + 1)]  # fmt: skip
    response = {"id": "resp_many", "status": "in_progress", "output": []}
    for message, from_client in (
        ({"type": "response.create"}, True),
        ({"type": "response.created", "response": response}, False),
        ({"type": "response.done", "response": response | {"status": "completed", "output": calls}}, False),
    ):  # fmt: skip
        reader.feed(frame(message).encode(), from_client, 100.0)
    owed = reader.owed_calls()
    assert len(owed) == MAX_OPEN and "call_0" not in owed and f"call_{MAX_OPEN}" in owed
    # One was forgotten while owed: its result could look like an orphan, so none is called one.
    reader.feed(frame({"type": "response.create"}).encode(), True)
    (waiting,) = reader.waiting
    assert waiting.prior == {}


def test_a_result_for_a_call_never_made_written_before_the_close_raises_nothing_there():
    reader = realtime_started()
    feed(reader, [realtime_output("call_ghost")])
    assert reader.close() == [] and reader.held == 0


def test_a_realtime_session_update_without_tools_leaves_them_unknown_after_joining_late():
    reader = socket_reader("realtime", REALTIME_URL, 8 << 20, late=True)
    update = {
        "type": "session.update",
        "session": {"type": "realtime", "instructions": "Be brief."},
    }
    messages = [
        (True, update),
        (True, {"type": "response.create"}),
        *realtime_events("resp_late00000001"),
    ]
    (turn,), _ = feed(reader, messages)
    assert turn.skipped == "the session's tools were set before tooltap followed this socket"


def test_a_clients_junk_is_counted_and_never_read_into_the_running_turn():
    reader = socket_reader("responses", RESPONSES_URL, 8 << 20)
    turns = reader.feed(frame({"type": "response.create", "input": "a"}).encode(), True)
    events = responses_turn("resp_a", [text_item("msg_a", "ok")])
    turns += reader.feed(events[0].encode(), False)
    turns += reader.feed(b"\x00garbage{", True)
    for m in events[1:]:
        turns += reader.feed(m.encode(), False)
    assert reader.skipped == {"not_json": 1}
    (verdict,) = verdicts(turns)
    assert verdict.stream_errors == []


def test_a_response_on_a_lane_no_request_waits_on_after_joining_late_is_read_from_its_echo():
    reader = socket_reader("responses", RESPONSES_URL, 8 << 20, late=True)
    turns = [t for m in responses_turn("resp_a", []) for t in reader.feed(m.encode(), False)]
    (turn,) = turns
    assert turn.exchange.request_body == b"{}" and not reader.skipped


def test_requests_let_go_past_the_waiting_bound_are_no_longer_held():
    reader = socket_reader("responses", RESPONSES_URL, 8 << 20)
    for n in range(MAX_WAITING + 2):
        reader.feed(frame({"type": "response.create", "input": "x" * n}).encode(), True)
    assert reader.held == sum(len(c.request) for q in reader.waiting.values() for c in q)
