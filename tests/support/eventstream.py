"""AWS event-stream messages framed by hand, as AWS documents the format (not by tooltap):
for the tests' own Bedrock streams and the loopback upstream that serves them."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from typing import Any


def frame(event_type: str, payload: bytes, message_type: str = "event", **extra: str) -> bytes:
    """One event-stream message, framed here by hand as AWS documents it (not by tooltap)."""
    headers = b""
    for name, value in {":event-type": event_type, ":message-type": message_type, **extra}.items():
        raw = value.encode()
        headers += bytes([len(name)]) + name.encode() + b"\x07" + struct.pack("!H", len(raw)) + raw
    total = 12 + len(headers) + len(payload) + 4
    prelude = struct.pack("!II", total, len(headers))
    prelude += struct.pack("!I", zlib.crc32(prelude))
    message = prelude + headers + payload
    return message + struct.pack("!I", zlib.crc32(message))


def chunk(event: dict[str, Any]) -> bytes:
    """An InvokeModel stream message: one event of the model's own stream, base64 in `bytes`."""
    envelope = {"bytes": base64.b64encode(json.dumps(event).encode()).decode(), "p": "abc"}
    return frame("chunk", json.dumps(envelope).encode())


def converse_event(event_type: str, payload: dict[str, Any]) -> bytes:
    """A Converse stream message: its type in the headers, its payload with AWS's padding."""
    return frame(event_type, json.dumps(payload | {"p": "abcdef"}).encode())
