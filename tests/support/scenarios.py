"""Upstream replies built from the real captures, keyed by a scenario name.

Clients pick a scenario with the `x-scenario` request header; streams are cut
into one chunk per SSE event and sent 20 ms apart.
"""

from __future__ import annotations

import gzip
import json

from tooltap.addon.harness.replay import Reply, Seen

from .captures import SSE, WIRE, pairs, stream_bytes

JSON_HEADERS = [("content-type", "application/json"), ("x-request-id", "req_test")]
SSE_HEADERS = [("content-type", SSE["content-type"]), ("cache-control", "no-cache")]


def events(wire: bytes) -> list[bytes]:
    """An SSE body cut after every blank line, the way servers flush it."""
    text = wire.replace(b"\r\n", b"\n")
    parts = [p + b"\n\n" for p in text.split(b"\n\n") if p.strip()]
    return parts


def three_call_chat() -> bytes:
    body = json.loads((WIRE / "chat_nonstream_parallel_tool_calls.json").read_text())
    calls = body["choices"][0]["message"]["tool_calls"]
    third = {
        "id": "call_3rdLookupOrder00000000",
        "type": "function",
        "function": {
            "name": "GetWeatherArgs",
            "arguments": '{"city": "Lisbon", "country": "PT", "units": "c"}',
        },
    }
    body["choices"][0]["message"]["tool_calls"] = [*calls, third]
    return json.dumps(body).encode()


def anthropic_json() -> bytes:
    return pairs("anthropic_roundtrip_tool_use_tool_result.json")[0].body


SCENARIOS: dict[str, Reply] = {
    "chat-json": Reply(
        headers=JSON_HEADERS,
        chunks=[(WIRE / "chat_nonstream_parallel_tool_calls.json").read_bytes()],
    ),
    "chat-3-calls": Reply(headers=JSON_HEADERS, chunks=[three_call_chat()]),
    "chat-gzip": Reply(
        headers=[*JSON_HEADERS, ("content-encoding", "gzip")],
        chunks=[gzip.compress((WIRE / "chat_nonstream_parallel_tool_calls.json").read_bytes())],
    ),
    "chat-sse": Reply(
        headers=SSE_HEADERS,
        chunks=events(stream_bytes("chat_stream_parallel_tool_calls_with_usage.sse")),
        delay=0.02,
    ),
    "azure-chat-sse": Reply(
        headers=SSE_HEADERS,
        chunks=events(stream_bytes("azure_chat_stream_tool_call_excerpt.sse")),
        delay=0.02,
    ),
    "responses-json": Reply(
        headers=JSON_HEADERS,
        chunks=[(WIRE / "openapi_responses_functions_response.json").read_bytes()],
    ),
    "responses-sse": Reply(
        headers=SSE_HEADERS,
        chunks=events(stream_bytes("responses_stream_function_call_gpt51.jsonl")),
        delay=0.02,
    ),
    "messages-json": Reply(headers=JSON_HEADERS, chunks=[anthropic_json()]),
    "messages-sse": Reply(
        headers=SSE_HEADERS,
        chunks=events(stream_bytes("anthropic_stream_text_then_tool_use.sse")),
        delay=0.02,
    ),
    "messages-400": Reply(
        status=400,
        headers=JSON_HEADERS,
        chunks=[pairs("anthropic_400_orphan_tool_result.json")[1].body],
    ),
}


def route(seen: Seen) -> Reply:
    name = seen.headers.get("x-scenario", "")
    return SCENARIOS.get(name) or Reply(
        status=404, chunks=[b'{"error": {"message": "no such scenario"}}']
    )
