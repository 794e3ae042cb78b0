"""Server-sent events, decoded incrementally (WHATWG HTML, "event stream").

Sans-I/O in the h11 style: feed() takes bytes cut anywhere (mid-line,
mid-UTF-8 character, between \\r and \\n) and returns the events completed so
far; close() flushes the last one. Lines end in \\r\\n, \\n or \\r; fields come
in any order; data lines join with \\n; comments, retry: and unknown fields are
ignored; an event whose data buffer is empty is not dispatched.

No maintained Python SSE library exposes a byte-level feed() like this (they
wrap a socket or an iterator of whole lines), so the ~60 lines live here, over the
line framing NDJSON shares (tooltap.core.lines).
"""

from __future__ import annotations

from typing import NamedTuple

from .lines import Lines


class Event(NamedTuple):
    event: str
    data: str
    id: str | None
    lossy: bool = False  # a line held invalid UTF-8, replaced with U+FFFD


class SSEDecoder:
    def __init__(self) -> None:
        self._lines = Lines()
        self._first = True
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None
        self._lossy = False

    def feed(self, chunk: bytes) -> list[Event]:
        events: list[Event] = []
        for raw in self._lines.feed(chunk):
            # What streams are made of, read without a call a line: data and event lines of
            # valid UTF-8, and the blank line that ends an event. Any other line is _line's.
            if self._first:
                event = self._line(raw)
            elif not raw:
                event = self._dispatch()
            elif raw[:5] == b"data:":
                value = raw[6:] if raw[5:6] == b" " else raw[5:]
                try:
                    self._data.append(value.decode("utf-8"))
                    continue
                except UnicodeDecodeError:
                    event = self._line(raw)
            elif raw[:6] == b"event:":
                value = raw[7:] if raw[6:7] == b" " else raw[6:]
                try:
                    self._event = value.decode("utf-8")
                    continue
                except UnicodeDecodeError:
                    event = self._line(raw)
            else:
                event = self._line(raw)
            if event is not None:
                events.append(event)
        return events

    def close(self) -> list[Event]:
        """Flush a final line and event that the stream did not terminate."""
        events: list[Event] = []
        rest = self._lines.close()
        for line in ([] if rest is None else [rest]) + [b""]:
            event = self._line(line)
            if event is not None:
                events.append(event)
        return events

    def _line(self, raw: bytes) -> Event | None:
        if self._first:
            self._first = False
            raw = raw.removeprefix(b"\xef\xbb\xbf")
        if not raw:
            return self._dispatch()
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            line = raw.decode("utf-8", "replace")
            self._lossy = True
        if line.startswith(":"):
            return None
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id" and "\0" not in value:
            self._id = value
        return None

    def _dispatch(self) -> Event | None:
        if self._data in ([], [""]):
            # An empty data buffer dispatches nothing (WHATWG): an `id:` with an empty `data:`
            # is a priming event, which sets where a client resumes and carries no message.
            self._event = ""
            self._data = []
            self._lossy = False
            return None
        event = Event(self._event or "message", "\n".join(self._data), self._id, self._lossy)
        self._event = ""
        self._data = []
        self._lossy = False
        return event
