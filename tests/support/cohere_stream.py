"""Cohere's v2 chat stream for an answer, written as Cohere's API sends it (the recordings in
tests/corpus/realworld/exchanges-4.jsonl): `message-start`, the plan in pieces, each content block
and each call (one object per `tool-call-start`, its arguments in pieces), `message-end`, then a
bare `data: [DONE]`. Built from the answer alone, sharing no code with tooltap."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any


def pieces(text: str, size: int) -> Iterator[str]:
    return (text[i : i + size] for i in range(0, len(text), max(1, size)))


def events_of(body: dict[str, Any], size: int = 5) -> list[dict[str, Any]]:
    """The stream's events for an unstreamed answer, every text cut into `size` pieces."""
    message = body["message"]
    skeleton = {"role": "assistant", "content": [], "tool_plan": "", "tool_calls": [],
                "citations": []}  # fmt: skip
    out: list[dict[str, Any]] = [
        {"id": body["id"], "type": "message-start", "delta": {"message": skeleton}}
    ]
    out += [
        {"type": "tool-plan-delta", "delta": {"message": {"tool_plan": piece}}}
        for piece in pieces(message.get("tool_plan", ""), size)
    ]
    for index, block in enumerate(message.get("content", [])):
        key = "thinking" if block["type"] == "thinking" else "text"
        start = {"content": {"type": block["type"], key: ""}}
        out.append({"type": "content-start", "index": index, "delta": {"message": start}})
        out += [
            {"type": "content-delta", "index": index,
             "delta": {"message": {"content": {key: piece}}}}
            for piece in pieces(block[key], size)
        ]  # fmt: skip
        out.append({"type": "content-end", "index": index})
    for index, call in enumerate(message.get("tool_calls", [])):
        start = {"id": call["id"], "type": "function",
                 "function": {"name": call["function"]["name"], "arguments": ""}}  # fmt: skip
        out.append({"type": "tool-call-start", "index": index,
                    "delta": {"message": {"tool_calls": start}}})  # fmt: skip
        out += [
            {"type": "tool-call-delta", "index": index,
             "delta": {"message": {"tool_calls": {"function": {"arguments": piece}}}}}
            for piece in pieces(call["function"]["arguments"], size)
        ]  # fmt: skip
        out.append({"type": "tool-call-end", "index": index})
    end: dict[str, Any] = {"finish_reason": body["finish_reason"]}
    if "usage" in body:
        end["usage"] = body["usage"]
    out.append({"type": "message-end", "delta": end})
    return out


def sse(events: list[dict[str, Any]], done: bool = True) -> bytes:
    """Events framed as Cohere frames them: an event name repeating the type, then `[DONE]`."""
    framed = b"".join(
        f"event: {e['type']}\ndata: {json.dumps(e, ensure_ascii=False)}\n\n".encode()
        for e in events
    )
    return framed + (b"data: [DONE]\n\n" if done else b"")
