"""A fast loopback upstream for the load benchmarks, run as its own process.

tooltap.addon.harness.replay.ReplayServer starts a Python thread per connection and
writes through file objects; under load it costs more CPU per request than
the client, and in the bench process it would share the client's GIL. This
server is a bare asyncio protocol in a child process: prebuilt replies, the
request's `x-scenario` header picks one (default: the ~4 KB chat JSON).
`--replay` serves the same scenarios with ReplayServer instead, so the
benchmark can show which upstream is the bottleneck.

    python -m bench.upstream [--replay]   prints "port N", serves until stdin closes
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
from typing import ClassVar

from . import bodies

JSON = b"application/json"
SSE = b"text/event-stream; charset=utf-8"
MAX_BODY = 256 * 1024  # the memory benchmark's tooltap_max_body; "big" replies exceed it


class Scenario:
    """A reply: status, content type, body chunks. `{N}` in a chunk becomes a unique number."""

    def __init__(self, status: int, content_type: bytes, chunks: list[bytes]) -> None:
        self.status = status
        self.content_type = content_type
        self.chunks = chunks
        self.templated = any(b"{N}" in c for c in chunks)


def scenarios() -> dict[bytes, Scenario]:
    chat = bodies.chat_response()
    big = bodies.chat_response(content_size=MAX_BODY + 40_000)
    stream = bodies.chat_stream_events()
    big_stream = bodies.chat_stream_events(content_size=MAX_BODY + 40_000, deltas=400)
    _, messages = bodies.messages_pair()
    return {
        b"chat-json": Scenario(200, JSON, [chat]),
        # Unique ids, so tooltap's previous_response_id map fills as it would in production.
        b"responses-json": Scenario(200, JSON, [bodies.responses_response("resp_{N}")]),
        b"messages-json": Scenario(200, JSON, [messages]),
        b"chat-sse": Scenario(200, SSE, stream),
        b"responses-sse": Scenario(200, SSE, bodies.responses_stream_events()),
        b"malformed-json": Scenario(200, JSON, [chat[: len(chat) // 2]]),
        b"truncated-sse": Scenario(200, SSE, stream[:20]),
        b"rejected": Scenario(
            400, JSON, [b'{"error": {"type": "invalid_request_error", "message": "bad schema"}}']
        ),
        b"big-json": Scenario(200, JSON, [big]),
        b"big-sse": Scenario(200, SSE, big_stream),
    }


REASONS = {200: b"OK", 400: b"Bad Request", 404: b"Not Found"}


def render(scenario: Scenario, n: int) -> bytes:
    """The whole HTTP response: Content-Length for one chunk, chunked otherwise."""
    chunks = scenario.chunks
    if scenario.templated:
        chunks = [c.replace(b"{N}", str(n).encode()) for c in chunks]
    head = b"HTTP/1.1 %d %s\r\ncontent-type: %s\r\nx-request-id: req_bench\r\n" % (
        scenario.status,
        REASONS.get(scenario.status, b"OK"),
        scenario.content_type,
    )
    if len(chunks) == 1:
        return head + b"content-length: %d\r\n\r\n" % len(chunks[0]) + chunks[0]
    framed = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks if c)
    return head + b"transfer-encoding: chunked\r\n\r\n" + framed + b"0\r\n\r\n"


class Server(asyncio.Protocol):
    table: ClassVar[dict[bytes, Scenario]] = {}
    prebuilt: ClassVar[dict[bytes, bytes]] = {}
    counter = itertools.count()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end].lower()
            length, scenario = 0, b"chat-json"
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name == b"content-length":
                    length = int(value)
                elif name == b"x-scenario":
                    scenario = value.strip()
            if len(self.buffer) < end + 4 + length:
                return
            self.buffer = self.buffer[end + 4 + length :]
            self.reply(scenario)

    def reply(self, name: bytes) -> None:
        scenario = self.table.get(name)
        if scenario is None:
            self.transport.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
        elif scenario.templated:
            self.transport.write(render(scenario, next(self.counter)))
        else:
            self.transport.write(self.prebuilt[name])


async def serve_asyncio() -> None:
    Server.table = scenarios()
    Server.prebuilt = {k: render(v, 0) for k, v in Server.table.items()}
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Server, "127.0.0.1", 0, backlog=256)
    print(f"port {server.sockets[0].getsockname()[1]}", flush=True)
    # Serve until the parent closes our stdin (or dies): no orphan.
    await loop.run_in_executor(None, sys.stdin.read)
    server.close()


def serve_replay() -> None:
    from tooltap.addon.harness.replay import ReplayServer, Reply, Seen

    table = scenarios()

    def route(seen: Seen) -> Reply:
        s = table.get(seen.headers.get("x-scenario", "chat-json").encode(), table[b"chat-json"])
        chunks = [c.replace(b"{N}", b"0") for c in s.chunks]
        return Reply(s.status, [("content-type", s.content_type.decode())], chunks)

    with ReplayServer(route) as server:
        server.seen = _Discard()  # unbounded list otherwise: we only want the bytes
        print(f"port {server.server_address[1]}", flush=True)
        sys.stdin.read()


class _Discard(list):  # type: ignore[type-arg]
    def append(self, _item: object) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--replay", action="store_true", help="serve with ReplayServer instead")
    if parser.parse_args().replay:
        serve_replay()
    else:
        asyncio.run(serve_asyncio())


if __name__ == "__main__":
    main()
