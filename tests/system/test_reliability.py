"""Attack the real proxy: bad bodies, broken streams, failing upstreams, hostile clients, secrets.

Every case runs three times against the same scripted loopback upstream:
directly, through `tooltap run`, and through plain mitmdump (with
stream_large_bodies=1 for the bodies tooltap streams, since tooltap streams
SSE by design). Through tooltap the client must see exactly what plain
mitmdump shows it (status, every header, every body byte, and the same
failure), and, when the upstream sent a whole response, exactly what the
upstream sent. All with the same client timeout. Afterwards the proxy must
still be serving, and the flow must be logged and counted exactly once, with
the outcome the case calls for and zero internal errors.
"""

from __future__ import annotations

import gzip
import hashlib
import hmac
import itertools
import json
import os
import socket
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import brotli
import httpx
import psutil
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mitmproxy.test import taddons, tflow, tutils
from prometheus_client.parser import text_string_to_metric_families
from support.captures import SSE, WIRE, stream_bytes
from support.scenarios import SCENARIOS, events
from support.scenarios import route as scenario_route
from support.tls import regular_proxy, upstream_tls
from support.upstreams import (
    CLOSE,
    RESET,
    TIMEOUT,
    Got,
    H2Upstream,
    Idle,
    RawUpstream,
    Request,
    chunk,
    fetch,
    head,
    reply,
    upstream_headers,
)

from tooltap.addon.harness.launch import Proxy
from tooltap.addon.proxy.addon import Tooltap
from tooltap.core import Exchange, inspect

JSON_HEADERS = [("content-type", "application/json"), ("x-request-id", "req_reliability")]
SSE_HEADERS = [("content-type", SSE["content-type"]), ("cache-control", "no-cache")]
PATHS = {"chat": "v1/chat/completions", "responses": "v1/responses", "messages": "v1/messages"}


def _tool(name: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "strict": True,
            "parameters": {
                "type": "object",
                "additionalProperties": False,
                "required": sorted(properties),
                "properties": properties,
            },
        },
    }


STRING = {"type": "string"}
CHAT_TOOLS = [
    _tool("GetWeatherArgs", {"city": STRING, "country": STRING, "units": STRING}),
    _tool("get_stock_price", {"ticker": STRING, "exchange": STRING}),
    _tool("get_weather", {"city": STRING}),
]


def chat_request(tools: list[Any] | None = None, **extra: Any) -> bytes:
    body = {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "weather?"}],
        "tools": CHAT_TOOLS if tools is None else tools,
        **extra,
    }
    return json.dumps(body).encode()


CHAT_REQUEST = chat_request()
MESSAGES_REQUEST = json.dumps(
    {
        "model": "claude-sonnet-4",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "weather in Paris?"}],
        "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
    }
).encode()
RESPONSES_REQUEST = json.dumps({"model": "gpt-5.1", "input": "weather?", "stream": True}).encode()
REQUESTS = {"chat": CHAT_REQUEST, "messages": MESSAGES_REQUEST, "responses": RESPONSES_REQUEST}

CHAT_BODY = (WIRE / "chat_nonstream_parallel_tool_calls.json").read_bytes()
CHAT_SSE = stream_bytes("chat_stream_single_tool_call.sse")
CHAT_EVENTS = events(CHAT_SSE)
MESSAGES_SSE = stream_bytes("anthropic_stream_text_then_tool_use.sse")
RESPONSES_SSE = stream_bytes("responses_stream_function_call_gpt51.jsonl")


def chat_with_calls(calls: list[tuple[str, str]]) -> bytes:
    """A Chat Completions answer carrying these (name, arguments) tool calls."""
    return json.dumps(
        {
            "id": "chatcmpl-reliability",
            "object": "chat.completion",
            "model": "gpt-4o-2024-08-06",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": f"call_{i:05d}",
                                "type": "function",
                                "function": {"name": name, "arguments": arguments},
                            }
                            for i, (name, arguments) in enumerate(calls)
                        ],
                    },
                }
            ],
        }
    ).encode()


def deep(levels: int) -> bytes:
    return b"[" * levels + b"]" * levels


def gzip_bomb(size: int) -> bytes:
    """`size` bytes of spaces, gzipped in a few hundred KB, without holding them."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b" " * (1 << 20)
    parts = [packer.compress(block) for _ in range(size // len(block))]
    return b"".join([*parts, packer.flush()])


def corrupt(data: bytes) -> bytes:
    middle = len(data) // 2
    return data[:middle] + bytes(b ^ 0xFF for b in data[middle : middle + 16]) + data[middle + 16 :]


# --- upstream scripts ---------------------------------------------------------

Script = Callable[[Request], Iterator[Any]]


def answer(
    body: bytes,
    status: int = 200,
    headers: list[tuple[str, str]] | None = None,
    parts: int = 1,
    pause: float = 0.0,
) -> Script:
    """A well-formed reply: the body in `parts` pieces (chunked when more than one)."""
    size = max(1, -(-len(body) // parts))
    pieces = [body[i : i + size] for i in range(0, len(body), size)] or [b""]

    def script(_request: Request) -> Iterator[Any]:
        yield from reply(status, JSON_HEADERS if headers is None else headers, pieces, pause=pause)

    return script


def stream(pieces: list[bytes], headers: list[tuple[str, str]] | None = None, pause=0.0) -> Script:
    def script(_request: Request) -> Iterator[Any]:
        yield from reply(200, SSE_HEADERS if headers is None else headers, pieces, True, pause)

    return script


def raw(*steps: Any) -> Script:
    def script(_request: Request) -> Iterator[Any]:
        yield from steps

    return script


GZIP_SSE = gzip.compress(CHAT_SSE)


@dataclass
class Case:
    name: str
    script: Script
    outcome: str  # the tooltap_flows_total outcome
    reason: str | None = None  # a phrase the logged reason must contain
    api: str = "chat"
    request: bytes | None = None
    streamed: bool = False  # tooltap streams this body (SSE): compare with a streaming mitmdump
    complete: bool = True  # the upstream sent a whole response: the client gets exactly it
    calls: int | None = None

    @property
    def body(self) -> bytes:
        return REQUESTS[self.api] if self.request is None else self.request


TEN_THOUSAND_TOOLS = chat_request(
    [_tool(f"tool_{i}", {"q": STRING, "n": {"type": "integer"}}) for i in range(10_000)]
)
REF_CYCLES = chat_request(
    [
        {
            "type": "function",
            "function": {
                "name": "cycle",
                "strict": True,
                "parameters": {
                    "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
                    "$ref": "#/$defs/a",
                },
            },
        },
        {
            "type": "function",
            "function": {
                "name": "tree",
                "parameters": {
                    "type": "object",
                    "properties": {"child": {"$ref": "#"}, "self": {"$ref": "#/properties/self"}},
                },
            },
        },
    ]
)
DEEP_ARGS = b"[" * 100_000 + b"]" * 100_000
SSE_WITH_A_DEEP_EVENT = (
    CHAT_EVENTS[0] + b"data: " + deep(100_000) + b"\n\n" + b"".join(CHAT_EVENTS[1:])
)
SSE_WITH_BAD_UTF8 = CHAT_SSE.replace(b'"arguments":" York"', b'"arguments":" Y\xff\xfek"')
assert SSE_WITH_BAD_UTF8 != CHAT_SSE
ERROR_500 = b'{"error": {"message": "The server had an error while processing your request.", "type": "server_error"}}'
OVERLOADED = b'{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}'
RATE_LIMIT = b'{"error": {"message": "Rate limit reached for gpt-4o", "type": "requests", "code": "rate_limit_exceeded"}}'

CASES = [
    # Bodies that are not what they claim.
    Case(
        "invalid-json",
        answer(b'{"id": "chatcmpl-1", "choices": [{"mess'),
        "unparseable",
        "not JSON",
    ),
    Case("json-array", answer(b'[{"choices": []}]'), "unparseable", "not a JSON object"),
    Case("json-string", answer(b'"tool_calls"'), "unparseable", "not a JSON object"),
    Case("json-null", answer(b"null"), "unparseable", "not a JSON object"),
    Case("json-number", answer(b"1e999"), "unparseable"),
    Case(
        "wrong-shape-chat",
        answer(b'{"id": 7, "model": ["x"], "choices": {"0": null}, "usage": "none"}'),
        "inspected",
        calls=0,
    ),
    Case(
        "wrong-shape-calls",
        answer(
            b'{"choices": [null, 3, {"message": {"tool_calls": "x"}}, {"message": {"tool_calls":'
            b' [null, {"function": {"name": 5, "arguments": {"city": "Paris"}}}]}}]}'
        ),
        "inspected",
    ),
    Case(
        "wrong-shape-messages",
        answer(b'{"content": {"type": "tool_use"}, "stop_reason": [], "model": {}}'),
        "inspected",
        api="messages",
    ),
    Case(
        "wrong-shape-responses",
        answer(b'{"output": "function_call", "tools": null, "id": []}'),
        "inspected",
        api="responses",
    ),
    Case("wrong-shape-request", answer(CHAT_BODY), "unparseable", "request", request=b"[1, 2]"),
    Case("invalid-utf8", answer(b'{"id": "x", "model": "\xff\xfe", "choices": []}'), "unparseable"),
    Case(
        "invalid-utf8-request",
        answer(CHAT_BODY),
        "unparseable",
        "request",
        request=b'{"model": "\xc3\x28", "messages": []}',
    ),
    Case(
        "invalid-utf8-sse", stream(events(SSE_WITH_BAD_UTF8)), "inspected", streamed=True, calls=1
    ),
    # Sizes and depths.
    Case("deep-response", answer(deep(100_000)), "unparseable", "not JSON"),
    Case("deep-request", answer(CHAT_BODY), "unparseable", "request", request=deep(100_000)),
    Case(
        "deep-arguments",
        answer(chat_with_calls([("get_weather", DEEP_ARGS.decode())])),
        "inspected",
        calls=1,
    ),
    Case(
        "deep-sse-event", stream(events(SSE_WITH_A_DEEP_EVENT)), "inspected", streamed=True, calls=1
    ),
    Case(
        "ref-cycles",
        answer(chat_with_calls([("cycle", '{"a": 1}'), ("tree", '{"child": {"child": {}}}')])),
        "inspected",
        request=REF_CYCLES,
        calls=2,
    ),
    Case(
        "10000-tools",
        answer(chat_with_calls([("tool_9999", '{"q": "x", "n": 1}')])),
        "inspected",
        request=TEN_THOUSAND_TOOLS,
        calls=1,
    ),
    Case(
        "5000-parallel-calls",
        answer(chat_with_calls([("GetWeatherArgs", '{"city": "Oslo"}')] * 5000), parts=7),
        "inspected",
        calls=5000,
    ),
    # Encodings.
    Case(
        "gzip",
        answer(gzip.compress(CHAT_BODY), headers=[*JSON_HEADERS, ("content-encoding", "gzip")]),
        "inspected",
        calls=2,
    ),
    Case(
        "br",
        answer(brotli.compress(CHAT_BODY), headers=[*JSON_HEADERS, ("content-encoding", "br")]),
        "inspected",
        calls=2,
    ),
    Case(
        "zstd",
        answer(
            zstandard.ZstdCompressor().compress(CHAT_BODY),
            headers=[*JSON_HEADERS, ("content-encoding", "zstd")],
        ),
        "inspected",
        calls=2,
    ),
    Case(
        "gzip-sse",
        stream(
            [GZIP_SSE[i : i + 97] for i in range(0, len(GZIP_SSE), 97)],
            [*SSE_HEADERS, ("content-encoding", "gzip")],
        ),
        "inspected",
        streamed=True,
        calls=1,
    ),
    Case(
        "gzip-corrupt",
        answer(
            corrupt(gzip.compress(CHAT_BODY)), headers=[*JSON_HEADERS, ("content-encoding", "gzip")]
        ),
        "unparseable",
        "could not be decoded",
    ),
    Case(
        "gzip-truncated",
        answer(
            gzip.compress(CHAT_BODY)[:-40], headers=[*JSON_HEADERS, ("content-encoding", "gzip")]
        ),
        "unparseable",
        "could not be decoded",
    ),
    Case(
        "gzip-sse-corrupt",
        stream([corrupt(GZIP_SSE)], [*SSE_HEADERS, ("content-encoding", "gzip")]),
        "unparseable",
        "could not be decoded",
        streamed=True,
    ),
    Case(
        "gzip-bomb",
        answer(gzip_bomb(96 << 20), headers=[*JSON_HEADERS, ("content-encoding", "gzip")]),
        "unparseable",
        "exceeds the size limit",
    ),
    Case(
        "unknown-encoding",
        answer(CHAT_BODY, headers=[*JSON_HEADERS, ("content-encoding", "compress")]),
        "unparseable",
        "unsupported content-encoding",
    ),
    # Content types.
    Case(
        "json-as-html",
        answer(CHAT_BODY, headers=[("content-type", "text/html")]),
        "inspected",
        calls=2,
    ),
    Case("json-without-content-type", answer(CHAT_BODY, headers=[]), "inspected", calls=2),
    Case("sse-as-json", answer(CHAT_SSE), "unparseable", "not JSON"),
    Case(
        "sse-as-text-plain",
        answer(CHAT_SSE, headers=[("content-type", "text/plain")], parts=5),
        "inspected",
        calls=1,
    ),
    Case("json-as-sse", stream([CHAT_BODY]), "unparseable", "no JSON events", streamed=True),
    # Empty bodies.
    Case("empty-200", answer(b""), "unparseable", "not JSON"),
    Case(
        "empty-chunked",
        raw(head(200, [*JSON_HEADERS, ("transfer-encoding", "chunked")]), b"0\r\n\r\n"),
        "unparseable",
    ),
    Case("empty-204", raw(head(204, [("x-request-id", "req_204")])), "unparseable"),
    Case("empty-sse", stream([]), "unparseable", "no JSON events", streamed=True),
    Case("empty-request", answer(CHAT_BODY), "unparseable", "request", request=b""),
    # Streams that end badly, and streams in every dialect.
    Case("sse-chat", stream(CHAT_EVENTS), "inspected", streamed=True, calls=1),
    Case(
        "sse-messages",
        stream(events(MESSAGES_SSE)),
        "inspected",
        api="messages",
        streamed=True,
        calls=1,
    ),
    Case(
        "sse-responses",
        stream(events(RESPONSES_SSE)),
        "inspected",
        api="responses",
        streamed=True,
        calls=1,
    ),
    Case(
        "sse-truncated-mid-event",
        stream([*CHAT_EVENTS[:-3], CHAT_EVENTS[-3][:40]]),
        "inspected",
        "ended before its final event",
        streamed=True,
        calls=1,
    ),
    # Some compatible servers end after the last finish_reason: a whole turn, no [DONE].
    Case("sse-without-done", stream(CHAT_EVENTS[:-1]), "inspected", streamed=True, calls=1),
    Case(
        "sse-cut-before-its-finish-reason",
        stream(CHAT_EVENTS[:-3]),
        "inspected",
        "ended before its final event",
        streamed=True,
        calls=1,
    ),
    Case(
        "sse-messages-without-stop",
        stream(events(MESSAGES_SSE)[:-1]),
        "inspected",
        "ended before its final event",
        api="messages",
        streamed=True,
        calls=1,
    ),
    Case(
        "sse-responses-without-completed",
        stream(events(RESPONSES_SSE)[:-1]),
        "inspected",
        "ended before its final event",
        api="responses",
        streamed=True,
        calls=1,
    ),
    Case("sse-slow", stream(CHAT_EVENTS, pause=0.15), "inspected", streamed=True, calls=1),
    Case(
        "sse-upstream-reset",
        raw(
            head(200, [*SSE_HEADERS, ("transfer-encoding", "chunked")]),
            *(chunk(e) for e in CHAT_EVENTS[:4]),
            0.05,
            RESET,
        ),
        "upstream_error",
        "the upstream failed",
        streamed=True,
        complete=False,
        calls=1,
    ),
    Case(
        "sse-upstream-closes-mid-stream",
        raw(
            head(200, [*SSE_HEADERS, ("transfer-encoding", "chunked")]),
            *(chunk(e) for e in CHAT_EVENTS[:4]),
            CLOSE,
        ),
        "upstream_error",
        "incomplete chunked read",
        streamed=True,
        complete=False,
    ),
    # The upstream fails.
    Case(
        "status-500",
        answer(ERROR_500, 500),
        "upstream_error",
        "500 server_error: The server had an error",
    ),
    Case(
        "status-502-html",
        answer(b"<html><body>502 Bad Gateway</body></html>", 502, [("content-type", "text/html")]),
        "upstream_error",
        "502",
    ),
    Case("status-503-empty", answer(b"", 503), "upstream_error", "503"),
    Case(
        "status-529",
        answer(OVERLOADED, 529),
        "upstream_error",
        "529 overloaded_error: Overloaded",
        api="messages",
    ),
    Case(
        "sse-error-event",
        stream([events(MESSAGES_SSE)[0], b"event: error\ndata: " + OVERLOADED + b"\n\n"]),
        "inspected",
        api="messages",
        streamed=True,
    ),
    Case("status-429", answer(RATE_LIMIT, 429), "inspected"),
    Case(
        "reset-mid-body",
        raw(
            head(200, [*JSON_HEADERS, ("content-length", "1000")]),
            b'{"id": "x", "choices": [',
            0.05,
            RESET,
        ),
        "upstream_error",
        "the upstream failed",
        complete=False,
    ),
    Case(
        "short-content-length",
        raw(head(200, [*JSON_HEADERS, ("content-length", "100")]), b'{"a": 1}', CLOSE),
        "upstream_error",
        "expected 100",
        complete=False,
    ),
    Case(
        "chunked-cut",
        raw(
            head(200, [*JSON_HEADERS, ("transfer-encoding", "chunked")]),
            chunk(CHAT_BODY[:50]),
            CLOSE,
        ),
        "upstream_error",
        "incomplete chunked read",
        streamed=True,  # a body of unknown length flows as it comes (I1), cut where it was cut
        complete=False,
    ),
    Case("no-response", raw(CLOSE), "upstream_error", "server closed connection", complete=False),
    Case(
        "reset-before-headers",
        raw(0.05, RESET),
        "upstream_error",
        "the upstream failed",
        complete=False,
    ),
    Case(
        "not-http",
        raw(b"SSH-2.0-OpenSSH_9.6\r\n\r\n", CLOSE),
        "upstream_error",
        "Cannot parse HTTP response",
        complete=False,
    ),
    Case(
        "slow-headers", raw(1.5, *answer(CHAT_BODY)(Request("", "", {}, b""))), "inspected", calls=2
    ),
    Case("slow-body", answer(CHAT_BODY, parts=6, pause=0.3), "inspected", calls=2),
]


def _deep_arguments_kept_raw_with_their_parse_error(proxy: Proxy, turn: dict[str, Any]) -> None:
    calls = proxy.wait_for("tool_call", where=lambda e: e["arguments_raw"] == DEEP_ARGS.decode())
    assert len(calls) == 1
    assert calls[0]["parse_error"]["type"] == "JSONDecodeError"


def _the_first_500_of_5000_calls_logged_and_every_one_counted(
    proxy: Proxy, turn: dict[str, Any]
) -> None:
    # The work on one exchange is bounded: the first MAX_CALLS are validated and logged.
    wanted = {f"call_{i:05d}" for i in range(5000)}
    calls = proxy.wait_for(
        "tool_call", 500, where=lambda e: e["name"] == "GetWeatherArgs" and e["call_id"] in wanted
    )
    assert {c["call_id"] for c in calls} == {f"call_{i:05d}" for i in range(500)}
    assert turn["calls"] == 5000
    assert turn["unchecked"] == [
        "4500 call(s) past the first 500 were counted, not validated nor logged one by one"
    ]
    assert turn["duplicates"] == {"GetWeatherArgs": 5000}
    assert turn["state"] == "strict-void"


def _rejection_logged_in_the_apis_words(proxy: Proxy, turn: dict[str, Any]) -> None:
    rejected = proxy.wait_for("request_rejected", where=lambda e: e["status"] == 429)
    assert rejected[-1]["message"] == "Rate limit reached for gpt-4o"


def _invalid_utf8_replaced_in_the_log_not_on_the_wire(proxy: Proxy, turn: dict[str, Any]) -> None:
    calls = proxy.wait_for("tool_call", where=lambda e: "\ufffd" in (e["arguments_raw"] or ""))
    assert calls[-1]["arguments_raw"] == '{"city":"New Y\ufffd\ufffdk City"}'


# (state, format_state, calls) each complete case must be logged with: read off the bodies by
# hand (CHAT_REQUEST declares strict tools with parallel calls left on; MESSAGES_REQUEST none).
EXPECTED = {
    "invalid-json": (None, None, 0),
    "json-array": (None, None, 0),
    "json-string": (None, None, 0),
    "json-null": (None, None, 0),
    "json-number": (None, None, 0),
    "wrong-shape-chat": ("strict-at-risk", "free-text", 0),
    "wrong-shape-calls": ("strict-at-risk", "free-text", 0),
    "wrong-shape-messages": ("no-strict-declared", "free-text", 0),
    "wrong-shape-responses": ("no-tools", "free-text", 0),
    "wrong-shape-request": (None, None, 2),
    "invalid-utf8": (None, None, 0),
    "invalid-utf8-request": (None, None, 2),
    "invalid-utf8-sse": ("strict-at-risk", "free-text", 1),
    "deep-response": (None, None, 0),
    "deep-request": (None, None, 2),
    "deep-arguments": ("strict-at-risk", "free-text", 1),
    "deep-sse-event": ("strict-at-risk", "free-text", 1),
    "ref-cycles": ("strict-void", "free-text", 2),
    "10000-tools": ("strict-at-risk", "free-text", 1),
    "5000-parallel-calls": ("strict-void", "free-text", 5000),
    "gzip": ("strict-void", "free-text", 2),
    "br": ("strict-void", "free-text", 2),
    "zstd": ("strict-void", "free-text", 2),
    "gzip-sse": ("strict-at-risk", "free-text", 1),
    "gzip-corrupt": (None, None, 0),
    "gzip-truncated": (None, None, 0),
    "gzip-sse-corrupt": (None, None, 0),
    "gzip-bomb": (None, None, 0),
    "unknown-encoding": (None, None, 0),
    "json-as-html": ("strict-void", "free-text", 2),
    "json-without-content-type": ("strict-void", "free-text", 2),
    "sse-as-json": (None, None, 0),
    "sse-as-text-plain": ("strict-at-risk", "free-text", 1),
    "json-as-sse": (None, None, 0),
    "empty-200": (None, None, 0),
    "empty-chunked": (None, None, 0),
    "empty-204": (None, None, 0),
    "empty-sse": (None, None, 0),
    "empty-request": (None, None, 2),
    "sse-chat": ("strict-at-risk", "free-text", 1),
    "sse-messages": ("no-strict-declared", "free-text", 1),
    "sse-responses": ("strict-at-risk", "free-text", 1),
    "sse-truncated-mid-event": ("strict-at-risk", "free-text", 1),
    "sse-without-done": ("strict-at-risk", "free-text", 1),
    "sse-cut-before-its-finish-reason": ("strict-at-risk", "free-text", 1),
    "sse-messages-without-stop": ("no-strict-declared", "free-text", 1),
    "sse-responses-without-completed": ("strict-at-risk", "free-text", 1),
    "sse-slow": ("strict-at-risk", "free-text", 1),
    "status-500": (None, None, 0),
    "status-502-html": (None, None, 0),
    "status-503-empty": (None, None, 0),
    "status-529": (None, None, 0),
    "sse-error-event": ("no-strict-declared", "free-text", 0),
    "status-429": (None, None, 0),
    "slow-headers": ("strict-void", "free-text", 2),
    "slow-body": ("strict-void", "free-text", 2),
}


def _whole_without_done(proxy: Proxy, turn: dict[str, Any]) -> None:
    assert turn["reason"] is None
    assert turn["state"] == "strict-at-risk"


CHECKS = {
    "sse-without-done": _whole_without_done,
    "invalid-utf8-sse": _invalid_utf8_replaced_in_the_log_not_on_the_wire,
    "deep-arguments": _deep_arguments_kept_raw_with_their_parse_error,
    "5000-parallel-calls": _the_first_500_of_5000_calls_logged_and_every_one_counted,
    "status-429": _rejection_logged_in_the_apis_words,
}

# --- a 200 MB reply, produced lazily --------------------------------------------

MB = 1 << 20
BIG_BLOCK = (b'{"pad": "' + b"x" * MB)[: MB - 3] + b'"}\n'
BIG_BLOCKS = 200
BIG_SHA256 = hashlib.sha256(BIG_BLOCK * BIG_BLOCKS).hexdigest()  # computed once, then dropped


def _big(kind: str) -> Script:
    def script(_request: Request) -> Iterator[Any]:
        if kind == "content-length":
            yield head(200, [*JSON_HEADERS, ("content-length", str(BIG_BLOCKS * MB))])
            yield from (BIG_BLOCK for _ in range(BIG_BLOCKS))
            return
        content_type = SSE_HEADERS if kind == "sse" else JSON_HEADERS
        yield head(200, [*content_type, ("transfer-encoding", "chunked")])
        yield from (chunk(BIG_BLOCK) for _ in range(BIG_BLOCKS))
        yield b"0\r\n\r\n"

    return script


# --- scripts that need per-run state ---------------------------------------------

IDLES: dict[str, Idle] = {}
SPLIT = CHAT_SSE


def _idle(request: Request) -> Iterator[Any]:
    """One event, then nothing: the upstream stalls until the peer leaves."""
    idle = IDLES.setdefault(request.headers.get("x-run", ""), Idle())
    yield head(200, [*SSE_HEADERS, ("transfer-encoding", "chunked")])
    yield chunk(CHAT_EVENTS[0])
    yield idle


def _split(request: Request) -> Iterator[Any]:
    """The stream cut in two at x-split (or sent one byte per chunk for x-split: bytes)."""
    at = request.headers["x-split"]
    pieces = [SPLIT[i : i + 1] for i in range(len(SPLIT))] if at == "bytes" else None
    if pieces is None:
        pieces = [SPLIT[: int(at)], SPLIT[int(at) :]]
    yield head(200, [*SSE_HEADERS, ("transfer-encoding", "chunked")])
    for piece in pieces:
        yield chunk(piece)
        yield 0.001  # two writes, so the proxy reads two pieces
    yield b"0\r\n\r\n"


SECRET_AUTH = "sk-proj-PLANTEDauthorization0123456789"
SECRET_API_KEY = "0123456789abcdefPLANTEDazure00000"  # Azure's shape: no sk- prefix
SECRET_X_API_KEY = "sk-ant-api03-PLANTEDxapikey-abcdefgh"
SECRET_ORG = "org-PLANTEDorganisation42"
HEADER_SECRETS = (SECRET_AUTH, SECRET_API_KEY, SECRET_X_API_KEY, SECRET_ORG)
ARGUMENT_SECRETS = ("hunter2-PLANTED-password", "PLANTED-argument-apikey", "PLANTED-argument-token")
SECRET_ARGUMENTS = json.dumps(
    {
        "city": "Paris",
        "password": ARGUMENT_SECRETS[0],
        "api_key": ARGUMENT_SECRETS[1],
        "auth": {"token": ARGUMENT_SECRETS[2]},
    }
)


def _echo(status: int, header: str) -> Script:
    """An API (or gateway) that quotes a credential header in its error message."""

    def script(request: Request) -> Iterator[Any]:
        message = f"Incorrect API key provided: {request.headers.get(header, '')}"
        body = json.dumps({"error": {"message": message, "type": "invalid_request_error"}})
        yield from reply(status, JSON_HEADERS, [body.encode()])

    return script


# The chat stream's arguments arrive as {" city ":" New  York  City "}: widen one fragment.
PASSWORD, API_KEY_ARGUMENT, TOKEN = ARGUMENT_SECRETS
SECRET_FRAGMENT = json.dumps(
    f'New York", "password": "{PASSWORD}", "api_key": "{API_KEY_ARGUMENT}", '
    f'"auth": {{"token": "{TOKEN}"}}, "x": "'
).encode()[1:-1]
SECRET_SSE = CHAT_SSE.replace(b'"arguments":"New"', b'"arguments":"' + SECRET_FRAGMENT + b'"')
assert SECRET_SSE != CHAT_SSE

SCRIPTS: dict[str, Script] = {case.name: case.script for case in CASES}
SCRIPTS.update(
    {
        "health": answer(CHAT_BODY),
        "big-content-length": _big("content-length"),
        "big-chunked": _big("chunked"),
        "big-sse": _big("sse"),
        "idle": _idle,
        "first-event": stream(CHAT_EVENTS, pause=0.2),
        "split": _split,
        "secret-chat": answer(chat_with_calls([("GetWeatherArgs", SECRET_ARGUMENTS)])),
        "secret-sse": stream(events(SECRET_SSE)),
        "secret-401": _echo(401, "authorization"),
        "secret-500": _echo(500, "api-key"),
        "secret-502": _echo(502, "x-api-key"),
        "hash": answer(chat_with_calls([("get_weather", '{"pin": "1234"}')])),
        "models": lambda request: reply(
            200,
            JSON_HEADERS,
            [
                chat_with_calls([]).replace(
                    b"gpt-4o-2024-08-06", request.headers["x-model"].encode()
                )
            ],
        ),
    }
)


# --- fixtures and helpers ----------------------------------------------------------


@pytest.fixture(scope="module")
def upstream():
    with RawUpstream(SCRIPTS) as server:
        yield server


@pytest.fixture(scope="module")
def tooltap(upstream):
    # The split test sends 3,129 streams eight at a time: on a loaded machine the niced
    # inspector falls behind, and a full hand-over drops (and counts) flows, which is not
    # what these tests are about (tests/system/test_memory.py and test_inspector_process.py).
    extra = ("--set", "tooltap_queue_size=10000")
    with Proxy.tooltap([upstream.url], "--log-format", "json", extra=extra) as proxy:
        yield proxy


@pytest.fixture(scope="module")
def plain(upstream):
    """What the user would run without tooltap."""
    with Proxy.mitmdump(upstream.url) as proxy:
        yield proxy


@pytest.fixture(scope="module")
def streaming(upstream):
    """Plain mitmdump streaming every body: the reference for what tooltap streams (SSE)."""
    with Proxy.mitmdump(upstream.url, "--set", "stream_large_bodies=1") as proxy:
        yield proxy


def once(url: str, body: bytes, headers: dict[str, str] | None = None, **kw: Any) -> Got:
    with httpx.Client() as client:
        return fetch(client, url, body, headers, **kw)


def scrape(proxy: Proxy) -> str:
    return httpx.get(proxy.metrics_url, timeout=5).text


def samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {
        tuple(sorted(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    }


def flows(proxy: Proxy) -> dict[tuple[tuple[str, str], ...], float]:
    return samples(scrape(proxy), "tooltap_flows_total")


def internal_errors(proxy: Proxy) -> float:
    return sum(samples(scrape(proxy), "tooltap_internal_errors_total").values())


def settle(proxy: Proxy, total: float, timeout: float = 15.0) -> dict[Any, float]:
    """tooltap_flows_total once its sum reaches `total` (the worker is asynchronous)."""
    deadline = time.monotonic() + timeout
    while True:
        counted = flows(proxy)
        if sum(counted.values()) >= total or time.monotonic() > deadline:
            return counted
        time.sleep(0.02)


def delta(after: dict[Any, float], before: dict[Any, float]) -> dict[Any, float]:
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v != before.get(k, 0.0)}


def label(api: str | None, outcome: str) -> tuple[tuple[str, str], ...]:
    return (("api", api or "none"), ("outcome", outcome))


def turns_at(
    proxy: Proxy, case: str, count: int = 1, timeout: float = 15.0
) -> list[dict[str, Any]]:
    return proxy.wait_for(
        "turn",
        count,
        where=lambda e: (e.get("path") or "").startswith(f"/case/{case}/"),
        timeout=timeout,
    )


def still_serving(proxy: Proxy) -> None:
    """One more exchange goes through, is logged and counted; it also marks a point in the log
    after every line of the exchanges before it."""
    before = sum(flows(proxy).values())
    logged = len(turns_at(proxy, "health", count=10**9, timeout=0))
    health = once(f"{proxy.url}/case/health/{PATHS['chat']}", CHAT_REQUEST)
    assert (health.status, health.body, health.error) == (200, CHAT_BODY, None)
    assert proxy.alive()
    assert len(turns_at(proxy, "health", count=logged + 1)) == logged + 1
    settle(proxy, before + 1)


def core_verdict(path: str, request: bytes, got: Got) -> dict[str, Any]:
    """What tooltap.core says offline about the bytes the client received."""
    headers = dict(got.headers)
    verdict = inspect(
        Exchange(
            method="POST",
            url="http://127.0.0.1" + path,
            request_body=request,
            status=got.status,
            response_headers={
                "content-type": headers.get("content-type", ""),
                "content-encoding": headers.get("content-encoding", ""),
            },
            response_body=got.body,
        )
    )
    return {
        "outcome": verdict.outcome,
        "reason": verdict.reason,
        "state": verdict.state,
        "format_state": verdict.format_state,
        "model": verdict.model,
        "response_id": verdict.response_id,
        "stream": verdict.stream,
        "calls": verdict.call_count,
        "duplicates": verdict.duplicates,
        "repairs": verdict.repairs,
    }


# --- every case ----------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_each_case_reaches_the_client_as_without_tooltap_and_is_logged_and_counted(
    case, upstream, tooltap, plain, streaming
):
    path = f"/case/{case.name}/{PATHS[case.api]}"
    before, errors_before = flows(tooltap), internal_errors(tooltap)
    reference_proxy = streaming if case.streamed else plain
    direct = once(upstream.url + path, case.body)
    via = once(tooltap.url + path, case.body)
    reference = once(reference_proxy.url + path, case.body)

    # Exactly what the user would have seen without tooltap, within the same bound.
    assert via.same_as(reference), (via, reference)
    assert "Timeout" not in (via.error or "")
    if case.complete or case.streamed:
        # Every byte the upstream sent (before it failed, for a cut stream).
        assert (via.status, via.body) == (direct.status, direct.body)
    if case.complete:
        assert via.error is None and direct.error is None
        assert upstream_headers(via) == upstream_headers(direct)
    else:
        assert direct.error is not None or direct.status is None or direct.status >= 500

    # Logged once, counted once, with the outcome the case calls for.
    turns = turns_at(tooltap, case.name)
    assert len(turns) == 1
    turn = turns[0]
    assert turn["outcome"] == case.outcome, turn
    if case.reason is not None:
        assert case.reason in (turn["reason"] or ""), turn
    if case.calls is not None:
        assert turn["calls"] == case.calls
    counted = settle(tooltap, sum(before.values()) + 1)
    assert delta(counted, before) == {label(case.api, case.outcome): 1}
    assert internal_errors(tooltap) == errors_before == 0
    if case.complete:
        assert (turn["state"], turn["format_state"], turn["calls"]) == EXPECTED[case.name]
        # Consistency: the proxy's tap, fed the stream in pieces, reads what the offline core
        # reads from the whole body the client received.
        offline = core_verdict(path, case.body, via)
        assert {k: turn[k] for k in offline} == offline
    if case.name in CHECKS:
        CHECKS[case.name](tooltap, turn)
    still_serving(tooltap)
    # The health exchange's turn came after any late line of this case (the inspector takes
    # records in order): logged once means once, not once so far.
    assert len(turns_at(tooltap, case.name, count=2, timeout=0)) == 1


# --- 200 MB above tooltap_max_body ------------------------------------------------


def _fetch_big(url: str, proxy: Proxy) -> tuple[int, int, str, int]:
    """Status, size, sha256, and how far the proxy's RSS rose above where it was while relaying."""
    process = psutil.Process(proxy.process.pid)
    digest, size = hashlib.sha256(), 0
    start = peak = process.memory_info().rss
    with (
        httpx.Client(timeout=TIMEOUT) as client,
        client.stream("POST", url, content=CHAT_REQUEST) as response,
    ):
        for data in response.iter_raw(MB):
            digest.update(data)
            size += len(data)
            peak = max(peak, process.memory_info().rss)
    return response.status_code, size, digest.hexdigest(), peak - start


@pytest.mark.parametrize("kind", ["content-length", "sse", "chunked"])
def test_a_200_mb_response_passes_byte_for_byte_and_is_skipped_not_inspected(kind, tooltap):
    before = flows(tooltap)
    name = f"big-{kind}"
    status, size, digest, rise = _fetch_big(f"{tooltap.url}/case/{name}/{PATHS['chat']}", tooltap)
    assert (status, size, digest) == (200, BIG_BLOCKS * MB, BIG_SHA256)
    # Never held: a declared length above tooltap_max_body (8 MiB) is streamed, and a stream
    # or a body of unknown length flows as it comes, its copy stopped at the cap. 48 MiB
    # allows for the relay's own buffers; 200 MB would not fit.
    assert rise < 48 * MB, rise / MB
    turn = turns_at(tooltap, name)[0]
    assert (turn["outcome"], turn["reason"]) == ("skipped", "response body above tooltap_max_body")
    assert delta(settle(tooltap, sum(before.values()) + 1), before) == {label("chat", "skipped"): 1}
    assert internal_errors(tooltap) == 0
    still_serving(tooltap)


def test_with_stream_large_bodies_a_200_mb_body_of_unknown_length_never_sits_in_memory(upstream):
    # mitmproxy's own option and tooltap's tap of a body of unknown length, together.
    extra = ("--set", "stream_large_bodies=8m")
    with Proxy.tooltap([upstream.url], "--log-format", "json", extra=extra) as proxy:
        status, size, digest, rise = _fetch_big(
            f"{proxy.url}/case/big-chunked/{PATHS['chat']}", proxy
        )
        assert (status, size, digest) == (200, BIG_BLOCKS * MB, BIG_SHA256)
        turn = turns_at(proxy, "big-chunked")[0]
        assert (turn["outcome"], turn["reason"]) == (
            "skipped",
            "response body above tooltap_max_body",
        )
        assert samples(scrape(proxy), "tooltap_flows_total")[label("chat", "skipped")] == 1
        still_serving(proxy)
    print(f"RSS rose {rise >> 20} MB while relaying 200 MB")
    assert rise < 48 * MB  # as for a streamed body above: it was never held


# --- one stream split at every possible boundary, through the proxy -----------------


def test_one_stream_split_at_every_byte_boundary_gives_the_same_bytes_and_the_same_turn(tooltap):
    points = [str(i) for i in range(1, len(SPLIT))] + ["bytes"]
    url = f"{tooltap.url}/case/split/{PATHS['chat']}"
    before = flows(tooltap)
    first_event = len(tooltap.events)
    deadline = time.monotonic() + 240

    local = threading.local()
    clients: list[httpx.Client] = []

    def one(point: str) -> bytes:
        assert time.monotonic() < deadline, "the split loop ran out of time"
        if not hasattr(local, "client"):
            local.client = httpx.Client()  # keep-alive, one per thread
            clients.append(local.client)
        got = fetch(local.client, url, CHAT_REQUEST, {"x-split": point})
        assert (got.status, got.error) == (200, None), point
        return got.body

    try:
        with ThreadPoolExecutor(8) as pool:
            bodies = list(pool.map(one, points))
    finally:
        for client in clients:
            client.close()
    assert all(body == SPLIT for body in bodies)
    # The inspector runs niced: on a loaded machine it reads 3,000 streams well after they passed.
    turns = turns_at(tooltap, "split", len(points), timeout=120)
    assert len(turns) == len(points)
    # One strict tool call with parallel calls left on: at risk, on every split.
    assert {
        (t["outcome"], t["state"], t["format_state"], t["calls"], t["reason"]) for t in turns
    } == {("inspected", "strict-at-risk", "free-text", 1, None)}
    calls = [
        e
        for e in tooltap.events[first_event:]
        if e["event"] == "tool_call" and e["call_id"] == "call_4XzlGBLtUe9dy3GVNV4jhq7h"
    ]
    assert len(calls) == len(points)
    assert {c["arguments_raw"] for c in calls} == {'{"city":"New York City"}'}
    counted = settle(tooltap, sum(before.values()) + len(points), timeout=120)
    assert delta(counted, before) == {label("chat", "inspected"): len(points)}
    assert internal_errors(tooltap) == 0
    still_serving(tooltap)


# --- clients that leave -------------------------------------------------------------


@pytest.mark.parametrize("via", ["direct", "tooltap", "streaming"])
def test_a_stream_the_client_abandons_while_the_upstream_is_idle(via, upstream, tooltap, streaming):
    base = {"direct": upstream.url, "tooltap": tooltap.url, "streaming": streaming.url}[via]
    run = f"idle-{via}"
    before = flows(tooltap)
    got = once(f"{base}/case/idle/{PATHS['chat']}", CHAT_REQUEST, {"x-run": run}, first_only=True)
    assert (got.status, got.body, got.error) == (200, CHAT_EVENTS[0], None)
    # The upstream learns the client left (the proxy hangs up on it) within the bound.
    assert IDLES[run].peer_closed.wait(TIMEOUT)
    if via == "tooltap":
        turn = turns_at(tooltap, "idle")[-1]
        assert (turn["outcome"], turn["stream"]) == ("inspected", True)
        assert turn["reason"] == "the stream ended before its final event (Client disconnected.)"
        assert delta(settle(tooltap, sum(before.values()) + 1), before) == {
            label("chat", "inspected"): 1
        }
        assert internal_errors(tooltap) == 0
        still_serving(tooltap)


def test_a_client_that_disconnects_after_the_first_event_is_logged_and_counted(upstream, tooltap):
    before = flows(tooltap)
    path = f"/case/first-event/{PATHS['chat']}"
    got = once(tooltap.url + path, CHAT_REQUEST, first_only=True)
    assert (got.status, got.error) == (200, None)
    assert CHAT_SSE.startswith(got.body) and got.body
    turn = turns_at(tooltap, "first-event")[0]
    assert turn["outcome"] == "inspected"
    assert turn["reason"] == "the stream ended before its final event (Client disconnected.)"
    assert delta(settle(tooltap, sum(before.values()) + 1), before) == {
        label("chat", "inspected"): 1
    }
    assert internal_errors(tooltap) == 0
    still_serving(tooltap)


# --- an upstream nobody answers on ---------------------------------------------------


def _dead_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("strategy", ["eager", "lazy"])
def test_connection_refused_gives_the_same_error_as_without_tooltap_and_is_counted(strategy):
    dead = f"http://127.0.0.1:{_dead_port()}"
    extra = ("--set", f"connection_strategy={strategy}")
    path = f"/case/refused/{PATHS['chat']}"
    with (
        Proxy.tooltap([dead], "--log-format", "json", extra=extra) as proxy,
        Proxy.mitmdump(dead, *extra) as reference,
    ):
        via, without = (
            once(proxy.url + path, CHAT_REQUEST),
            once(reference.url + path, CHAT_REQUEST),
        )
        if strategy == "eager":
            # mitmproxy drops the client before it reads a request: no status,
            # no byte. Whether the client's socket then reports a reset or a
            # clean close depends on whether its request was already sent.
            dropped = ("RemoteProtocolError", "ReadError")
            assert (via.status, via.body, without.status, without.body) == (None, b"", None, b"")
            assert via.error in dropped and without.error in dropped
        else:  # mitmproxy answers with its own 502
            assert via.same_as(without), (via, without)
            assert via.status == 502 and b"Connect call failed" in via.body
        turn = proxy.wait_for("turn")[0]
        assert turn["outcome"] == "upstream_error"
        assert "Connect call failed" in turn["reason"]
        api = None if strategy == "eager" else "chat"
        assert delta(settle(proxy, 1), {}) == {label(api, "upstream_error"): 1}
        assert internal_errors(proxy) == 0
        assert proxy.alive()


# --- HTTP/2 ---------------------------------------------------------------------------


def test_an_http2_client_in_reverse_mode_talks_http1_and_gets_the_same_bytes(tooltap):
    # What a user does: OPENAI_BASE_URL=http://127.0.0.1:8080/v1 with an
    # HTTP/2-enabled httpx client. httpx only negotiates h2 over TLS (ALPN),
    # so plain-http reverse mode is HTTP/1.1, through tooltap or not.
    with httpx.Client(http2=True, timeout=TIMEOUT) as client:
        response = client.post(f"{tooltap.url}/case/health/{PATHS['chat']}", content=CHAT_REQUEST)
    assert (response.http_version, response.status_code, response.content) == (
        "HTTP/1.1",
        200,
        CHAT_BODY,
    )


def test_http2_prior_knowledge_is_refused_by_mitmproxy_itself_as_without_tooltap(tooltap, plain):
    # h2c with prior knowledge: mitmproxy refuses it before any flow exists
    # ("Initiating HTTP/2 connections with prior knowledge are currently not
    # supported"), with or without tooltap; the proxy keeps serving.
    path = f"/case/health/{PATHS['chat']}"
    seen = []
    for proxy in (tooltap, plain):
        with httpx.Client(http1=False, http2=True) as client:
            seen.append(fetch(client, proxy.url + path, CHAT_REQUEST))
    # Which error the client sees depends on whether its write or the close wins.
    # Now and then mitmproxy leaves the refused connection open instead of closing
    # it (a ReadTimeout): seen through plain mitmdump as through tooltap, about one
    # run in fifteen on this machine, so it is mitmproxy's race, not tooltap's.
    refused = ("RemoteProtocolError", "WriteError", "ReadError", "ReadTimeout")
    assert all(got.status is None and got.error in refused for got in seen), (
        [got.error for got in seen],
        tooltap.text[-20:],
    )
    assert any("prior knowledge" in line for line in tooltap.text)
    still_serving(tooltap)


@pytest.fixture(scope="module")
def tls_ca(tmp_path_factory):
    return upstream_tls(tmp_path_factory.mktemp("ca"))


def test_http2_end_to_end_in_regular_mode_byte_for_byte_and_inspected(tls_ca):
    # The real HTTP/2 path: HTTPS_PROXY to an h2 API host. The client and the
    # upstream both negotiate h2 with mitmproxy (ALPN); tooltap's hooks and
    # stream tap run on HTTP/2 flows.
    ca_path, context = tls_ca
    with (
        H2Upstream(scenario_route, context) as upstream,
        regular_proxy(ca_path) as (proxy, trust),
    ):
        with httpx.Client(proxy=proxy.url, verify=trust, http2=True, timeout=TIMEOUT) as client:
            got = {}
            for name in ("chat-json", "chat-sse", "messages-sse"):
                path = "/v1/messages" if name.startswith("messages") else "/v1/chat/completions"
                with client.stream(
                    "POST",
                    upstream.url + path,
                    json={"model": "m"},
                    headers={"x-scenario": name},
                ) as response:
                    got[name] = (
                        response.http_version,
                        response.status_code,
                        b"".join(response.iter_raw()),
                    )
        turns = proxy.wait_for("turn", 3)
        assert internal_errors(proxy) == 0
    for name, (version, status, body) in got.items():
        assert (version, status, body) == ("HTTP/2", 200, SCENARIOS[name].body), name
    assert set(upstream.protocols) == {"h2"}
    assert sorted((t["api"], t["stream"], t["outcome"], t["calls"]) for t in turns) == [
        ("chat", False, "inspected", 2),
        ("chat", True, "inspected", 2),
        ("messages", True, "inspected", 1),
    ]


# --- upstream TLS is never weakened ---------------------------------------------------


def test_a_self_signed_upstream_is_refused_unless_the_user_sets_mitmproxys_own_option(tls_ca):
    _ca_path, context = tls_ca
    from tooltap.addon.harness.replay import ReplayServer

    with ReplayServer(scenario_route, tls=context) as upstream:
        path, headers = "/v1/chat/completions", {"x-scenario": "chat-json"}
        with (
            Proxy.tooltap([upstream.url], "--log-format", "json") as proxy,
            Proxy.mitmdump(upstream.url) as reference,
        ):
            via = once(proxy.url + path, b"{}", headers)
            without = once(reference.url + path, b"{}", headers)
            turn = proxy.wait_for("turn")[0]
        assert via.same_as(without)
        assert via.status == 502 and b"Certificate verify failed" in via.body
        assert upstream.seen == []  # not one request reached the untrusted upstream
        assert turn["outcome"] == "upstream_error" and "Certificate verify failed" in turn["reason"]

        insecure = ("--set", "ssl_insecure=true")
        with Proxy.tooltap([upstream.url], "--log-format", "json", extra=insecure) as proxy:
            allowed = once(proxy.url + path, b"{}", headers)
        assert (allowed.status, allowed.body) == (200, SCENARIOS["chat-json"].body)

    from tooltap.addon.commands import cli, run

    argv, _hints = run.mitmdump_args(cli.parser().parse_args(["run"]), [])
    assert not any("ssl" in arg or arg in ("-k", "--insecure") for arg in argv)


# --- secrets ---------------------------------------------------------------------------

PLANTED_HEADERS = {
    "authorization": f"Bearer {SECRET_AUTH}",
    "api-key": SECRET_API_KEY,
    "x-api-key": SECRET_X_API_KEY,
    "OpenAI-Organization": SECRET_ORG,
}
HISTORY_REQUEST = chat_request(
    messages=[
        {"role": "user", "content": "log me in"},
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "call_earlier",
                    "type": "function",
                    "function": {"name": "GetWeatherArgs", "arguments": SECRET_ARGUMENTS},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_earlier", "content": ARGUMENT_SECRETS[0]},
    ]
)


@pytest.mark.parametrize("mode", ["raw", "redact", "hash", "omit"])
def test_planted_credentials_never_reach_the_log_or_metrics_in_any_mode(mode, upstream):
    with Proxy.tooltap([upstream.url], "--log-format", "json", "--log-arguments", mode) as proxy:
        for name, body in (
            ("secret-chat", HISTORY_REQUEST),
            ("secret-sse", CHAT_REQUEST),
            ("secret-401", CHAT_REQUEST),
            ("secret-500", CHAT_REQUEST),
            ("secret-502", CHAT_REQUEST),
        ):
            url = f"{proxy.url}/case/{name}/{PATHS['chat']}?api-key={SECRET_API_KEY}&api-version=1"
            got = once(url, body, PLANTED_HEADERS)
            assert got.error is None and got.status in (200, 401, 500, 502)
        turns = proxy.wait_for("turn", 5)
        assert len(turns) == 5
        proxy.wait_for("tool_call", 2)
        exposed = scrape(proxy)
        assert proxy.stop() == 0  # SIGINT: done hooks ran, and everything is flushed
    events = [json.dumps(e) for e in proxy.events]
    text = "\n".join(proxy.text)
    assert all(
        t["path"] == f"/case/{t['path'].split('/')[2]}/{PATHS['chat']}?api-version=1" for t in turns
    )
    for secret in HEADER_SECRETS:  # never, in any mode, anywhere
        assert not [e for e in events if secret in e], (mode, secret)
        assert secret not in text and secret not in exposed, (mode, secret)
    rejected = next(e for e in proxy.events if e["event"] == "request_rejected")
    assert rejected["message"] == "Incorrect API key provided: [redacted]"
    for secret in ARGUMENT_SECRETS:
        assert secret not in text and secret not in exposed
        where = {json.loads(e)["event"] for e in events if secret in e}
        # raw logs the arguments as received, by design (DESIGN.md): only there.
        assert where == ({"tool_call"} if mode == "raw" else set()), (mode, secret, where)
    calls = [e for e in proxy.events if e["event"] == "tool_call"]
    assert len(calls) == 2
    if mode == "redact":
        assert all('"password":"[redacted]"' in c["arguments_raw"] for c in calls)
    if mode == "hash":
        assert all(c["arguments_raw"].startswith("hmac-sha256:") for c in calls)
    if mode == "omit":
        assert all(c["arguments_raw"] is None for c in calls)


def _hashed_pin(upstream: RawUpstream, key: str) -> str:
    with Proxy.tooltap(
        [upstream.url],
        "--log-format",
        "json",
        "--log-arguments",
        "hash",
        env={"TOOLTAP_HASH_KEY": key},
    ) as proxy:
        once(f"{proxy.url}/case/hash/{PATHS['chat']}", CHAT_REQUEST)
        return proxy.wait_for("tool_call")[0]["arguments_raw"]


def test_hash_mode_is_keyed_so_a_short_secret_cannot_be_looked_up(upstream):
    raw_pin = '{"pin": "1234"}'
    first, second = _hashed_pin(upstream, ""), _hashed_pin(upstream, "")
    shared = [_hashed_pin(upstream, "replica-key") for _ in range(2)]
    # Two processes with no key: different random keys, different hashes.
    assert first != second
    # A bare digest of the 4-digit pin would be guessable in 10,000 tries.
    for unkeyed in (hashlib.sha256, hashlib.sha1, hashlib.md5):
        assert unkeyed(raw_pin.encode()).hexdigest()[:32] not in (first, second)
    # TOOLTAP_HASH_KEY makes replicas agree, with the keyed HMAC.
    expected = hmac.new(b"replica-key", raw_pin.encode(), hashlib.sha256).hexdigest()[:32]
    assert shared == [f"hmac-sha256:{expected}"] * 2


def test_metrics_bind_loopback_by_default(upstream):
    from tooltap.addon.commands import cli

    # The CLI's default, and the addon option's default (plain mitmdump -s).
    assert cli.parser().parse_args(["run"]).metrics[0] == "127.0.0.1"
    assert cli.parser().parse_args(["run"]).listen[0] == "127.0.0.1"
    mitmdump = os.path.join(os.path.dirname(sys.executable), "mitmdump")
    argv = [
        mitmdump,
        "--listen-host",
        "127.0.0.1",
        "-p",
        "0",
        "--mode",
        f"reverse:{upstream.url}",
        "-s",
        str(cli.SCRIPT),
        "--set",
        "tooltap_metrics_port=0",
        "--set",
        "flow_detail=0",
    ]
    with Proxy(argv, modes=1) as proxy:
        port = int(proxy.metrics_url.rsplit(":", 1)[1].split("/")[0])
        # The metrics endpoint is served by the inspection process, a child of the proxy.
        parent = psutil.Process(proxy.process.pid)
        listening = {
            c.laddr.port: c.laddr.ip
            for process in (parent, *parent.children(recursive=True))
            for c in process.net_connections("inet")
            if c.status == psutil.CONN_LISTEN
        }
        assert listening[port] == "127.0.0.1"
        assert httpx.get(proxy.metrics_url, timeout=5).status_code == 200


def test_10000_distinct_model_names_make_at_most_the_configured_labels_plus_other(upstream):
    # Through the addon in-process (10,000 flows in seconds), then a sample of
    # them through the real proxy's /metrics.
    import io

    from prometheus_client import generate_latest

    addon = Tooltap(log_stream=io.StringIO())
    with taddons.context(addon) as tctx:
        tctx.configure(
            addon,
            tooltap_metrics_port=0,
            tooltap_log_format="json",
            tooltap_inspector="thread",
            tooltap_model_labels=7,
            tooltap_queue_size=20_000,  # this loop outruns the worker; drops are not the point here
        )
        template = chat_with_calls([("get_weather", '{"city": "Oslo"}')])
        for i in range(10_000):
            flow = _flow(
                "/v1/chat/completions",
                CHAT_REQUEST,
                template.replace(b"gpt-4o-2024-08-06", f"model-{i}".encode()),
            )
            addon.request(flow)
            addon.responseheaders(flow)
            addon.response(flow)
        assert addon.flush(60)
        text = generate_latest(addon.inspection.metrics.registry).decode()
        addon.done()
    models = {
        labels[1][1] for labels in samples(text, "tooltap_turns_total") if labels[1][0] == "model"
    }
    assert models == {f"model-{i}" for i in range(7)} | {"other"}
    calls = samples(text, "tooltap_tool_calls_total")
    assert calls[(("api", "chat"), ("model", "other"))] == 10_000 - 7
    assert samples(text, "tooltap_flows_total")[label("chat", "inspected")] == 10_000

    with Proxy.tooltap([upstream.url], "--log-format", "json", "--model-labels", "3") as proxy:
        with httpx.Client(timeout=TIMEOUT) as client:
            for i in range(40):
                got = fetch(
                    client,
                    f"{proxy.url}/case/models/{PATHS['chat']}",
                    CHAT_REQUEST,
                    {"x-model": f"m-{i}"},
                )
                assert got.status == 200 and f"m-{i}".encode() in got.body
        settle(proxy, 40)
        text = scrape(proxy)
    for name in ("tooltap_turns_total", "tooltap_formats_total"):
        models = {dict(labels)["model"] for labels in samples(text, name)}
        assert models == {"m-0", "m-1", "m-2", "other"}, name


# --- property: any bodies, any chunking, through the addon with mitmproxy's helpers ---

PROPERTY_KEYS = st.sampled_from(
    [
        "tools",
        "tool_calls",
        "choices",
        "message",
        "function",
        "arguments",
        "name",
        "id",
        "type",
        "output",
        "content",
        "call_id",
        "strict",
        "parallel_tool_calls",
        "model",
        "error",
        "delta",
        "index",
        "input",
        "messages",
        "role",
        "tool_call_id",
        "response",
        "parameters",
    ]
) | st.text(max_size=4)
PROPERTY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(PROPERTY_KEYS, children, max_size=5)
    ),
    max_leaves=30,
)


def _json_bytes(value: Any) -> bytes:
    return json.dumps(value).encode()


def _sse_bytes(values: list[Any]) -> bytes:
    return (
        b"".join(b"data: " + json.dumps(v).encode() + b"\n\n" for v in values) + b"data: [DONE]\n\n"
    )


CAPTURED = [
    CHAT_BODY,
    CHAT_SSE,
    MESSAGES_SSE,
    RESPONSES_SSE,
    (WIRE / "openapi_responses_functions_response.json").read_bytes(),
]
BODIES = st.one_of(
    PROPERTY_JSON.map(_json_bytes),
    st.lists(PROPERTY_JSON, max_size=6).map(_sse_bytes),
    st.binary(max_size=300),
    st.sampled_from(CAPTURED),
    st.sampled_from(CAPTURED).flatmap(
        lambda body: st.integers(0, len(body)).map(lambda n: body[:n])
    ),
    st.sampled_from([deep(2000), b"\xff\xfe{", b"", b"data: " + deep(3000) + b"\n\n"]),
)
ENCODINGS = st.sampled_from(
    ["", "gzip", "br", "zstd", "deflate", "gzip-corrupt", "identity, gzip", "bogus"]
)
CONTENT_TYPES = st.sampled_from(
    ["application/json", SSE["content-type"], "text/html", "", "text/plain"]
)
ENDINGS = st.sampled_from(["response", "client-gone", "upstream-failed", "no-response"])


def _encode(body: bytes, encoding: str) -> tuple[bytes, str]:
    if encoding == "gzip":
        return gzip.compress(body), "gzip"
    if encoding == "gzip-corrupt":
        return corrupt(gzip.compress(body) + b"x" * 40), "gzip"
    if encoding == "br":
        return brotli.compress(body), "br"
    if encoding == "zstd":
        return zstandard.ZstdCompressor().compress(body), "zstd"
    if encoding == "deflate":
        return zlib.compress(body), "deflate"
    if encoding == "identity, gzip":
        return gzip.compress(body), encoding
    return body, encoding


def _flow(
    path: str,
    request: bytes,
    response: bytes | None,
    headers=(("content-type", "application/json"),),
    status=200,
):
    req = tutils.treq(
        method=b"POST",
        host="api.openai.com",
        port=443,
        scheme=b"https",
        path=path.encode(),
        headers=((b"content-type", b"application/json"),),
        content=request,
    )
    resp = tutils.tresp(
        status_code=status,
        headers=tuple((k.encode(), v.encode()) for k, v in headers),
        content=response,
    )
    if response is not None:
        resp.headers["content-length"] = str(len(response))  # a known length: buffered
    return tflow.tflow(req=req, resp=resp)


@settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    api=st.sampled_from(["chat", "responses", "messages", "embeddings"]),
    request=st.one_of(
        st.sampled_from(list(REQUESTS.values())),
        PROPERTY_JSON.map(_json_bytes),
        st.binary(max_size=200),
    ),
    body=BODIES,
    encoding=ENCODINGS,
    content_type=CONTENT_TYPES,
    status=st.sampled_from([200, 200, 200, 400, 429, 500, 529]),
    streamed_by_mitmproxy=st.booleans(),
    max_body=st.sampled_from([8 * MB, 64]),
    cuts=st.lists(st.integers(0, 1 << 16), max_size=12),
    ending=ENDINGS,
)
def test_any_exchange_through_the_addon_leaves_the_flow_unchanged_and_every_chunk_as_it_was(
    api,
    request,
    body,
    encoding,
    content_type,
    status,
    streamed_by_mitmproxy,
    max_body,
    cuts,
    ending,
):
    import io

    wire, coding = _encode(body, encoding)
    headers = [("content-type", content_type)] if content_type else []
    if coding:
        headers.append(("content-encoding", coding))
    path = "/v1/embeddings" if api == "embeddings" else "/" + PATHS[api]
    flow = _flow(path, request, None, headers, status)
    addon = Tooltap(log_stream=io.StringIO())
    with taddons.context(addon) as tctx:
        tctx.configure(
            addon,
            tooltap_metrics_port=0,
            tooltap_log_format="json",
            tooltap_inspector="thread",
            tooltap_max_body=max_body,
        )
        if streamed_by_mitmproxy:
            flow.response.stream = True  # stream_large_bodies decided before our hook
        before = (flow.request.get_state(), flow.response.get_state())
        addon.request(flow)
        addon.responseheaders(flow)
        assert (flow.request.get_state(), flow.response.get_state()) == before
        tap = flow.response.stream
        if callable(tap):
            points = sorted({c % (len(wire) + 1) for c in cuts} | {0, len(wire)})
            for start, end in itertools.pairwise(points):
                piece = wire[start:end]
                assert tap(piece) is piece  # forwarded unchanged: the very same object
            assert tap(b"") == b""
        elif ending == "response":
            flow.response.raw_content = wire  # mitmproxy buffered the body
        if ending == "client-gone":
            flow.error = tflow.terr("Client disconnected.")
        elif ending in ("upstream-failed", "no-response"):
            flow.response.timestamp_end = None
            flow.error = tflow.terr("HTTP/1 protocol error: peer closed connection")
            if ending == "no-response":
                flow.response = None
        before = (flow.request.get_state(), flow.response.get_state() if flow.response else None)
        (addon.response if ending == "response" else addon.error)(flow)
        assert (
            flow.request.get_state(),
            flow.response.get_state() if flow.response else None,
        ) == before
        assert addon.flush(10)
        registry = addon.inspection.metrics.registry
        counted = {
            (s.labels["api"], s.labels["outcome"]): s.value
            for metric in registry.collect()
            if metric.name == "tooltap_flows"
            for s in metric.samples
            if s.name == "tooltap_flows_total" and s.value
        }
        errors = sum(
            s.value
            for metric in registry.collect()
            if metric.name == "tooltap_internal_errors"
            for s in metric.samples
            if s.name == "tooltap_internal_errors_total"
        )
        logged = [json.loads(line) for line in addon._log_stream.getvalue().splitlines()]
        addon.done()
    assert errors == 0
    if api == "embeddings":  # no dialect reads it: said and counted, never held nor read
        gone = ending in ("upstream-failed", "no-response")
        outcome = "upstream_error" if gone else "not_read"
        assert counted == {("none", outcome): 1}
        assert [(e["event"], e["outcome"], e["level"]) for e in logged] == [
            ("turn", outcome, "warning" if gone else "info")
        ]
        return
    assert sum(counted.values()) == 1
    ((counted_api, outcome),) = counted
    assert counted_api == api
    turns = [e for e in logged if e["event"] == "turn"]
    assert len(turns) == 1 and turns[0]["outcome"] == outcome
    if ending in ("upstream-failed", "no-response"):
        assert outcome == "upstream_error"
    elif status >= 500:
        assert outcome in ("upstream_error", "skipped")
