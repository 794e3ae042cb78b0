"""Newline-delimited JSON (`application/x-ndjson`), split into lines as its bytes arrive:
Ollama's streams, one JSON object a line.

Sans-I/O like tooltap.core.sse: feed() takes bytes cut anywhere (mid-line, mid-UTF-8 character)
and returns the lines completed so far; close() returns the last line if the stream did not end
it. Lines end at \\n (a \\r before it is JSON whitespace); blank lines carry nothing. Lines
stay bytes: parsing each one (and reading invalid UTF-8 leniently) is the reader's
(tooltap.core.stream). A line that is not JSON spoils only itself, as ollama-js skips it and
goes on, so a multiple-value JSON parser, which stops at the first bad byte, is not used here.
"""

from __future__ import annotations


class NDJSONDecoder:
    def __init__(self) -> None:
        self._pending: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        if b"\n" not in chunk:
            # No line ends here: keep the piece; joining happens once per line, so a long
            # line fed in small chunks stays linear.
            if chunk:
                self._pending.append(chunk)
            return []
        if self._pending:
            self._pending.append(chunk)
            chunk = b"".join(self._pending)
            self._pending = []
        *lines, rest = chunk.split(b"\n")
        if rest:
            self._pending.append(rest)
        return [line for line in map(bytes.strip, lines) if line]

    def close(self) -> list[bytes]:
        """The last line, when the stream ended without its newline."""
        rest = b"".join(self._pending).strip()
        self._pending = []
        return [rest] if rest else []
