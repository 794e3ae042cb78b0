"""OpenTelemetry: each verdict as a GenAI span inside the application's own trace.

The official SDKs, their httpx clients instrumented by OpenTelemetry's own httpx
instrumentation, drive the demo's traffic through a real `tooltap run`; a real OTLP/HTTP
receiver decodes what tooltap exports with opentelemetry-proto.
"""

from __future__ import annotations

import json
import time

import httpx
import pytest
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from support.otlp import Receiver, attributes
from support.prom import sample, scrape

from tooltap.addon.commands.demo_steps import STEPS, Clients, client_errors
from tooltap.addon.harness.launch import Proxy
from tooltap.addon.harness.replay import ReplayServer, Reply, Seen

BY_NAME = {step.name: step for step in STEPS}
CREDENTIAL = "sk-proj-PLANTEDCREDENTIAL0123456789"
SECRET = "sk-live-PLANTEDSECRET0123456789"
CITY = "Ouagadougou"  # an argument value, to look for in the exported bytes
STRICT_WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "strict": True,
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "api_key": {"type": "string"}},
            "required": ["city", "api_key"],
            "additionalProperties": False,
        },
    },
}


def fan_out(seen: Seen) -> Reply:
    """Two strict calls in one turn; one argument carries a secret under a secret-looking key."""
    calls = [
        {"id": f"call_trace{i}", "type": "function",
         "function": {"name": "get_weather",
                      "arguments": json.dumps({"city": CITY, "api_key": SECRET})}}
        for i in range(2)
    ]  # fmt: skip
    body = {
        "id": "chatcmpl-trace0001", "object": "chat.completion", "created": 1, "model": "gpt-4o-2024-08-06",
        "choices": [{"index": 0, "finish_reason": "tool_calls",
                     "message": {"role": "assistant", "content": None, "tool_calls": calls}}],
        "usage": {"prompt_tokens": 42, "completion_tokens": 17, "total_tokens": 59},
    }  # fmt: skip
    return Reply(headers=[("content-type", "application/json")], chunks=[json.dumps(body).encode()])


def streamed_fan_out(seen: Seen) -> Reply:
    """The same two calls streamed, event by event; the follow-up that answers them, whole."""
    from tooltap.addon.commands.demo_openai import chat_completion, chat_stream

    if b'"role": "tool"' in seen.body:
        answer = chat_completion("chatcmpl-trace0003", [], "Mild in both.")
        return Reply(chunks=[json.dumps(answer).encode()])
    calls = [(f"call_wait{i}", "get_weather", json.dumps({"city": CITY})) for i in range(2)]
    return Reply(
        headers=[("content-type", "text/event-stream")],
        chunks=chat_stream("chatcmpl-trace0002", calls),
        delay=0.02,
    )


def route(seen: Seen) -> Reply:
    if seen.headers.get("x-scenario") == "fan-out":
        return fan_out(seen)
    if seen.headers.get("x-scenario") == "streamed":
        return streamed_fan_out(seen)
    step = BY_NAME[seen.headers["x-demo-step"]]
    assert step.reply is not None
    return step.reply


def clients(proxy: Proxy, provider: TracerProvider) -> Clients:
    """openai on an httpx client traced by OpenTelemetry's httpx instrumentation; anthropic
    (which brings its own HTTP client) untraced: its calls carry no traceparent."""
    import anthropic
    import openai

    http = httpx.Client(timeout=30)
    HTTPXClientInstrumentor.instrument_client(http, tracer_provider=provider)
    oa = openai.OpenAI(
        base_url=proxy.url + "/v1", api_key=CREDENTIAL, max_retries=0, http_client=http
    )
    an = anthropic.Anthropic(base_url=proxy.url, api_key=CREDENTIAL, max_retries=0)
    return Clients(proxy.url, made={"openai": oa, "anthropic": an})


def drive(proxy: Proxy, provider: TracerProvider) -> None:
    sdks = clients(proxy, provider)
    sdks.with_headers({"x-scenario": "fan-out"}).openai.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "weather?"}], tools=[STRICT_WEATHER]
    )
    for name in ("responses-fanout", "anthropic-orphan"):
        step = BY_NAME[name]
        try:
            step.call(sdks.with_headers({"x-demo-step": name}))
        except client_errors():
            assert step.expect_error


@pytest.fixture
def client_spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def traced(collector: str, *options: str, env: dict[str, str] | None = None) -> Proxy:
    """tooltap exporting to the collector, a batch every 50 ms (the SDK's variable, in ms)."""
    env = {
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": collector,
        "OTEL_BSP_SCHEDULE_DELAY": "50",
        **(env or {}),
    }
    return Proxy.tooltap([UPSTREAM_URL[0]], "--log-format", "json", *options, env=env)


UPSTREAM_URL: list[str] = []


@pytest.fixture
def upstream():
    with ReplayServer(route) as server:
        UPSTREAM_URL[:] = [server.url]
        yield server


def test_each_verdict_is_a_genai_span_inside_the_callers_trace(upstream, client_spans):
    provider, exported = client_spans
    with Receiver() as collector, traced(collector.url) as proxy:
        drive(proxy, provider)
        proxy.wait_for("turn", 3)
        spans = collector.wait_spans(3)
        values = scrape(proxy)
    assert len(spans) == 3
    clients_by_path = {
        s.attributes.get("url.full", s.attributes.get("http.url", "")).rsplit("/", 1)[-1]: s
        for s in exported.get_finished_spans()
        if s.kind == SpanKind.CLIENT
    }
    by_name = {s.name: s for s in spans}
    assert set(by_name) == {"chat gpt-4o", "chat gpt-5.1", "chat claude-haiku-4-5"}
    for span, path in zip(
        (by_name["chat gpt-4o"], by_name["chat gpt-5.1"]), ("completions", "responses"), strict=True
    ):
        client = clients_by_path[path]
        assert span.trace_id.hex() == format(client.context.trace_id, "032x")
        assert span.parent_span_id.hex() == format(client.context.span_id, "016x")
        assert span.kind == span.SPAN_KIND_CLIENT
    # No traceparent on the request: a trace of its own.
    alone = by_name["chat claude-haiku-4-5"]
    assert alone.parent_span_id == b"" and alone.trace_id.hex() not in {
        format(c.context.trace_id, "032x") for c in exported.get_finished_spans()
    }

    void = by_name["chat gpt-4o"]
    assert attributes(void.attributes) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.response.model": "gpt-4o-2024-08-06",
        "gen_ai.response.id": "chatcmpl-trace0001",
        "gen_ai.response.finish_reasons": ["tool_calls"],
        "gen_ai.usage.input_tokens": 42,
        "gen_ai.usage.output_tokens": 17,
        "server.address": "127.0.0.1",
        "tooltap.api": "chat",
        "tooltap.transport": "http",
        "tooltap.outcome": "inspected",
        "tooltap.calls": 2,
        "tooltap.state": "strict-void",
        "tooltap.format_state": "free-text",
        "tooltap.findings": ["strict-void"],
        "tooltap.strict_void": True,
        "tooltap.at_risk": True,
        "tooltap.fanout": True,
        "tooltap.loop_errors": [],
        "tooltap.argument_errors.parse": 0,
        "tooltap.argument_errors.schema": 0,
        "tooltap.tool_failures": 0,
    }
    assert [(e.name, attributes(e.attributes)) for e in void.events] == [
        ("tooltap.tool_call", {
            "gen_ai.tool.call.id": f"call_trace{i}", "gen_ai.tool.name": "get_weather",
            "tooltap.schema_errors": [],
            "gen_ai.tool.call.arguments": json.dumps({"city": CITY, "api_key": SECRET}),
        })
        for i in range(2)
    ]  # fmt: skip
    # The span is the exchange as mitmproxy timed it: inside the client's own span.
    client = clients_by_path["completions"]
    assert (
        client.start_time <= void.start_time_unix_nano <= void.end_time_unix_nano <= client.end_time
    )

    schema = by_name["chat gpt-5.1"]
    (bad,) = [e for e in schema.events if attributes(e.attributes)["tooltap.schema_errors"]]
    assert attributes(bad.attributes)["tooltap.schema_errors"] == [
        '$: "country" is a required property',
        '$.units: "kelvin" is not one of "c" or "f"',
    ]
    assert attributes(schema.attributes)["tooltap.argument_errors.schema"] == 1

    orphan = by_name["chat claude-haiku-4-5"]
    orphan_attributes = attributes(orphan.attributes)
    assert orphan_attributes["gen_ai.provider.name"] == "anthropic"
    assert orphan_attributes["error.type"] == "invalid_request_error"
    assert orphan_attributes["tooltap.loop_errors"] == ["orphan-result"]
    (loop_event,) = [e for e in orphan.events if e.name == "tooltap.loop_error"]
    assert attributes(loop_event.attributes)["tooltap.where"] == "messages.1.content.0"
    assert orphan.status.code == orphan.status.STATUS_CODE_ERROR
    assert sample(values, "tooltap_spans_total", outcome="exported") == 3
    assert sample(values, "tooltap_spans_total", outcome="dropped") == 0


@pytest.mark.parametrize("mode", ["redact", "hash", "omit"])
def test_arguments_follow_the_log_policy_and_credentials_never_leave(upstream, client_spans, mode):
    provider, _ = client_spans
    with Receiver() as collector, traced(collector.url, "--log-arguments", mode) as proxy:
        drive(proxy, provider)
        proxy.wait_for("turn", 3)
        spans = collector.wait_spans(3)
    assert len(spans) == 3
    calls = [e for s in spans for e in s.events if e.name == "tooltap.tool_call"]
    assert len(calls) == 4  # the fan-out's two, the Responses turn's two
    exported = b"".join(collector.raw)
    assert exported and CREDENTIAL.encode() not in exported
    assert SECRET.encode() not in exported
    assert (CITY.encode() in exported) == (mode == "redact")  # redact masks secret-looking keys
    # A validator message quotes the value ("kelvin"): hash and omit keep only its path.
    assert (b"kelvin" in exported) == (mode == "redact")
    if mode == "hash":
        assert b"hmac-sha256:" in exported
    if mode == "omit":
        assert b"gen_ai.tool.call.arguments" not in exported


@pytest.mark.parametrize("collector_state", ["down", "slow"])
def test_a_collector_down_or_slow_leaves_traffic_and_log_alone_and_the_drop_is_counted(
    upstream, client_spans, collector_state
):
    provider, _ = client_spans
    env = {"OTEL_EXPORTER_OTLP_TIMEOUT": "1"}
    with Receiver(delay=5.0 if collector_state == "slow" else 0.0) as collector:
        url = collector.url
        if collector_state == "down":
            collector.shutdown()
            collector.server_close()  # nothing listens there now
        with traced(url, env=env) as proxy:
            started = time.monotonic()
            drive(proxy, provider)
            turns = proxy.wait_for("turn", 3)
            assert len(turns) == 3 and time.monotonic() - started < 10
            deadline = time.monotonic() + 15
            counted = (0.0, 0.0)
            while time.monotonic() < deadline and sum(counted) < 3:
                values = scrape(proxy)
                counted = tuple(
                    sample(values, "tooltap_spans_total", outcome=outcome) or 0.0
                    for outcome in ("dropped", "exported")
                )
                time.sleep(0.2)
    assert counted == (3.0, 0.0)  # a span per turn, each counted once: none reached it


def test_a_streamed_turn_carries_its_times_and_the_calls_it_issued_are_execute_tool_spans(
    upstream, client_spans
):
    """An agent's loop inside one span of its own: a streamed turn issues two calls, the agent
    runs them, and a follow-up answers both. The answered calls become execute_tool spans in
    the agent's trace, beside the turn that answered them."""
    import openai

    provider, _ = client_spans
    with Receiver() as collector, traced(collector.url) as proxy:
        http = httpx.Client(timeout=30)
        HTTPXClientInstrumentor.instrument_client(http, tracer_provider=provider)
        client = openai.OpenAI(
            base_url=proxy.url + "/v1", api_key=CREDENTIAL, max_retries=0, http_client=http,
            default_headers={"x-scenario": "streamed"},
        )  # fmt: skip
        messages: list = [{"role": "user", "content": "weather?"}]
        with provider.get_tracer("agent").start_as_current_span("invoke_agent") as agent:
            stream = client.chat.completions.create(
                model="gpt-4o", messages=messages, tools=[STRICT_WEATHER], stream=True,
                stream_options={"include_usage": True},
            )  # fmt: skip
            calls: dict[int, dict] = {}
            for chunk in stream:
                for delta in chunk.choices[0].delta.tool_calls or [] if chunk.choices else []:
                    call = calls.setdefault(delta.index, {"id": delta.id, "arguments": ""})
                    call["arguments"] += delta.function.arguments or ""
            time.sleep(0.3)  # the agent runs its tools
            messages.append({"role": "assistant", "tool_calls": [
                {"id": c["id"], "type": "function",
                 "function": {"name": "get_weather", "arguments": c["arguments"]}}
                for c in calls.values()
            ]})  # fmt: skip
            messages += [{"role": "tool", "tool_call_id": c["id"], "content": "12C"}
                         for c in calls.values()]  # fmt: skip
            client.chat.completions.create(model="gpt-4o", messages=messages)
        issued, answer = proxy.wait_for("turn", 2)
        timed = proxy.wait_for("tool_time", 2)
        spans = collector.wait_spans(4)
    assert len(spans) == 4
    agent_trace = format(agent.get_span_context().trace_id, "032x")
    assert {s.trace_id.hex() for s in spans} == {agent_trace}
    turns = [s for s in spans if s.name == "chat gpt-4o"]
    waits = [s for s in spans if s.name == "execute_tool get_weather"]
    assert len(turns) == 2 and len(waits) == 2
    first, follow_up = sorted(turns, key=lambda s: s.start_time_unix_nano)
    said = attributes(first.attributes)
    assert said["gen_ai.usage.input_tokens"] == 80 and said["gen_ai.usage.output_tokens"] == 20
    # The first call's name came in the stream's second event, at least one pause after the
    # request ended; the log says the same time.
    assert said["gen_ai.response.time_to_first_chunk"] * 1000 == pytest.approx(
        issued["first_token_ms"]
    )
    assert 0 < issued["first_token_ms"] <= issued["duration_ms"]
    assert said["gen_ai.response.time_to_first_chunk"] >= 0.02
    assert attributes(follow_up.attributes)["tooltap.tool_wait_ms"] == answer["tool_wait_ms"]
    for wait, call_id in zip(sorted(waits, key=lambda s: attributes(s.attributes)["gen_ai.tool.call.id"]),
                             ("call_wait0", "call_wait1"), strict=True):  # fmt: skip
        assert attributes(wait.attributes) == {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.name": "get_weather",
            "tooltap.api": "chat",
            "tooltap.late": False,
        }
        assert wait.kind == wait.SPAN_KIND_INTERNAL
        # Beside the answering turn, under the agent's HTTP span that sent the follow-up.
        assert wait.parent_span_id == follow_up.parent_span_id
        # From the end of the issuing turn to the follow-up's start, as the proxy saw them.
        assert wait.start_time_unix_nano == first.end_time_unix_nano
        assert wait.end_time_unix_nano == follow_up.start_time_unix_nano
        assert wait.end_time_unix_nano - wait.start_time_unix_nano >= 0.3e9
    assert sorted(t["waited_ms"] for t in timed)[-1] == answer["tool_wait_ms"]
