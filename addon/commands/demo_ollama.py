"""The demo's Ollama step: the official `ollama` client against the demo's upstream, which answers
in Ollama's own NDJSON stream, as a local server's /api/chat does.

The agent asked for two cities' weather and a share price; its history answered one of the two
weather calls (by `tool_name`, as ollama-python sends results: it keeps no call ids), and the
model now calls again, two tools at once, one argument off its schema.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..harness.replay import Reply

MODEL = "qwen3:8b"
ASK = "Weather in Tromsø and Bergen, and Equinor's share price?"
# The last turn's calls (as ollama-python sends them back: no ids), and the one answer it got.
EARLIER = [
    {"function": {"name": "get_weather", "arguments": {"city": c, "country": "NO", "units": "c"}}}
    for c in ("Tromsø", "Bergen")
]
# This turn's calls, as a server of 2025 or later sends them: an id each, and an index.
CALLS = [
    ("call_w3k9d0qa", "get_weather", {"city": "Bergen", "country": "NO", "units": "kelvin"}),
    ("call_p8r2m5xe", "get_stock_price", {"ticker": "EQNR", "exchange": "OSE"}),
]


def _line(message: dict[str, Any], done: bool = False) -> bytes:
    line: dict[str, Any] = {
        "model": MODEL,
        "created_at": "2026-12-01T09:14:07.218431Z",
        "message": {"role": "assistant", "content": ""} | message,
        "done": done,
    }
    if done:
        line |= {
            "done_reason": "stop",
            "total_duration": 2431175833,
            "load_duration": 31822250,
            "prompt_eval_count": 212,
            "prompt_eval_duration": 318229000,
            "eval_count": 58,
            "eval_duration": 2061003000,
        }
    return json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def reply() -> Reply:
    """The stream a local Ollama sends: thinking in pieces, each call whole in its own line,
    then the `done` line with its counts."""
    thinking = ["Bergen has no answer yet", "; ask again, and fetch", " the share price."]
    lines = [_line({"thinking": piece}) for piece in thinking]
    lines += [
        _line({"tool_calls": [{"id": i, "function": {"index": n, "name": name, "arguments": a}}]})
        for n, (i, name, a) in enumerate(CALLS)
    ]
    lines.append(_line({}, done=True))
    return Reply(headers=[("content-type", "application/x-ndjson")], chunks=lines, delay=0.01)


def chat(base_url: str, headers: Mapping[str, str], tools: list[dict[str, Any]]) -> list[Any]:
    """The agent's next turn, streamed through the ollama client. The client sends each tool's
    schema as its `Tool` model keeps it (no `strict`, no `additionalProperties`)."""
    import ollama  # noqa: PLC0415 - the SDKs are the demo extra

    client = ollama.Client(host=base_url, headers=dict(headers))
    history: list[dict[str, Any]] = [
        {"role": "user", "content": ASK},
        {"role": "assistant", "content": "", "tool_calls": EARLIER},
        {"role": "tool", "tool_name": "get_weather", "content": "Tromsø: -3C, snow"},
    ]
    return list(client.chat(model=MODEL, messages=history, tools=tools, stream=True))
