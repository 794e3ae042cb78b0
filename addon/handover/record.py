"""The record of one finished exchange, as the proxy passes it to the inspection side.

On the pipe to the inspector process a record is one frame: a header, the
record's metadata pickled, then its bodies as they are. The proxy writes the
bodies it already holds (a buffered body, a tap's chunks) without joining or
copying them; the inspector reads each into a buffer of its exact size.
"""

from __future__ import annotations

import io
import pickle
import struct
from dataclasses import dataclass, field, fields
from itertools import accumulate
from operator import attrgetter
from typing import Any
from urllib.parse import parse_qsl, urlencode

from tooltap.core import REQUEST_HEADERS, RESPONSE_HEADERS, Api, Exchange
from tooltap.core.sockets import SocketClose

HEAD = struct.Struct(">II")  # how many bodies, the metadata's length; then a length per body
LENGTH = struct.Struct(">Q")


# Request headers whose values are credentials. They are never logged, and
# neither is any echo of them: an API error that quotes the key, or a model
# that repeats it in an argument, is scrubbed before the sinks see it.
CREDENTIAL_HEADERS = frozenset(
    {b"authorization", b"proxy-authorization", b"api-key", b"x-api-key", b"x-goog-api-key",
     b"openai-organization", b"openai-project"}
)  # fmt: skip
MIN_CREDENTIAL = 8  # shorter values are not scrubbed: they would mangle ordinary text
# Query parameters worth keeping in the logged path; anything else might be a key.
SAFE_QUERY = ("api-version", "beta", "model", "deployment")
# A browser cannot set headers on a WebSocket: the Realtime API takes the key
# as a subprotocol, `openai-insecure-api-key.<key>`.
KEY_PROTOCOL = "openai-insecure-api-key."

Fields = tuple[tuple[bytes, bytes], ...]


def _header(fields: Fields, name: bytes) -> str:
    for key, value in fields:
        if key.lower() == name:
            return value.decode("latin-1")
    return ""


def _headers(fields: Fields, wanted: dict[bytes, str]) -> dict[str, str]:
    """The first value of each wanted header (its name in lower case -> as the Exchange names
    it), "" when absent: one pass over the fields, not one per header."""
    found = dict.fromkeys(wanted.values(), "")
    for key, value in reversed(fields):  # the first of a repeated header is written last
        name = wanted.get(key.lower())
        if name is not None:
            found[name] = value.decode("latin-1")
    return found


_REQUEST_WANTED = {name.encode(): name for name in REQUEST_HEADERS}
_RESPONSE_WANTED = {name.encode(): name for name in RESPONSE_HEADERS}


@dataclass(slots=True)
class SocketBatch:
    """What a record of WebSocket messages says besides the messages (its chunks)."""

    key: str  # the flow's id: one socket
    sources: bytes = b""  # per message, 1 when the client sent it
    first: int = 0  # how many messages the socket carried before this batch
    lost: bool = False  # messages went by unread since the last batch
    ended: bool = False  # the socket closed after this batch
    close: SocketClose | None = None  # the socket's close, when it ended
    skipped: dict[str, int] = field(default_factory=dict)  # messages not kept, by reason
    let_go: str | None = None  # why tooltap stops following the socket after this batch


@dataclass(slots=True)
class StreamPart:
    """What a record of a piece of an MCP server's GET stream says besides its bytes."""

    key: str  # the flow's id: one stream
    ended: bool = False  # the stream closed after this piece
    lost: bool = False  # pieces before this one went by unread


@dataclass(slots=True)
class Record:
    """One finished exchange, as the proxy hands it over: only references it already holds.

    Everything derived from them (the Exchange, the logged host and path, the
    credentials to scrub) is built here, on the inspection side, off the proxy's
    event loop.
    """

    # None: no path names the API (a shared path, whose body will; a path no dialect reads),
    # or there was no request (the upstream refused the connection: no method either).
    api: Api | None
    method: str = ""
    scheme: str = "http"
    host: str = ""
    port: int = 0
    path: str = ""
    request_headers: Fields = ()
    request_body: bytes = b""
    status: int | None = None  # None: no response
    response_headers: Fields = ()
    response_body: bytes = b""
    chunks: list[bytes] = field(default_factory=list)  # a tapped stream's body
    skipped: str | None = None
    failure: str | None = None  # the upstream broke the exchange off: mitmproxy's words
    note: str | None = None  # the client broke it off: mitmproxy's words
    held: int = 0  # bytes taken from the memory budget for this record (proxy side)
    socket: SocketBatch | None = None  # a batch of one socket's messages, in chunks
    part: StreamPart | None = None  # a piece of an MCP server's GET stream, in chunks
    started: float = 0.0  # when the request began (a socket batch: its first message), epoch s
    ended: float = 0.0  # when the response ended, or broke off (a batch: its last message)
    request_ended: float = 0.0  # when the request's last byte came
    arrived: list[float] = field(default_factory=list)  # when each chunk came (a batch: message)
    # Where each chunk ended in response_body, once the chunks were joined (the inspector's pipe).
    ends: list[int] = field(default_factory=list)
    # The request alone of an MCP tools/call still unanswered past tooltap_tool_deadline (ended:
    # when the proxy saw it so): said overdue, its exchange still to come.
    overdue: bool = False
    flow: str = ""  # mitmproxy's id of the flow: the log's exchange id is made from it

    @classmethod
    def of(cls, api: Api | None, request: Any, **fields: Any) -> Record:
        """A record of a mitmproxy Request: its method, address, path and headers (referenced)."""
        return cls(
            api,
            method=request.method,
            scheme=request.scheme,
            host=request.host,
            port=request.port,
            path=request.path,
            request_headers=request.headers.fields,
            **{"started": request.timestamp_start or 0.0, **fields},
        )

    @property
    def connection_refused(self) -> bool:
        """No request was made: the upstream refused the connection (reverse mode)."""
        return not self.method

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}{self.path}"

    def exchange(self) -> Exchange:
        return Exchange(
            method=self.method,
            url=self.url,
            request_body=self.request_body,
            request_headers=_headers(self.request_headers, _REQUEST_WANTED),
            status=self.status,
            response_headers=_headers(self.response_headers, _RESPONSE_WANTED),
            response_body=b"".join(self.chunks) if self.chunks else self.response_body,
            api=self.api,
            request_start=self.started or None,
            request_end=self.request_ended or None,
            response_end=self.ended or None,
            arrivals=self._arrivals(),
            flow=self.flow,
        )

    def _arrivals(self) -> tuple[tuple[int, float], ...]:
        """Each streamed chunk's end in the body, with when it came."""
        ends = list(accumulate(map(len, self.chunks))) if self.chunks else self.ends
        if not self.arrived or len(ends) != len(self.arrived):
            return ()
        return tuple(zip(ends, self.arrived, strict=True))

    def logged_host(self) -> str:
        """The Host header without its port (as mitmproxy's pretty_host), else the address."""
        authority = _header(self.request_headers, b"host")
        if authority.startswith("["):
            return authority[1:].partition("]")[0]
        name, colon, port = authority.rpartition(":")
        return (name if colon and port.isdigit() else authority) or self.host

    def logged_path(self) -> str:
        base, _, query = self.path.partition("?")
        kept = [(k, v) for k, v in parse_qsl(query) if k in SAFE_QUERY]
        return base + ("?" + urlencode(kept) if kept else "")

    def credentials(self) -> tuple[str, ...]:
        """The credential header values, and for `Scheme token` the bare token, longest first."""
        found: set[str] = set()
        for key, raw in self.request_headers:
            if key.lower() in CREDENTIAL_HEADERS:
                value = raw.decode("latin-1").strip()
                found.update((value, value.partition(" ")[2].strip()))
            elif key.lower() == b"sec-websocket-protocol":
                for protocol in raw.decode("latin-1").split(","):
                    if protocol.strip().startswith(KEY_PROTOCOL):
                        found.add(protocol.strip().removeprefix(KEY_PROTOCOL))
        return tuple(sorted((v for v in found if len(v) >= MIN_CREDENTIAL), key=len, reverse=True))


FIELDS = tuple(item.name for item in fields(Record))
_values = attrgetter(*FIELDS)
# Where the bodies sit among the values: they travel after the metadata, not in it.
_BODIES = tuple(FIELDS.index(name) for name in ("request_body", "response_body", "chunks"))


def encode(record: Record) -> list[bytes]:
    """A record as the buffers of one frame, its bodies uncopied. The metadata is the list of
    its values, which pickles in a quarter of the time the dataclass takes."""
    bodies = [record.request_body, *(record.chunks or [record.response_body])]
    values = list(_values(record))
    request, response, chunks = _BODIES
    values[request] = values[response] = b""
    values[chunks] = []
    meta = pickle.dumps(values, 5)
    lengths = b"".join(LENGTH.pack(len(body)) for body in bodies)
    return [HEAD.pack(len(bodies), len(meta)) + lengths, meta, *bodies]


class FrameReader:
    """The inspector's side of the pipe: frames in, records out, one at a time.

    read() takes from the (non-blocking) pipe up to the end of the next record,
    never a byte further, so the records after it wait in the pipe; each body is
    read straight into a buffer of its exact size.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._pipe = io.FileIO(fd, "rb", closefd=False)
        self._plan = [HEAD.size]  # the sizes of this frame's pieces, as far as known
        self._pieces: list[bytearray] = []
        self._piece = bytearray(HEAD.size)
        self._filled = 0
        self.closed = False  # the proxy closed its end

    def read(self) -> Record | None:
        """The next record, once all of it has come; None while the pipe holds no more of it."""
        while not self.closed:
            if self._filled < len(self._piece):
                count = self._pipe.readinto(memoryview(self._piece)[self._filled :])
                if count is None:
                    return None  # nothing more for now
                if count == 0:
                    self.closed = True
                    return None
                self._filled += count
                continue
            record = self._next_piece()
            if record is not None:
                return record
        return None

    def _next_piece(self) -> Record | None:
        """The current piece is full: start the next one, or finish the record."""
        pieces = self._pieces
        pieces.append(self._piece)
        if len(pieces) == 1:  # the head: the lengths and the metadata come next
            bodies, meta = HEAD.unpack(pieces[0])
            self._plan = [HEAD.size, LENGTH.size * bodies, meta]
        elif len(pieces) == 2:  # the lengths: a body of each comes after the metadata
            self._plan += [length for (length,) in LENGTH.iter_unpack(pieces[1])]
        if len(pieces) < len(self._plan):
            self._start(self._plan[len(pieces)])
            return None
        record = Record(*pickle.loads(pieces[2]))  # noqa: S301 - our own pipe
        request, *response = pieces[3:]
        record.request_body = bytes(request)
        if record.socket is not None:  # messages stay apart
            record.chunks = [bytes(m) for m in response[: len(record.socket.sources)]]
        else:
            record.response_body = bytes(response[0]) if len(response) == 1 else b"".join(response)
            if record.arrived:  # a tapped stream: where each of its chunks ended, for its times
                record.ends = list(accumulate(map(len, response)))
        self._plan, self._pieces = [HEAD.size], []
        self._start(HEAD.size)
        return record

    def _start(self, size: int) -> None:
        self._piece = bytearray(size)
        self._filled = 0
