"""Core is total and deterministic: arbitrary JSON values and arbitrary bytes never raise (I5)."""

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.cohere_stream import events_of, sse

from tooltap.core import Exchange, StreamReader, inspect, parallel, schema, subsets
from tooltap.core.lines import NDJSONDecoder
from tooltap.core.sse import SSEDecoder
from tooltap.core.wire import check_loop, read_turn

KEYS = st.sampled_from(
    [
        "tools",
        "output",
        "type",
        "name",
        "function",
        "strict",
        "parallel_tool_calls",
        "call_id",
        "arguments",
        "text",
        "format",
        "response_format",
        "json_schema",
        "schema",
        "properties",
        "required",
        "items",
        "additionalProperties",
        "anyOf",
        "$defs",
        "enum",
        "messages",
        "role",
        "content",
        "tool_calls",
        "id",
        "input",
        "tool_use_id",
        "tool_call_id",
        "choices",
        "message",
        "index",
        "is_error",
        "model",
        "error",
        "tool_choice",
        "allowed_tools",
        "namespace",
        "execution",
        "environment",
        "background",
        "status",
        "previous_response_id",
        "input_schema",
        "format",
        "minItems",
        "allOf",
        "done",
        "tool_name",
        "prompt",
        "response",
        "thinking",
        "tool_plan",
        "strict_tools",
        "finish_reason",
        "delta",
        "usage",
        "tokens",
        "document",
        "data",
    ]
) | st.text(max_size=5)
# Values that steer the readers into their branches (item types, roles, choices, statuses).
WORDS = st.sampled_from(
    [
        "function",
        "function_call",
        "function_call_output",
        "tool_search_call",
        "tool_search_output",
        "additional_tools",
        "shell_call",
        "shell_call_output",
        "local_shell_call_output",
        "compaction",
        "namespace",
        "tool_use",
        "tool_result",
        "assistant",
        "user",
        "client",
        "server",
        "none",
        "allowed_tools",
        "queued",
        "completed",
        "object",
        "string",
        "email",
        "tool",
        "document",
        "json_object",
        "NONE",
        "ERROR",
        "message-start",
        "tool-call-start",
        "tool-call-delta",
        "content-start",
        "content-delta",
        "message-end",
    ]
)

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
    | WORDS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(KEYS, children, max_size=5),
    max_leaves=40,
)
APIS = st.sampled_from(["responses", "chat", "messages", "ollama", "cohere"])
URL = {
    "cohere": "https://api.cohere.com/v2/chat",
    "responses": "https://api.openai.com/v1/responses",
    "chat": "https://api.openai.com/v1/chat/completions",
    "messages": "https://api.anthropic.com/v1/messages",
    "ollama": "http://localhost:11434/api/chat",
}
HEADERS = st.sampled_from(
    [
        {},
        {"content-type": "application/json"},
        {"content-type": "text/event-stream"},
        {"content-type": "text/event-stream", "content-encoding": "gzip"},
        {"content-encoding": "br"},
        {"content-encoding": "zstd, deflate"},
        {"content-type": "application/x-ndjson"},
    ]
)
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(JSON)
def test_the_seed_rules_never_raise_and_are_deterministic(value):
    assert parallel.classify(value) == parallel.classify(value)
    assert schema.classify(value) == schema.classify(value)
    assert schema.schema_blockers(value) == schema.schema_blockers(value)
    (
        parallel.exposure([value]),
        parallel.unvalidated_calls([value]),
        parallel.duplicate_names([value]),
    )
    parallel.parse_ids(value), parallel.function_calls(value), parallel.strict_tools(value)
    (
        schema.repair_lines(value, "advisory-schema"),
        schema.schema_size(value),
        schema.loose_tools(value),
    )
    for api in ("responses", "messages", "cohere"):
        assert subsets.blockers(api, value) == subsets.blockers(api, value)


@SETTINGS
@given(
    APIS,
    JSON,
    JSON,
    st.one_of(st.none(), st.integers(100, 599)),
    HEADERS,
    st.sampled_from(["POST", "GET"]),
)
def test_inspect_never_raises_on_any_json(api, request, response, status, headers, method):
    exchange = Exchange(
        method=method,
        url=URL[api] + ("/resp_1" if method == "GET" else ""),
        request_body=json.dumps(request).encode(),
        status=status,
        response_headers=headers,
        response_body=json.dumps(response).encode(),
    )
    first = inspect(exchange, {"resp_1": ["call_1"]})
    assert first == inspect(exchange, {"resp_1": ["call_1"]})
    json.dumps(first.to_dict())
    turn = read_turn(api, request, response)
    parallel.classify_turn(turn)
    schema.judge(schema.format_declared(turn.applied_format()), turn.loose_tools)
    check_loop(api, request)


@SETTINGS
@given(APIS, st.binary(max_size=300), st.binary(max_size=300), st.integers(100, 599), HEADERS)
def test_inspect_never_raises_on_any_bytes(api, request, response, status, headers):
    inspect(
        Exchange(
            method="POST",
            url=URL[api],
            request_body=request,
            status=status,
            response_headers=headers,
            response_body=response,
        )
    )


@SETTINGS
@given(
    APIS,
    st.lists(st.binary(max_size=40), max_size=20),
    st.sampled_from([None, "gzip", "br", "zstd", "x"]),
    st.sampled_from(["sse", "ndjson"]),
)
def test_stream_readers_take_any_bytes_in_any_pieces(api, pieces, encoding, framing):
    whole, split = (
        StreamReader(api, encoding, framing=framing),
        StreamReader(api, encoding, framing=framing),
    )
    whole.feed(b"".join(pieces))
    for piece in pieces:
        split.feed(piece)
    assert whole.close() == split.close()
    for decoder in (SSEDecoder(), NDJSONDecoder()):
        for piece in pieces:
            decoder.feed(piece)
        decoder.close()


@SETTINGS
@given(APIS, st.lists(JSON, max_size=12), st.data(), st.sampled_from(["sse", "ndjson"]))
def test_any_json_events_in_any_split_reassemble_the_same(api, events, data, framing):
    if framing == "sse":
        wire = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
    else:
        wire = b"".join(json.dumps(e).encode() + b"\n" for e in events)
    cut = sorted(data.draw(st.sets(st.integers(0, len(wire)), max_size=10)))
    pieces = [wire[a:b] for a, b in zip([0, *cut], [*cut, len(wire)], strict=True)]
    whole, split = StreamReader(api, framing=framing), StreamReader(api, framing=framing)
    whole.feed(wire)
    for piece in pieces:
        split.feed(piece)
    assert whole.close() == split.close()


# A Cohere answer: a plan, thinking and text blocks, calls whose arguments are any text (cut
# mid-character by the split below), and its end; what the stream must reassemble into.
TEXT = st.text(st.characters(codec="utf-8"), max_size=30)
COHERE_CALL = st.builds(
    lambda n, name, arguments: {"id": f"{name}_{n:012d}", "type": "function",
                                "function": {"name": name, "arguments": arguments}},
    st.integers(0, 10**12 - 1), st.sampled_from(["get_weather", "get_stock"]), TEXT,
)  # fmt: skip
COHERE_ANSWER = st.builds(
    lambda plan, blocks, calls, finish: {
        "id": "5bbdb185-19bf-4683-bdbc-7e21f2dead78",
        "message": {"role": "assistant"}
        | ({"content": blocks} if blocks else {})
        | ({"tool_plan": plan} if plan else {})
        | ({"tool_calls": calls} if calls else {}),
        "finish_reason": finish,
        "usage": {"tokens": {"input_tokens": 906, "output_tokens": 77}},
    },
    TEXT,
    st.lists(st.sampled_from(["text", "thinking"]).flatmap(
        lambda kind: TEXT.map(lambda said: {"type": kind, kind: said})), max_size=3),
    st.lists(COHERE_CALL, max_size=3),
    st.sampled_from(["COMPLETE", "TOOL_CALL", "MAX_TOKENS"]),
)  # fmt: skip


@SETTINGS
@given(COHERE_ANSWER, st.integers(1, 8), st.data())
def test_any_cohere_stream_in_any_split_reassembles_into_the_answer_sent_unstreamed(
    answer, size, data
):
    wire = sse(events_of(answer, size))
    cut = sorted(data.draw(st.sets(st.integers(0, len(wire)), max_size=12)))
    reader = StreamReader("cohere")
    for start, end in zip([0, *cut], [*cut, len(wire)], strict=True):
        reader.feed(wire[start:end])
    result = reader.close()
    assert (result.complete, result.bad_events, result.errors) == (True, 0, [])
    assert result.response == answer
    calls = [(c["id"], c["function"]["arguments"]) for c in answer["message"].get("tool_calls", [])]
    verdict = inspect(
        Exchange(method="POST", url=URL["cohere"], request_body=b'{"model": "command-r"}',
                 status=200, response_headers={"content-type": "text/event-stream"},
                 response_body=wire)
    )  # fmt: skip
    assert [(c.call_id, c.arguments_raw) for c in verdict.calls] == calls  # byte for byte
