"""Recording relays on both sides of a proxy, for tests that say what reached whom, and when.

    client -> front relay -> proxy -> back relay -> server

Each relay is a loopback TCP forwarder that counts the bytes each way and reads them as HTTP/1.1
as they pass: each message's head, its body with the chunked framing taken off, and in an event
stream each event with the time its last byte came. A request the back relay passes on is paired
with the client's request it is (the first unpaired one with the same request line and body), so
each exchange the server had is known with the one the client had; the test compares the rest.

The back relay passes an event stream on in lock step: once it has passed an event's last byte
to the proxy, it passes nothing more of that stream until the client's copy of that event has
reached the front relay (or the client has hung up, or WAIT has passed: the event was held, and
that is marked). So every event has a next one the proxy could not have seen yet: a proxy that
holds an event until more bytes come is caught on each event, not only where the server paused.

Why not h11: it gives no byte offsets, and the lock step cuts a read where each event ends.
"""

from __future__ import annotations

import contextlib
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

WAIT = 5.0  # how long the back relay waits for the client to have an event
CLOSING = 10.0  # how long a session's connections get to close after it
# A blank line ends an event. The servers here end lines with LF or CRLF; WHATWG's lone CR is
# not read (a stream that used it would be read as one event).
BLANK_LINE = re.compile(rb"\r?\n\r?\n")


@dataclass
class Event:
    """One event of an event stream, as it crossed a relay."""

    data: bytes  # its bytes, the blank line that ends it included
    came: float  # when its last byte reached the relay (time.monotonic)
    sent: float = 0.0  # back relay: when it had passed the event's last byte on


@dataclass
class Message:
    """One HTTP/1.1 message as it crossed a relay."""

    began: float
    start: bytes = b""  # the request or status line
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)  # as sent, in order
    body: bytearray = field(default_factory=bytearray)  # the chunked framing taken off
    events: list[Event] = field(default_factory=list)  # in an event stream
    ended: float | None = None  # None: cut off before its end
    held: int | None = None  # back relay: the event the client did not have within WAIT

    def header(self, name: bytes) -> bytes:
        return next((v for k, v in self.headers if k.lower() == name), b"")

    @property
    def streamed(self) -> bool:
        return self.header(b"content-type").lower().startswith(b"text/event-stream")


class Reader:
    """One direction of one connection, read as HTTP/1.1 as the bytes come."""

    def __init__(self, responses: bool) -> None:
        self.responses = responses
        self.messages: list[Message] = []
        self._state = "head"  # head, size, body, crlf, trailer, rest (after a 101)
        self._line = bytearray()
        self._left: int | None = None  # body bytes still to come (None: until the close)
        self._chunked = False
        self._event = bytearray()  # the event being read

    def feed(self, data: bytes, now: float) -> list[tuple[int, Message, int]]:
        """Bytes as they came: for each event they end, the offset in data just past it, its
        message and its index there."""
        ends: list[tuple[int, Message, int]] = []
        i = 0
        while i < len(data):
            if self._state == "rest":
                break
            if self._state == "body":
                take = len(data) - i if self._left is None else min(self._left, len(data) - i)
                self._body(data, i, i + take, now, ends)
                i += take
                if self._left is not None:
                    self._left -= take
                    if self._left == 0:
                        self._after_body(now)
                continue
            end = data.find(b"\n", i)
            stop = len(data) if end < 0 else end + 1
            self._line += data[i:stop]
            i = stop
            if end >= 0:
                line, self._line = bytes(self._line), bytearray()
                self._on_line(line, now)
        return ends

    def close(self, now: float) -> None:
        """The connection closed: a body read until the close ends here."""
        if self._state == "body" and self._left is None and self.messages:
            self._done(now)

    def _on_line(self, line: bytes, now: float) -> None:
        text = line.rstrip(b"\r\n")
        between = not self.messages or self.messages[-1].ended is not None
        if self._state == "head" and between:
            if text:  # not a blank line between messages
                self.messages.append(Message(began=now, start=text))
            return
        if self._state == "head":
            if text:
                name, _, value = text.partition(b":")
                self.messages[-1].headers.append((name, value.strip()))
            else:
                self._framing(now)
        elif self._state == "size":
            size = int(text.split(b";")[0] or b"0", 16)
            self._state, self._left = ("trailer", None) if size == 0 else ("body", size)
        elif self._state == "crlf":
            self._state = "size"
        elif self._state == "trailer" and not text:
            self._done(now)

    def _framing(self, now: float) -> None:
        message = self.messages[-1]
        status = message.start.split(b" ")[1] if self.responses else b""
        length = message.header(b"content-length")
        self._chunked = b"chunked" in message.header(b"transfer-encoding").lower()
        if status == b"101":
            self._state = "rest"
            message.ended = now
        elif status[:1] == b"1" or status in (b"204", b"304"):
            self._done(now)
        elif self._chunked:
            self._state = "size"
        elif length:
            self._state, self._left = "body", int(length)
            if self._left == 0:
                self._done(now)
        elif self.responses:
            self._state, self._left = "body", None  # until the close
        else:
            self._done(now)

    def _body(self, data: bytes, start: int, stop: int, now: float, ends: list) -> None:
        message = self.messages[-1]
        piece = data[start:stop]
        message.body += piece
        if not message.streamed:
            return
        base = start - len(self._event)  # where the event being read began, in data
        at = max(0, len(self._event) - 3)
        self._event += piece
        while (found := BLANK_LINE.search(self._event, at)) is not None:
            end = found.end()
            message.events.append(Event(bytes(self._event[:end]), now))
            ends.append((max(start, base + end), message, len(message.events) - 1))
            del self._event[:end]
            base += end
            at = 0

    def _after_body(self, now: float) -> None:
        if self._chunked:
            self._state = "crlf"
        else:
            self._done(now)

    def _done(self, now: float) -> None:
        message = self.messages[-1]
        message.ended = now
        self._state, self._left, self._chunked = "head", None, False
        self._event = bytearray()


@dataclass(eq=False)
class Exchange:
    """A request and its response on one connection through one relay."""

    connection: Connection
    request: Message
    peer: Exchange | None = None  # the same exchange through the other relay

    @property
    def response(self) -> Message | None:
        index = self.connection.exchanges.index(self)
        responses = self.connection.responses.messages
        return responses[index] if index < len(responses) else None

    def key(self) -> tuple[bytes, bytes]:
        """What pairs the server's exchange with the client's: the request line and body (the
        headers are the test's to compare: the proxy rewrites Host)."""
        return self.request.start, bytes(self.request.body)


class Connection:
    """One TCP connection through a relay: how many bytes went each way, and its exchanges as
    they were read."""

    def __init__(self, incoming: socket.socket) -> None:
        self.incoming = incoming
        self.outgoing: socket.socket | None = None
        self.closed: float | None = None  # both ways ended
        self.hung_up: float | None = None  # the side that connected to the relay stopped
        self.sizes = {"up": 0, "down": 0}  # bytes, framing included
        self.requests = Reader(responses=False)
        self.responses = Reader(responses=True)
        self.exchanges: list[Exchange] = []
        self._ways = 2


class Relay:
    """A loopback TCP forwarder to `target` (front: a proxy; back: a server), recording."""

    def __init__(self, pair: Relays, side: str, target: int | None = None) -> None:
        self.pair = pair
        self.side = side
        self.target = target
        self.connections: list[Connection] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._listener.close()
        for connection in list(self.connections):
            for sock in (connection.incoming, connection.outgoing):
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.close()

    def _accept(self) -> None:
        while True:
            try:
                incoming, _ = self._listener.accept()
            except OSError:
                return
            connection = Connection(incoming)
            with self.pair.changed:
                self.connections.append(connection)
            try:
                if self.target is None:
                    raise OSError("the relay's target is not set")
                connection.outgoing = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                incoming.close()
                self._ended(connection, "up")
                self._ended(connection, "down")
                continue
            # Each piece goes on at once, as asyncio's sockets (the proxy's, the servers') send
            # it: Nagle's wait for an ACK would hold a response's last piece for 40 ms.
            for sock in (incoming, connection.outgoing):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for way in ("up", "down"):
                threading.Thread(target=self._pump, args=(connection, way), daemon=True).start()

    def _pump(self, connection: Connection, way: str) -> None:
        source, sink = (connection.incoming, connection.outgoing)[:: 1 if way == "up" else -1]
        assert sink is not None
        reader = connection.requests if way == "up" else connection.responses
        try:
            while data := source.recv(65536):
                now = time.monotonic()
                with self.pair.changed:
                    connection.sizes[way] += len(data)
                    ends = reader.feed(data, now)
                    if way == "up":
                        self._requests(connection)
                    self.pair.changed.notify_all()
                if way == "down" and self.side == "back" and ends:
                    self._lock_step(connection, data, ends)
                else:
                    sink.sendall(data)
        except OSError:
            pass
        self._ended(connection, way)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)
        if way == "up" and self.side == "front":
            connection.hung_up = time.monotonic()

    def _requests(self, connection: Connection) -> None:
        """Requests read whole become exchanges; the back relay's are matched with the client's."""
        for request in connection.requests.messages[len(connection.exchanges) :]:
            if request.ended is None:
                return
            exchange = Exchange(connection, request)
            connection.exchanges.append(exchange)
            if self.side == "back":
                self.pair.match(exchange)

    def _lock_step(self, connection: Connection, data: bytes, ends: list) -> None:
        start = 0
        for end, message, index in ends:
            connection.incoming.sendall(data[start:end])
            start = end
            event = message.events[index]
            event.sent = time.monotonic()
            self.pair.await_client(connection, message, index)
        connection.incoming.sendall(data[start:])

    def _ended(self, connection: Connection, way: str) -> None:
        with self.pair.changed:
            reader = connection.requests if way == "up" else connection.responses
            reader.close(time.monotonic())
            connection._ways -= 1
            if connection._ways == 0:
                connection.closed = time.monotonic()
                for sock in (connection.incoming, connection.outgoing):
                    if sock is not None:
                        with contextlib.suppress(OSError):
                            sock.close()
            self.pair.changed.notify_all()


@dataclass
class Recording:
    """What one session sent through the relays: its exchanges, each through both, matched."""

    front: list[Exchange] = field(default_factory=list)  # as the client had them
    back: list[Exchange] = field(default_factory=list)  # as the server had them
    front_connections: list[Connection] = field(default_factory=list)  # the client's

    def pairs(self) -> list[tuple[Exchange, Exchange]]:
        """(client's, server's) for every exchange the server had, in the client's order."""
        return [(f, f.peer) for f in self.front if f.peer is not None]

    def held(self) -> list[tuple[bytes, int]]:
        """(request line, event index) of each stream an event of which the proxy held."""
        return [
            (e.request.start, e.response.held)
            for e in self.back
            if e.response is not None and e.response.held is not None
        ]


class Relays:
    """A front and a back relay around one proxy, for one server: one per test module, one
    Recording per session (the connections opened during it)."""

    def __init__(self, server: int) -> None:
        self.changed = threading.Condition()
        self.back = Relay(self, "back", server)
        self.front = Relay(self, "front")
        self._since = 0  # the first of the front relay's connections in this session

    def to(self, proxy: int) -> None:
        """Where the front relay forwards to: the proxy's port for this server."""
        self.front.target = proxy

    def close(self) -> None:
        self.front.close()
        self.back.close()

    @contextlib.contextmanager
    def session(self) -> Iterator[Recording]:
        """The connections opened in the block; filled in once they have all closed (or
        CLOSING has passed)."""
        with self.changed:
            marks = len(self.front.connections), len(self.back.connections)
            self._since = marks[0]
        recording = Recording()
        yield recording
        with self.changed:
            front = self.front.connections[marks[0] :]
            back = self.back.connections[marks[1] :]
            self.changed.wait_for(lambda: all(c.closed is not None for c in front + back), CLOSING)
            recording.front_connections = list(front)
            recording.front = sorted(
                (e for c in front for e in c.exchanges), key=lambda e: e.request.began
            )
            recording.back = [e for c in back for e in c.exchanges]

    def match(self, exchange: Exchange) -> None:
        """The client's exchange a request the server gets is (the first one of this session
        unmatched with the same request). Called holding `changed`."""
        key = exchange.key()
        for connection in self.front.connections[self._since :]:
            for front in connection.exchanges:
                if front.peer is None and front.key() == key:
                    front.peer, exchange.peer = exchange, front
                    return

    def await_client(self, connection: Connection, message: Message, index: int) -> None:
        """Wait until the client has event `index` of this response, or hung up, or WAIT has
        passed (it was held: marked on the message, and its later events not waited for)."""
        with self.changed:
            at = connection.responses.messages.index(message)
            exchange = connection.exchanges[at] if at < len(connection.exchanges) else None
            peer = exchange.peer if exchange is not None else None
            if peer is None or message.held is not None:
                return  # unpaired (the test says so), or this stream was held already

            def arrived() -> bool:
                response = peer.response
                return (response is not None and len(response.events) > index) or (
                    peer.connection.hung_up is not None
                )

            if not self.changed.wait_for(arrived, WAIT):
                message.held = index
