"""Streams: every SSE capture reassembled by value, under any chunking and any content-encoding."""

import gzip
import json
import re
import zlib

import brotli
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from support.captures import SSE, URLS, pairs, stream_bytes, stream_exchange, text

from tooltap.core import Exchange, StreamReader, inspect
from tooltap.core.assembly import Blocks
from tooltap.core.encoding import DecodeError, Decoder, decode
from tooltap.core.sse import Event, SSEDecoder
from tooltap.core.stream import ApiError

# (capture, api, model, calls, complete)
CAPTURES = [
    (
        "chat_stream_parallel_tool_calls_with_usage.sse",
        "chat",
        "gpt-4o-2024-08-06",
        [
            (
                "call_JMW1whyEaYG438VE1OIflxA2",
                "GetWeatherArgs",
                '{"city": "Edinburgh", "country": "GB", "units": "c"}',
            ),
            (
                "call_DNYTawLBoN8fj3KN6qU9N1Ou",
                "get_stock_price",
                '{"ticker": "AAPL", "exchange": "NASDAQ"}',
            ),
        ],
        True,
    ),
    (
        "chat_stream_single_tool_call.sse",
        "chat",
        "gpt-4o-2024-08-06",
        [("call_4XzlGBLtUe9dy3GVNV4jhq7h", "get_weather", '{"city":"New York City"}')],
        True,
    ),
    (
        "chat_stream_strict_tool_call.sse",
        "chat",
        "gpt-4o-2024-08-06",
        [("call_CTf1nWJLqSeRgDqaCG27xZ74", "get_weather", '{"city":"San Francisco","state":"CA"}')],
        True,
    ),
    # Azure: a leading chunk with empty id and model, and an excerpt without [DONE]
    # (whole: its one choice reached its finish_reason).
    (
        "azure_chat_stream_tool_call_excerpt.sse",
        "chat",
        "gpt-5.2-chat-2025-12-11",
        [("call_uLWyKTpLtOsRmTudAFNQ2Vwv", "getMyIp", "{}")],
        True,
    ),
    ("openapi_chat_streaming_text.txt", "chat", "gpt-4o-mini", [], True),
    (
        "anthropic_stream_text_then_tool_use.sse",
        "messages",
        "claude-sonnet-4-20250514",
        [("toolu_01NRLabsLyVHZPKxbKvkfSMn", "get_weather", '{"location":"Paris"}')],
        True,
    ),
    (
        "anthropic_stream_tool_use_no_args.jsonl",
        "messages",
        "claude-sonnet-4-5-20250929",
        [("toolu_01QE1WLsSVp5hy5Q3GmGTmjP", "updateIssueList", "{}")],
        True,
    ),
    # A call made from code execution: its whole input in content_block_start, no delta.
    (
        "anthropic_stream_programmatic_tool_call.jsonl",
        "messages",
        "claude-sonnet-4-5-20250929",
        [("toolu_019jKkXz4jAdwHweHBw92CVY", "rollDie", '{"player":"player1"}')],
        True,
    ),
    # ... or in message_start's content, with no content block event at all.
    (
        "anthropic_stream_programmatic_tool_call_in_message_start.jsonl",
        "messages",
        "claude-sonnet-4-5-20250929",
        [("toolu_015dGLMbwBKv1ZRQr6KdJzeH", "rollDie", '{"player":"player2"}')],
        True,
    ),
    (
        "azure_responses_stream_function_call.jsonl",
        "responses",
        "gpt-5.1",
        [("call_H5DxLSFnsGhiROnUiDHmgyc8", "weather", '{"location":"San Francisco"}')],
        True,
    ),
    ("openapi_responses_streaming_text.sse", "responses", "gpt-5.4", [], True),
    (
        "responses_stream_custom_tool_call_SYNTHETIC.jsonl",
        "responses",
        "gpt-5.2-codex",
        [("call_custom_sql_001", "write_sql", "SELECT * FROM users WHERE age > 25")],
        True,
    ),
    (
        "responses_stream_function_call_gpt51.jsonl",
        "responses",
        "gpt-5.1-2025-11-13",
        [("call_2FQdm3Br7Qb35YUBSkDR7kue", "get_weather", '{"city":"Beijing"}')],
        True,
    ),
]


def calls(verdict):
    return [(c.call_id, c.name, c.arguments_raw) for c in verdict.calls]


def reassemble(api, wire, pieces=None, encoding=None):
    reader = StreamReader(api, encoding)
    for piece in pieces if pieces is not None else [wire]:
        reader.feed(piece)
    return reader.close()


@pytest.mark.parametrize(("name", "api", "model", "expected", "complete"), CAPTURES)
def test_every_sse_capture_gives_its_calls_by_value(name, api, model, expected, complete):
    verdict = inspect(stream_exchange(name, api))
    assert (verdict.api, verdict.outcome, verdict.stream, verdict.model) == (
        api,
        "inspected",
        True,
        model,
    )
    assert calls(verdict) == expected
    assert ("ended before its final event" in (verdict.reason or "")) is not complete


@pytest.mark.parametrize(("name", "api", "model", "expected", "complete"), CAPTURES)
def test_one_piece_byte_by_byte_and_gzip_give_the_same_response(
    name, api, model, expected, complete
):
    wire = stream_bytes(name)
    whole = reassemble(api, wire)
    assert (
        reassemble(api, wire, [wire[i : i + 1] for i in range(len(wire))]).response
        == whole.response
    )
    zipped = gzip.compress(wire)
    pieces = [zipped[i : i + 5] for i in range(0, len(zipped), 5)]
    assert reassemble(api, wire, pieces, "gzip").response == whole.response
    assert whole.complete is complete


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(CAPTURES), st.data())
def test_any_split_of_any_capture_gives_the_same_response(capture, data):
    name, api = capture[0], capture[1]
    wire = stream_bytes(name)
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(wire) - 1)), max_size=40)))
    pieces = [wire[a:b] for a, b in zip([0, *cuts], [*cuts, len(wire)], strict=True)]
    assert reassemble(api, wire, pieces).response == reassemble(api, wire).response


def test_the_four_reasoning_streams_each_end_with_their_own_call():
    lines = [
        line
        for line in text("responses_stream_reasoning_then_function_call_4turns.jsonl").splitlines()
        if line
    ]
    starts = [i for i, line in enumerate(lines) if json.loads(line)["type"] == "response.created"]
    found = []
    for a, b in zip(starts, [*starts[1:], len(lines)], strict=True):
        wire = "".join(f"data: {line}\n\n" for line in lines[a:b]).encode()
        verdict = inspect(
            Exchange(
                method="POST",
                url=URLS["responses"],
                request_body=b"{}",
                status=200,
                response_headers=SSE,
                response_body=wire,
            )
        )
        found.append((verdict.output_types, calls(verdict)))
    assert found == [
        (
            ["reasoning", "function_call"],
            [("call_AB6AaRZ1FYZB2RwS6A5vbdqn", "calculator", '{"a":12,"b":7,"op":"add"}')],
        ),
        (
            ["function_call"],
            [("call_Q6pW65MUgW9vF59BmItYGos3", "calculator", '{"a":19,"b":3,"op":"multiply"}')],
        ),
        (
            ["function_call"],
            [("call_Zl5vIMnD7dVAjgU6FkhmiCZh", "calculator", '{"a":57,"b":10,"op":"multiply"}')],
        ),
        (["message"], []),
    ]


def test_a_stream_cut_by_max_tokens_keeps_the_partial_text_and_reports_a_parse_error():
    verdict = inspect(
        stream_exchange("anthropic_stream_tool_use_max_tokens_incomplete_json.sse", "messages")
    )
    (call,) = verdict.calls
    assert (call.call_id, call.name) == ("toolu_01EKqbqmZrGRXy18eN7m9kvY", "make_file")
    assert call.arguments_raw.startswith('{"filename": "taxes.txt", "lines_of_text": [')
    assert call.parse_error.type == "JSONDecodeError"
    assert call.parse_error.position == len(call.arguments_raw.encode())


def test_a_responses_stream_cut_before_completed_is_rebuilt_from_items_and_deltas():
    lines = [
        line for line in text("responses_stream_function_call_gpt51.jsonl").splitlines() if line
    ]
    kinds = [json.loads(line)["type"] for line in lines]
    for last, expected in (
        (
            kinds.index("response.function_call_arguments.done") - 2,
            '{"city":"Beijing',
        ),  # deltas only
        (
            kinds.index("response.function_call_arguments.done"),
            '{"city":"Beijing"}',
        ),  # done has no name
    ):
        wire = "".join(f"data: {line}\n\n" for line in lines[: last + 1]).encode()
        verdict = inspect(
            Exchange(
                method="POST",
                url=URLS["responses"],
                request_body=b"{}",
                status=200,
                response_headers=SSE,
                response_body=wire,
            )
        )
        assert calls(verdict) == [("call_2FQdm3Br7Qb35YUBSkDR7kue", "get_weather", expected)]
        assert verdict.reason == "the stream ended before its final event"


def test_both_shapes_of_the_responses_error_event_are_recorded():
    nested = inspect(
        stream_exchange("responses_stream_error_nested_then_failed.jsonl", "responses")
    )
    assert nested.stream_errors[0].type == "insufficient_quota"
    assert nested.stream_errors[0].message.startswith("You exceeded your current quota")
    flat = b'data: {"type":"error","code":"server_error","message":"boom","param":null,"sequence_number":1}\n\n'
    verdict = inspect(
        Exchange(
            method="POST",
            url=URLS["responses"],
            request_body=b"{}",
            status=200,
            response_headers=SSE,
            response_body=flat,
        )
    )
    assert reassemble("responses", flat).errors == [ApiError(type="server_error", message="boom")]
    assert verdict.outcome == "inspected"


def chunk(**delta):
    return {
        "id": "c1",
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
    }


def sse(*events):
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)


def test_chat_tool_calls_accumulate_by_index_never_by_id():
    wire = (
        sse(
            chunk(
                tool_calls=[
                    {
                        "index": 0,
                        "id": "first-id",
                        "type": "function",
                        "function": {"name": "f", "arguments": ""},
                    }
                ]
            ),
            chunk(
                tool_calls=[
                    {"index": 0, "id": "new-id-per-fragment", "function": {"arguments": '{"a":'}}
                ]
            ),
            chunk(
                tool_calls=[
                    {"index": 1, "id": "second", "function": {"name": "g", "arguments": "{}"}}
                ]
            ),
            chunk(tool_calls=[{"index": 0, "id": "yet-another", "function": {"arguments": " 1}"}}]),
        )
        + b"data: [DONE]\n\n"
    )
    message = reassemble("chat", wire).response["choices"][0]["message"]
    assert [
        (c["id"], c["function"]["name"], c["function"]["arguments"]) for c in message["tool_calls"]
    ] == [("first-id", "f", '{"a": 1}'), ("second", "g", "{}")]


def test_a_chat_stream_is_whole_once_every_choice_finished_with_or_without_done():
    wire = stream_bytes("chat_stream_parallel_tool_calls_with_usage.sse")
    events = [e + b"\n\n" for e in wire.split(b"\n\n") if e.strip()]
    assert events[-1] == b"data: [DONE]\n\n"
    finished = next(i for i, e in enumerate(events) if b'"finish_reason":"tool_calls"' in e)
    assert reassemble("chat", wire).complete
    assert reassemble("chat", b"".join(events[:-1])).complete  # no [DONE]
    assert reassemble("chat", b"".join(events[: finished + 1])).complete  # nor usage
    cut = reassemble("chat", b"".join(events[:finished]))  # before the finish_reason
    assert not cut.complete
    verdict = inspect(
        Exchange(
            method="POST",
            url=URLS["chat"],
            request_body=b"{}",
            status=200,
            response_headers=SSE,
            response_body=b"".join(events[:finished]),
        )
    )
    assert verdict.reason == "the stream ended before its final event"


def test_a_chat_stream_with_two_choices_is_cut_until_both_finished():
    two = sse(
        {"choices": [{"index": 0, "delta": {"content": "a"}, "finish_reason": "stop"}]},
        {"choices": [{"index": 1, "delta": {"content": "b"}, "finish_reason": None}]},
    )
    assert not reassemble("chat", two).complete
    both = two + sse({"choices": [{"index": 1, "delta": {}, "finish_reason": "stop"}]})
    assert reassemble("chat", both).complete


def test_a_mid_stream_chat_error_and_the_usage_chunk_are_handled():
    wire = sse(
        chunk(content="hi"),
        {"choices": [], "usage": {"total_tokens": 3}},
        {"error": {"message": "overloaded", "type": "server_error"}},
    )
    result = reassemble("chat", wire)
    assert result.errors == [ApiError(type="server_error", message="overloaded")]
    assert result.response["usage"] == {"total_tokens": 3}
    assert result.complete is False


def test_anthropic_ping_unknown_and_error_events():
    wire = sse(
        {"type": "message_start", "message": {"id": "msg_1", "model": "claude", "content": []}},
        {"type": "ping"},
        {"type": "some_future_event", "x": 1},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "t", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"q": '},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '"x"}'},
        },
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    )
    result = reassemble("messages", wire)
    assert result.response["content"][0]["input"] == {"q": "x"}
    assert result.errors == [ApiError(type="overloaded_error", message="Overloaded")]
    assert result.complete is False


def test_bedrock_mantle_writes_data_before_event_and_it_still_reads():
    first = pairs("pydanticai_bedrock_mantle_reused_call_ids_stream.yaml")[0]
    assert first.body.startswith(b"data: ")
    verdict = inspect(first.exchange())
    assert calls(verdict) == [("call_0", "first_tool", "{}")]
    assert verdict.stream


def test_a_streamed_and_an_unstreamed_turn_with_the_same_content_get_the_same_verdict():
    request = {
        "tools": [
            {"type": "function", "function": {"name": "GetWeatherArgs", "strict": True}},
            {"type": "function", "function": {"name": "get_stock_price", "strict": True}},
        ]
    }
    for name, api in [(c[0], c[1]) for c in CAPTURES]:
        streamed = stream_exchange(name, api, request)
        body = json.dumps(reassemble(api, streamed.response_body).response).encode()
        plain = Exchange(
            method="POST",
            url=streamed.url,
            request_body=streamed.request_body,
            status=200,
            response_headers={"content-type": "application/json"},
            response_body=body,
        )
        a, b = inspect(streamed).to_dict(), inspect(plain).to_dict()
        a.pop("stream"), b.pop("stream"), a.pop("reason"), b.pop("reason")
        # The spec's streaming example has a "...." line where events were left out.
        junk = [e for e in a["stream_errors"] if e["type"] == "malformed_event"]
        assert len(junk) == (name == "openapi_chat_streaming_text.txt"), name
        a["stream_errors"] = [e for e in a["stream_errors"] if e not in junk]
        assert a == b, name


def test_the_anthropic_stream_and_the_history_that_echoes_it_agree():
    first, second = pairs("anthropic_roundtrip_streaming.json")
    verdict = inspect(first.exchange())
    echoed = second.request["messages"][1]["content"][0]
    assert calls(verdict) == [
        (echoed["id"], echoed["name"], json.dumps(echoed["input"], separators=(",", ":")))
    ]


# --- SSE framing (WHATWG) ---------------------------------------------------


def decode_all(wire, size=None):
    decoder = SSEDecoder()
    pieces = [wire] if size is None else [wire[i : i + size] for i in range(0, len(wire), size)]
    events = [e for p in pieces for e in decoder.feed(p)]
    return events + decoder.close()


@pytest.mark.parametrize("size", [None, 1, 2, 3])
def test_sse_framing_follows_the_spec(size):
    wire = (
        b"\xef\xbb\xbf: a comment\r\n"
        b"data: one\r\ndata:two\r\nevent: x\r\n\r\n"  # data before event; multi-line; no space
        b"event: y\n data: not a field\ndata:  spaced \n\n"  # leading space in a name; two spaces kept minus one
        b"id: 7\rdata: cr only\r\r"
        b"retry: 10\nunknown: z\n\n"  # no data: nothing dispatched
        b"id: 8\nevent: primed\ndata:\n\n"  # an empty data buffer: nothing dispatched either
        b"data:\ndata:\n\n"  # two empty lines are one line break, dispatched
        b"data: caf\xc3\xa9\n\n"
        b"data: tail without blank line"
    )
    assert decode_all(wire, size) == [
        Event("x", "one\ntwo", None),
        Event("y", " spaced ", None),
        Event("message", "cr only", "7"),
        Event("message", "\n", "8"),
        Event("message", "café", "8"),
        Event("message", "tail without blank line", "8"),
    ]


def test_a_priming_event_in_any_dialects_stream_is_no_malformed_event():
    name = "chat_stream_single_tool_call.sse"
    primed = inspect(
        stream_exchange(
            name,
            "chat",
            response_body=b"id: 0\ndata: \n\n: ping\nretry: 300\n\n" + stream_bytes(name),
        )
    )
    plain = inspect(stream_exchange(name, "chat"))
    assert primed.stream_errors == plain.stream_errors == []
    assert (primed.state, primed.reason, len(primed.calls)) == (plain.state, None, 1)


def test_a_crlf_split_between_chunks_is_one_line_end():
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"") == []
    assert decoder.feed(b"\ndata: b\r\n\r\n") == [Event("message", "a\nb", None)]


def whatwg_events(body: bytes) -> list[Event]:
    """The events of a whole stream as the WHATWG algorithm reads them, line by line, and a
    last event the stream did not end with a blank line (tooltap reads it, a browser would not):
    a plain reading to hold the decoder's quick paths to."""
    events, event, data, last_id, lossy = [], "", [], None, False
    lines = re.split(rb"\r\n|\r|\n", body.removeprefix(b"\xef\xbb\xbf"))
    if lines[-1] == b"":  # the end of the last line
        lines.pop()
    for raw in [*lines, b""]:
        if raw == b"":
            if data not in ([], [""]):
                events.append(Event(event or "message", "\n".join(data), last_id, lossy))
            event, data, lossy = "", [], False
            continue
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            line, lossy = raw.decode("utf-8", "replace"), True
        if line.startswith(":"):
            continue
        field, colon, value = line.partition(":")
        value = value[1:] if colon and value.startswith(" ") else value
        if field == "data":
            data.append(value)
        elif field == "event":
            event = value
        elif field == "id" and "\0" not in value:
            last_id = value
    return events


SSE_LINE = st.sampled_from(
    [b"data: {\"a\": 1}", b"data:{\"b\":2}", b"data:", b"data", b"data: x\xff", b"data:  two",
     b"event: ping", b"event:", b"event:x\xfe", b"id: 7", b"id: a\0b", b": comment", b":", b"retry: 5",
     b"\xef\xbb\xbfdata: bom", b"dat", b"data: \xc3\xa9", b""]
)  # fmt: skip


@settings(max_examples=300)
@given(
    st.lists(st.tuples(SSE_LINE, st.sampled_from([b"\n", b"\r\n", b"\r"])), max_size=12),
    st.lists(st.integers(0, 400), max_size=6),
    st.booleans(),
)
def test_any_stream_cut_anywhere_reads_as_the_whatwg_algorithm_reads_it(lines, cuts, at_cr):
    body = b"".join(line + end for line, end in lines)
    if at_cr:  # a cut between the two bytes of every \r\n, and after every lone \r
        cuts = cuts + [m.end() for m in re.finditer(rb"\r", body)]
    decoder, events, start = SSEDecoder(), [], 0
    for cut in sorted(min(c, len(body)) for c in cuts):
        events += decoder.feed(body[start:cut])
        start = cut
    events += decoder.feed(body[start:]) + decoder.close()
    assert events == whatwg_events(body)


def test_a_long_line_in_tiny_chunks_stays_linear():
    decoder = SSEDecoder()
    line = b"data: " + b"x" * 200_000
    for i in range(0, len(line), 3):
        assert decoder.feed(line[i : i + 3]) == []
    assert decoder.feed(b"\n\n")[0].data == "x" * 200_000


# --- content-encoding -------------------------------------------------------

BODY = b'{"choices": []}' * 200


@pytest.mark.parametrize(
    ("encoding", "encode"),
    [
        ("gzip", gzip.compress),
        ("x-gzip", gzip.compress),
        ("deflate", zlib.compress),
        ("deflate", lambda b: zlib.compress(b)[2:-4]),  # raw deflate, no zlib header
        ("br", brotli.compress),
        ("zstd", zstandard.ZstdCompressor().compress),
        ("identity", lambda b: b),
        ("gzip, br", lambda b: brotli.compress(gzip.compress(b))),
    ],
)
def test_every_content_encoding_decodes_incrementally(encoding, encode):
    data = encode(BODY)
    decoder = Decoder(encoding)
    out = b"".join(decoder.feed(data[i : i + 7]) for i in range(0, len(data), 7))
    decoder.close()
    assert out == BODY


def test_corrupt_truncated_unknown_and_oversized_encodings_are_errors_not_crashes():
    with pytest.raises(DecodeError):
        decode(b"\x1f\x8b\x08\x00garbage", "gzip")
    with pytest.raises(DecodeError, match="ended early"):
        decode(gzip.compress(BODY)[:-12], "gzip")
    with pytest.raises(DecodeError, match="unsupported content-encoding 'compress'"):
        decode(BODY, "compress")
    bomb = gzip.compress(b"\0" * 10_000_000)
    with pytest.raises(DecodeError, match="exceeds the size limit"):
        decode(bomb, "gzip", max_decoded=1_000_000)
    for name, encode in (("br", brotli.compress), ("zstd", zstandard.ZstdCompressor().compress)):
        with pytest.raises(DecodeError, match="exceeds the size limit"):
            decode(encode(b"\0" * 10_000_000), name, max_decoded=1_000_000)


def test_a_corrupt_gzip_stream_makes_the_verdict_unparseable_with_its_reason():
    wire = gzip.compress(stream_bytes("chat_stream_single_tool_call.sse"))
    headers = {**SSE, "content-encoding": "gzip"}
    good = inspect(
        Exchange(
            method="POST",
            url=URLS["chat"],
            request_body=b"{}",
            status=200,
            response_headers=headers,
            response_body=wire,
        )
    )
    assert calls(good) == [
        ("call_4XzlGBLtUe9dy3GVNV4jhq7h", "get_weather", '{"city":"New York City"}')
    ]
    bad = inspect(
        Exchange(
            method="POST",
            url=URLS["chat"],
            request_body=b"{}",
            status=200,
            response_headers=headers,
            response_body=wire[:20] + b"\xff" * 40 + wire[60:],
        )
    )
    assert bad.outcome == "unparseable"
    assert bad.reason.startswith("stream could not be decoded")


def test_a_zstd_body_of_two_frames_decodes_and_a_truncated_one_is_an_error():
    compress = zstandard.ZstdCompressor().compress
    assert decode(compress(b"one ") + compress(b"two"), "zstd") == b"one two"
    with pytest.raises(DecodeError, match="ended early"):
        decode(compress(BODY)[:-5], "zstd")


def test_blocks_keep_their_pieces_by_index_and_a_block_started_again_loses_what_came_before():
    blocks = Blocks()
    blocks.open(1, {"name": "b"})
    blocks.open(0, {"name": "a"})
    blocks.add(0, '{"city":')
    blocks.add(0, 7)  # no string: dropped
    blocks.add(2, "never opened")
    blocks.add(0, '"Paris"}')
    assert list(blocks) == [(0, {"name": "a"}, '{"city":"Paris"}'), (1, {"name": "b"}, None)]
    blocks.open(0, {"name": "a2"})  # restarted by the API
    blocks.add(0, "{}")
    assert next(iter(blocks)) == (0, {"name": "a2"}, "{}")
