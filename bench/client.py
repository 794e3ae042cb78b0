"""A minimal HTTP/1.1 keep-alive client on asyncio streams.

httpx costs more CPU per request than the proxy under test would leave for it
on two cores; this reads exactly one response per request (Content-Length or
chunked) and can timestamp each SSE event as it completes.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

TIMEOUT = 15.0  # per request: a hung proxy fails the run instead of stalling it


def build_request(url: str, path: str, body: bytes, scenario: str = "chat-json") -> bytes:
    host = urlsplit(url).netloc
    return (
        f"POST {path} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n"
        f"authorization: Bearer sk-bench-not-a-key\r\nx-scenario: {scenario}\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode() + body


@dataclass
class Response:
    status: int
    size: int
    event_times: list[float] = field(default_factory=list)  # perf_counter() per SSE event


class Connection:
    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> Connection:
        self.reader, self.writer = await asyncio.open_connection(
            self.host, self.port, limit=1 << 20
        )
        return self

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(OSError):
                await self.writer.wait_closed()

    async def request(self, raw: bytes, events: bool = False) -> Response:
        return await asyncio.wait_for(self._request(raw, events), TIMEOUT)

    async def _request(self, raw: bytes, events: bool) -> Response:
        assert self.reader is not None and self.writer is not None
        self.writer.write(raw)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        length, chunked = None, False
        for line in head.lower().split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding" and b"chunked" in value:
                chunked = True
        response = Response(status, 0)
        on_data = _EventClock(response.event_times).feed if events else None
        if chunked:
            while True:
                size = int((await self.reader.readline()).split(b";")[0], 16)
                if size == 0:
                    await self.reader.readline()
                    break
                data = (await self.reader.readexactly(size + 2))[:-2]
                response.size += size
                if on_data:
                    on_data(data)
        elif length:
            if on_data:
                # Read as it arrives, so a streamed Content-Length body is timed per event too.
                left = length
                while left:
                    data = await self.reader.read(min(left, 65536))
                    if not data:
                        raise ConnectionError("closed mid-body")
                    left -= len(data)
                    on_data(data)
            else:
                await self.reader.readexactly(length)
            response.size = length
        return response


class _EventClock:
    """Appends perf_counter() each time a blank line completes an SSE event."""

    def __init__(self, times: list[float]) -> None:
        self.times = times
        self.tail = b""

    def feed(self, data: bytes) -> None:
        now = time.perf_counter()
        text = self.tail + data
        self.times.extend(now for _ in range(text.count(b"\n\n")))
        self.tail = text[-1:]  # a "\n\n" may straddle two reads
        if self.tail == b"\n" and text.endswith(b"\n\n"):
            self.tail = b""


@dataclass
class Batch:
    latencies: list[float]  # seconds, per request
    wall: float
    errors: int

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.wall if self.wall else 0.0


async def run_batch(
    url: str,
    make: Callable[[int], bytes],
    count: int,
    concurrency: int,
    *,
    deadline: float = 120.0,
    expect: Callable[[Response], bool] | None = None,
) -> Batch:
    """`count` requests over `concurrency` keep-alive connections; stops early at `deadline` s."""
    connections = [await Connection(url).open() for _ in range(concurrency)]
    latencies: list[float] = []
    errors = 0
    counter = iter(range(count))
    stop_at = time.perf_counter() + deadline

    async def worker(conn: Connection) -> None:
        nonlocal errors
        for n in counter:
            if time.perf_counter() > stop_at:
                return
            raw = make(n)
            t0 = time.perf_counter()
            try:
                response = await conn.request(raw)
            except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError):
                errors += 1
                await conn.close()
                await conn.open()
                continue
            latencies.append(time.perf_counter() - t0)
            if expect is not None and not expect(response):
                errors += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in connections))
    wall = time.perf_counter() - started
    for conn in connections:
        await conn.close()
    return Batch(latencies, wall, errors)
