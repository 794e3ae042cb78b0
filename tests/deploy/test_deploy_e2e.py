"""End to end: scripted traffic through a real tooltap proxy, a real Prometheus scraping it with
deploy/prometheus/rules.yml loaded, and every rule and dashboard expression evaluated through
Prometheus's HTTP API against the numbers the script implies.

The script (SCRIPT) is a known mix built from the real captures in tests/corpus/wire/: strict-void
and strict-at-risk Chat turns on several models, fan-out without strict, a strict-serialised turn,
an argument that breaks its schema, arguments cut off mid-JSON, tool results ok and in error, an
Anthropic orphan tool_result refused with a 400, on all three APIs, streamed and not.

How exact numbers survive rate(). A counter series is born at its first increment, and rate()
never sees that first step; rate() also extrapolates to the ends of its window, by a factor that
depends on each series' first value and sample times. So the script runs twice: once before
Prometheus starts (every series is born, and Prometheus's first scrape already holds the whole
first pass), then again while Prometheus scrapes. Every series that rises in the window then has
the same sample times and rises by exactly its value at the first scrape, so every rate() and
increase() is the second pass's count times one extrapolation factor per window. The test
measures that factor on one reference series, checks it is sane, and then checks every
expression: ratios (the exposure rate) exactly, counts as count x factor, raw series exactly.
Two steps run in one pass only (models E and F), so that two models have strict series with
no visible rise: their exposure is 0/0, which the rules must drop, not record as NaN.

Rates need at least two samples in their window: the test waits until the window holds five
scrapes (1s apart), and until a rule evaluation that follows the last scrape by more than one
interval, so that even a series born in the second pass has two samples.

Bounded waits everywhere; loopback only; the proxy and Prometheus are this test's own children,
stopped by their own handles (SIGINT for the proxy, SIGTERM to Prometheus's pid).
"""

from __future__ import annotations

import json
import math
import re
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.captures import WIRE, pairs, stream_bytes
from support.prom import start_prometheus, stop_prometheus, wait_until
from support.scenarios import JSON_HEADERS, SSE_HEADERS, events
from test_deploy_metric_names import (
    APIS,
    COUNTERS,
    FLOW_OUTCOMES,
    HTTP_APIS,
    LOOP_RULES,
    concrete,
    dashboard_expressions,
    metric_names,
    rule_expressions,
)

from tooltap.addon.harness.eventstream import converse_event
from tooltap.addon.harness.launch import Proxy
from tooltap.addon.harness.replay import ReplayServer, Reply, Seen
from tooltap.core.parallel import STATES as TURN_STATES
from tooltap.core.schema import STATES as FORMAT_STATES

pytestmark = pytest.mark.timeout(110)

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS_DIR = ROOT / "deploy" / "prometheus"

CHAT, RESPONSES, MESSAGES = "/v1/chat/completions", "/v1/responses", "/v1/messages"
# Bedrock Converse: the model is in the path (the body names none).
NOVA = "us.amazon.nova-pro-v1:0"
CONVERSE, CONVERSE_STREAM = f"/model/{NOVA}/converse", f"/model/{NOVA}/converse-stream"
# Gemini: the model is in the path too.
GEMINI = "gemini-2.5-flash"
GENERATE = f"/v1beta/models/{GEMINI}:generateContent"
GENERATE_STREAM = f"/v1beta/models/{GEMINI}:streamGenerateContent"
# Ollama's own API: the model is in the body; a stream is NDJSON.
OLLAMA, QWEN = "/api/chat", "qwen3:8b"
# Cohere's v2 chat: the model is the request's (the answer names none); a stream is SSE.
COHERE, COMMAND = "/v2/chat", "command-a-03-2025"
API_OF_PATH = {
    CHAT: "chat",
    RESPONSES: "responses",
    MESSAGES: "messages",
    CONVERSE: "converse",
    CONVERSE_STREAM: "converse",
    GENERATE: "gemini",
    GENERATE_STREAM: "gemini",
    OLLAMA: "ollama",
    COHERE: "cohere",
}

# Models. A: mostly void; B: at-risk only (exposure 0, the `or ... * 0` arm); C: half and half,
# with a schema error; D: fan-out and serialised only (no strict series at all). E and F have
# strict series whose rate is 0 in the window, so their exposure is 0/0 and the `> 0` guard
# must leave them out: E's one at-risk turn is in the first pass only, before the first scrape;
# F's is in the second pass only, where it is a series' first increment, which rate() cannot
# see (Prometheus knows no value before a series' first sample).
A = "gpt-4o-2024-08-06"
B = "gpt-4o-mini-2024-07-18"
C = "gpt-4.1-2025-04-14"
D = "gpt-4.1-mini-2025-04-14"
E = "gpt-4o-2024-05-13"
F = "gpt-4o-2024-11-20"
GPT54 = "gpt-5.4"
GPT51 = "gpt-5.1-2025-11-13"
HAIKU = "claude-haiku-4-5-20251001"
SONNET4 = "claude-sonnet-4-20250514"
SONNET37 = "claude-3-7-sonnet-20250219"

# The headline numbers, written out by hand: the script below must produce them.
VOID, AT_RISK = 5, 6  # strict-void and strict-at-risk turns per pass that rate() can see
EXPOSURE = VOID / (VOID + AT_RISK)  # 5/11
EXPOSURE_BY_MODEL = {A: 4 / 5, B: 0.0, C: 1 / 2, GPT54: 0.0, GPT51: 0.0}  # E, F: none
EXPOSURE_BY_API = {"chat": 5 / 9, "responses": 0.0}  # messages: never void, no series
FLOWS = 29  # requests per pass


def _function(name: str, properties: dict[str, Any], strict: bool = True) -> dict[str, Any]:
    tool: dict[str, Any] = {
        "name": name,
        "parameters": {
            "type": "object",
            "additionalProperties": False,
            "required": sorted(properties),
            "properties": properties,
        },
    }
    if strict:
        tool["strict"] = True
    return {"type": "function", "function": tool}


STRING = {"type": "string"}
WEATHER_ARGS = {"city": STRING, "country": STRING, "units": {"type": "string", "enum": ["c", "f"]}}
STOCK = {"ticker": STRING, "exchange": STRING}
STRICT_TOOLS = [_function("GetWeatherArgs", WEATHER_ARGS), _function("get_stock_price", STOCK)]
LOOSE_TOOLS = [
    _function("GetWeatherArgs", WEATHER_ARGS, strict=False),
    _function("get_stock_price", STOCK, strict=False),
]
CITY_STATE_TOOL = [_function("get_weather", {"city": STRING, "state": STRING})]
CITY_TOOL = [_function("get_weather", {"city": STRING})]
ANTHROPIC_STRICT_TOOL = [
    {
        "name": "get_weather",
        "strict": True,
        "input_schema": {
            "type": "object",
            "additionalProperties": False,
            "required": ["location"],
            "properties": {"location": STRING},
        },
    }
]
ANTHROPIC_FILE_TOOL = [
    {
        "name": "make_file",
        "input_schema": {
            "type": "object",
            "required": ["filename", "lines_of_text"],
            "properties": {"filename": STRING, "lines_of_text": {"type": "array", "items": STRING}},
        },
    }
]
ASK = [{"role": "user", "content": "What's the weather in Edinburgh and AAPL's price?"}]
STRICT_FORMAT = {
    "type": "json_schema",
    "json_schema": {
        "name": "answer",
        "strict": True,
        "schema": {
            "type": "object",
            "additionalProperties": False,
            "required": ["text"],
            "properties": {"text": STRING},
        },
    },
}


def chat_body(model: str, calls: int = 2, bad_units: bool = False, third: bool = False) -> bytes:
    """The real non-streamed parallel Chat capture, with its model and tool calls adjusted."""
    body = json.loads((WIRE / "chat_nonstream_parallel_tool_calls.json").read_text())
    body["model"] = model
    message = body["choices"][0]["message"]
    if bad_units:  # "kelvin" is not in the enum: a schema error, in a strict-void turn
        message["tool_calls"][0]["function"]["arguments"] = (
            '{"city": "Edinburgh", "country": "GB", "units": "kelvin"}'
        )
    if third:  # GetWeatherArgs twice: a duplicate-name turn
        message["tool_calls"].append(
            {
                "id": "call_3rdLookupOrder00000000",
                "type": "function",
                "function": {
                    "name": "GetWeatherArgs",
                    "arguments": '{"city": "Lisbon", "country": "PT", "units": "c"}',
                },
            }
        )
    message["tool_calls"] = message["tool_calls"][: 3 if third else calls]
    return json.dumps(body).encode()


def json_reply(body: bytes, status: int = 200) -> Reply:
    return Reply(status=status, headers=JSON_HEADERS, chunks=[body])


def sse_reply(wire: bytes) -> Reply:
    return Reply(headers=SSE_HEADERS, chunks=events(wire), delay=0.002)


CONVERSE_TOOLS = {"tools": [{"toolSpec": {"name": "get_weather", "inputSchema": {"json": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}}]}  # fmt: skip
CONVERSE_ASK = {"messages": [{"role": "user", "content": [{"text": "Weather in Paris?"}]}],
                "toolConfig": CONVERSE_TOOLS}  # fmt: skip
CONVERSE_USE = {"toolUseId": "tooluse_e2e1", "name": "get_weather", "input": {"city": "Paris"}}


def converse_reply() -> Reply:
    body = {"output": {"message": {"role": "assistant", "content": [{"toolUse": CONVERSE_USE}]}},
            "stopReason": "tool_use", "usage": {"inputTokens": 30, "outputTokens": 9}}  # fmt: skip
    return json_reply(json.dumps(body).encode())


def converse_stream_reply() -> Reply:
    start = {"toolUseId": CONVERSE_USE["toolUseId"], "name": "get_weather"}
    frames = [
        converse_event("messageStart", {"role": "assistant"}),
        converse_event("contentBlockStart", {"contentBlockIndex": 0, "start": {"toolUse": start}}),
        converse_event("contentBlockDelta", {"contentBlockIndex": 0,
                                             "delta": {"toolUse": {"input": '{"city": "Paris"}'}}}),
        converse_event("contentBlockStop", {"contentBlockIndex": 0}),
        converse_event("messageStop", {"stopReason": "tool_use"}),
        converse_event("metadata", {"usage": {"inputTokens": 30, "outputTokens": 9}}),
    ]  # fmt: skip
    headers = [("content-type", "application/vnd.amazon.eventstream")]
    return Reply(headers=headers, chunks=frames, delay=0.002)


GEMINI_TOOLS = [{"functionDeclarations": [{"name": "get_weather", "parameters": {
    "type": "OBJECT", "properties": {"city": {"type": "STRING"}}, "required": ["city"]}}]}]  # fmt: skip
GEMINI_ASK = {"contents": [{"role": "user", "parts": [{"text": "Weather in Paris and Rome?"}]}],
              "tools": GEMINI_TOOLS}  # fmt: skip


def gemini_body(*cities: str) -> dict[str, Any]:
    parts = [{"functionCall": {"name": "get_weather", "args": {"city": c}}} for c in cities]
    return {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 30, "candidatesTokenCount": 9},
            "modelVersion": GEMINI, "responseId": "e2eGeminiResponse1"}  # fmt: skip


def gemini_stream_reply() -> Reply:
    chunk = b"data: " + json.dumps(gemini_body("Paris")).encode() + b"\r\n\r\n"
    return Reply(headers=SSE_HEADERS, chunks=[chunk], delay=0.002)


OLLAMA_ASK = {"model": QWEN, "messages": [{"role": "user", "content": "Weather in Paris?"}],
              "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {
                  "type": "object", "properties": {"city": {"type": "string"}},
                  "required": ["city"]}}}]}  # fmt: skip
OLLAMA_CALL = {"id": "call_e2e0q7rx", "function": {"index": 0, "name": "get_weather",
                                                   "arguments": {"city": "Paris"}}}  # fmt: skip


def ollama_line(message: dict[str, Any], done: bool) -> dict[str, Any]:
    line = {"model": QWEN, "created_at": "2026-12-01T10:00:00Z",
            "message": {"role": "assistant", "content": ""} | message, "done": done}  # fmt: skip
    return line | (
        {"done_reason": "stop", "prompt_eval_count": 30, "eval_count": 9} if done else {}
    )


def ollama_stream_reply() -> Reply:
    lines = [ollama_line({"tool_calls": [OLLAMA_CALL]}, False), ollama_line({}, True)]
    chunks = [json.dumps(line).encode() + b"\n" for line in lines]
    return Reply(headers=[("content-type", "application/x-ndjson")], chunks=chunks, delay=0.002)


COHERE_ASK = {"model": COMMAND, "messages": [{"role": "user", "content": "Paris and Rome?"}],
              "strict_tools": True, "tools": [{"type": "function", "function": {
                  "name": "get_weather", "parameters": {"type": "object", "properties": {
                      "city": {"type": "string"}}, "required": ["city"]}}}]}  # fmt: skip


def cohere_call(index: int, city: str) -> dict[str, Any]:
    return {"id": f"get_weather_e2e{index}q7rx0k", "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"city": city})}}  # fmt: skip


def cohere_body(*cities: str) -> dict[str, Any]:
    calls = [cohere_call(i, city) for i, city in enumerate(cities)]
    return {"id": "5bbdb185-19bf-4683-bdbc-7e21f2dead78", "finish_reason": "TOOL_CALL",
            "message": {"role": "assistant", "tool_plan": "Look it up.", "tool_calls": calls},
            "usage": {"billed_units": {"input_tokens": 12, "output_tokens": 9},
                      "tokens": {"input_tokens": 900, "output_tokens": 30}}}  # fmt: skip


def cohere_stream_reply() -> Reply:
    call = cohere_call(0, "Paris")
    started = call | {"function": {"name": "get_weather", "arguments": ""}}
    said = [
        {"id": "5bbdb185-19bf-4683-bdbc-7e21f2dead78", "type": "message-start",
         "delta": {"message": {"role": "assistant", "tool_calls": []}}},
        {"type": "tool-call-start", "index": 0, "delta": {"message": {"tool_calls": started}}},
        {"type": "tool-call-delta", "index": 0, "delta": {"message": {"tool_calls": {
            "function": {"arguments": call["function"]["arguments"]}}}}},
        {"type": "tool-call-end", "index": 0},
        {"type": "message-end", "delta": {"finish_reason": "TOOL_CALL"}},
    ]  # fmt: skip
    chunks = [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in said]
    return Reply(headers=SSE_HEADERS, chunks=[*chunks, b"data: [DONE]\n\n"], delay=0.002)


@dataclass(frozen=True)
class Step:
    """One scripted request, its reply, and what the proxy must make of it (per pass)."""

    scenario: str
    path: str
    request: dict[str, Any]
    reply: Reply
    model: str
    state: str | None  # the parallel/strict state; None: refused, so no turn
    calls: int = 0
    format_state: str | None = "free-text"
    times: int = 1
    schema_errors: int = 0
    parse_errors: int = 0
    duplicate: bool = False
    loop_errors: tuple[str, ...] = ()
    results: tuple[str, ...] = ()  # outcomes of the tool results in the request's history
    rejected: int | None = None
    passes: tuple[int, ...] = (1, 2)
    tool_changes: int = 0  # definitions unlike the first seen from its source: said once

    @property
    def api(self) -> str:
        return API_OF_PATH[self.path.split("?")[0]]


def _anthropic(name: str, index: int) -> tuple[str, dict[str, Any], Reply]:
    """A recorded Anthropic round trip's request path, body and reply, as recorded."""
    pair = pairs(name)[index]
    path = "/v1/messages" + ("?beta=true" if pair.url.endswith("?beta=true") else "")
    return path, pair.request, json_reply(pair.body, pair.status)


def _chat(model: str, tools: list[dict[str, Any]], stream: bool = False, **extra: Any) -> dict:
    return {"model": model, "messages": ASK, "tools": tools, "stream": stream, **extra}


_ROUNDTRIP = "anthropic_roundtrip_tool_use_tool_result.json"
_IS_ERROR = "anthropic_roundtrip_tool_result_is_error.json"
_ORPHAN = "anthropic_400_orphan_tool_result.json"

SCRIPT: list[Step] = [
    # --- Chat, model A: 4 void, 1 at-risk --------------------------------------------------
    Step("a-void", CHAT, _chat(A, STRICT_TOOLS), json_reply(chat_body(A)), A, "strict-void", 2, times=2),
    Step("a-void-dup", CHAT, _chat(A, STRICT_TOOLS), json_reply(chat_body(A, third=True)), A,
         "strict-void", 3, duplicate=True),
    Step("a-void-sse", CHAT, _chat(A, STRICT_TOOLS, stream=True),
         sse_reply(stream_bytes("chat_stream_parallel_tool_calls_with_usage.sse")), A,
         "strict-void", 2),
    Step("a-at-risk-sse", CHAT, _chat(A, CITY_STATE_TOOL, stream=True),
         sse_reply(stream_bytes("chat_stream_strict_tool_call.sse")), A, "strict-at-risk", 1),
    # --- Chat, model B: at-risk only ------------------------------------------------------
    # Its get_weather is not a-at-risk-sse's (no state property): one tool-changed, said once.
    Step("b-at-risk-sse", CHAT, _chat(B, CITY_TOOL, stream=True),
         sse_reply(stream_bytes("chat_stream_single_tool_call.sse").replace(A.encode(), B.encode())),
         B, "strict-at-risk", 1, times=2, tool_changes=1),
    # --- Chat, model C: 1 void (with a schema error), 1 at-risk with an enforced format ---
    Step("c-void-bad-args", CHAT, _chat(C, STRICT_TOOLS), json_reply(chat_body(C, bad_units=True)),
         C, "strict-void", 2, schema_errors=1),
    Step("c-at-risk-enforced", CHAT, _chat(C, STRICT_TOOLS, response_format=STRICT_FORMAT),
         json_reply(chat_body(C, calls=1)), C, "strict-at-risk", 1, format_state="enforced"),
    # --- Chat, model D: no strict parallel traffic at all ---------------------------------
    Step("d-fanout", CHAT, _chat(D, LOOSE_TOOLS), json_reply(chat_body(D)), D,
         "fanout-no-strict", 2, times=2),
    Step("d-serialised", CHAT, _chat(D, STRICT_TOOLS, parallel_tool_calls=False),
         json_reply(chat_body(D, calls=1)), D, "strict-serialised", 1),
    # --- Chat, models E and F: one at-risk turn each, in one pass each --------------------
    Step("e-first-pass-only", CHAT, _chat(E, STRICT_TOOLS), json_reply(chat_body(E, calls=1)), E,
         "strict-at-risk", 1, passes=(1,)),
    Step("f-second-pass-only", CHAT, _chat(F, STRICT_TOOLS), json_reply(chat_body(F, calls=1)),
         F, "strict-at-risk", 1, passes=(2,)),
    # --- Responses: at-risk, streamed and not (strict is read from the response's echo) ---
    Step("responses-json", RESPONSES,
         json.loads((WIRE / "openapi_responses_functions_request.json").read_text()),
         json_reply((WIRE / "openapi_responses_functions_response.json").read_bytes()), GPT54,
         "strict-at-risk", 1),
    Step("responses-sse", RESPONSES, {"model": "gpt-5.1", "input": "weather?", "stream": True},
         sse_reply(stream_bytes("responses_stream_function_call_gpt51.jsonl")), GPT51,
         "strict-at-risk", 1),
    # --- Messages: real recorded round trips ----------------------------------------------
    Step("m-tool-use", *_anthropic(_ROUNDTRIP, 0), HAIKU, "no-strict-declared", 1),
    Step("m-result-ok", *_anthropic(_ROUNDTRIP, 1), HAIKU, "no-strict-declared", 0, results=("ok",)),
    Step("m-result-error", *_anthropic(_IS_ERROR, 1), HAIKU, "no-strict-declared", 0,
         results=("error",)),
    # The API refuses a tool_result with no tool_use before it: a rejected 400, and the loop
    # check names the orphan. The request's model is the label; a refused request is no turn.
    Step("m-orphan-400", *_anthropic(_ORPHAN, 1), "claude-haiku-4-5", None, 0, format_state=None,
         loop_errors=("orphan-result",), results=("ok",), rejected=400),
    # Anthropic documents no strict/parallel conflict: strict with parallel allowed holds. Its
    # get_weather is not the recorded round trips': the same (unnamed) application, endpoint
    # and instructions declared it otherwise, so the first pass says one tool-changed.
    Step("m-strict-sse", MESSAGES,
         {"model": "claude-sonnet-4", "max_tokens": 100, "messages": ASK,
          "tools": ANTHROPIC_STRICT_TOOL, "stream": True},
         sse_reply(stream_bytes("anthropic_stream_text_then_tool_use.sse")), SONNET4,
         "strict-serialised", 1, tool_changes=1),
    # Cut off by max_tokens in the middle of the tool input: the arguments do not parse.
    Step("m-cut-off-sse", MESSAGES,
         {"model": "claude-3-7-sonnet", "max_tokens": 100, "messages": ASK,
          "tools": ANTHROPIC_FILE_TOOL, "stream": True},
         sse_reply(stream_bytes("anthropic_stream_tool_use_max_tokens_incomplete_json.sse")),
         SONNET37, "no-strict-declared", 1, parse_errors=1),
    # --- Bedrock Converse, streamed (AWS's event stream) and not ---------------------------
    Step("converse", CONVERSE, CONVERSE_ASK, converse_reply(), NOVA, "no-strict-declared", 1),
    Step("converse-stream", CONVERSE_STREAM, CONVERSE_ASK, converse_stream_reply(), NOVA,
         "no-strict-declared", 1),
    # --- Gemini: a fan-out under AUTO (no guarantee), one call under ANY (schemas adhered) -
    Step("gemini", GENERATE, GEMINI_ASK, json_reply(json.dumps(gemini_body("Paris", "Rome")).encode()),
         GEMINI, "fanout-no-strict", 2, duplicate=True),
    Step("gemini-stream", GENERATE_STREAM + "?alt=sse",
         GEMINI_ASK | {"toolConfig": {"functionCallingConfig": {"mode": "ANY"}}},
         gemini_stream_reply(), GEMINI, "strict-serialised", 1),
    # --- Ollama's own API: no strict tools; streamed as NDJSON and not ----------------------
    Step("ollama", OLLAMA, OLLAMA_ASK | {"stream": False},
         json_reply(json.dumps(ollama_line({"tool_calls": [OLLAMA_CALL]}, True)).encode()),
         QWEN, "no-strict-declared", 1),
    Step("ollama-stream", OLLAMA, OLLAMA_ASK, ollama_stream_reply(), QWEN, "no-strict-declared", 1),
    # --- Cohere's v2 chat: strict_tools, and a fan-out under it voids nothing ----------------
    Step("cohere", COHERE, COHERE_ASK, json_reply(json.dumps(cohere_body("Paris", "Rome")).encode()),
         COMMAND, "strict-serialised", 2, duplicate=True),
    Step("cohere-stream", COHERE, COHERE_ASK | {"stream": True}, cohere_stream_reply(), COMMAND,
         "strict-serialised", 1),
]  # fmt: skip
BY_SCENARIO = {step.scenario: step for step in SCRIPT}


def route(seen: Seen) -> Reply:
    step = BY_SCENARIO.get(seen.headers.get("x-scenario", ""))
    return step.reply if step else json_reply(b'{"error": {"message": "no such scenario"}}', 404)


# --- what the script implies --------------------------------------------------------------

Labels = tuple[tuple[str, str], ...]
Samples = dict[tuple[str, Labels], float]


def _labels(**labels: str) -> Labels:
    return tuple(sorted(labels.items()))


def _le(bound: float) -> str:
    return "+Inf" if math.isinf(bound) else repr(float(bound))


def in_pass(number: int) -> list[Step]:
    return [step for step in SCRIPT if number in step.passes]


def expected_samples(buckets: list[float], passes: int = 1) -> Samples:
    """Every sample the proxy's /metrics must show after `passes` passes of the script, except
    the inspect-time buckets and sums (wall-clock) and the `_created` timestamps. The bucket
    bounds of tooltap_calls_per_turn are read from the proxy itself; the counts are not."""
    found: Counter[tuple[str, Labels]] = Counter()
    # Label sets the proxy creates at 0, so panels and alerts have a series before any event.
    for api in APIS:
        for outcome in FLOW_OUTCOMES - {"not_read"}:
            found[("tooltap_flows_total", _labels(api=api, outcome=outcome))] += 0
        for rule in LOOP_RULES:
            found[("tooltap_loop_errors_total", _labels(api=api, rule=rule))] += 0
        for outcome in ("ok", "error"):
            found[("tooltap_tool_results_total", _labels(api=api, outcome=outcome))] += 0
        found[("tooltap_tool_changes_total", _labels(api=api, server=""))] += 0
        for where in ("definition", "result"):
            found[("tooltap_hidden_text_total", _labels(api=api, where=where))] += 0
        for name in ("tooltap_serial_batches_total", "tooltap_overdue_calls_total"):
            found[(name, _labels(api=api))] += 0
    found[("tooltap_flows_total", _labels(api="none", outcome="not_read"))] += 0
    for where in ("hook", "tap", "worker"):
        found[("tooltap_internal_errors_total", _labels(where=where))] += 0
    skips = COUNTERS["tooltap_websocket_messages_skipped_total"]
    for api in skips["api"] or ():
        for reason in skips["reason"] or ():
            found[
                ("tooltap_websocket_messages_skipped_total", _labels(api=api, reason=reason))
            ] += 0
    found[("tooltap_inspector_restarts_total", ())] += 0  # the inspector was never restarted
    found[("tooltap_state_errors_total", ())] += 0  # its own memory: nothing shared to miss
    for outcome in COUNTERS["tooltap_spans_total"]["outcome"] or ():
        found[("tooltap_spans_total", _labels(outcome=outcome))] += 0  # no trace export here
    for step in SCRIPT:
        api, model = step.api, step.model
        n = step.times * sum(1 for number in step.passes if number <= passes)
        if not n:
            continue
        if step.tool_changes and min(step.passes) <= passes:  # once, whatever the passes
            key = _labels(api=api, server="")
            found[("tooltap_tool_changes_total", key)] += step.tool_changes
        found[("tooltap_flows_total", _labels(api=api, outcome="inspected"))] += n
        found[("tooltap_inspect_seconds_count", _labels(api=api))] += n
        for rule in step.loop_errors:
            found[("tooltap_loop_errors_total", _labels(api=api, rule=rule))] += n
        for outcome in step.results:
            found[("tooltap_tool_results_total", _labels(api=api, outcome=outcome))] += n
        if step.rejected is not None:
            status = str(step.rejected)
            found[("tooltap_rejected_requests_total", _labels(api=api, status=status))] += n
        if step.state is None:
            continue
        by_model = _labels(api=api, model=model)
        # A model's first turn creates all of its per-model series at 0 (addon/metrics.py).
        for state in TURN_STATES:
            found[("tooltap_turns_total", _labels(api=api, model=model, state=state))] += 0
        for state in FORMAT_STATES:
            found[("tooltap_formats_total", _labels(api=api, model=model, state=state))] += 0
        for kind in ("parse", "schema"):
            found[("tooltap_argument_errors_total", _labels(api=api, model=model, kind=kind))] += 0
        for name in (
            "tooltap_tool_calls_total",
            "tooltap_unguaranteed_arguments_total",
            "tooltap_duplicate_calls_total",
        ):
            found[(name, by_model)] += 0
        found[("tooltap_turns_total", _labels(api=api, model=model, state=step.state))] += n
        # Every finished turn through the proxy is timed (its buckets and sum are wall-clock).
        found[("tooltap_model_duration_seconds_count", by_model)] += n
        if step.format_state is not None:
            key = _labels(api=api, model=model, state=step.format_state)
            found[("tooltap_formats_total", key)] += n
        for bound in buckets:
            key = _labels(api=api, le=_le(bound))
            found[("tooltap_calls_per_turn_bucket", key)] += n if step.calls <= bound else 0
        found[("tooltap_calls_per_turn_count", _labels(api=api))] += n
        found[("tooltap_calls_per_turn_sum", _labels(api=api))] += n * step.calls
        if step.calls:
            found[("tooltap_tool_calls_total", by_model)] += n * step.calls
        if step.state == "strict-void":
            found[("tooltap_unguaranteed_arguments_total", by_model)] += n * step.calls
        if step.duplicate:
            found[("tooltap_duplicate_calls_total", by_model)] += n
        for kind, count in (("parse", step.parse_errors), ("schema", step.schema_errors)):
            if count:
                key = _labels(api=api, model=model, kind=kind)
                found[("tooltap_argument_errors_total", key)] += n * count
    return {key: float(value) for key, value in found.items()}


def visible(buckets: list[float]) -> Samples:
    """What rate() and increase() can see of the second pass, per series: the rise from the
    first scrape (which holds pass 1 whole) on. A series born in pass 2 rises from nothing,
    which Prometheus cannot tell from a series it had not scraped yet: it shows 0."""
    before, after = expected_samples(buckets, 1), expected_samples(buckets, 2)
    return {key: value - before[key] if key in before else 0.0 for key, value in after.items()}


# Series whose values are what each reply's usage and timing say, checked apart from the script's
# exact counts (test_every_finished_turn_counts_its_tokens_and_streams_their_first_token).
TIMED = ("tooltap_tokens_total", "tooltap_first_token_seconds", "tooltap_tool_wait_seconds",
         "tooltap_tool_run_seconds")  # fmt: skip


def counted(samples: Samples) -> Samples:
    """The samples the script's counts say exactly: all but TIMED's."""
    return {key: value for key, value in samples.items() if not key[0].startswith(TIMED)}


def live_samples(text: str) -> tuple[Samples, list[float]]:
    """The proxy's /metrics as comparable samples, and its calls-per-turn bucket bounds."""
    samples: Samples = {}
    buckets: set[float] = set()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "tooltap_calls_per_turn_bucket":
                buckets.add(float(sample.labels["le"]))
            skip = sample.name.endswith("_created") or sample.name in (
                "tooltap_inspect_seconds_bucket",
                "tooltap_inspect_seconds_sum",
                "tooltap_model_duration_seconds_bucket",
                "tooltap_model_duration_seconds_sum",
                # How many bytes were held at once depends on timing: checked against the budget.
                "tooltap_held_bytes",
                "tooltap_held_peak_bytes",
            )
            if not skip:
                samples[(sample.name, _labels(**sample.labels))] = sample.value
    return samples, sorted(buckets)


def aggregate(samples: Samples, name: str, by: tuple[str, ...] = (), **match: str) -> dict:
    """sum by (by) (name{label=~"a|b"...}) over samples: {Labels: value}."""
    out: dict[Labels, float] = defaultdict(float)
    for (sample, labels), value in samples.items():
        values = dict(labels)
        if sample != name or any(values.get(k) not in v.split("|") for k, v in match.items()):
            continue
        out[tuple((k, values[k]) for k in sorted(by))] += value
    return dict(out)


def exposure(samples: Samples, by: tuple[str, ...] = ()) -> dict[Labels, float]:
    void = aggregate(samples, "tooltap_turns_total", by, state="strict-void")
    risky = aggregate(samples, "tooltap_turns_total", by, state="strict-void|strict-at-risk")
    return {key: void.get(key, 0.0) / total for key, total in risky.items() if total > 0}


# --- the run ------------------------------------------------------------------------------


@dataclass
class Run:
    """What one end-to-end run observed, for the tests below to judge."""

    at: float = 0.0  # the evaluation time of every query
    results: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    factor: dict[str, float] = field(default_factory=dict)  # window -> increase / scripted count
    samples_after: dict[int, Samples] = field(default_factory=dict)  # pass -> proxy /metrics
    expected_after: dict[int, Samples] = field(default_factory=dict)
    metrics_text: str = ""
    series_names: set[str] = field(default_factory=set)  # names with series in Prometheus
    rules: list[dict[str, Any]] = field(default_factory=list)
    targets: list[dict[str, Any]] = field(default_factory=list)
    alerts: list[dict[str, Any]] = field(default_factory=list)
    turn_events: list[dict[str, Any]] = field(default_factory=list)
    samples_in_window: float = 0.0
    down: list[dict[str, Any]] = field(default_factory=list)  # TooltapDown once the proxy stopped
    up_after_stop: float | None = None


def all_expressions() -> list[tuple[str, str]]:
    return rule_expressions() + dashboard_expressions()


def windows(expr: str) -> set[str]:
    return set(re.findall(r"\[(\d+[smh])\]", concrete(expr)))


def drive(proxy: Proxy, number: int) -> None:
    """One pass of the script through the proxy; every reply arrives byte for byte."""
    with httpx.Client(base_url=proxy.url, timeout=15) as client:
        for step in in_pass(number):
            for _ in range(step.times):
                with client.stream(
                    "POST", step.path, json=step.request, headers={"x-scenario": step.scenario}
                ) as response:
                    body = b"".join(response.iter_raw())
                assert response.status_code == step.reply.status, step.scenario
                assert body == step.reply.body, step.scenario


def scrape(proxy: Proxy) -> str:
    assert proxy.metrics_url
    return httpx.get(proxy.metrics_url, timeout=5).text


def wait_for_pass(proxy: Proxy, passes: int) -> tuple[Samples, Samples]:
    """The proxy's samples once they equal what `passes` runs of the script imply (bounded);
    on timeout the last ones are returned, and the test comparing them shows the difference."""
    deadline = time.monotonic() + 15
    while True:
        live, buckets = live_samples(scrape(proxy))
        expected = expected_samples(buckets, passes)
        if counted(live) == expected or time.monotonic() > deadline:
            return live, expected
        time.sleep(0.05)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    found = Run()
    tmp = tmp_path_factory.mktemp("prometheus")
    reference = 'sum(increase(tooltap_flows_total{outcome="inspected"}[%s]))'
    with (
        ReplayServer(route) as upstream,
        Proxy.tooltap([upstream.url], "--log-format", "json") as proxy,
    ):
        # Pass 1, before Prometheus exists: every series is born.
        drive(proxy, 1)
        found.samples_after[1], found.expected_after[1] = wait_for_pass(proxy, 1)
        assert proxy.metrics_url
        target = proxy.metrics_url.removeprefix("http://").removesuffix("/metrics")
        prometheus = start_prometheus(tmp, target)
        try:
            # Its first scrape holds pass 1 whole; then pass 2 while it scrapes.
            wait_until(
                "the first scrape",
                lambda: prometheus.value('up{job="tooltap"}') == 1,
                timeout=15,
            )
            drive(proxy, 2)
            found.samples_after[2], found.expected_after[2] = wait_for_pass(proxy, 2)
            settled = time.time()  # every increment of pass 2 is in /metrics by now
            found.metrics_text = scrape(proxy)
            found.turn_events = proxy.wait_for("turn", 2 * FLOWS, timeout=5)

            def scraped_after_settled() -> float | None:
                last = prometheus.value('timestamp(up{job="tooltap"})')
                return last if last is not None and last > settled else None

            complete = wait_until("a scrape after the second pass", scraped_after_settled, 15)
            total = prometheus.value('sum(tooltap_flows_total{outcome="inspected"})', complete)
            assert total == 2 * FLOWS, total

            def evaluated_after_complete() -> float | None:
                # A rule evaluation clearly after that scrape and the next one (so that series
                # born in pass 2 have two samples), with enough samples for rate().
                recorded = prometheus.value("timestamp(tooltap:exposure_rate:5m)")
                if recorded is None or recorded < complete + 1.25:
                    return None
                at = recorded + 0.001
                count = prometheus.value('count_over_time(up{job="tooltap"}[5m])', at) or 0
                return at if count >= 5 else None

            found.at = wait_until(
                "a rule evaluation after the last scrape", evaluated_after_complete, timeout=20
            )
            time.sleep(max(0.0, found.at + 0.5 - time.time()))  # every sample <= at is written
            found.samples_in_window = prometheus.value(
                'count_over_time(up{job="tooltap"}[5m])', found.at
            )
            for where, expr in all_expressions():
                found.results[where] = prometheus.query(concrete(expr), found.at)
            for expr in {concrete(e) for _, e in all_expressions()}:
                for window in windows(expr):
                    value = prometheus.value(reference % window, found.at)
                    found.factor[window] = (value or 0.0) / FLOWS
            names = prometheus.query("count by (__name__) ({__name__=~'.+'})", found.at)
            found.series_names = {r["metric"]["__name__"] for r in names}
            found.rules = [
                rule
                for group in prometheus.api("/api/v1/rules")["groups"]
                for rule in group["rules"]
            ]
            found.targets = prometheus.api("/api/v1/targets")["activeTargets"]
            found.alerts = wait_until(
                "the alerts to settle",
                lambda: _settled(prometheus.api("/api/v1/alerts")["alerts"]),
                timeout=10,
            )
            # Then the proxy goes away: TooltapDown must see it.
            proxy.stop()
            wait_until(
                "a failed scrape",
                lambda: prometheus.value('up{job="tooltap"}') == 0,
                timeout=15,
            )
            down = dict(rule_expressions())["TooltapDown"]
            found.down = prometheus.query(down)
            found.up_after_stop = prometheus.value(
                concrete(dict(dashboard_expressions())["tooltap/Proxies up/A"])
            )
        finally:
            stop_prometheus(prometheus)
    yield found


def _settled(alerts: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    names = {a["labels"]["alertname"] for a in alerts}
    wanted = {"TooltapArgumentErrors", "TooltapLoopErrors", "TooltapStrictGuaranteeVoid"}
    return alerts if wanted <= names else None


# --- the expectations, one per expression -------------------------------------------------


@dataclass(frozen=True)
class Expect:
    """What an expression must return for the script.

    kind "counts": {labels: count rate() can see}; each value must be count x the window's
    extrapolation factor (divided by the window for rate()). kind "values": exact values
    (ratios, gauges). kind "raw": the raw series, exactly (two passes). kind "empty": no series,
    for the reason given. kind "quantile": one latency in seconds, within the bucket range.
    kind "budget": one byte count, at most tooltap_memory_budget. kind "timed": times or
    rates measured live, so only their range: some series, each a positive finite number (or
    NaN: a quantile of a label set with nothing in the window), its labels among `values`'.
    """

    kind: str
    values: Mapping[Labels, float] = field(default_factory=dict)
    reason: str = ""


def expectations(buckets: list[float]) -> dict[str, Expect]:
    one = visible(buckets)
    two = expected_samples(buckets, 2)

    def counts(name: str, by: tuple[str, ...] = (), positive: bool = False, **match: str):
        found = aggregate(one, name, by, **match)
        return Expect("counts", {k: v for k, v in found.items() if v > 0 or not positive})

    def shown(found: dict[Labels, float]) -> dict[Labels, float]:
        """As Prometheus shows a series: a label with an empty value is no label."""
        return {tuple((k, v) for k, v in labels if v): value for labels, value in found.items()}

    def raw(name: str, **unless: str) -> Expect:
        """The series of a metric, but those with a label of the given value."""
        return Expect(
            "raw",
            {
                labels: v
                for (n, labels), v in two.items()
                if n == name and not set(unless.items()) & set(labels)
            },
        )

    strict_states = "strict-void|strict-at-risk|fanout-no-strict"
    models = dict.fromkeys(aggregate(one, "tooltap_turns_total", ("model",)), 0.0)
    apis = dict.fromkeys(((("api", api),) for api in APIS), 0.0)
    void_by_model = exposure(one, ("model",))
    board = "tooltap/"
    return {
        "tooltap:exposure_rate:5m": Expect("values", exposure(one)),
        "tooltap:exposure_rate_by_model:5m": Expect("values", void_by_model),
        "tooltap:exposure_rate_by_api:5m": Expect("values", exposure(one, ("api",))),
        "TooltapStrictGuaranteeVoid": Expect(
            "values", {k: v for k, v in void_by_model.items() if v > 0.05}
        ),
        "TooltapArgumentErrors": counts(
            "tooltap_argument_errors_total", ("api", "model", "kind"), positive=True
        ),
        "TooltapLoopErrors": counts("tooltap_loop_errors_total", ("api", "rule"), positive=True),
        # The one change came in the first pass, before the first scrape: increase() cannot see
        # it, the arm for a series newer than 10 minutes does (a Prometheus this young holds no
        # older sample). No hidden text was sent.
        "TooltapToolDefinitions": Expect(
            "values",
            shown(
                {
                    labels: value
                    for labels, value in aggregate(
                        two, "tooltap_tool_changes_total", ("api", "server")
                    ).items()
                    if value > 0
                }
            ),
        ),
        # The proxy creates the dropped and internal-error series at 0, nothing was dropped
        # and nothing raised, so both arms are filtered out by `> 0`: no alert, as it should.
        "TooltapFlowsDropped": Expect("empty", reason="no flow was dropped (the series is 0)"),
        "TooltapInternalErrors": Expect("empty", reason="no exception was caught (series at 0)"),
        # The target is up; the other way round is checked after the proxy stops.
        "TooltapDown": Expect("empty", reason="the proxy is up while it is evaluated"),
        # Coverage: every scripted flow was inspected, the inspector never restarted, and
        # neither Redis nor a collector is configured (their series stay at 0).
        "TooltapFlowsSkipped": Expect("empty", reason="no flow was skipped"),
        "TooltapFlowsUnparseable": Expect("empty", reason="every body was read"),
        "TooltapInspectorRestarts": Expect("empty", reason="the inspector ran throughout"),
        "TooltapStateErrors": Expect("empty", reason="no shared state: the series is 0"),
        "TooltapSpansDropped": Expect("empty", reason="no collector: no span was made"),
        board + "Exposure rate (5m)/A": Expect("values", exposure(one)),
        board + "Exposure rate by model/A": Expect("values", void_by_model),
        board + "Strict turns per second by state/A": counts(
            "tooltap_turns_total", ("state",), state=strict_states
        ),
        board + "Argument objects without guarantee/A": counts(
            "tooltap_unguaranteed_arguments_total", ("model",)
        ),
        board + "Tool calls per second/A": counts("tooltap_tool_calls_total", ("model",)),
        board + "Tool calls per second/B": counts("tooltap_duplicate_calls_total", ("model",)),
        board + "Argument errors by kind/A": counts("tooltap_argument_errors_total", ("kind",)),
        board + "Tool calls per turn/A": counts("tooltap_calls_per_turn_bucket", ("le",)),
        board + "Tool-loop errors by rule/A": counts("tooltap_loop_errors_total", ("rule",)),
        board + "Tool failures/A": counts("tooltap_tool_results_total", ("api",), outcome="error"),
        board + "Rejected requests/A": counts("tooltap_rejected_requests_total", ("api", "status")),
        board + "Output-format states/A": counts("tooltap_formats_total", ("state",)),
        board + "Realtime session errors/A": Expect(
            "empty", reason="the script is HTTP only: no Realtime session, no series"
        ),
        # The script has no MCP traffic: no server, so no series; the unlisted-tool series is
        # there at 0 (created for every API), and 0 results make the failure share empty.
        board + "MCP tool calls per second/A": Expect("empty", reason="no MCP server: no series"),
        board + "MCP argument and result errors/A": Expect(
            "empty", reason="no MCP server: no series"
        ),
        board + "MCP tool failure share/A": Expect("empty", reason="no MCP result: 0/0 is empty"),
        board + "MCP JSON-RPC rejections by code/A": Expect(
            "empty", reason="no MCP request: no code"
        ),
        board + "MCP unlisted-tool calls/A": Expect("values", {(): 0.0}),
        board + "Tool definitions changed/A": Expect(
            "counts", shown(aggregate(one, "tooltap_tool_changes_total", ("api", "server")))
        ),
        board + "Hidden text in definitions and results/A": counts(
            "tooltap_hidden_text_total", ("where",)
        ),
        # Time: the script's turns are timed live (streams with their first token); a follow-up
        # answers calls a turn before it made; no call runs on an MCP server, none is overdue,
        # and the counters of both are there at 0 for every API.
        "TooltapToolCallsOverdue": Expect("empty", reason="no call overdue (the series is 0)"),
        "TooltapSerialBatches": Expect("empty", reason="no batch ran serially (series at 0)"),
        board + "Model time by model/A": Expect("timed", models),
        board + "Model time by model/B": Expect("timed", models),
        board + "Time to first token by model/A": Expect("timed", models),
        board + "Time to first token by model/B": Expect("timed", models),
        board + "Output tokens per second by model/A": Expect("timed", models),
        board + "Tool wait and run p95/A": Expect("timed", apis),
        board + "Tool wait and run p95/B": Expect("empty", reason="no MCP server: no run"),
        board + "Serial batches and overdue calls/A": Expect("values", dict.fromkeys(apis, 0.0)),
        board + "Serial batches and overdue calls/B": Expect("values", dict.fromkeys(apis, 0.0)),
        board + "Proxies up/A": Expect("values", {(): 1.0}),
        # A 0, not "No data": the series exist at 0 and nothing was dropped or raised.
        board + "Dropped flows/A": counts("tooltap_flows_total", outcome="dropped"),
        board + "Internal errors/A": counts("tooltap_internal_errors_total"),
        board + "Inspector restarts/A": Expect("values", {(): 0.0}),
        board + "Shared state misses/A": counts("tooltap_state_errors_total"),
        board + "Memory held for inspection/A": Expect("budget"),
        board + "Memory held for inspection/B": Expect("budget"),
        board + "Flows by outcome/A": counts("tooltap_flows_total", ("outcome",)),
        # The script is HTTP only: every reason's series is there, at 0.
        board + "WebSocket messages skipped/A": counts(
            "tooltap_websocket_messages_skipped_total", ("reason",)
        ),
        # Trace export is off here: both series are there, at 0.
        board + "Trace spans/A": counts("tooltap_spans_total", ("outcome",)),
        board + "Inspection latency/A": Expect("quantile"),
        board + "Inspection latency/B": Expect("quantile"),
        board + "Inspection latency/C": Expect("quantile"),
        board + "$api": raw("tooltap_flows_total", api="none"),  # the picker offers APIs only
        board + "$model": raw("tooltap_turns_total"),
    }


def observed(result: list[dict[str, Any]]) -> dict[Labels, float]:
    out = {}
    for series in result:
        labels = {k: v for k, v in series["metric"].items() if k not in ("job", "instance")}
        labels.pop("__name__", None)
        if "le" in labels:
            labels["le"] = _le(float(labels["le"]))
        out[_labels(**labels)] = float(series["value"][1])
    assert len(out) == len(result), result
    return out


def _close(got: float, want: float) -> bool:
    return math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12)


# --- the tests ----------------------------------------------------------------------------


def is_stream(reply: Reply) -> bool:
    kind = dict(reply.headers).get("content-type", "")
    return any(t in kind for t in ("text/event-stream", "vnd.amazon.eventstream", "x-ndjson"))


def test_the_script_is_the_known_mix():
    one = visible([0.0, 1.0, 2.0, 3.0, math.inf])
    turns = aggregate(one, "tooltap_turns_total", ("state",))
    assert turns[(("state", "strict-void"),)] == VOID
    assert turns[(("state", "strict-at-risk"),)] == AT_RISK
    assert turns[(("state", "fanout-no-strict"),)] == 3
    assert sum(step.times for step in in_pass(1)) == sum(s.times for s in in_pass(2)) == FLOWS
    assert exposure(one) == {(): EXPOSURE}
    assert exposure(one, ("model",)) == {(("model", m),): v for m, v in EXPOSURE_BY_MODEL.items()}
    assert exposure(one, ("api",)) == {(("api", a),): v for a, v in EXPOSURE_BY_API.items()}
    assert {step.api for step in SCRIPT} == HTTP_APIS
    streamed = {step.api for step in SCRIPT if is_stream(step.reply)}
    assert streamed == HTTP_APIS  # every HTTP API both streamed and not
    assert {step.api for step in SCRIPT if not is_stream(step.reply)} == HTTP_APIS


def test_every_series_rises_by_its_first_sample_or_not_at_all():
    # The premise of the exact checks: a series that rises in the window rises by exactly the
    # value it had at the first scrape, so rate() extrapolates every series by one factor.
    # Series born in pass 2 hold one increment, which rate() cannot see.
    buckets = [0.0, 1.0, 2.0, 3.0, 5.0, math.inf]
    before, after = expected_samples(buckets, 1), expected_samples(buckets, 2)
    for key, value in after.items():
        if key not in before:
            # Born in pass 2: one increment, or a series created at 0 with a new model.
            assert value in (0, 1), key
        else:
            # Or a series created at 0 with its model, rising for the first time in pass 2.
            assert value in (before[key], 2 * before[key]) or before[key] == 0, (
                key,
                before[key],
                value,
            )
    born_late = {
        key
        for key, value in after.items()
        if key not in before and value and key[0] == "tooltap_turns_total"
    }
    assert born_late == {
        ("tooltap_turns_total", _labels(api="chat", model=F, state="strict-at-risk"))
    }


def test_the_proxy_counts_exactly_what_the_script_sent(run):
    for passes in (1, 2):
        live, expected = run.samples_after[passes], run.expected_after[passes]
        live = counted(live)
        missing = {k: v for k, v in expected.items() if live.get(k) != v}
        extra = {k: v for k, v in live.items() if k not in expected}
        assert not missing and not extra, (
            passes,
            missing,
            {k: live.get(k) for k in missing},
            extra,
        )


def test_every_finished_turn_counts_its_tokens_and_streams_their_first_token(run):
    live = run.samples_after[2]
    for step in SCRIPT:
        if step.state is None:
            continue
        turns = live[
            ("tooltap_model_duration_seconds_count", _labels(api=step.api, model=step.model))
        ]
        input_tokens = live.get(
            ("tooltap_tokens_total", _labels(api=step.api, model=step.model, type="input"))
        )
        assert turns >= 1 and input_tokens is not None, (
            step.scenario,
            sorted(labels for (name, labels) in live if name == "tooltap_tokens_total"),
        )
    said = {labels: value for (name, labels), value in live.items()
            if name == "tooltap_tokens_total" and value > 0}  # fmt: skip
    assert {dict(labels)["type"] for labels in said} >= {"input", "output"}
    streamed = [value for (name, _), value in live.items()
                if name == "tooltap_first_token_seconds_count"]  # fmt: skip
    assert streamed and sum(streamed) > 0  # the script's streams carry output


def test_the_proxy_logged_each_step_with_its_state(run):
    got = Counter((e["api"], e["model"], e["state"], e["calls"]) for e in run.turn_events)
    want: Counter[tuple[str, str, str | None, int]] = Counter()
    for step in SCRIPT:
        # A refused request logs a turn line too: state None, the request's model, no calls.
        want[(step.api, step.model, step.state, step.calls)] += len(step.passes) * step.times
    assert got == want


def test_prometheus_scraped_the_proxy_as_job_tooltap_and_every_rule_evaluates_cleanly(run):
    [target] = run.targets
    assert target["health"] == "up", target
    assert target["labels"]["job"] == "tooltap"
    assert target["scrapeUrl"].endswith("/metrics")
    assert len(run.rules) == len(rule_expressions())
    bad = [(r["name"], r.get("lastError")) for r in run.rules if r["health"] != "ok"]
    assert not bad
    assert run.samples_in_window >= 5  # rate() has well over the two samples it needs


def test_the_extrapolation_factor_is_one_sane_number_per_window(run):
    # increase() over a window reaching back before the first scrape extrapolates the first
    # interval: between 1x and 1.5x the scripted count with at least 5 samples in the window.
    assert set(run.factor) == {"1m", "5m", "10m", "15m", "30m", "1h"}
    for window, factor in run.factor.items():
        assert 1.0 <= factor <= 1.5, (window, factor)


def test_the_exposure_rate_equals_the_scripted_void_over_at_risk_ratio(run):
    [series] = run.results["tooltap:exposure_rate:5m"]
    assert math.isclose(float(series["value"][1]), 5 / 11, rel_tol=1e-9)
    by_model = observed(run.results["tooltap:exposure_rate_by_model:5m"])
    # D has no strict series; E's and F's are flat in the window: 0/0, left out by `> 0`.
    assert set(by_model) == {(("model", m),) for m in EXPOSURE_BY_MODEL}
    for model, ratio in EXPOSURE_BY_MODEL.items():
        assert _close(by_model[(("model", model),)], ratio), model
    by_api = observed(run.results["tooltap:exposure_rate_by_api:5m"])
    assert by_api.keys() == {(("api", a),) for a in EXPOSURE_BY_API}  # messages: never void
    for api, ratio in EXPOSURE_BY_API.items():
        assert _close(by_api[(("api", api),)], ratio), api


def test_the_model_variable_offers_every_scripted_model(run):
    models = {series["metric"]["model"] for series in run.results["tooltap/$model"]}
    assert models == {A, B, C, D, E, F, GPT54, GPT51, HAIKU, SONNET4, SONNET37, NOVA, GEMINI, QWEN,
                      COMMAND}  # fmt: skip


def test_the_api_variable_offers_every_api_the_proxy_counts(run):
    apis = {series["metric"]["api"] for series in run.results["tooltap/$api"]}
    assert apis == APIS


def test_every_rule_and_panel_expression_has_an_expectation():
    assert set(expectations([0.0])) == {where for where, _ in all_expressions()}


@pytest.mark.parametrize(
    ("where", "expr"), all_expressions(), ids=[w for w, _ in all_expressions()]
)
def test_every_expression_returns_what_the_script_implies(run, where, expr):
    _, buckets = live_samples(run.metrics_text)
    expect = expectations(buckets)[where]
    result = run.results[where]
    got = observed(result)
    if expect.kind == "empty":
        assert result == [], (where, expect.reason, result)
        return
    assert result, f"{where}: no data"
    if expect.kind == "budget":  # bytes held at one time: timing, but never past the budget
        [held] = got.values()
        assert 0 <= held <= 256 * 1024 * 1024, (where, held)
        return
    if expect.kind == "timed":
        assert set(got) <= set(expect.values), (where, got, expect.values)
        finite = [v for v in got.values() if not math.isnan(v)]
        assert finite and all(0 < v < math.inf for v in finite), (where, got)
        return
    if expect.kind == "quantile":
        [seconds] = got.values()
        assert 0 < seconds <= 1.0, (where, seconds)  # 1.0 s is the top finite bucket
        if where.endswith("/C"):  # p50 <= p95 <= p99
            latency = [observed(run.results[where[:-1] + ref]) for ref in "ABC"]
            assert [v[()] for v in latency] == sorted(v[()] for v in latency), latency
        return
    assert set(got) == set(expect.values), (where, got, expect.values)
    if expect.kind in ("values", "raw"):
        for labels, want in expect.values.items():
            assert _close(got[labels], want), (where, labels, got[labels], want)
        return
    [window] = windows(expr)
    seconds = {"s": 1, "m": 60, "h": 3600}[window[-1]] * int(window[:-1])
    per = seconds if "rate(" in concrete(expr) else 1
    factor = run.factor[window]
    for labels, count in expect.values.items():
        want = count * factor / per
        assert _close(got[labels], want), (where, labels, got[labels], count, want)


def test_alerts_fire_for_this_traffic_and_not_otherwise(run):
    states = {(a["labels"]["alertname"], a["state"]) for a in run.alerts}
    # No `for`: firing at once. `for: 10m`: pending for the whole short run.
    assert ("TooltapArgumentErrors", "firing") in states
    assert ("TooltapLoopErrors", "firing") in states
    assert ("TooltapToolDefinitions", "firing") in states
    assert ("TooltapStrictGuaranteeVoid", "pending") in states
    names = {name for name, _ in states}
    assert names == {
        "TooltapArgumentErrors",
        "TooltapLoopErrors",
        "TooltapToolDefinitions",
        "TooltapStrictGuaranteeVoid",
    }
    errors = {
        (a["labels"]["model"], a["labels"]["kind"])
        for a in run.alerts
        if a["labels"]["alertname"] == "TooltapArgumentErrors"
    }
    assert errors == {(C, "schema"), (SONNET37, "parse")}
    voided = {
        a["labels"]["model"]
        for a in run.alerts
        if a["labels"]["alertname"] == "TooltapStrictGuaranteeVoid"
    }
    assert voided == {A, C}
    assert all(
        a["annotations"].get("summary") and a["annotations"].get("runbook") for a in run.alerts
    )


def test_tooltap_down_fires_once_the_proxy_is_gone(run):
    [series] = run.down
    assert series["metric"]["job"] == "tooltap"
    assert series["metric"]["instance"] == run.targets[0]["labels"]["instance"]
    assert run.up_after_stop == 0


def test_every_metric_a_rule_or_panel_reads_is_in_the_live_metrics_output(run):
    live = {
        sample.name
        for family in text_string_to_metric_families(run.metrics_text)
        for sample in family.samples
    }
    read = set().union(*(metric_names(expr) for _, expr in all_expressions()))
    recorded = {name for name, _ in rule_expressions() if ":" in name}
    # Labelled by the API's own error codes: no series until a Realtime session sends one
    # (this script is HTTP only); its name is checked against the contract elsewhere.
    read -= {"tooltap_session_errors_total"}
    # Labelled by the MCP server a model's call was linked to: none until one is (no MCP here).
    read -= {"tooltap_tool_run_seconds_bucket"}
    from_prometheus = {"up"}  # Prometheus makes it per target
    assert {name for name in read if ":" in name} <= recorded  # rules.yml defines what is read
    assert {"tooltap:exposure_rate:5m", "tooltap:exposure_rate_by_model:5m"} <= read
    assert read - recorded - from_prometheus <= live, read - recorded - from_prometheus - live
    assert read <= run.series_names, read - run.series_names  # and Prometheus holds them all
