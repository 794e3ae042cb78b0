"""AWS's event stream, read as Bedrock sends it: any split of the bytes gives the same turn, and a
broken frame is a malformed event, never a crash."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tooltap.addon.harness.eventstream import chunk, frame
from tooltap.core import Exchange, StreamReader, inspect
from tooltap.core.eventstream import EventStreamDecoder, looks_like_eventstream

EVENTSTREAM = {"content-type": "application/vnd.amazon.eventstream"}


def bedrock_exchange(path: str, body: bytes, request: dict | None = None) -> Exchange:
    return Exchange(
        method="POST",
        url=f"https://bedrock-runtime.us-east-1.amazonaws.com/model/{path}",
        request_body=json.dumps(request or {"messages": []}).encode(),
        status=200,
        response_headers=EVENTSTREAM,
        response_body=body,
    )


CLAUDE = "us.anthropic.claude-sonnet-4-5-20250929-v1%3A0"


MESSAGES = [
    {"type": "message_start", "message": {"id": "msg_bdrk_1", "model": "claude-sonnet-4-5",
                                          "role": "assistant", "content": []}},
    {"type": "content_block_start", "index": 0,
     "content_block": {"type": "tool_use", "id": "toolu_bdrk_1", "name": "get_weather", "input": {}}},
    {"type": "content_block_delta", "index": 0,
     "delta": {"type": "input_json_delta", "partial_json": '{"city": "Par'}},
    {"type": "content_block_delta", "index": 0,
     "delta": {"type": "input_json_delta", "partial_json": 'is"}'}},
    {"type": "content_block_stop", "index": 0},
    {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
    {"type": "message_stop", "amazon-bedrock-invocationMetrics": {"inputTokenCount": 20}},
]  # fmt: skip
STREAM = b"".join(chunk(event) for event in MESSAGES)


def test_an_invoke_stream_is_read_as_the_messages_events_its_chunks_carry():
    verdict = inspect(bedrock_exchange(f"{CLAUDE}/invoke-with-response-stream", STREAM))
    assert (verdict.api, verdict.outcome, verdict.reason, verdict.stream) == (
        "messages",
        "inspected",
        None,
        True,
    )
    assert [(c.call_id, c.name, c.arguments_raw) for c in verdict.calls] == [
        ("toolu_bdrk_1", "get_weather", '{"city":"Paris"}')
    ]
    # The body names no model; the path does.
    assert verdict.request_model == "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    assert verdict.finish_reasons == ["tool_use"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, len(STREAM)), max_size=12))
def test_any_split_of_the_bytes_gives_the_same_turn(cuts):
    whole = StreamReader("messages", framing="eventstream")
    whole.feed(STREAM)
    pieces = StreamReader("messages", framing="eventstream")
    bounds = [0, *sorted(cuts), len(STREAM)]
    for start, end in itertools.pairwise(bounds):
        pieces.feed(STREAM[start:end])
    assert pieces.close() == whole.close()


@pytest.mark.parametrize("at", [0, 5, 9, 20, 60])
def test_a_flipped_byte_in_the_first_frame_stops_the_reading_and_says_so(at):
    body = bytearray(STREAM)
    body[at] ^= 0x01  # in the prelude, its CRC, a header or the payload: a CRC no longer holds
    verdict = inspect(bedrock_exchange(f"{CLAUDE}/invoke-with-response-stream", bytes(body)))
    assert (verdict.outcome, verdict.reason) == ("unparseable", "stream carried no JSON events")


def test_a_flipped_byte_in_a_later_frame_is_a_malformed_event_and_the_rest_is_kept():
    body = bytearray(STREAM)
    body[-3] ^= 0x01  # the last frame's CRC
    verdict = inspect(bedrock_exchange(f"{CLAUDE}/invoke-with-response-stream", bytes(body)))
    assert verdict.outcome == "inspected"
    assert [c.call_id for c in verdict.calls] == ["toolu_bdrk_1"]
    assert [e.type for e in verdict.stream_errors] == ["malformed_event"]
    assert verdict.reason == (
        "the stream ended before its final event; "
        "1 stream event(s) could not be read and were dropped"
    )


def test_a_frame_cut_short_is_a_stream_cut_short():
    verdict = inspect(bedrock_exchange(f"{CLAUDE}/invoke-with-response-stream", STREAM[:-7]))
    assert verdict.reason == "the stream ended before its final event"
    assert verdict.stream_errors == []
    decoder = EventStreamDecoder()
    decoder.feed(STREAM[:-7])
    assert decoder.close() == len(chunk(MESSAGES[-1])) - 7


def test_an_exception_message_is_a_stream_error_with_its_type():
    throttled = frame(
        "throttlingException",
        b'{"message":"Too many requests, please wait before trying again."}',
        message_type="exception",
        **{":exception-type": "throttlingException"},
    )
    verdict = inspect(
        bedrock_exchange(
            f"{CLAUDE}/invoke-with-response-stream", b"".join(map(chunk, MESSAGES[:3])) + throttled
        )
    )
    assert [(e.type, e.message) for e in verdict.stream_errors] == [
        ("throttlingException", "Too many requests, please wait before trying again.")
    ]


def test_a_recording_without_its_content_type_is_known_by_its_prelude():
    assert looks_like_eventstream(STREAM)
    assert not looks_like_eventstream(b'{"output": {}}') and not looks_like_eventstream(b"")
    untyped = bedrock_exchange(f"{CLAUDE}/invoke-with-response-stream", STREAM).model_copy(
        update={"response_headers": {}}
    )
    assert [c.call_id for c in inspect(untyped).calls] == ["toolu_bdrk_1"]
