"""The AWS event stream (`application/vnd.amazon.eventstream`), read as its messages.

Sans-I/O, like the SSE reader: `feed(chunk)` takes bytes cut anywhere and returns the messages
completed so far. The framing (a prelude with the lengths and its CRC32, headers such as
`:event-type` and `:message-type`, the payload, the message's CRC32) is read by botocore's own
`EventStreamBuffer`. A frame that fails its checks ends the reading: nothing after it can be
placed, so it is said (`broken`), never raised; bytes left at the end are a frame cut short.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from botocore.eventstream import EventStreamBuffer, ParserError

PIECE = 64 << 10  # bytes handed to the buffer at once: it copies what it holds per message
_PRELUDE = struct.Struct("!III")  # total length, headers length, the prelude's CRC32


@dataclass(frozen=True, slots=True)
class Message:
    """One event-stream message: its type headers and its payload."""

    event_type: str  # :event-type (chunk, contentBlockDelta, ...)
    message_type: str  # :message-type: event, or exception
    exception_type: str  # :exception-type of an exception (throttlingException, ...)
    payload: bytes


def looks_like_eventstream(body: bytes) -> bool:
    """Does a body open with an event-stream prelude whose CRC holds? Pure.

    For a stream recorded without its content-type: an accidental match needs a 32-bit
    checksum to agree by chance.
    """
    if len(body) < _PRELUDE.size:
        return False
    total, headers, crc = _PRELUDE.unpack_from(body)
    return bool(zlib.crc32(body[:8]) == crc and headers + 16 <= total)


class EventStreamDecoder:
    """Event-stream messages, fed chunk by chunk; total: never raises."""

    def __init__(self) -> None:
        self._buffer = EventStreamBuffer()
        self._held = 0  # bytes fed and not yet part of a whole message
        self.broken: str | None = None  # why the reading stopped at a bad frame

    def feed(self, chunk: bytes) -> list[Message]:
        out: list[Message] = []
        for start in range(0, len(chunk), PIECE):
            if self.broken is not None:
                break
            piece = chunk[start : start + PIECE]
            self._buffer.add_data(piece)
            self._held += len(piece)
            out += self._drain()
        return out

    def close(self) -> int:
        """The bytes of a frame the stream cut short (0 when it ended on a whole message)."""
        return 0 if self.broken is not None else self._held

    def _drain(self) -> list[Message]:
        out: list[Message] = []
        try:
            for message in self._buffer:
                self._held -= message.prelude.total_length
                headers = message.headers
                out.append(
                    Message(
                        event_type=_text(headers.get(":event-type")),
                        message_type=_text(headers.get(":message-type")),
                        exception_type=_text(headers.get(":exception-type")),
                        payload=message.payload,
                    )
                )
        # botocore's checks (CRCs, lengths), and lengths it leaves unchecked (a total of 0).
        except (ParserError, struct.error, ValueError, IndexError) as exc:
            self.broken = f"{type(exc).__name__}: {exc}"
        return out


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""
