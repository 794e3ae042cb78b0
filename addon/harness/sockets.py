"""A loopback WebSocket upstream that replays scripted server events: the demo's and the tests'.

Each connection plays a script: steps, each played when the client sends a
message of its trigger type (or on connect), as the frames the server then
sends: text, binary, a close, or a dropped connection. Every connection
records what it received and sent, frame by frame, for byte-exact checks.
Built on the `websockets` package, as the SDKs' own transport is.
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from websockets.exceptions import ConnectionClosed
from websockets.sync.server import Server, ServerConnection, serve


@dataclass(frozen=True)
class Close:
    """Close the socket: with a close frame (code), or by dropping the connection (None)."""

    code: int | None = 1000
    reason: str = ""


Frame = str | bytes | Close  # a text message, a binary message, or the end


@dataclass
class Step:
    trigger: str | None  # the type of the client message that plays it; None: on connect
    frames: list[Frame]


@dataclass
class Connection:
    """One client connection, as the upstream saw it."""

    path: str
    headers: dict[str, str]
    received: list[str | bytes] = field(default_factory=list)
    sent: list[str | bytes] = field(default_factory=list)
    closed: threading.Event = field(default_factory=threading.Event)


Script = Callable[[str], list[Step]]  # the request path -> the steps of one connection


def message_type(message: str | bytes) -> str | None:
    """The `type` of a JSON text message, or None."""
    if isinstance(message, bytes):
        return None
    try:
        value = json.loads(message)
    except ValueError:
        return None
    return value.get("type") if isinstance(value, dict) else None


class SocketReplay:
    """Serves a script per WebSocket connection on 127.0.0.1, in a background thread."""

    def __init__(
        self, script: Script, tls: ssl.SSLContext | None = None, compression: str | None = None
    ) -> None:
        self.script = script
        self.connections: list[Connection] = []
        self.scheme = "https" if tls is not None else "http"
        self._server: Server = serve(
            self._handle,
            "127.0.0.1",
            0,
            ssl=tls,
            compression=compression,
            max_size=None,
            ping_interval=None,
        )
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="socket-replay", daemon=True
        )

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self._server.socket.getsockname()[1]}"

    def __enter__(self) -> SocketReplay:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._thread.join(timeout=5)

    def _handle(self, ws: ServerConnection) -> None:
        request = ws.request
        path = request.path if request is not None else ""
        headers = {k.lower(): v for k, v in request.headers.raw_items()} if request else {}
        connection = Connection(path, headers)
        self.connections.append(connection)
        steps = deque(self.script(path))
        try:
            while steps and steps[0].trigger is None:
                if not self._play(ws, connection, steps.popleft().frames):
                    return
            for message in ws:
                connection.received.append(message)
                played = steps and steps[0].trigger == message_type(message)
                if played and not self._play(ws, connection, steps.popleft().frames):
                    return
        except ConnectionClosed:
            pass
        finally:
            connection.closed.set()

    @staticmethod
    def _play(ws: ServerConnection, connection: Connection, frames: list[Frame]) -> bool:
        """Send the frames; False once the script closed the socket."""
        for frame in frames:
            if isinstance(frame, Close):
                if frame.code is None:
                    ws.socket.shutdown(socket.SHUT_RDWR)
                    ws.socket.close()
                else:
                    ws.close(frame.code, frame.reason)
                return False
            ws.send(frame)
            connection.sent.append(frame)
        return True
