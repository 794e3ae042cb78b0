"""WebSocket replies for the loopback upstream: scripted server events, frame by frame.

A connection plays a script: steps, each played when the client sends a
message of its trigger type (or on connect), as the frames the server then
sends: text, binary, a close, or a dropped connection. Every connection
records what it received and sent, for byte-exact checks. The protocol is the
`websockets` package's (sans-I/O), the library the SDKs' own transport is
built on; ReplayServer hands an upgrade request here, so one upstream serves
HTTP and WebSocket traffic on one port.
"""

from __future__ import annotations

import json
import socket
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from websockets.frames import Frame as WireFrame
from websockets.frames import Opcode
from websockets.http11 import Request
from websockets.protocol import State
from websockets.server import ServerProtocol

from tooltap.core.dialects.gemini_live import camel


@dataclass(frozen=True)
class Close:
    """Close the socket: with a close frame (code), or by dropping the connection (None)."""

    code: int | None = 1000
    reason: str = ""


Frame = str | bytes | Close  # a text message, a binary message, or the end


@dataclass
class Step:
    trigger: str | None  # the type (or key) of the client message that plays it; None: on connect
    frames: Sequence[Frame]


@dataclass
class Connection:
    """One client connection, as the upstream saw it."""

    path: str
    headers: dict[str, str]
    received: list[str | bytes] = field(default_factory=list)
    sent: list[str | bytes] = field(default_factory=list)
    closed: threading.Event = field(default_factory=threading.Event)


Script = Callable[[str, dict[str, str]], list[Step]]  # (path, headers) -> one connection's steps


def message_type(message: str | bytes) -> str | None:
    """What a JSON message is: its `type` (OpenAI's events), else its first key in camelCase
    (Gemini Live's `setup`, `clientContent`, `toolResponse`, in either spelling); or None."""
    try:
        value = json.loads(message)
    except ValueError:
        return None
    if not isinstance(value, dict) or not value:
        return None
    if "type" in value:
        return value["type"] if isinstance(value["type"], str) else None
    return camel(next(iter(value)))


class SocketSession:
    """Plays one connection's script over a socket whose upgrade request has been read."""

    def __init__(self, sock: socket.socket, head: bytes, steps: list[Step], connection: Connection):
        self.sock = sock
        self.steps = deque(steps)
        self.connection = connection
        self.protocol = ServerProtocol(max_size=None)
        self.protocol.receive_data(head)
        request = next(iter(self.protocol.events_received()), None)
        if not isinstance(request, Request):
            raise ValueError("not a WebSocket upgrade request")
        self.protocol.send_response(self.protocol.accept(request))
        self._flush()
        self._pieces: list[bytes | bytearray | memoryview] = []  # a fragmented message so far
        self._text = False

    def run(self) -> None:
        try:
            while self.steps and self.steps[0].trigger is None:
                if not self._play(self.steps.popleft().frames):
                    return
            while self.protocol.state is not State.CLOSED:
                data = self.sock.recv(65536)
                if not data:
                    self.protocol.receive_eof()
                    break
                self.protocol.receive_data(data)
                for event in self.protocol.events_received():
                    if isinstance(event, WireFrame) and not self._message(event):
                        return
                self._flush()
        except OSError:
            pass
        finally:
            self.connection.closed.set()

    def _message(self, frame: WireFrame) -> bool:
        """A frame in; a whole message plays its step. False once the script closed."""
        if frame.opcode in (Opcode.TEXT, Opcode.BINARY):
            self._pieces, self._text = [frame.data], frame.opcode is Opcode.TEXT
        elif frame.opcode is Opcode.CONT:
            self._pieces.append(frame.data)
        else:
            return True  # ping, pong and close are the protocol's
        if not frame.fin:
            return True
        data = b"".join(self._pieces)
        message: str | bytes = data.decode() if self._text else data
        self.connection.received.append(message)
        if self.steps and self.steps[0].trigger == message_type(message):
            return self._play(self.steps.popleft().frames)
        return True

    def _play(self, frames: Sequence[Frame]) -> bool:
        for frame in frames:
            if isinstance(frame, Close):
                if frame.code is None:
                    self.sock.shutdown(socket.SHUT_RDWR)
                    self.sock.close()
                    return False
                self.protocol.send_close(frame.code, frame.reason)
                self._flush()
                return True  # reading on: the client's close frame ends the session
            if isinstance(frame, str):
                self.protocol.send_text(frame.encode())
            else:
                self.protocol.send_binary(frame)
            self.connection.sent.append(frame)
            self._flush()
        return True

    def _flush(self) -> None:
        for data in self.protocol.data_to_send():
            if data:
                self.sock.sendall(data)
