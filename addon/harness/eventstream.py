"""AWS event-stream messages, framed as AWS documents the format: what Bedrock's streams look
like on the wire, for the demo's upstream, the tests' and the benchmarks'.

tooltap reads these with botocore's own reader; framing them here, by hand, keeps the writer
and the reader independent.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from typing import Any

CONTENT_TYPE = "application/vnd.amazon.eventstream"


def frame(event_type: str, payload: bytes, message_type: str = "event", **extra: str) -> bytes:
    """One message: prelude (lengths and their CRC32), string headers, payload, CRC32."""
    headers = b""
    for name, value in {":event-type": event_type, ":message-type": message_type, **extra}.items():
        raw = value.encode()
        headers += bytes([len(name)]) + name.encode() + b"\x07" + struct.pack("!H", len(raw)) + raw
    total = 12 + len(headers) + len(payload) + 4
    prelude = struct.pack("!II", total, len(headers))
    prelude += struct.pack("!I", zlib.crc32(prelude))
    message = prelude + headers + payload
    return message + struct.pack("!I", zlib.crc32(message))


def chunk(event: dict[str, Any] | bytes) -> bytes:
    """An InvokeModel stream message: one event of the model's own stream, base64 in `bytes`
    (a dict is sent as its JSON; bytes as they are)."""
    data = event if isinstance(event, bytes) else json.dumps(event).encode()
    envelope = {"bytes": base64.b64encode(data).decode(), "p": "abcdef"}
    return frame("chunk", json.dumps(envelope).encode())


def converse_event(event_type: str, payload: dict[str, Any]) -> bytes:
    """A Converse stream message: its type in the headers, its payload with AWS's padding."""
    return frame(event_type, json.dumps(payload | {"p": "abcdef"}).encode())
