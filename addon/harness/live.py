"""Gemini Live server messages, in the shapes the Live API reference and google-genai's types
give them, for the loopback upstream (the demo and the tests), and the tools they call.

Google's servers send each message as a binary frame holding JSON, pretty-printed; `frame`
writes them so. A script's steps are triggered by the client message's key (`setup`,
`clientContent`, `toolResponse`), whichever spelling the client uses.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from .sockets import Step

SILENCE = base64.b64encode(bytes(960)).decode()  # 20 ms of 24 kHz 16-bit PCM
# A voice agent's tools, as its setup declares them: a lookup the model waits for, and a slow
# booking it talks on past (NON_BLOCKING).
WEATHER = {
    "name": "get_weather",
    "description": "Weather for a city",
    "parameters": {
        "type": "OBJECT",
        "properties": {
            "city": {"type": "STRING"},
            "units": {"type": "STRING", "enum": ["c", "f"]},
        },
        "required": ["city", "units"],
    },
}
BOOKING = {
    "name": "book_ticket",
    "description": "Book a flight; slow, so the conversation goes on meanwhile",
    "behavior": "NON_BLOCKING",
    "parameters": {"type": "OBJECT", "properties": {"flight": {"type": "STRING"}}},
}


def frame(message: dict[str, Any]) -> bytes:
    """One server message as Google sends it: JSON with two-space indents, in a binary frame."""
    return json.dumps(message, indent=2).encode()


def setup_complete() -> bytes:
    return frame({"setupComplete": {}})


def tool_call(*calls: tuple[str, str, dict[str, Any]]) -> bytes:
    """A toolCall: (id, name, args) per call."""
    return frame(
        {"toolCall": {"functionCalls": [{"id": i, "name": n, "args": a} for i, n, a in calls]}}
    )


def cancellation(*ids: str) -> bytes:
    return frame({"toolCallCancellation": {"ids": list(ids)}})


def text(words: str) -> bytes:
    return frame({"serverContent": {"modelTurn": {"parts": [{"text": words}]}}})


def audio() -> bytes:
    """A chunk of the model's speech (never held for inspection)."""
    part = {"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": SILENCE}}
    return frame({"serverContent": {"modelTurn": {"parts": [part]}}})


def generation_complete() -> bytes:
    return frame({"serverContent": {"generationComplete": True}})


def interrupted() -> bytes:
    return frame({"serverContent": {"interrupted": True}})


def turn_complete(prompt: int = 0, response: int = 0) -> bytes:
    """The end of the model's turn, with the usage the server sends beside it."""
    message: dict[str, Any] = {"serverContent": {"turnComplete": True}}
    if prompt or response:
        message["usageMetadata"] = {
            "promptTokenCount": prompt,
            "responseTokenCount": response,
            "totalTokenCount": prompt + response,
        }
    return frame(message)


def go_away(time_left: str = "10s") -> bytes:
    return frame({"goAway": {"timeLeft": time_left}})


def answer(words: str, prompt: int = 0, response: int = 0) -> list[bytes]:
    """A whole model turn of text: its words, generationComplete, turnComplete."""
    return [text(words), generation_complete(), turn_complete(prompt, response)]


def script(*steps: tuple[str | None, list[bytes]]) -> list[Step]:
    """A connection's steps: what the server sends on connect (None) and after each client
    message of a key. The setup is answered with setupComplete first."""
    played = [Step(trigger, list(frames)) for trigger, frames in steps]
    return [Step(None, []), Step("setup", [setup_complete()]), *played]
