"""Incremental Content-Encoding decoding (gzip, deflate, br, zstd).

Bytes that cross the proxy stay encoded; only the rules read decoded text.
Decoders are fed one chunk at a time, so a stream can be decoded as it ends
up in the worker, and the output is capped so a small compressed body cannot
expand without bound.
"""

from __future__ import annotations

import zlib
from typing import Protocol

import brotli
import zstandard

DEFAULT_MAX_DECODED = 64 * 1024 * 1024
TOO_LARGE = "decoded body exceeds the size limit"


class DecodeError(Exception):
    """The body is not valid in the encoding its headers declare, or too large."""


class _Step(Protocol):
    def feed(self, data: bytes, limit: int) -> bytes: ...
    def close(self) -> None: ...


class _Zlib:
    """gzip, or deflate with or without its zlib header (both are seen live)."""

    def __init__(self, encoding: str) -> None:
        self._gzip = encoding in ("gzip", "x-gzip")
        self._obj = zlib.decompressobj(16 + zlib.MAX_WBITS if self._gzip else zlib.MAX_WBITS)
        self._started = False

    def feed(self, data: bytes, limit: int) -> bytes:
        if not data:
            return b""
        # A zlib header's first byte has 8 (deflate) in its low nibble; raw
        # deflate has none.
        if not self._started and not self._gzip and data[0] & 0x0F != 8:
            self._obj = zlib.decompressobj(-zlib.MAX_WBITS)
        self._started = True
        try:
            out = self._obj.decompress(data, limit)
        except zlib.error as exc:
            raise DecodeError(str(exc)) from exc
        if self._obj.unconsumed_tail:
            raise DecodeError(TOO_LARGE)
        return out

    def close(self) -> None:
        if self._started and not self._obj.eof:
            raise DecodeError("compressed stream ended early")


class _Brotli:
    def __init__(self) -> None:
        self._obj = brotli.Decompressor()
        self._started = False

    def feed(self, data: bytes, limit: int) -> bytes:
        if not data:
            return b""
        self._started = True
        try:
            out = bytes(self._obj.process(data, output_buffer_limit=limit))
        except brotli.error as exc:
            raise DecodeError(str(exc)) from exc
        if not self._obj.can_accept_more_data():
            raise DecodeError(TOO_LARGE)
        return out

    def close(self) -> None:
        if self._started and not self._obj.is_finished():
            raise DecodeError("brotli stream ended early")


class _Zstd:
    # zstd has no output cap per call, so input goes in small slices and the
    # cap is checked between them (one slice expands to at most ~32 MB).
    # Frames are followed one by one, so a truncated last frame is detected.
    SLICE = 1024

    def __init__(self) -> None:
        self._obj = zstandard.ZstdDecompressor().decompressobj()
        self._started = False

    def feed(self, data: bytes, limit: int) -> bytes:
        out = bytearray()
        pending = [data[i : i + self.SLICE] for i in range(0, len(data), self.SLICE)]
        while pending:
            piece = pending.pop(0)
            if self._obj.eof:
                self._obj = zstandard.ZstdDecompressor().decompressobj()
            self._started = True
            try:
                out += self._obj.decompress(piece)
            except zstandard.ZstdError as exc:
                raise DecodeError(str(exc)) from exc
            if self._obj.eof and self._obj.unused_data:
                pending.insert(0, self._obj.unused_data)
            if len(out) > limit:
                raise DecodeError(TOO_LARGE)
        return bytes(out)

    def close(self) -> None:
        if self._started and not self._obj.eof:
            raise DecodeError("zstd stream ended early")


def _step(encoding: str) -> _Step:
    if encoding in ("gzip", "x-gzip", "deflate"):
        return _Zlib(encoding)
    if encoding == "br":
        return _Brotli()
    if encoding == "zstd":
        return _Zstd()
    raise DecodeError(f"unsupported content-encoding {encoding!r}")


class Decoder:
    """Decode a Content-Encoding chain, one chunk at a time. Sans-I/O.

    feed() and close() raise DecodeError (bad data, or more than max_decoded
    bytes out); the constructor raises it for an unknown coding.
    """

    def __init__(self, content_encoding: str | None, max_decoded: int = DEFAULT_MAX_DECODED):
        names = [e.strip().lower() for e in (content_encoding or "").split(",")]
        # Codings are listed in the order they were applied: undo them in reverse.
        self._steps = [_step(name) for name in reversed(names) if name not in ("", "identity")]
        self._left = max_decoded

    def feed(self, chunk: bytes) -> bytes:
        for step in self._steps:
            chunk = step.feed(chunk, self._left + 1)
        self._left -= len(chunk)
        if self._left < 0:
            raise DecodeError(TOO_LARGE)
        return chunk

    def close(self) -> None:
        for step in self._steps:
            step.close()


def decode(
    body: bytes, content_encoding: str | None, max_decoded: int = DEFAULT_MAX_DECODED
) -> bytes:
    """Decode a whole body. Pure. Raises DecodeError."""
    if not content_encoding:  # nothing to undo (most bodies): only the size to check
        if len(body) > max_decoded:
            raise DecodeError(TOO_LARGE)
        return body
    decoder = Decoder(content_encoding, max_decoded)
    out = decoder.feed(body)
    decoder.close()
    return out
