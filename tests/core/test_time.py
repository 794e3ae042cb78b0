"""Time in a turn: its duration, its stream's first token, and the tokens its API counts.

Times come in with the exchange (the proxy's stamps, each streamed piece's arrival); core reads
no clock. The first token is the first event that carries model output (text, reasoning, a
call's name or arguments), dated by the piece that completed it.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.captures import SSE, stream_bytes

from tooltap.core import Exchange, inspect
from tooltap.core.dialects import dialect, socket_reader
from tooltap.core.turn import tokens

T0 = 1_764_480_000.0  # the request's first byte, epoch seconds
CHAT = "https://api.openai.com/v1/chat/completions"
MESSAGES = "https://api.anthropic.com/v1/messages"
RESPONSES = "https://api.openai.com/v1/responses"


def near(ms: float) -> Any:
    """A time in milliseconds, to the microsecond (epoch seconds in a float are that exact)."""
    return pytest.approx(ms, abs=0.001)


def events(*data: dict[str, Any], named: bool = False) -> bytes:
    """These events as one piece of an SSE stream."""
    return b"".join([
        (f"event: {d['type']}\n".encode() if named else b"") + b"data: " + json.dumps(d).encode()
        + b"\n\n"
        for d in data
    ])  # fmt: skip


def streamed(url: str, pieces: list[bytes], times: list[float], **request: Any) -> Exchange:
    """An exchange whose response came in these pieces, at these times; the request took 5 ms."""
    ends, size = [], 0
    for piece in pieces:
        size += len(piece)
        ends.append(size)
    return Exchange(
        method="POST",
        url=url,
        request_body=json.dumps({"model": "m", **request}).encode(),
        status=200,
        response_headers=SSE,
        response_body=b"".join(pieces),
        request_start=T0,
        request_end=T0 + 0.005,
        response_end=times[-1],
        arrivals=tuple(zip(ends, times, strict=True)),
    )


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "gpt-4o",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}  # fmt: skip


def test_a_chat_streams_first_token_is_its_first_content_not_its_role_chunk():
    pieces = [
        events(chunk({"role": "assistant", "content": ""})),
        events(chunk({"content": "Hel"})),
        events(chunk({"content": "lo"}), chunk({}, "stop")),
        b"data: [DONE]\n\n",
    ]
    verdict = inspect(streamed(CHAT, pieces, [T0 + 0.2, T0 + 0.45, T0 + 0.5, T0 + 0.51]))
    assert verdict.first_token_ms == near(445.0)  # from the request's end
    assert verdict.duration_ms == near(510.0)  # from the request's first byte


def test_a_call_is_output_from_the_fragment_that_names_it():
    call = {"index": 0, "id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": ""}}  # fmt: skip
    pieces = [
        events(chunk({"role": "assistant"})),
        events(chunk({"tool_calls": [call]})),
        events(
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}, "tool_calls")
        ),
    ]
    verdict = inspect(streamed(CHAT, pieces, [T0 + 0.1, T0 + 0.3, T0 + 0.4]))
    assert verdict.first_token_ms == near(295.0)


def test_an_anthropic_streams_first_token_is_past_its_start_ping_and_empty_block():
    start = {"type": "message_start", "message": {"id": "msg_1", "type": "message",
             "role": "assistant", "model": "claude-haiku-4-5", "content": [],
             "usage": {"input_tokens": 10, "output_tokens": 1}}}  # fmt: skip
    pieces = [
        events(start, {"type": "ping"}, named=True),
        events(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
            named=True,
        ),
        events(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "Hi"},
            },
            named=True,
        ),
        events(
            {"type": "content_block_stop", "index": 0},
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 3},
            },
            {"type": "message_stop"},
            named=True,
        ),
    ]
    times = [T0 + 0.3, T0 + 0.31, T0 + 0.6, T0 + 0.7]
    verdict = inspect(streamed(MESSAGES, pieces, times, max_tokens=10, messages=[]))
    assert verdict.first_token_ms == near(595.0)
    assert (verdict.usage["input_tokens"], verdict.usage["output_tokens"]) == (10, 3)


def test_a_responses_streams_first_token_is_its_first_delta_or_named_item():
    response = {"id": "resp_1", "object": "response", "status": "in_progress", "output": []}
    message = {"type": "message", "id": "msg_1", "role": "assistant", "content": []}
    pieces = [
        events(
            {"type": "response.created", "response": response},
            {"type": "response.in_progress", "response": response},
            named=True,
        ),
        events(
            {"type": "response.output_item.added", "output_index": 0, "item": message}, named=True
        ),
        events(
            {"type": "response.output_text.delta", "item_id": "msg_1", "delta": "Hi"}, named=True
        ),
        events(
            {
                "type": "response.completed",
                "response": response | {"status": "completed", "output": [message]},
            },
            named=True,
        ),
    ]
    times = [T0 + 0.1, T0 + 0.2, T0 + 0.9, T0 + 1.0]
    verdict = inspect(streamed(RESPONSES, pieces, times, input="hi"))
    assert verdict.first_token_ms == near(895.0)


def test_a_stream_without_output_or_without_times_has_no_first_token():
    silent = [events(chunk({"role": "assistant"}), chunk({}, "stop")), b"data: [DONE]\n\n"]
    assert inspect(streamed(CHAT, silent, [T0 + 0.1, T0 + 0.2])).first_token_ms is None
    untimed = streamed(CHAT, silent, [T0 + 0.1, T0 + 0.2]).model_copy(
        update={"arrivals": (), "request_start": None, "response_end": None}
    )
    verdict = inspect(untimed)
    assert (verdict.first_token_ms, verdict.duration_ms) == (None, None)


def test_a_whole_response_has_a_duration_and_no_first_token():
    body = {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 2}}  # fmt: skip
    exchange = Exchange(
        method="POST", url=CHAT, request_body=b'{"model": "gpt-4o", "messages": []}',
        status=200, response_headers={"content-type": "application/json"},
        response_body=json.dumps(body).encode(), request_start=T0, request_end=T0 + 0.01,
        response_end=T0 + 1.25,
    )  # fmt: skip
    verdict = inspect(exchange)
    assert (verdict.duration_ms, verdict.first_token_ms) == (near(1250.0), None)
    assert verdict.usage == {"input_tokens": 9, "output_tokens": 2}


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_any_split_of_a_real_stream_dates_the_first_token_by_the_piece_that_completed_it(data):
    raw = stream_bytes("chat_stream_parallel_tool_calls_with_usage.sse")
    cuts = sorted(data.draw(st.sets(st.integers(1, len(raw) - 1), max_size=12)))
    bounds = [0, *cuts, len(raw)]
    pieces = [raw[a:b] for a, b in itertools.pairwise(bounds)]
    times = [T0 + 0.1 * (n + 1) for n in range(len(pieces))]
    verdict = inspect(streamed(CHAT, pieces, times))
    whole = inspect(streamed(CHAT, [raw], [times[-1]]))
    # The first event with output: the one carrying the first call's name.
    first = raw.index(b"\n\n", raw.index(b'"name"')) + 2
    piece = next(n for n, end in enumerate(bounds[1:]) if end >= first)
    assert verdict.first_token_ms == near((times[piece] - T0 - 0.005) * 1000)
    untimed = {"first_token_ms", "duration_ms"}
    assert verdict.model_dump(exclude=untimed) == whole.model_dump(exclude=untimed)


def test_a_socket_turn_is_timed_from_its_request_message_to_its_last_event():
    reader = socket_reader("responses", "wss://api.openai.com/v1/responses", 8 << 20)
    response = {"id": "resp_1", "object": "response", "status": "in_progress", "output": [],
                "tools": []}  # fmt: skip
    done = response | {"status": "completed", "output": [
        {"type": "message", "id": "m", "role": "assistant", "content": []}]}  # fmt: skip
    messages = [
        ({"type": "response.create", "model": "gpt-5", "input": "hi"}, True, T0),
        ({"type": "response.created", "response": response}, False, T0 + 0.2),
        ({"type": "response.output_text.delta", "item_id": "m", "delta": "Hi"}, False, T0 + 0.7),
        ({"type": "response.completed", "response": done}, False, T0 + 0.9),
    ]
    turns = []
    for message, from_client, at in messages:
        turns += reader.feed(json.dumps(message).encode(), from_client, at)
    (turn,) = turns
    verdict = inspect(turn.exchange, turn.prior)
    assert verdict.duration_ms == near(900.0)
    assert verdict.first_token_ms == near(700.0)


# --- tokens, as each API counts them ---------------------------------------------------------


@pytest.mark.parametrize(
    ("api", "response", "counted"),
    [
        ("responses", {"usage": {"input_tokens": 100, "output_tokens": 40,
                                 "input_tokens_details": {"cached_tokens": 64},
                                 "output_tokens_details": {"reasoning_tokens": 32}}},
         {"input_tokens": 100, "output_tokens": 40, "cached_input_tokens": 64,
          "reasoning_tokens": 32}),
        ("chat", {"usage": {"prompt_tokens": 12, "completion_tokens": 5,
                            "prompt_tokens_details": {"cached_tokens": 0},
                            "completion_tokens_details": {"reasoning_tokens": 0}}},
         {"input_tokens": 12, "output_tokens": 5, "cached_input_tokens": 0,
          "reasoning_tokens": 0}),
        ("realtime", {"usage": {"input_tokens": 20, "output_tokens": 8,
                                "input_token_details": {"cached_tokens": 16}}},
         {"input_tokens": 20, "output_tokens": 8, "cached_input_tokens": 16}),
        # Anthropic's input_tokens leaves out what the cache read and wrote.
        ("messages", {"usage": {"input_tokens": 10, "cache_read_input_tokens": 2000,
                                "cache_creation_input_tokens": 500, "output_tokens": 7}},
         {"input_tokens": 2510, "output_tokens": 7, "cached_input_tokens": 2000}),
        ("converse", {"usage": {"inputTokens": 11, "outputTokens": 264, "totalTokens": 1303,
                                "cacheReadInputTokens": 0, "cacheWriteInputTokens": 1028}},
         {"input_tokens": 1039, "output_tokens": 264, "cached_input_tokens": 0}),
        # Gemini counts thoughts apart from the candidates: output holds both.
        ("gemini", {"usageMetadata": {"promptTokenCount": 81, "candidatesTokenCount": 20,
                                      "thoughtsTokenCount": 140, "cachedContentTokenCount": 64}},
         {"input_tokens": 81, "output_tokens": 160, "cached_input_tokens": 64,
          "reasoning_tokens": 140}),
        ("ollama", {"prompt_eval_count": 26, "eval_count": 9},
         {"input_tokens": 26, "output_tokens": 9}),
        # Cohere's tokens are what the model read and wrote; billed_units is what was billed.
        ("cohere", {"usage": {"billed_units": {"input_tokens": 80, "output_tokens": 301},
                              "tokens": {"input_tokens": 1494, "output_tokens": 330},
                              "cached_tokens": 1008}},
         {"input_tokens": 1494, "output_tokens": 330, "cached_input_tokens": 1008}),
    ],
)  # fmt: skip
def test_each_api_counts_its_tokens_in_its_own_words(api, response, counted):
    assert dialect(api).usage(response) == counted


def test_a_count_not_given_or_not_a_whole_number_is_left_out_never_zero():
    assert tokens(None, "12", True, -1) == {}
    assert dialect("chat").usage({}) == {} and dialect("messages").usage({"usage": None}) == {}
    assert dialect("messages").usage({"usage": {"output_tokens": 3}}) == {"output_tokens": 3}


def test_groqs_stream_says_its_usage_under_x_groq_and_it_is_read():
    pieces = [
        events(chunk({"role": "assistant", "content": "Hi"})),
        events(
            chunk({}, "stop")
            | {"x_groq": {"id": "req_1", "usage": {"prompt_tokens": 30, "completion_tokens": 2}}}
        ),
        b"data: [DONE]\n\n",
    ]
    verdict = inspect(streamed(CHAT, pieces, [T0 + 0.1, T0 + 0.2, T0 + 0.3]))
    assert verdict.usage == {"input_tokens": 30, "output_tokens": 2}


def test_a_chat_stream_that_ends_in_an_error_still_counts_the_tokens_it_says_were_used():
    # OpenRouter's last chunk: the upstream's error, and the usage it was billed, together.
    usage = {"prompt_tokens": 43, "completion_tokens": 10,
             "completion_tokens_details": {"reasoning_tokens": 11}}  # fmt: skip
    error = {"error": {"code": 400, "message": "Token limit reached"}, "usage": usage}
    pieces = [
        events(chunk({"role": "assistant", "content": "", "reasoning": "Hi"}, "length")),
        events(chunk({"content": ""}) | error),
        b"data: [DONE]\n\n",
    ]
    verdict = inspect(streamed(CHAT, pieces, [T0 + 0.1, T0 + 0.2, T0 + 0.3]))
    assert [e.message for e in verdict.stream_errors] == ["Token limit reached"]
    assert verdict.usage == {"input_tokens": 43, "output_tokens": 10, "reasoning_tokens": 11}


# --- overdue: a call a session still owes past the deadline ------------------------------------


def realtime_call(reader, call_id: str, at: float) -> None:
    """A Realtime response that completes with one call, at `at`."""
    response = {"id": f"resp_{call_id}", "status": "in_progress", "output": []}
    item = {"type": "function_call", "call_id": call_id, "name": "get_weather",
            "arguments": "{}", "status": "completed"}  # fmt: skip
    for message, from_client in (
        ({"type": "session.update", "session": {"tools": []}}, True),
        ({"type": "response.create"}, True),
        ({"type": "response.created", "response": response}, False),
        ({"type": "response.done", "response": response | {"status": "completed",
                                                             "output": [item]}}, False),
    ):  # fmt: skip
        reader.feed(json.dumps(message).encode(), from_client, at)


def test_a_call_a_realtime_session_owes_past_the_deadline_is_overdue_once():
    reader = socket_reader("realtime", "wss://api.openai.com/v1/realtime?model=m", 8 << 20)
    realtime_call(reader, "call_1", T0)
    assert reader.overdue(T0 + 59, 60) == []
    assert reader.overdue(T0 + 60, 60) == []  # at the deadline, not past it
    (late,) = reader.overdue(T0 + 61, 60)
    assert (late.call_id, late.name, round(late.waited)) == ("call_1", "get_weather", 61)
    assert late.response_id == "resp_call_1"
    assert reader.overdue(T0 + 120, 60) == []  # said once
    output = {"type": "function_call_output", "call_id": "call_1", "output": "12C"}
    reader.feed(json.dumps({"type": "conversation.item.create", "item": output}).encode(),
                True, T0 + 121)  # fmt: skip
    assert reader.owed_calls() == {}  # answered: no longer owed


def test_a_gemini_live_call_cancelled_or_answered_is_never_overdue():
    url = ("wss://generativelanguage.googleapis.com/ws/google.ai.generativelanguage.v1beta"
           ".GenerativeService.BidiGenerateContent")  # fmt: skip
    reader = socket_reader("gemini_live", url, 8 << 20)
    setup = {"setup": {"model": "models/m", "tools": [{"functionDeclarations": [
        {"name": "get_weather"}, {"name": "book"}]}]}}  # fmt: skip
    reader.feed(json.dumps(setup).encode(), True, T0)
    call = {"toolCall": {"functionCalls": [{"id": "a", "name": "get_weather", "args": {}},
                                           {"id": "b", "name": "book", "args": {}}]}}  # fmt: skip
    reader.feed(json.dumps(call).encode(), False, T0 + 1)
    reader.feed(json.dumps({"toolCallCancellation": {"ids": ["a"]}}).encode(), False, T0 + 2)
    # A Live call is answered by its id alone: no response names it.
    assert [(o.call_id, o.response_id) for o in reader.overdue(T0 + 100, 60)] == [("b", "")]
    answer = {"toolResponse": {"functionResponses": [{"id": "b", "name": "book",
                                                      "response": {}}]}}  # fmt: skip
    reader.feed(json.dumps(answer).encode(), True, T0 + 101)
    assert reader.owed_calls() == {}


def test_a_responses_socket_owes_a_completed_responses_calls_until_an_output_names_them():
    reader = socket_reader("responses", "wss://api.openai.com/v1/responses", 8 << 20)
    response = {"id": "resp_1", "status": "in_progress", "output": [], "tools": []}
    call = {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"}
    for message, from_client, at in (
        ({"type": "response.create", "model": "m", "input": "hi"}, True, T0),
        ({"type": "response.created", "response": response}, False, T0 + 0.1),
        ({"type": "response.completed", "response": response | {"status": "completed",
                                                                  "output": [call]}}, False, T0 + 1),
    ):  # fmt: skip
        reader.feed(json.dumps(message).encode(), from_client, at)
    assert reader.owed_calls() == {"call_1": ("f", T0 + 1, "resp_1")}
    output = {"type": "function_call_output", "call_id": "call_1", "output": "ok"}
    follow_up = {"type": "response.create", "previous_response_id": "resp_1", "input": [output]}
    reader.feed(json.dumps(follow_up).encode(), True, T0 + 2)
    assert reader.owed_calls() == {}
    reader.lost()
    assert reader.overdue(T0 + 500, 60) == []


def test_a_responses_socket_owes_every_call_its_client_answers_and_no_hosted_one():
    """Computer, local shell, patch and approval calls are owed as function calls are, each
    until the item that answers it by its own key; a shell call run in a hosted container and
    a tool search the server ran are the provider's, and owed nothing."""
    reader = socket_reader("responses", "wss://api.openai.com/v1/responses", 8 << 20)
    response = {"id": "resp_1", "status": "in_progress", "output": [], "tools": []}
    issued = [
        {"type": "computer_call", "call_id": "cu_1", "action": {"type": "screenshot"}},
        {"type": "local_shell_call", "call_id": "sh_1", "id": "lsc_1", "action": {}},
        {"type": "apply_patch_call", "call_id": "ap_1", "operation": {}},
        {"type": "mcp_approval_request", "id": "mcpr_1", "name": "delete", "server_label": "fs"},
        {"type": "shell_call", "call_id": "sh_2", "environment": {"type": "container_auto"}},
        {"type": "tool_search_call", "call_id": "ts_1", "execution": "server"},
    ]
    for message, from_client, at in (
        ({"type": "response.create", "model": "m", "input": "hi"}, True, T0),
        ({"type": "response.created", "response": response}, False, T0 + 0.1),
        ({"type": "response.completed", "response": response | {"status": "completed",
                                                                  "output": issued}}, False, T0 + 1),
    ):  # fmt: skip
        reader.feed(json.dumps(message).encode(), from_client, at)
    assert reader.owed_calls() == {
        "cu_1": ("computer_call", T0 + 1, "resp_1"),
        "sh_1": ("local_shell_call", T0 + 1, "resp_1"),
        "ap_1": ("apply_patch_call", T0 + 1, "resp_1"),
        "mcpr_1": ("delete", T0 + 1, "resp_1"),
    }
    assert [o.call_id for o in reader.overdue(T0 + 100, 60)] == ["cu_1", "sh_1", "ap_1", "mcpr_1"]
    answers = [
        {"type": "computer_call_output", "call_id": "cu_1", "output": {}},
        {"type": "local_shell_call_output", "id": "sh_1", "output": "ok"},  # its id is the call's
        {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": True},
    ]
    follow_up = {"type": "response.create", "previous_response_id": "resp_1", "input": answers}
    reader.feed(json.dumps(follow_up).encode(), True, T0 + 2)
    assert reader.owed_calls() == {"ap_1": ("apply_patch_call", T0 + 1, "resp_1")}
    patched = {"type": "apply_patch_call_output", "call_id": "ap_1", "status": "completed"}
    reader.feed(json.dumps(follow_up | {"input": [patched]}).encode(), True, T0 + 3)
    assert reader.owed_calls() == {}
