"""Bytes split into lines as they arrive: the framing under SSE (tooltap.core.sse) and under
newline-delimited JSON (`application/x-ndjson`, Ollama's streams, one JSON object a line).

Sans-I/O: feed() takes bytes cut anywhere (mid-line, mid-UTF-8 character, between \\r and \\n)
and returns the lines completed so far, without their ends; close() returns the last line if
the stream did not end it. A piece with no line end is kept and joined once, when its line
ends, so a long line fed in small chunks stays linear.
"""

from __future__ import annotations


class Lines:
    """universal: \\r\\n, \\n and \\r each end a line (SSE); else only \\n does (NDJSON, where a
    \\r before it is JSON whitespace)."""

    def __init__(self, universal: bool = True) -> None:
        self._universal = universal
        self._pending: list[bytes] = []
        self._skip_lf = False  # the \n of a \r\n pair may open the next chunk

    def feed(self, chunk: bytes) -> list[bytes]:
        if not chunk:
            return []
        if self._skip_lf:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        if b"\n" not in chunk and not (self._universal and b"\r" in chunk):
            if chunk:
                self._pending.append(chunk)
            return []
        if self._pending:
            self._pending.append(chunk)
            chunk = b"".join(self._pending)
            self._pending = []
        if not self._universal:
            *lines, rest = chunk.split(b"\n")
            if rest:
                self._pending.append(rest)
            return lines
        # bytes.splitlines ends lines at \r\n, \n and \r, as SSE does, and drops the ends.
        lines = chunk.splitlines()
        end = chunk[-1:]
        if end not in (b"\n", b"\r"):  # the last line goes on in the next chunk
            self._pending.append(lines.pop())
        elif end == b"\r":
            self._skip_lf = True
        return lines

    def close(self) -> bytes | None:
        """The last line, when the stream ended without ending it."""
        if not self._pending:
            return None
        rest = b"".join(self._pending)
        self._pending = []
        return rest


class NDJSONDecoder:
    """NDJSON's lines, each stripped; blank lines carry nothing. Lines stay bytes: parsing each
    one (and reading invalid UTF-8 leniently) is the reader's (tooltap.core.stream). A line that
    is not JSON spoils only itself, as ollama-js skips it and goes on, so a multiple-value JSON
    parser, which stops at the first bad byte, is not used here."""

    def __init__(self) -> None:
        self._lines = Lines(universal=False)

    def feed(self, chunk: bytes) -> list[bytes]:
        return [line for line in map(bytes.strip, self._lines.feed(chunk)) if line]

    def close(self) -> list[bytes]:
        rest = (self._lines.close() or b"").strip()
        return [rest] if rest else []
