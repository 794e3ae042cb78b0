"""MCP's session streams: the legacy HTTP+SSE transport (protocol 2024-11-05), whose POSTs are
answered on the session's GET stream, and the tool-list changes any session stream announces.

The client opens `GET /sse` (`Accept: text/event-stream`); the server's first event is
`event: endpoint`, whose data is the path to POST to with the session in its query
(`/messages/?session_id=...` from the Python SDK, `/message?sessionId=...` from the
TypeScript SDK). Every client message is POSTed there and answered `202 Accepted`; the
JSON-RPC responses, and the server's own requests and notifications, arrive on the GET
stream as `event: message`. A request and its response are paired by JSON-RPC id within the
session, and each pair becomes one Exchange, as if the POST had been answered with that
event: serve() then reads it as any Streamable HTTP exchange.

Either half may come first: live, a response can reach the inspector before the POST it
answers (the 202 ends later), and in a recording the GET stream ends, and so is stored, after
every POST of its session. So a 202 to a request waits for its response, and a response for
its request, each bounded in number and bytes; what never met its other half is said when
the stream ends (or at close()), never dropped in silence.

A session's stream also says when the server's tool list changed
(notifications/tools/list_changed): on this transport and on Streamable HTTP's GET stream,
whose events are otherwise the server's own business. That is said as a Changed, in stream
order: after the exchanges of the responses that came before it on the stream, even those
still waiting for their POST, so that a list read before the change never outlives it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

from ..exchange import Exchange
from ..jsontext import dumps, loads
from ..sse import SSEDecoder
from .mcp import LIST_CHANGED, messages_of

MAX_WAITING = 1_000  # requests awaiting their response, and responses their request, each
MAX_BYTES = 16 << 20  # ... and the bytes they hold together
MAX_STREAMS = 1_000  # session streams followed at once; past it the oldest is let go
ANSWERED_ON_STREAM = 202  # what a legacy POST is answered with: the response comes on the stream
NEVER_ANSWERED = "its response never came on the session's stream (the stream ended first)"
LET_GO = "tooltap stopped waiting for its response on the session's stream (too many waiting)"
_SSE = {"content-type": "text/event-stream"}


@dataclass(frozen=True, slots=True)
class Paired:
    """One exchange made of a POSTed request and the response the session's stream carried;
    `unanswered` says why no response is in it, when none is."""

    exchange: Exchange
    unanswered: str | None = None


@dataclass(frozen=True, slots=True)
class Changed:
    """The server said on a session's stream that its tool list changed. `url`: where the
    session's exchanges go (the legacy transport's POST endpoint, its session in the query; on
    Streamable HTTP the stream's own, its session in the GET's Mcp-Session-Id)."""

    url: str


Said = Paired | Changed  # what a session's stream and its POSTs complete, in order


def _endpoint(url: str) -> str:
    """Where a POST went, as the endpoint event names it: path and query, no origin (a
    recording may spell the host another way than the stream's URL). Pure."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    return f"{parts.path}?{parts.query}" if parts.query else parts.path


def _rpc_id(message: Mapping[str, Any]) -> str | None:
    value = message.get("id")
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return f"{type(value).__name__}:{value}"  # 1 and "1" are two ids
    return None


def is_response(message: Mapping[str, Any]) -> bool:
    return "method" not in message and ("result" in message or "error" in message)


def _event_bytes(data: str) -> bytes:
    """One SSE message event carrying data, as the server wrote it."""
    lines = "".join(f"data: {line}\n" for line in data.split("\n"))
    return f"event: message\n{lines}\n".encode()


@dataclass(slots=True)
class _Waiting:
    exchange: Exchange  # the POST's
    message: Mapping[str, Any]
    size: int


class _Stream:
    """One GET stream: its decoder, and the endpoint its first event named (None: Streamable
    HTTP's GET stream), as path and query and as the URL a POST goes to."""

    __slots__ = ("decoder", "endpoint", "posts", "url")

    def __init__(self, url: str) -> None:
        self.url = url
        self.decoder = SSEDecoder()
        self.endpoint: str | None = None
        self.posts = url


class Channels:
    """The legacy sessions in flight: streams by key, requests and responses waiting by
    (endpoint, JSON-RPC id). Not thread-safe: one owner."""

    def __init__(self, waiting: int = MAX_WAITING, limit: int = MAX_BYTES) -> None:
        self.waiting = waiting
        self.limit = limit
        self.held = 0
        self._streams: OrderedDict[str, _Stream] = OrderedDict()
        self._requests: OrderedDict[tuple[str, str], _Waiting] = OrderedDict()
        self._responses: OrderedDict[tuple[str, str], tuple[str, int]] = OrderedDict()
        # A list change said on a legacy stream while responses that came before it still wait
        # for their POSTs, by endpoint: the URL it is said for, and those responses.
        self._changes: dict[str, tuple[str, set[tuple[str, str]]]] = {}

    def __len__(self) -> int:
        return len(self._requests) + len(self._responses)

    def posted(self, exchange: Exchange, request: Any) -> list[Said] | None:
        """A POST to an MCP server and its parsed body. None: not one the session's stream
        answers (inspect it as it is); else the exchanges it completes, maybe none yet (and a
        list change that waited for them). A POST with no status (the client hung up before
        its 202, as a client that exits after its last result does) is one when a session's
        stream serves its endpoint: the server answers it there all the same."""
        endpoint = _endpoint(exchange.url)
        if exchange.status != ANSWERED_ON_STREAM and not (
            exchange.status is None and self._serves(endpoint)
        ):
            return None
        asked = [m for m in messages_of(request) if isinstance(m.get("method"), str)]
        asked = [m for m in asked if _rpc_id(m) is not None]
        if not asked:
            return None  # notifications and answers: the 202 is the whole of it
        paired: list[Said] = []
        for message in asked:
            key = (endpoint, _rpc_id(message) or "")
            response = self._responses.pop(key, None)
            if response is not None:
                self.held -= response[1]
                paired.append(Paired(_exchange(exchange, message, response[0])))
                paired += self._settled(key)
                continue
            size = len(exchange.request_body) // len(asked)
            stale = self._requests.pop(key, None)
            if stale is not None:  # the same id again: the first is not answered now
                self.held -= stale.size
                paired.append(Paired(_exchange(stale.exchange, stale.message), NEVER_ANSWERED))
            self._requests[key] = _Waiting(exchange, message, size)
            self.held += size
        return paired + self._trim()

    def stream(
        self, key: str, url: str, data: bytes, *, ended: bool = False, lost: bool = False
    ) -> list[Said]:
        """Bytes of a GET stream on an MCP server (key: which stream), cut anywhere; ended: it
        closed after them; lost: bytes before them went by unread (the event they cut is
        dropped, and reading starts again at the next). The exchanges its responses complete,
        and the list changes it says, in order."""
        stream = self._streams.get(key)
        if stream is None:
            stream = self._streams[key] = _Stream(url)
        elif lost:
            stream.decoder = SSEDecoder()
        self._streams.move_to_end(key)
        events = stream.decoder.feed(data)
        if ended:
            events += stream.decoder.close()
        paired: list[Said] = []
        for event in events:
            if event.event == "endpoint" and stream.endpoint is None:
                stream.posts = urljoin(stream.url, event.data.strip())
                stream.endpoint = _endpoint(stream.posts)
            elif event.event in ("message", ""):
                paired += self._received(stream, event.data)
        if ended:
            del self._streams[key]
            paired += self._ended(stream.endpoint)
        while len(self._streams) > MAX_STREAMS:
            _, oldest = self._streams.popitem(last=False)
            paired += self._ended(oldest.endpoint)
        return paired + self._trim()

    def close(self) -> list[Said]:
        """Everything still waiting, said: the end of a recording."""
        paired: list[Said] = [
            Paired(_exchange(w.exchange, w.message), NEVER_ANSWERED)
            for w in self._requests.values()
        ]
        paired += [Changed(url) for url, _ in self._changes.values()]
        self._requests.clear()
        self._responses.clear()
        self._streams.clear()
        self._changes.clear()
        self.held = 0
        return paired

    def _received(self, stream: _Stream, data: str) -> list[Said]:
        endpoint = stream.endpoint
        if endpoint is None and LIST_CHANGED not in data:
            return []  # Streamable HTTP's GET stream: only a list change is read there
        value, error = loads(data)
        if error is not None:
            return []
        paired: list[Said] = []
        for message in messages_of(value):
            if message.get("method") == LIST_CHANGED:
                paired += self._changed(stream)
                continue
            rpc_id = _rpc_id(message)
            if endpoint is None or rpc_id is None or not is_response(message):
                continue  # the server's own requests and notifications: no call of the client's
            key = (endpoint, rpc_id)
            waiting = self._requests.pop(key, None)
            text = dumps(message) if isinstance(value, list) else data
            if waiting is not None:
                self.held -= waiting.size
                paired.append(Paired(_exchange(waiting.exchange, waiting.message, text)))
            else:
                stale = self._responses.pop(key, None)
                self.held += len(text) - (stale[1] if stale else 0)
                self._responses[key] = (text, len(text))
        return paired

    def _serves(self, endpoint: str) -> bool:
        """Is a session's stream open on this endpoint, or a response it carried waiting?"""
        return any(k[0] == endpoint for k in self._responses) or any(
            s.endpoint == endpoint for s in self._streams.values()
        )

    def _changed(self, stream: _Stream) -> list[Said]:
        """The stream said the tool list changed: said now, or once the responses that came
        before it on a legacy stream have met their POSTs (or were let go)."""
        endpoint = stream.endpoint
        before = {k for k in self._responses if k[0] == endpoint}
        if endpoint is None or not before:
            return [Changed(stream.posts)]
        _, waited = self._changes.get(endpoint, ("", set()))
        self._changes[endpoint] = (stream.posts, waited | before)
        return []

    def _settled(self, key: tuple[str, str]) -> list[Said]:
        """A waiting response left (paired or let go): a list change that waited for it, if it
        was the last, is said."""
        change = self._changes.get(key[0])
        if change is None:
            return []
        change[1].discard(key)
        if change[1]:
            return []
        del self._changes[key[0]]
        return [Changed(change[0])]

    def _ended(self, endpoint: str | None) -> list[Said]:
        """The session's stream closed: its requests will get no response. The responses it
        carried still wait (within the bounds) for their POSTs, whose records may come after
        the stream's end: a client that exits closes both at once. A list change that waited
        for them is said now."""
        if endpoint is None:
            return []
        paired: list[Said] = []
        for key in [k for k in self._requests if k[0] == endpoint]:
            waiting = self._requests.pop(key)
            self.held -= waiting.size
            paired.append(Paired(_exchange(waiting.exchange, waiting.message), NEVER_ANSWERED))
        for key in [k for k in self._responses if k[0] == endpoint]:
            paired += self._settled(key)
        return paired

    def _trim(self) -> list[Said]:
        """Past the bounds, the oldest waiting go: a request said, a response dropped."""
        paired: list[Said] = []
        while self._requests and (len(self._requests) > self.waiting or self.held > self.limit):
            _, waiting = self._requests.popitem(last=False)
            self.held -= waiting.size
            paired.append(Paired(_exchange(waiting.exchange, waiting.message), LET_GO))
        while self._responses and (len(self._responses) > self.waiting or self.held > self.limit):
            key, (_, size) = self._responses.popitem(last=False)
            self.held -= size
            paired += self._settled(key)
        return paired


def _exchange(
    posted: Exchange, message: Mapping[str, Any], response: str | None = None
) -> Exchange:
    """The POST's exchange with one of its requests, answered by the stream's event (or not).
    Answered, a POST the client hung up on has the status the server gives every POST it takes
    (202): what it said is read from the stream."""
    status = ANSWERED_ON_STREAM if response is not None else posted.status
    return posted.model_copy(
        update={
            "status": status,
            "request_body": dumps(message).encode(),
            "request_headers": {
                k: v for k, v in posted.request_headers.items() if k.lower() != "content-encoding"
            },
            "response_headers": _SSE if response is not None else {},
            "response_body": _event_bytes(response) if response is not None else b"",
        }
    )
