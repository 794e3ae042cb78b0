"""WebSocket transports read as turns: what every socket reader shares.

A dialect that speaks over a WebSocket (the Responses WebSocket mode, the Realtime API, the
Gemini Live API) holds its own reader, beside its HTTP reading, and states it in its
SocketReading. The readers are sans-I/O, like the stream readers: messages in, turns out. A
turn is an Exchange that inspect() reads as it reads HTTP: the request is the JSON a POST
would carry, and the response is the turn's server events framed as the SSE stream the same
request gives over HTTP. So a turn on a socket meets the same rules, the same assembler and the
same loop check as one over HTTP.

Where a reading is uncertain (which request an error answers, whether a call is owed a
result), a reader takes the one that cannot raise a false alarm, and says why where it does.
"""

from __future__ import annotations

import re
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import ApiError, api_error
from .exchange import Exchange
from .turn import Api
from .verdict import Verdict

HEAD = 256  # bytes of a message looked at to place it
LOST = "messages of this turn were not kept for inspection"

_LEADING_TYPE = re.compile(rb'\s*\{\s*"type"\s*:\s*"([^"\\]{1,100})"')

# Why a reader did not use a message (its `skipped` counts).
READER_SKIPS = (
    "not_json",
    "turn_too_large",
    "too_many_lanes",
    "too_many_waiting",
    "too_many_items",
    "joined_late",
    "lost",
)
# The HTTP status OpenAI sends with each error type (its error codes guide).
ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "rate_limit_error": 429,
    "rate_limit_exceeded": 429,
    "insufficient_quota": 429,
    "server_error": 500,
}
# RFC 6455's close codes (IANA's registry) by name, as a session error's type carries them.
CLOSE_NAMES = {
    1002: "protocol_error",
    1003: "unsupported_data",
    1006: "abnormal_closure",
    1007: "invalid_frame_payload_data",
    1008: "policy_violation",
    1009: "message_too_big",
    1010: "mandatory_extension",
    1011: "internal_error",
    1012: "service_restart",
    1013: "try_again_later",
    1014: "bad_gateway",
    1015: "tls_handshake",
}
# A close that says nothing went wrong: done, going away (a server's restart or its session's
# time limit), or no code at all. The clients agree: websockets (google-genai's and the Agents
# SDK's transport) raises ConnectionClosedOK for exactly these.
NORMAL_CLOSES = frozenset({1000, 1001, 1005})
MAX_CLOSE_REASON = 256  # characters kept of a close's reason (RFC 6455 allows 123 bytes)
MAX_LANES = 64  # Responses stream_id lanes, or Realtime responses running, per socket
MAX_WAITING = 16  # response.create messages waiting for their response, per lane
MAX_ITEMS = 1_000  # Realtime results kept between two response.create messages
MAX_OPEN = 10_000  # Realtime calls remembered as owed, or as answerable


def leading_type(message: bytes) -> str | None:
    """The message's type when it is the first key, as the APIs and SDKs send it. Pure.

    Reads the head only; None when the type is not found there.
    """
    match = _LEADING_TYPE.match(message, 0, HEAD)
    return match.group(1).decode("ascii", "replace") if match else None


def sse(events: list[bytes]) -> bytes:
    """Server events framed as the SSE stream they mirror: one `data:` line per line. Pure."""
    return framed(events)[0]


def framed(events: list[bytes]) -> tuple[bytes, list[int]]:
    """sse(events), and the offset each event's frame ends at. Pure."""
    parts: list[bytes] = []
    ends: list[int] = []
    size = 0
    for event in events:
        for line in event.splitlines() or [b""]:
            parts += (b"data: ", line, b"\n")
            size += len(line) + 7
        parts.append(b"\n")
        size += 1
        ends.append(size)
    return b"".join(parts), ends


def error_status(event: dict[str, Any]) -> int | None:
    """The HTTP status an `error` event stands for, or None when it does not say. Pure.

    The Responses WebSocket sends `status`; otherwise the error's type maps to
    the status the same type comes with over HTTP. Any other type is not
    guessed at: the error is reported as one inside a stream.
    """
    status = event.get("status")
    if isinstance(status, int) and not isinstance(status, bool) and status >= 400:
        return status
    return ERROR_STATUS.get(api_error(event).type)


@dataclass(frozen=True, slots=True)
class SocketClose:
    """How a socket ended, as the proxy saw its close frame: the code (1006 when the connection
    dropped without one), the reason, and whose close it was (None: not known)."""

    code: int | None
    reason: str = ""
    by_client: bool | None = None

    @property
    def server_error(self) -> bool:
        """Did the server end the socket with a code that is not a normal close?"""
        return self.by_client is False and self.code is not None and self.code not in NORMAL_CLOSES

    def error(self) -> ApiError:
        """The close as a session error: its code's name (or number), its code and reason."""
        code = self.code
        if code in CLOSE_NAMES:
            kind = CLOSE_NAMES[code]
        else:  # a private code (4000-4999) or a registered one with no name yet: its number
            kind = str(code) if code is not None and 1000 <= code <= 4999 else "invalid"
        said = f"the server closed the socket with {code} ({kind.replace('_', ' ')})"
        reason = self.reason[:MAX_CLOSE_REASON]
        return ApiError(type=kind, message=f"{said}: {reason}" if reason else said)


@dataclass(slots=True)
class SocketTurn:
    """One turn read off a socket, ready for inspect(); or what the session said outside one."""

    exchange: Exchange
    prior: dict[str, list[str]] | None = None  # Realtime: the calls owed a result when asked
    cut: bool = False  # the socket closed before the turn's final event
    skipped: str | None = None  # why the turn is not inspected
    said: Verdict | None = None  # a session-scope finding, already read (exchange unused)


@dataclass(frozen=True, slots=True)
class Overdue:
    """A call the session still owes a result, past the deadline."""

    call_id: str
    name: str
    waited: float  # seconds since the response that issued it ended
    response_id: str = ""


@dataclass(slots=True)
class HeldTurn:
    """A turn being read: its request, and its server events as they come."""

    request: bytes
    prior: dict[str, list[str]] | None = None
    events: list[bytes] = field(default_factory=list)
    size: int = 0
    response_id: str = ""
    skipped: str | None = None
    detached: bool = False  # Realtime: out of band, its calls are owed nothing
    errored: bool = False  # an error event came; only the response's final event may follow
    started: float | None = None  # when the message that started the turn crossed the socket
    times: list[float | None] = field(default_factory=list)  # each event's, as it came


@dataclass(slots=True)
class Waiting:
    """A request sent on the socket, waiting for the response that answers it."""

    request: bytes
    previous: str = ""  # its previous_response_id
    prior: dict[str, list[str]] | None = None
    detached: bool = False
    event_id: str = ""  # Realtime: the client's id for the event, if it gave one
    skipped: str | None = None  # why its turn is not inspected
    at: float | None = None  # when it was sent


class SocketReader:
    """What every socket reader shares: the socket's address, the byte bound, the counts, and
    the turn's framing as the exchange inspect() reads.

    A dialect's reader says the rest: `feed(message, from_client)` takes each message in the
    order it crossed the socket and returns the turns it finished; `close(end)` returns those
    the socket's end cut off, with what the session left owed; `lost(why)` forgets what was in
    flight when messages went by unread.
    """

    api: Api

    def __init__(self, url: str, max_turn: int) -> None:
        self.url = url
        self.max_turn = max_turn
        self.skipped: Counter[str] = Counter()  # messages not used, by reason
        self.held = 0  # bytes of messages held now
        self.now: float | None = None  # when the message being read crossed the socket
        self._said_overdue: set[str] = set()  # calls already said to be overdue

    def _exchange(
        self,
        request: bytes,
        events: list[bytes] | None,
        times: Sequence[float | None] = (),
        started: float | None = None,
    ) -> Exchange:
        """A turn as an exchange: events None when no response came at all. Timed from the
        message that started it to its last event, each event at the time it came."""
        body, ends = framed(events or [])
        known = [t for t in times if t is not None]
        arrivals = tuple(zip(ends, known, strict=True)) if len(known) == len(ends) else ()
        return Exchange(
            method="POST",
            url=self.url,
            request_body=request,
            status=200 if events is not None else None,
            response_headers={"content-type": "text/event-stream"},
            response_body=body,
            api=self.api,
            transport="websocket",
            request_start=started,
            request_end=started,
            response_end=known[-1] if known and arrivals else self.now,
            arrivals=arrivals,
        )

    def _rejection(self, create: Waiting, message: bytes, event: dict[str, Any]) -> SocketTurn:
        """A request the API answered with an error event instead of a response."""
        status = error_status(event)
        if status is None:  # reported as an error inside the turn's stream
            exchange = self._exchange(create.request, [message], [self.now], create.at)
            return SocketTurn(exchange, create.prior)
        exchange = self._exchange(create.request, [], [], create.at).model_copy(
            update={
                "status": status,
                "response_headers": {"content-type": "application/json"},
                "response_body": message,
            }
        )
        return SocketTurn(exchange, create.prior)

    def _said(self, **found: Any) -> SocketTurn:
        """A finding of the session itself, outside any turn."""
        verdict = Verdict(
            api=self.api, outcome="inspected", transport="websocket", scope="session", **found
        )
        return SocketTurn(self._exchange(b"{}", None), said=verdict)

    def _add(self, turn: HeldTurn, message: bytes) -> None:
        if turn.skipped is not None:
            return
        turn.size += len(message)
        if turn.size > self.max_turn:
            self.held -= turn.size - len(message)
            turn.events, turn.times = [], []
            turn.skipped = "the turn's events passed tooltap_max_body"
            self.skipped["turn_too_large"] += 1
            return
        self.held += len(message)
        turn.events.append(message)
        turn.times.append(self.now)

    def _done(self, turn: HeldTurn, cut: bool = False) -> SocketTurn:
        self.held -= len(turn.request) + (turn.size if turn.skipped is None else 0)
        exchange = self._exchange(turn.request, turn.events, turn.times, turn.started)
        return SocketTurn(exchange, turn.prior, cut=cut, skipped=turn.skipped)

    def _drop(self, turns: Iterable[HeldTurn], why: str) -> list[SocketTurn]:
        """Turns in flight when messages went by unread: each ends uninspected, for why."""
        done = []
        for turn in turns:
            if turn.skipped is None:
                turn.events, turn.times, turn.skipped = [], [], why
            done.append(self._done(turn))
        return done

    def owed_calls(self) -> dict[str, tuple[str, float, str]]:
        """The calls this session owes a result now: id -> (tool, when the response that issued
        it ended, its response id); only those known to be owed, with a known time."""
        return {}

    def overdue(self, now: float, deadline: float) -> list[Overdue]:
        """The calls owed past the deadline at `now` (epoch seconds, the caller's clock), each
        said once."""
        found = []
        owed = self.owed_calls()
        self._said_overdue &= owed.keys()  # answered meanwhile: nothing more to remember
        for call_id, (name, at, response_id) in owed.items():
            if now - at > deadline and call_id not in self._said_overdue:
                self._said_overdue.add(call_id)
                found.append(Overdue(call_id, name, now - at, response_id))
        return found

    def feed(self, message: bytes, from_client: bool, at: float | None = None) -> list[SocketTurn]:
        """One message, in the order it crossed the socket (at: when, epoch seconds): the
        turns it finished."""
        self.now = at
        return self._read(message, from_client)

    def _read(self, message: bytes, from_client: bool) -> list[SocketTurn]:
        raise NotImplementedError

    def close(self, end: SocketClose | None = None) -> list[SocketTurn]:
        raise NotImplementedError

    def lost(self, why: str = LOST) -> list[SocketTurn]:
        raise NotImplementedError


def remember(table: OrderedDict[str, Any], key: str, value: Any = None) -> None:
    """Add a key, newest last; past MAX_OPEN the oldest is forgotten."""
    table[key] = value
    table.move_to_end(key)
    if len(table) > MAX_OPEN:
        table.popitem(last=False)


@dataclass(frozen=True, slots=True)
class SocketReading:
    """How a dialect is read off a WebSocket: which paths speak it, its reader, and the cheap look
    at each message's head the proxy takes on its event loop (nothing is parsed there)."""

    path: str | tuple[str, ...]  # a WebSocket to a path ending so speaks it
    reader: Callable[[str, int, bool], SocketReader]  # (url, max_turn, joined late)
    needed: Callable[[bytes, str | None], bool]  # (message, its kind): worth holding?
    ends_turn: Callable[[bytes, str | None], bool]  # may it end a turn: hand the batch over now
    kind: Callable[[bytes], str | None] = leading_type  # what a message is, from its head
    binary: bool = False  # its JSON may come in binary frames (Gemini Live's servers)

    def readable(self, is_text: bool) -> bool:
        """Can a message in this frame type hold JSON the reader uses?"""
        return is_text or self.binary

    def wanted(self, message: bytes, is_text: bool) -> bool:
        """Is a message worth reading, frame type and all? What the live proxy holds."""
        return self.readable(is_text) and self.needed(message, self.kind(message))
