"""Time in spans: each call a request answers is an `execute_tool` span from its issue to its
answer, in the answering turn's trace; the turn's span carries the GenAI conventions' token and
first-chunk attributes."""

from __future__ import annotations

import json

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.trace import SpanKind

from tooltap.addon.inspection.session import Session
from tooltap.addon.sinks import traces
from tooltap.core import Exchange

T0 = 1_764_480_000.0
CHAT = "https://api.openai.com/v1/chat/completions"
JSON = {"content-type": "application/json"}
PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
CITIES = ("Paris", "Rome")
CALLS = [
    {"id": f"call_{c}", "type": "function",
     "function": {"name": "get_weather", "arguments": json.dumps({"city": c})}}
    for c in CITIES
]  # fmt: skip


def issued() -> Exchange:
    """A Chat response calling get_weather twice, from T0 to T0 + 1."""
    body = {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": None,
                         "tool_calls": CALLS}, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 90, "completion_tokens": 30,
                      "prompt_tokens_details": {"cached_tokens": 64},
                      "completion_tokens_details": {"reasoning_tokens": 12}}}  # fmt: skip
    request = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Weather?"}]}
    return Exchange(
        method="POST", url=CHAT, request_body=json.dumps(request).encode(), status=200,
        response_headers=JSON, response_body=json.dumps(body).encode(), request_start=T0,
        request_end=T0 + 0.1, response_end=T0 + 1,
    )  # fmt: skip


def answering() -> Exchange:
    """Both calls answered by a request at T0 + 4."""
    messages = [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": None, "tool_calls": CALLS},
        *({"role": "tool", "tool_call_id": f"call_{c}", "content": "12C"} for c in CITIES),
    ]
    body = {"id": "chatcmpl-2", "object": "chat.completion", "model": "gpt-4o",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Mild."},
                         "finish_reason": "stop"}]}  # fmt: skip
    return Exchange(
        method="POST", url=CHAT, status=200, response_headers=JSON,
        request_body=json.dumps({"model": "gpt-4o", "messages": messages}).encode(),
        response_body=json.dumps(body).encode(), request_start=T0 + 4, response_end=T0 + 4.5,
    )  # fmt: skip


def spans(*traceparent: str, deadline: float = 60, first: Exchange | None = None) -> list:
    session = Session(deadline=deadline)
    exporter = InMemorySpanExporter()
    sink = traces.TraceSink("", "raw", lambda outcome, n: None, exporter=exporter)
    headers = [(b"traceparent", value.encode()) for value in traceparent]
    for exchange in (first or issued(), answering()):
        verdict = session.inspect(exchange)
        assert exchange.request_start is not None and exchange.response_end is not None
        sink.emit(verdict, "api.openai.com", headers, exchange.request_start, exchange.response_end)
    sink.close()
    return list(exporter.get_finished_spans())


def test_each_answered_call_is_an_execute_tool_span_from_its_issue_to_its_answer():
    issuing, answered, *waits = spans()
    assert (issuing.name, answered.name) == ("chat gpt-4o", "chat gpt-4o")
    assert [w.name for w in waits] == ["execute_tool get_weather"] * 2
    for wait, city in zip(waits, CITIES, strict=True):
        assert wait.kind == SpanKind.INTERNAL
        assert dict(wait.attributes) == {
            gen_ai.GEN_AI_OPERATION_NAME: "execute_tool",
            gen_ai.GEN_AI_TOOL_CALL_ID: f"call_{city}",
            gen_ai.GEN_AI_TOOL_NAME: "get_weather",
            "tooltap.api": "chat",
            "tooltap.late": False,
        }
        # From the end of the response that issued it to the request that carried its result.
        assert (wait.start_time, wait.end_time) == (int((T0 + 1) * 1e9), int((T0 + 4) * 1e9))
        # No traceparent: the turn that answered it is the only trace to be in.
        assert wait.context.trace_id == answered.context.trace_id
        assert wait.parent.span_id == answered.context.span_id
    assert answered.attributes["tooltap.tool_wait_ms"] == 3000.0
    assert "tooltap.tool_wait_ms" not in issuing.attributes


def test_under_the_callers_trace_the_waits_sit_beside_the_turn():
    _, answered, *waits = spans(PARENT)
    caller = int("b7ad6b7169203331", 16)
    assert answered.parent.span_id == caller
    for wait in waits:
        assert wait.context.trace_id == int("0af7651916cd43dd8448eb211c80319c", 16)
        assert wait.parent.span_id == caller


def test_a_traceparent_that_does_not_parse_leaves_the_waits_in_the_turns_own_trace():
    _, answered, *waits = spans("00-not-a-trace")
    assert answered.parent is None
    assert all(w.parent.span_id == answered.context.span_id for w in waits)


def test_the_turn_span_says_its_tokens_in_the_genai_conventions_words():
    issuing, *_ = spans()
    assert {k: v for k, v in issuing.attributes.items() if k.startswith("gen_ai.usage")} == {
        gen_ai.GEN_AI_USAGE_INPUT_TOKENS: 90,
        gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS: 30,
        gen_ai.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: 64,
        gen_ai.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: 12,
    }
    assert gen_ai.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK not in issuing.attributes  # not streamed
    assert (issuing.start_time, issuing.end_time) == (int(T0 * 1e9), int((T0 + 1) * 1e9))


def test_a_call_answered_past_the_deadline_is_marked_late():
    *_, paris, rome = spans(deadline=2)
    assert paris.attributes["tooltap.late"] and rome.attributes["tooltap.late"]


def test_a_streamed_turn_says_its_time_to_first_chunk_in_seconds():
    """The stream's pieces arrive at T0 + 0.2 (the role), + 0.6 (the first call's name), then
    the rest at + 1: the first output is the call's name, 0.5 s after the request's end."""
    from tooltap.addon.commands.demo_openai import chat_stream

    pieces = chat_stream("chatcmpl-1", [(c["id"], "get_weather", c["function"]["arguments"])
                                        for c in CALLS])  # fmt: skip
    ends, at = [], []
    for index, piece in enumerate(pieces):
        ends.append((ends[-1] if ends else 0) + len(piece))
        at.append(T0 + (0.2 if index == 0 else 0.6 if index == 1 else 1.0))
    streamed = issued().model_copy(
        update={
            "request_body": json.dumps(
                {"model": "gpt-4o", "stream": True, "messages": []}
            ).encode(),
            "response_headers": {"content-type": "text/event-stream"},
            "response_body": b"".join(pieces),
            "arrivals": tuple(zip(ends, at, strict=True)),
        }
    )
    turn, *_ = spans(first=streamed)
    assert turn.attributes[gen_ai.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] == 0.5
    assert turn.attributes[gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS] == 20  # the stream's usage chunk
