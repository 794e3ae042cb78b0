"""Loopback upstreams for the reliability tests, and a client that records what it saw.

RawUpstream writes every byte itself: a test scripts the status line, the
framing, pauses, stalls, resets and closes that ReplayServer (always a
well-formed reply from a list in memory) cannot produce. Bodies are produced
lazily, so a 200 MB reply never sits in memory. H2Upstream answers HTTP/2 over
TLS (ALPN h2), as the real API hosts do.
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Self

import h2.config
import h2.connection
import h2.events
import httpx

from tooltap.addon.harness.replay import Reply, Seen

RESET = "reset"  # close with SO_LINGER 0: the peer gets a TCP RST
CLOSE = "close"  # close cleanly (FIN)
TIMEOUT = 10.0  # every client call, direct or proxied, gets this same bound


@dataclass
class Idle:
    """Stall until `release` is set or the peer hangs up; bounded by `limit` seconds."""

    release: threading.Event = field(default_factory=threading.Event)
    limit: float = TIMEOUT
    peer_closed: threading.Event = field(default_factory=threading.Event)


Step = bytes | float | str | Idle
Script = Callable[["Request"], Iterable[Step]]


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def case(self) -> str:
        """The case name: requests go to /case/<name>/v1/..."""
        parts = self.path.split("/")
        return parts[2] if len(parts) > 2 and parts[1] == "case" else ""


def head(status: int, headers: Iterable[tuple[str, str]], reason: str = "Status") -> bytes:
    lines = [f"HTTP/1.1 {status} {reason}", *(f"{k}: {v}" for k, v in headers)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def reply(
    status: int,
    headers: Iterable[tuple[str, str]],
    parts: Iterable[bytes],
    chunked: bool | None = None,
    pause: float = 0.0,
) -> Iterator[Step]:
    """A well-formed response: Content-Length for one part, chunked for several."""
    parts = list(parts)
    if chunked is None:
        chunked = len(parts) != 1
    if not chunked:
        body = b"".join(parts)
        yield head(status, [*headers, ("content-length", str(len(body)))])
        if body:
            yield body
        return
    yield head(status, [*headers, ("transfer-encoding", "chunked")])
    for index, part in enumerate(parts):
        if index and pause:
            yield pause
        if part:
            yield chunk(part)
    yield b"0\r\n\r\n"


class _Listener:
    """A loopback TCP server: each connection is served on a thread of its own by _serve."""

    scheme = "http"

    def __init__(self, name: str, backlog: int) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(backlog)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, name=name, daemon=True)

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self._sock.getsockname()[1]}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        self._sock.close()
        self._thread.join(5)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        raise NotImplementedError


class RawUpstream(_Listener):
    """scripts[case](request) -> steps: bytes to send, a pause, an Idle stall, RESET or CLOSE."""

    def __init__(self, scripts: dict[str, Script]) -> None:
        super().__init__("raw-upstream", backlog=256)
        self.scripts = scripts
        self.requests: list[Request] = []

    def _serve(self, conn: socket.socket) -> None:
        reader = _Reader(conn)
        try:
            while (request := reader.request()) is not None:
                self.requests.append(request)
                if not self._play(conn, self.scripts[request.case](request)):
                    return
        except (OSError, ValueError):
            return
        finally:
            conn.close()

    @staticmethod
    def _play(conn: socket.socket, steps: Iterable[Step]) -> bool:
        """Run one script; False when it ended the connection."""
        for step in steps:
            if isinstance(step, bytes):
                conn.sendall(step)
            elif isinstance(step, float | int):
                time.sleep(step)
            elif isinstance(step, Idle):
                deadline = time.monotonic() + step.limit
                while not step.release.is_set() and time.monotonic() < deadline:
                    readable, _, _ = select.select([conn], [], [], 0.02)
                    if readable and not conn.recv(1, socket.MSG_PEEK):
                        step.peer_closed.set()
                        return False
            elif step == RESET:
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return False
            elif step == CLOSE:
                return False
        return True


class _Reader:
    """Just enough HTTP/1.1 request parsing for a test upstream: Content-Length or chunked."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self.buf = b""

    def _fill(self) -> bool:
        data = self.conn.recv(1 << 16)
        self.buf += data
        return bool(data)

    def _until(self, marker: bytes) -> bytes | None:
        while marker not in self.buf:
            if not self._fill():
                return None
        line, _, self.buf = self.buf.partition(marker)
        return line

    def _exactly(self, size: int) -> bytes | None:
        while len(self.buf) < size:
            if not self._fill():
                return None
        data, self.buf = self.buf[:size], self.buf[size:]
        return data

    def request(self) -> Request | None:
        raw = self._until(b"\r\n\r\n")
        if raw is None:
            return None
        first, *lines = raw.decode("latin-1").split("\r\n")
        method, path, _ = first.split(" ", 2)
        headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            parts = []
            while True:
                size_line = self._until(b"\r\n")
                if size_line is None:
                    return None
                size = int(size_line.split(b";")[0], 16)
                data = self._exactly(size + 2)
                if data is None:
                    return None
                parts.append(data[:size])
                if size == 0:
                    break
            body = b"".join(parts)
        else:
            body = self._exactly(int(headers.get("content-length") or 0)) or b""
        return Request(method, path, headers, body)


class H2Upstream(_Listener):
    """HTTP/2 over TLS (ALPN h2 only), replying with route(Seen) -> Reply, chunk by chunk."""

    scheme = "https"

    def __init__(self, route: Callable[[Seen], Reply], tls: ssl.SSLContext) -> None:
        super().__init__("h2-upstream", backlog=64)
        tls.set_alpn_protocols(["h2"])
        self.route = route
        self.tls = tls
        self.seen: list[Seen] = []
        self.protocols: list[str | None] = []

    def _serve(self, raw: socket.socket) -> None:
        with contextlib.suppress(OSError, ssl.SSLError, h2.exceptions.ProtocolError):
            conn = self.tls.wrap_socket(raw, server_side=True)
            self.protocols.append(conn.selected_alpn_protocol())
            h2conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
            h2conn.initiate_connection()
            conn.sendall(h2conn.data_to_send())
            streams: dict[int, dict[str, Any]] = {}
            while data := conn.recv(1 << 16):
                for event in h2conn.receive_data(data):
                    if isinstance(event, h2.events.RequestReceived):
                        headers = {_text(k): _text(v) for k, v in event.headers}
                        streams[event.stream_id] = {"headers": headers, "body": b""}
                    elif isinstance(event, h2.events.DataReceived):
                        streams[event.stream_id]["body"] += event.data
                        h2conn.acknowledge_received_data(
                            event.flow_controlled_length, event.stream_id
                        )
                    elif isinstance(event, h2.events.StreamEnded):
                        self._answer(conn, h2conn, event.stream_id, streams.pop(event.stream_id))
                conn.sendall(h2conn.data_to_send())
            conn.close()

    def _answer(self, conn: Any, h2conn: Any, stream_id: int, request: dict[str, Any]) -> None:
        headers = request["headers"]
        seen = Seen(
            headers[":method"],
            headers[":path"],
            {k: v for k, v in headers.items() if not k.startswith(":")},
            request["body"],
        )
        self.seen.append(seen)
        answer = seen.reply = self.route(seen)
        h2conn.send_headers(stream_id, [(":status", str(answer.status)), *answer.headers])
        conn.sendall(h2conn.data_to_send())
        for index, part in enumerate(answer.chunks):
            if index and answer.delay:
                time.sleep(answer.delay)
            h2conn.send_data(stream_id, part)  # bodies here stay inside the 64 KB window
            conn.sendall(h2conn.data_to_send())
            seen.sent_at.append(time.perf_counter())
        h2conn.end_stream(stream_id)
        conn.sendall(h2conn.data_to_send())


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


@dataclass
class Got:
    """What a client saw: status, headers, the body bytes that arrived, and how it ended."""

    status: int | None
    headers: list[tuple[str, str]]
    body: bytes
    error: str | None  # the httpx exception class, None when the exchange completed

    def same_as(self, other: Got) -> bool:
        return (self.status, self.headers, self.body, self.error) == (
            other.status,
            other.headers,
            other.body,
            other.error,
        )


FRAMING = {"content-length", "transfer-encoding", "connection", "keep-alive"}


def upstream_headers(got: Got) -> list[tuple[str, str]]:
    """Headers without the framing a proxy may legitimately re-do."""
    return [(k, v) for k, v in got.headers if k not in FRAMING]


def fetch(
    client: httpx.Client,
    url: str,
    body: bytes = b"{}",
    headers: dict[str, str] | None = None,
    first_only: bool = False,
) -> Got:
    """POST and read the raw (still content-encoded) body until it ends, fails or times out."""
    status, seen_headers, parts, error = None, [], [], None
    try:
        with client.stream(
            "POST",
            url,
            content=body,
            headers={"content-type": "application/json", **(headers or {})},
            timeout=TIMEOUT,
        ) as response:
            status = response.status_code
            seen_headers = [(k.lower(), v) for k, v in response.headers.multi_items()]
            for data in response.iter_raw():
                parts.append(data)
                if first_only:
                    break
    except httpx.HTTPError as exc:
        error = type(exc).__name__
    return Got(status, seen_headers, b"".join(parts), error)
