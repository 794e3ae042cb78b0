"""Request and response bodies for the benchmarks, built from the real captures.

The medium case is the one the issue names: a Chat Completions response with
three parallel tool calls (~4 KB), the chat capture plus a third call whose
arguments carry a file, as coding agents send. The request declares the
three tools (strict) and carries one earlier round of calls and results, so
the loop check and the schema validation both do real work.
"""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path
from typing import Any

from tooltap.addon.handover.record import Record
from tooltap.addon.harness import eventstream

WIRE = Path(__file__).resolve().parent.parent / "tests" / "corpus" / "wire"

CHAT_PATH = "/v1/chat/completions"
RESPONSES_PATH = "/v1/responses"
MESSAGES_PATH = "/v1/messages"
JSON_TYPE = (b"content-type", b"application/json")


def _read(name: str) -> bytes:
    return (WIRE / name).read_bytes()


def capture_chat() -> dict[str, Any]:
    """The real non-streaming chat capture: two parallel calls, 812 bytes."""
    return json.loads(_read("chat_nonstream_parallel_tool_calls.json"))


def file_text(size: int) -> str:
    """Plausible source code of about `size` characters (the write_file payload)."""
    lines, total, n = [], 0, 0
    while total < size:
        line = f"    total_{n} = sum(row.amount for row in rows if row.region == 'eu-{n % 7}')\n"
        lines.append(line)
        total += len(line)
        n += 1
    return "def report(rows):\n" + "".join(lines) + "    return locals()\n"


TOOLS = [
    {
        "name": "GetWeatherArgs",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "country": {"type": "string"},
                "units": {"type": "string", "enum": ["c", "f"]},
            },
            "required": ["city", "country", "units"],
            "additionalProperties": False,
        },
    },
    {
        "name": "get_stock_price",
        "description": "Latest price of a listed stock.",
        "parameters": {
            "type": "object",
            "properties": {"ticker": {"type": "string"}, "exchange": {"type": "string"}},
            "required": ["ticker", "exchange"],
            "additionalProperties": False,
        },
    },
    {
        "name": "write_file",
        "description": "Write a UTF-8 text file in the workspace.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
            "additionalProperties": False,
        },
    },
]


def call_arguments(content_size: int) -> list[tuple[str, str]]:
    """(name, arguments JSON text) of the three calls."""
    return [
        ("GetWeatherArgs", '{"city": "Edinburgh", "country": "GB", "units": "c"}'),
        ("get_stock_price", '{"ticker": "AAPL", "exchange": "NASDAQ"}'),
        (
            "write_file",
            json.dumps({"path": "src/report.py", "content": file_text(content_size)}),
        ),
    ]


def chat_tool_calls(round_: int, content_size: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"call_r{round_}n{i}_fdNz3vOBKYgOIpMdWotB9MjY",
            "type": "function",
            "function": {"name": name, "arguments": args},
        }
        for i, (name, args) in enumerate(call_arguments(content_size))
    ]


def chat_request(history: int = 1, content_size: int = 2800, stream: bool = False) -> bytes:
    """A chat request declaring the three strict tools, with `history` answered rounds."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a helpful assistant. Use the tools."},
        {"role": "user", "content": "Weather in Edinburgh, AAPL price, and save the report."},
    ]
    for r in range(history):
        calls = chat_tool_calls(r, content_size)
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        for call in calls:
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": '{"ok": true}'})
        messages.append({"role": "user", "content": "Again, please."})
    body: dict[str, Any] = {
        "model": "gpt-4o-2024-08-06",
        "messages": messages,
        "tools": [{"type": "function", "function": {**tool, "strict": True}} for tool in TOOLS],
    }
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return json.dumps(body).encode()


def chat_response(
    content_size: int = 2800, ident: str = "chatcmpl-ABfvyvfNWKcl7Ohqos4UFrmMs1v4C"
) -> bytes:
    """The chat capture with a third call: ~4 KB at the default size."""
    body = capture_chat()
    body["id"] = ident
    body["choices"][0]["message"]["tool_calls"] = chat_tool_calls(99, content_size)
    return json.dumps(body).encode()


def _split(text: str, parts: int) -> list[str]:
    """Exactly `parts` pieces (the last ones may be empty for a short text)."""
    cuts = [len(text) * i // parts for i in range(parts + 1)]
    return [text[a:b] for a, b in itertools.pairwise(cuts)]


def chat_stream_events(
    content_size: int = 2800,
    deltas: int = 43,
    ident: str = "chatcmpl-ABfwAwrNePHUgBBezonVC6MX3zd63",
) -> list[bytes]:
    """The same three calls as a Chat stream, one SSE event per list item.

    With the defaults: role + 3 call headers + 43 argument deltas + finish +
    usage + [DONE] = 50 events, shaped like the capture's chunks.
    """
    head = {
        "id": ident,
        "object": "chat.completion.chunk",
        "created": 1727346178,
        "model": "gpt-4o-2024-08-06",
        "system_fingerprint": "fp_5050236cbd",
    }

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        body = {**head, "choices": [choice] if delta is not None else [], **extra}
        return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"

    calls = call_arguments(content_size)
    per_call = [deltas // len(calls)] * len(calls)
    per_call[-1] += deltas - sum(per_call)
    out = [chunk({"role": "assistant", "content": None})]
    for index, ((name, args), count) in enumerate(zip(calls, per_call, strict=True)):
        call_id = f"call_s{index}_JMW1whyEaYG438VE1OIflxA2"
        out.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }
                    ]
                }
            )
        )
        for piece in _split(args, count):
            out.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    out.append(chunk({}, finish="tool_calls"))
    usage = {"prompt_tokens": 149, "completion_tokens": 860, "total_tokens": 1009}
    out.append(chunk(None, usage=usage))  # type: ignore[arg-type]
    out.append(b"data: [DONE]\n\n")
    return out


def ollama_request(history: int = 1, content_size: int = 2800) -> bytes:
    """chat_request's conversation in Ollama's own shape: the same tools (Ollama has no strict),
    calls with their arguments as objects, results named by tool_name."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a helpful assistant. Use the tools."},
        {"role": "user", "content": "Weather in Edinburgh, AAPL price, and save the report."},
    ]
    for _ in range(history):
        calls = call_arguments(content_size)
        messages.append({"role": "assistant", "content": "", "tool_calls": [
            {"function": {"name": name, "arguments": json.loads(args)}} for name, args in calls]})  # fmt: skip
        messages += [{"role": "tool", "tool_name": name, "content": '{"ok": true}'}
                     for name, _ in calls]  # fmt: skip
        messages.append({"role": "user", "content": "Again, please."})
    body = {"model": "qwen3:8b", "messages": messages,
            "tools": [{"type": "function", "function": tool} for tool in TOOLS]}  # fmt: skip
    return json.dumps(body).encode()


def ollama_stream_lines(size: int, deltas: int = 43, content_size: int = 2800) -> list[bytes]:
    """The same three calls as an Ollama NDJSON stream of about `size` bytes: thinking in
    `deltas` lines (padded to the size), each call whole in a line of its own, the done line."""

    def line(message: dict[str, Any], **top: Any) -> bytes:
        body = {"model": "qwen3:8b", "created_at": "2026-12-01T09:14:07.218431Z",
                "message": {"role": "assistant", "content": ""} | message, "done": False} | top  # fmt: skip
        return json.dumps(body, separators=(",", ":")).encode() + b"\n"

    calls = [
        line(
            {
                "tool_calls": [
                    {
                        "id": f"call_{i:08d}",
                        "function": {"index": i, "name": name, "arguments": json.loads(args)},
                    }
                ]
            }
        )
        for i, (name, args) in enumerate(call_arguments(content_size))
    ]
    done = line({}, done=True, done_reason="stop", prompt_eval_count=149, eval_count=860)
    empty = len(line({"thinking": ""}))
    left = max(deltas, size - sum(map(len, calls)) - len(done) - deltas * empty)
    thinking = _split(
        ("The user wants three things done at once. " * (left // 40 + 1))[:left], deltas
    )
    return [*(line({"thinking": piece}) for piece in thinking), *calls, done]


def responses_response(
    ident: str = "resp_67ca09c5efe0819096d0511c92b8c890096610f474011cc0",
) -> bytes:
    """The Responses capture (one strict call), with its id replaced."""
    body = json.loads(_read("openapi_responses_functions_response.json"))
    body["id"] = ident
    body["output"][0]["call_id"] = "call_" + ident[-24:]
    return json.dumps(body).encode()


def responses_request() -> bytes:
    return _read("openapi_responses_functions_request.json")


def messages_pair() -> tuple[bytes, bytes]:
    """The Anthropic round trip's first request and response."""
    data = json.loads(_read("anthropic_roundtrip_tool_use_tool_result.json"))
    first = data[0]
    return json.dumps(first["request"]["body"]).encode(), json.dumps(
        first["response"]["body"]
    ).encode()


def sse_events(wire: bytes) -> list[bytes]:
    """An SSE body cut after every blank line, the way servers flush it."""
    text = wire.replace(b"\r\n", b"\n")
    return [p + b"\n\n" for p in text.split(b"\n\n") if p.strip()]


def responses_stream_events() -> list[bytes]:
    out = []
    for line in _read("responses_stream_function_call_gpt51.jsonl").splitlines():
        if line.strip():
            kind = json.loads(line).get("type", "message")
            out.append(f"event: {kind}\n".encode() + b"data: " + line + b"\n\n")
    return out


def messages_stream_events() -> list[bytes]:
    return sse_events(_read("anthropic_stream_text_then_tool_use.sse"))


def bedrock_frames(events: list[bytes]) -> list[bytes]:
    """The same Messages events as Bedrock streams them: each one base64 in a `chunk` of AWS's
    event stream."""
    return [
        eventstream.chunk(
            next(line[6:] for line in event.splitlines() if line.startswith(b"data: "))
        )
        for event in events
    ]


def small_pair() -> tuple[bytes, bytes]:
    """The unmodified chat capture (two calls) and a minimal request with its two tools."""
    request = {
        "model": "gpt-4o-2024-08-06",
        "messages": [{"role": "user", "content": "Weather in Edinburgh and AAPL price?"}],
        "tools": [{"type": "function", "function": {**t, "strict": True}} for t in TOOLS[:2]],
    }
    return json.dumps(request).encode(), _read("chat_nonstream_parallel_tool_calls.json")


def scaled_pair(scale: int) -> tuple[bytes, bytes]:
    """Request and response that grow together: `scale` history rounds, `scale` x the file."""
    return chat_request(history=scale), chat_response(2800 * scale)


def _sse(kind: str | None, data: dict[str, Any]) -> bytes:
    head = f"event: {kind}\n".encode() if kind else b""
    return head + b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"


def responses_stream_built(content_size: int = 2800, deltas: int = 43) -> list[bytes]:
    """The three calls as a Responses stream (created, items, argument deltas, completed)."""
    calls = call_arguments(content_size)
    base = {
        "id": "resp_bench",
        "object": "response",
        "model": "gpt-5.4",
        "status": "in_progress",
        "parallel_tool_calls": True,
        "tools": [{"type": "function", **t, "strict": True} for t in TOOLS],
    }
    out = [
        _sse("response.created", {"type": "response.created", "response": {**base, "output": []}})
    ]
    items = []
    for index, (name, args) in enumerate(calls):
        item = {
            "type": "function_call",
            "id": f"fc_{index}",
            "call_id": f"call_{index}",
            "name": name,
            "arguments": "",
            "status": "in_progress",
        }
        out.append(
            _sse(
                "response.output_item.added",
                {"type": "response.output_item.added", "output_index": index, "item": item},
            )
        )
        for piece in _split(args, deltas // len(calls)):
            out.append(
                _sse(
                    "response.function_call_arguments.delta",
                    {
                        "type": "response.function_call_arguments.delta",
                        "item_id": item["id"],
                        "output_index": index,
                        "delta": piece,
                    },
                )
            )
        done = {**item, "arguments": args, "status": "completed"}
        out.append(
            _sse(
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": index, "item": done},
            )
        )
        items.append(done)
    final = {**base, "status": "completed", "output": items}
    out.append(_sse("response.completed", {"type": "response.completed", "response": final}))
    return out


def messages_stream_built(content_size: int = 2800, deltas: int = 43) -> list[bytes]:
    """The three calls as an Anthropic Messages stream of tool_use blocks."""
    start = {
        "id": "msg_bench",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": 377, "output_tokens": 1},
    }
    out = [_sse("message_start", {"type": "message_start", "message": start})]
    for index, (name, args) in enumerate(call_arguments(content_size)):
        block = {"type": "tool_use", "id": f"toolu_{index}", "name": name, "input": {}}
        out.append(
            _sse(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": block},
            )
        )
        for piece in _split(args, deltas // 3):
            out.append(
                _sse(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": piece},
                    },
                )
            )
        out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
    out.append(
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use"},
                "usage": {"output_tokens": 860},
            },
        )
    )
    out.append(_sse("message_stop", {"type": "message_stop"}))
    return out


MCP_WEATHER = {
    "name": "weather",
    "inputSchema": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "units": {"enum": ["c", "f"]}},
        "required": ["city"],
    },
    "outputSchema": {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "temperature": {"type": "number"},
            "conditions": {"type": "string"},
        },
        "required": ["city", "temperature", "conditions"],
    },
}


def mcp_list_pair() -> tuple[bytes, bytes]:
    """An MCP tools/list and its answer, as the SDK's server sends it (SSE)."""
    request = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    answer = {"jsonrpc": "2.0", "id": 2, "result": {"tools": [MCP_WEATHER]}}
    return json.dumps(request).encode(), _sse("message", answer)


def mcp_call_pair() -> tuple[bytes, bytes]:
    """An MCP tools/call with a progress notification before its structured result (SSE)."""
    request = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "weather", "arguments": {"city": "Oslo", "units": "c"}},
    }
    progress = {"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": 3, "progress": 1, "total": 2}}  # fmt: skip
    weather = {"city": "Oslo", "temperature": 21.5, "conditions": "sunny"}
    result = {"content": [{"type": "text", "text": json.dumps(weather)}], "isError": False,
              "structuredContent": weather}  # fmt: skip
    answer = {"jsonrpc": "2.0", "id": 3, "result": result}
    return json.dumps(request).encode(), _sse("message", progress) + _sse("message", answer)


def record(
    api: str,
    path: str,
    request: bytes,
    response: bytes,
    request_headers: tuple[tuple[bytes, bytes], ...] = (JSON_TYPE,),
) -> Record:
    """A finished JSON exchange with api.openai.com as the proxy hands it to the inspector."""
    now = time.time()
    return Record(
        api,
        method="POST",
        scheme="https",
        host="api.openai.com",
        port=443,
        path=path,
        request_headers=request_headers,
        request_body=request,
        status=200,
        response_headers=(JSON_TYPE,),
        response_body=response,
        started=now - 0.5,
        ended=now,
    )
