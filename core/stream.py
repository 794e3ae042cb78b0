"""Streamed responses reassembled into the object the same call returns unstreamed.

Sans-I/O: `StreamReader.feed(chunk)` takes raw (still content-encoded) bytes
cut anywhere and returns the JSON events completed so far; `close()` returns a
`StreamResult` whose `response` has the non-streaming shape of the dialect, so
a streamed turn gets the same Verdict as the same turn unstreamed. The content
encoding and the framing (SSE, NDJSON, ...) are undone here; each dialect's assembler
(tooltap.core.dialects) reads the events, on their JSON `type`, never on `event:`.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from .dialects import dialect
from .encoding import DEFAULT_MAX_DECODED, DecodeError, Decoder
from .errors import ApiError, api_error
from .eventstream import EventStreamDecoder, Message
from .jsonarray import ArrayDecoder
from .jsontext import loads, loads_lenient
from .lines import NDJSONDecoder
from .sse import SSEDecoder
from .turn import Api

# text/event-stream, AWS's binary event stream, a JSON array sent piece by piece (Gemini), or
# newline-delimited JSON (Ollama)
Framing = Literal["sse", "eventstream", "jsonarray", "ndjson"]

__all__ = ["ApiError", "StreamReader", "StreamResult", "api_error"]


@dataclass(slots=True)
class StreamResult:
    """What a finished stream said: the response object, and how it ended."""

    response: dict[str, Any]
    """The response in the dialect's non-streaming shape."""
    events: int
    """JSON events read."""
    complete: bool
    """The stream reached its final event."""
    errors: list[ApiError] = field(default_factory=list)
    """Errors the API sent inside the stream."""
    bad_events: int = 0
    """Events that were not JSON objects even when read leniently: dropped."""
    repaired_events: int = 0
    """Events read only leniently (invalid UTF-8, raw control characters)."""
    decode_error: str | None = None
    """Why the content-encoding could not be undone, if it could not."""
    first_output_at: float | None = None
    """When the piece arrived that completed the first event carrying model output (text,
    reasoning, or a call's name or arguments), as feed() was told; None when none did, or
    no time was given."""


class StreamReader:
    """Content-encoding, the framing (SSE, the AWS event stream, a JSON array or NDJSON) and
    one dialect's reassembly, fed chunk by chunk."""

    def __init__(
        self,
        api: Api,
        content_encoding: str | None = None,
        max_decoded: int = DEFAULT_MAX_DECODED,
        framing: Framing = "sse",
    ) -> None:
        self._assembler = dialect(api).assembler()
        self._sse = SSEDecoder()
        self._frames = EventStreamDecoder() if framing == "eventstream" else None
        self._array = ArrayDecoder() if framing == "jsonarray" else None
        self._lines = NDJSONDecoder() if framing == "ndjson" else None
        self._events = 0
        self._bad = 0
        self._repaired = 0
        self._error: str | None = None
        self._at: float | None = None  # when the last piece fed arrived
        self._first_output_at: float | None = None
        self._decoder: Decoder | None = None
        try:
            self._decoder = Decoder(content_encoding, max_decoded)
        except DecodeError as exc:
            self._error = str(exc)

    @property
    def output_dated(self) -> bool:
        """The first event carrying output has come, dated: the pieces after it need no time."""
        return self._first_output_at is not None

    def feed(self, chunk: bytes, at: float | None = None) -> list[Any]:
        """The events a piece of the stream completes; at: when the piece arrived (epoch
        seconds), which dates the first event that carries output."""
        self._at = at
        said = self._assembler.said
        events = self._feed(chunk)
        if not said and self._assembler.said:
            self._first_output_at = at
        return events

    def _feed(self, chunk: bytes) -> list[Any]:
        if self._decoder is None:
            return []
        try:
            data = self._decoder.feed(chunk)
        except DecodeError as exc:
            self._fail(str(exc))
            return []
        if self._frames is not None:
            return self._messages(self._frames.feed(data))
        if self._array is not None:
            return self._elements(self._array.feed(data))
        if self._lines is not None:
            return self._lines_of(self._lines.feed(data))
        return self._events_of(self._sse.feed(data))

    def close(self) -> StreamResult:
        said = self._assembler.said
        if self._decoder is not None:
            try:
                self._decoder.close()
            except DecodeError as exc:
                self._error = str(exc)
            # A last event (or frame) the stream did not finish was cut off, not
            # malformed: "ended before its final event" already says so. A frame that
            # failed its checks was malformed, and ended the reading.
            if self._array is not None:
                self._elements(self._array.close())
                self._bad += self._array.broken is not None
            elif self._lines is not None:
                self._lines_of(self._lines.close(), cut=True)
            elif self._frames is None:
                self._events_of(self._sse.close(), cut=True)
            elif self._frames.broken is not None:
                self._bad += 1
        assembler = self._assembler
        if not said and assembler.said:  # a last event the stream did not end, at its end
            self._first_output_at = self._at
        return StreamResult(
            response=assembler.result(),
            events=self._events,
            complete=assembler.complete,
            errors=assembler.errors,
            bad_events=self._bad,
            repaired_events=self._repaired,
            decode_error=self._error,
            first_output_at=self._first_output_at,
        )

    def _fail(self, reason: str) -> None:
        self._error = reason
        self._decoder = None

    def _messages(self, messages: list[Message]) -> list[Any]:
        """Event-stream messages as the dialect's events; an exception is a stream error."""
        out: list[Any] = []
        for message in messages:
            if message.message_type == "exception":
                error = api_error(loads(message.payload)[0])
                kind = message.exception_type or message.event_type
                self._assembler.errors.append(ApiError(type=kind, message=error.message))
                continue
            self._hand(_event(message), out)
        return out

    def _elements(self, values: list[Any]) -> list[Any]:
        """A JSON array's elements as the dialect's events: each must be an object."""
        out: list[Any] = []
        for value in values:
            self._hand(value, out)
        return out

    def _hand(self, value: Any, out: list[Any]) -> None:
        """An event to the dialect's assembler, if it is a JSON object; else it is a bad one."""
        if not isinstance(value, dict):
            self._bad += 1
            return
        self._events += 1
        self._assembler.event(value)
        out.append(value)

    def _events_of(self, events: list[Any], cut: bool = False) -> list[Any]:
        """SSE events: OpenAI's `[DONE]` marks the end; every other event's data is JSON."""
        out = []
        for event in events:
            if event.data == "[DONE]":  # OpenAI's end of stream, not JSON
                self._assembler.done_marker()
                continue
            if not event.lossy:  # most events: one JSON object, read here without a call
                try:
                    value = orjson.loads(event.data)
                except (ValueError, TypeError, RecursionError):
                    value = None
                if isinstance(value, dict):
                    self._events += 1
                    self._assembler.event(value)
                    out.append(value)
                    continue
            if (value := self._json_event(event.data, event.lossy, cut)) is not None:
                out.append(value)
        return out

    def _lines_of(self, lines: list[bytes], cut: bool = False) -> list[Any]:
        """NDJSON lines: each one JSON object (invalid UTF-8 in one is read leniently)."""
        out = []
        for line in lines:
            if (value := self._json_event(line, False, cut)) is not None:
                out.append(value)
        return out

    def _json_event(self, data: bytes | str, lossy: bool, cut: bool) -> dict[str, Any] | None:
        """One event's JSON object, handed to the dialect; None when it is none. A last one
        the stream cut off is not counted malformed."""
        value, error = loads(data)
        lenient = lossy
        if error is not None:
            value, error, lenient = loads_lenient(data)
        if error is not None or not isinstance(value, dict):
            self._bad += not cut
            return None
        self._repaired += lenient
        self._events += 1
        self._assembler.event(value)
        return value


def _event(message: Message) -> dict[str, Any] | None:
    """A message's event, as the dialect reads it; None when it cannot be read. Pure.

    InvokeModel wraps each event of the model's own stream in a `chunk`, base64 under
    `bytes`; any other event is `{event type: payload}`, as botocore hands Converse's out.
    """
    value, error = loads(message.payload)
    if error is not None or not isinstance(value, dict):
        return None
    if message.event_type != "chunk" or not isinstance(value.get("bytes"), str):
        return {message.event_type: value}
    try:
        inner = base64.b64decode(value["bytes"], validate=True)
    except (binascii.Error, ValueError):
        return None
    value, error = loads(inner)
    return value if error is None and isinstance(value, dict) else None
