"""A loopback model API that replays scripted responses: the demo's upstream, and the tests'.

Replies are byte-exact: a body is a list of chunks, written with
Content-Length when there is one chunk and chunked transfer otherwise, with an
optional pause between chunks so streams keep their cadence. With a socket
script, a WebSocket upgrade plays it (harness/sockets.py) on the same port.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .sockets import Connection, Script, SocketSession


@dataclass
class Reply:
    status: int = 200
    headers: list[tuple[str, str]] = field(
        default_factory=lambda: [("content-type", "application/json")]
    )
    chunks: list[bytes] = field(default_factory=list)
    delay: float = 0.0

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)


@dataclass
class Seen:
    """One request the upstream received, and when each chunk of its reply left."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    reply: Reply | None = None
    sent_at: list[float] = field(default_factory=list)


Route = Callable[[Seen], Reply]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate sends; with Nagle's algorithm the body
    # would wait for the client's delayed ACK (~40 ms a reply).
    disable_nagle_algorithm = True
    server: ReplayServer
    raw_requestline: bytes  # set by BaseHTTPRequestHandler as it reads the request line

    def log_message(self, *args: Any) -> None:
        pass  # quiet: the tests and the demo read `seen`, not stderr

    def _read_body(self) -> bytes:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            parts: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("content-length") or 0))

    def _serve(self) -> None:
        if (
            self.server.sockets is not None
            and "websocket" in self.headers.get("upgrade", "").lower()
        ):
            self._socket(self.server.sockets)
            return
        seen = Seen(
            self.command,
            self.path,
            {k.lower(): v for k, v in self.headers.items()},
            self._read_body(),
        )
        self.server.seen.append(seen)
        reply = seen.reply = self.server.route(seen)
        self.send_response(reply.status)
        chunked = len(reply.chunks) != 1
        for name, value in reply.headers:
            self.send_header(name, value)
        if chunked:
            self.send_header("transfer-encoding", "chunked")
        else:
            self.send_header("content-length", str(len(reply.chunks[0])))
        self.end_headers()
        self.wfile.flush()
        for index, chunk in enumerate(reply.chunks):
            if index and reply.delay:
                time.sleep(reply.delay)
            if chunked:
                if not chunk:
                    continue
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            else:
                self.wfile.write(chunk)
            self.wfile.flush()
            seen.sent_at.append(time.perf_counter())
        if chunked:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    def _socket(self, script: Script) -> None:
        """Hand the connection to a WebSocket session: the upgrade's head, as it came."""
        self.close_connection = True
        head = self.raw_requestline + b"".join(
            f"{name}: {value}\r\n".encode("latin-1") for name, value in self.headers.items()
        )
        connection = Connection(self.path, {k.lower(): v for k, v in self.headers.items()})
        self.server.connections.append(connection)
        steps = script(self.path, connection.headers)
        SocketSession(self.connection, head + b"\r\n", steps, connection).run()

    do_GET = do_POST = _serve


class ReplayServer(ThreadingHTTPServer):
    """Serves route(request) -> Reply on 127.0.0.1, and sockets(path) to WebSockets, in threads."""

    daemon_threads = True
    request_queue_size = 128  # a burst of clients connecting at once is not refused

    def __init__(
        self,
        route: Route,
        port: int = 0,
        tls: ssl.SSLContext | None = None,
        sockets: Script | None = None,
    ) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        if tls is not None:
            self.socket = tls.wrap_socket(self.socket, server_side=True)
        self.route = route
        self.sockets = sockets  # what a WebSocket connection plays, by its path
        self.seen: list[Seen] = []
        self.connections: list[Connection] = []
        self.scheme = "https" if tls is not None else "http"
        # A stop is noticed within 50 ms (serve_forever's own default checks every 500).
        self._thread = threading.Thread(
            target=self.serve_forever, args=(0.05,), name="replay", daemon=True
        )

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> ReplayServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()
