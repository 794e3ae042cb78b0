"""WebSocket transports read as turns: the Responses WebSocket mode, the Realtime API and the
Gemini Live API.

Sans-I/O, like the stream readers: `feed(message, from_client)` takes each text
message in the order it crossed the socket and returns the turns it finished;
`close()` returns those the socket's end cut off. A turn is an Exchange that
inspect() reads as it reads HTTP: the request is the JSON a POST would carry,
and the response is the turn's server events framed as the SSE stream the same
request gives over HTTP. So a turn on a socket meets the same rules, the same
assembler and the same loop check as one over HTTP.

Where a reading is uncertain (which request an error answers, whether a call
is owed a result), the reader takes the one that cannot raise a false alarm,
and says why where it does.
"""

from __future__ import annotations

import re
from collections import Counter, OrderedDict, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .dialects import gemini, gemini_live
from .dialects.realtime import owed_at_close
from .errors import ApiError, api_error
from .exchange import Exchange
from .jsontext import dumps, loads
from .shapes import as_dict, as_list, as_str
from .turn import Api
from .verdict import Verdict

# The events a turn needs. The rest (text and audio deltas, transcripts, rate
# limits) is never held: over a long socket it is nearly everything.
RESPONSES_EVENTS = frozenset(
    {
        "response.create",
        "response.created",
        "response.queued",
        "response.in_progress",
        "response.output_item.added",
        "response.output_item.done",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.custom_tool_call_input.delta",
        "response.custom_tool_call_input.done",
        "response.completed",
        "response.incomplete",
        "response.failed",
        "error",
    }
)
REALTIME_EVENTS = frozenset(
    {
        "session.update",
        "session.created",
        "session.updated",
        "conversation.item.create",
        "response.create",
        "response.created",
        "response.output_item.added",
        "response.output_item.done",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.done",
        "error",
    }
)
NEEDED: dict[str, frozenset[str]] = {"responses": RESPONSES_EVENTS, "realtime": REALTIME_EVENTS}
# After one of these a turn may be complete: worth handing over at once.
ENDS = frozenset(
    {"response.completed", "response.incomplete", "response.failed", "response.done", "error"}
)
# Item types a Realtime client creates that the loop check reads.
_CALL_ITEMS = (b"function_call", b"function_call_output")
_MEDIA = (b'"input_audio"', b'"input_image"', b'"audio"')
_ITEM_TYPE = re.compile(
    rb'"item"\s*:\s*\{\s*(?:"[^"\\]*"\s*:\s*"[^"\\]*"\s*,\s*)*"type"\s*:\s*"([^"\\]{1,100})"'
)
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


def kind_of(api: str, message: bytes) -> str | None:
    """What a message is, read from its head: its `type`, or (Gemini Live) its one key. Pure."""
    return gemini_live.kind(message) if api == "gemini_live" else leading_type(message)


def readable(api: str, is_text: bool) -> bool:
    """Can a message of this frame type hold JSON the reader uses? Gemini Live's servers send
    theirs in binary frames; the OpenAI APIs' binary frames are not theirs. Pure."""
    return is_text or api == "gemini_live"


def needed(api: str, message: bytes, kind: str | None) -> bool:
    """Is a message worth holding for inspection? Pure, and cheap: it reads the head.

    kind is its kind_of(). A message whose type is not its first key is
    held (the reader decides). A Realtime item that carries audio or an image
    is not, unless it may be a call or a result.
    """
    if api == "gemini_live":
        return gemini_live.needed(message, kind)
    if kind is None:
        return True
    if kind not in NEEDED.get(api, ()):
        return False
    if kind == "conversation.item.create":
        head = message[:HEAD]
        item = _ITEM_TYPE.search(head)
        if item is not None:
            return item.group(1) in _CALL_ITEMS
        return not any(m in head for m in _MEDIA)
    return True


def wanted(api: str, message: bytes, is_text: bool) -> bool:
    """Is a message worth reading, frame type and all? Pure: what the live proxy holds."""
    return readable(api, is_text) and needed(api, message, kind_of(api, message))


def ends_turn(api: str, message: bytes, kind: str | None) -> bool:
    """May a held message finish a turn, so that its batch is worth handing over at once?"""
    if api == "gemini_live":
        return gemini_live.ends_turn(message, kind)
    return kind in ENDS


def sse(events: list[bytes]) -> bytes:
    """Server events framed as the SSE stream they mirror: one `data:` line per line. Pure."""
    parts: list[bytes] = []
    for event in events:
        for line in event.splitlines() or [b""]:
            parts += (b"data: ", line, b"\n")
        parts.append(b"\n")
    return b"".join(parts)


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


@dataclass(slots=True)
class _Turn:
    request: bytes
    prior: dict[str, list[str]] | None = None
    events: list[bytes] = field(default_factory=list)
    size: int = 0
    response_id: str = ""
    skipped: str | None = None
    detached: bool = False  # Realtime: out of band, its calls are owed nothing
    errored: bool = False  # an error event came; only the response's final event may follow


@dataclass(slots=True)
class _Create:
    request: bytes
    previous: str = ""  # its previous_response_id
    prior: dict[str, list[str]] | None = None
    detached: bool = False
    event_id: str = ""  # Realtime: the client's id for the event, if it gave one
    skipped: str | None = None  # why its turn is not inspected


class _Reader:
    """What both readers share: the socket's address, the byte bound and the counts."""

    api: Api

    def __init__(self, url: str, max_turn: int) -> None:
        self.url = url
        self.max_turn = max_turn
        self.skipped: Counter[str] = Counter()  # messages not used, by reason
        self.held = 0  # bytes of messages held now

    def _exchange(self, request: bytes, events: list[bytes] | None) -> Exchange:
        """A turn as an exchange: events None when no response came at all."""
        return Exchange(
            method="POST",
            url=self.url,
            request_body=request,
            status=200 if events is not None else None,
            response_headers={"content-type": "text/event-stream"},
            response_body=sse(events or []),
            api=self.api,
            transport="websocket",
        )

    def _rejection(self, create: _Create, message: bytes, event: dict[str, Any]) -> SocketTurn:
        """A request the API answered with an error event instead of a response."""
        status = error_status(event)
        if status is None:  # reported as an error inside the turn's stream
            return SocketTurn(self._exchange(create.request, [message]), create.prior)
        exchange = self._exchange(create.request, []).model_copy(
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

    def _add(self, turn: _Turn, message: bytes) -> None:
        if turn.skipped is not None:
            return
        turn.size += len(message)
        if turn.size > self.max_turn:
            self.held -= turn.size - len(message)
            turn.events = []
            turn.skipped = "the turn's events passed tooltap_max_body"
            self.skipped["turn_too_large"] += 1
            return
        self.held += len(message)
        turn.events.append(message)

    def _done(self, turn: _Turn, cut: bool = False) -> SocketTurn:
        self.held -= len(turn.request) + (turn.size if turn.skipped is None else 0)
        exchange = self._exchange(turn.request, turn.events)
        return SocketTurn(exchange, turn.prior, cut=cut, skipped=turn.skipped)


class ResponsesSocket(_Reader):
    """A Responses WebSocket: each response.create and the events that answer it.

    Responses are matched to requests in order, per `stream_id` lane (the API
    runs one lane's requests first in, first out). A response that no request
    waits for (an automatic successor after response.steer, or one that began
    before tooltap followed the socket) is read from its own echo of the
    settings, and its loop is not checked.
    """

    api: Api = "responses"
    FINAL = ("response.completed", "response.incomplete", "response.failed")
    START = ("response.created", "response.queued", "response.in_progress")

    def __init__(self, url: str, max_turn: int, late: bool = False) -> None:
        super().__init__(url, max_turn)
        self.waiting: dict[str, deque[_Create]] = {}
        self.active: dict[str, _Turn] = {}
        self._late: set[str] | None = set() if late else None  # lanes seen since joining

    def feed(self, message: bytes, from_client: bool) -> list[SocketTurn]:
        value, error = loads(message)
        if error is not None or not isinstance(value, dict):
            return self._unreadable(message, from_client)
        kind = as_str(value.get("type"))
        lane = as_str(value.get("stream_id"))
        if lane not in self.active and lane not in self.waiting and self._lanes() >= MAX_LANES:
            self.skipped["too_many_lanes"] += 1
            return []
        if from_client:
            if kind == "response.create":
                self._wait(lane, message, as_str(value.get("previous_response_id")))
            return []
        done: list[SocketTurn] = []
        turn = self.active.get(lane)
        response = as_dict(value.get("response"))
        if turn is not None and turn.errored:
            if kind in self.FINAL and as_str(response.get("id")) == turn.response_id:
                self._add(turn, message)  # the failed response, right after its error
                return [self._done(self.active.pop(lane))]
            done.append(self._done(self.active.pop(lane)))
            turn = None
        if kind in self.START:
            if turn is not None and turn.response_id == as_str(response.get("id")):
                self._add(turn, message)
                return done
            # A new response: one still open on this lane ended without a final event.
            if turn is not None:
                done.append(self._done(self.active.pop(lane)))
            self._start(lane, message, response)
            return done
        if kind == "error":
            return done + self._error(lane, message, value)
        if turn is None:
            return done  # before tooltap followed the socket
        self._add(turn, message)
        if kind in self.FINAL:
            done.append(self._done(self.active.pop(lane)))
        return done

    def close(self, end: SocketClose | None = None) -> list[SocketTurn]:
        """The turns the socket's end cut off, and the requests that never got a response.

        end, the close itself, says nothing more: the Responses API states its errors in
        `error` events."""
        turns = [self._done(turn, cut=not turn.errored) for turn in self.active.values()]
        for queue in self.waiting.values():
            turns += (SocketTurn(self._exchange(c.request, None), cut=True) for c in queue)
        self.active, self.waiting, self.held = {}, {}, 0
        return turns

    def lost(self, why: str = LOST) -> list[SocketTurn]:
        """Messages went by unread: forget what was in flight rather than misread it."""
        turns = []
        for turn in self.active.values():
            if turn.skipped is None:
                turn.events, turn.skipped = [], why
            turns.append(self._done(turn))
        self.skipped["lost"] += sum(len(q) for q in self.waiting.values())
        self.active, self.waiting, self.held = {}, {}, 0
        self._late = set()
        return turns

    def _lanes(self) -> int:
        return len(self.active.keys() | self.waiting.keys())

    def _wait(self, lane: str, message: bytes, previous: str) -> None:
        queue = self.waiting.setdefault(lane, deque())
        if len(queue) >= MAX_WAITING:
            self.held -= len(queue.popleft().request)
            self.skipped["too_many_waiting"] += 1
        if len(message) > self.max_turn:  # kept as a place in the line, not as bytes
            create = _Create(b"{}", previous, skipped="the request passed tooltap_max_body")
        else:
            create = _Create(message, previous)
        queue.append(create)
        self.held += len(create.request)

    def _take(self, lane: str, previous: str | None = None) -> _Create | None:
        """The request a new response on this lane answers, if one is known to."""
        queue = self.waiting.get(lane)
        if self._late is not None and lane not in self._late:
            # The first response on a lane after joining may answer a request sent
            # before: the ones seen so far cannot be matched to it with certainty.
            self._late.add(lane)
            if len(self._late) > MAX_LANES:
                self._late = None  # long enough: every lane running now was seen
            for create in self.waiting.pop(lane, ()):
                self.held -= len(create.request)
                self.skipped["joined_late"] += 1
            return None
        if not queue:
            return None
        # An automatic successor names the response it continues; a request
        # that names another is not the one it answers.
        if previous and queue[0].previous != previous:
            return None
        create = queue.popleft()
        self.held -= len(create.request)
        if not queue:
            del self.waiting[lane]
        return create

    def _start(self, lane: str, message: bytes, response: Mapping[str, Any]) -> None:
        create = self._take(lane, as_str(response.get("previous_response_id")))
        turn = _Turn(create.request if create else b"{}", response_id=as_str(response.get("id")))
        turn.skipped = create.skipped if create else None
        self.active[lane] = turn
        self.held += len(turn.request)  # held until the turn is done, as its events are
        self._add(turn, message)

    def _error(self, lane: str, message: bytes, event: dict[str, Any]) -> list[SocketTurn]:
        """An error event: the running response's, or a waiting request's rejection.

        One with a sequence_number was sent inside a response's stream. Any other,
        while a request waits, answers the oldest one (the lane's requests run in
        order); with none waiting it is the running response's. An error ends a
        response's turn, as it ends an HTTP stream, unless the response's own
        final event (response.failed) comes next.
        """
        turn = self.active.get(lane)
        waiting = self.waiting.get(lane)
        if turn is not None and (event.get("sequence_number") is not None or not waiting):
            self._add(turn, message)
            turn.errored = True
            return []
        create = self._take(lane) if waiting else None
        return [self._rejection(create or _Create(b"{}"), message, event)]

    def _unreadable(self, message: bytes, from_client: bool) -> list[SocketTurn]:
        """Not a JSON object: a server's goes to its turn (read there as a malformed
        event) when only one turn runs; anything else is counted and dropped."""
        if not from_client and len(self.active) == 1:
            self._add(next(iter(self.active.values())), message)
        else:
            self.skipped["not_json"] += 1
        return []


class RealtimeSocket(_Reader):
    """A Realtime session: tools from the session, one turn per response.

    A turn's request is the session's tool settings (with the response.create's
    own, when it sets them), the function_call_output items the client created
    since it last asked for a response, and the calls owed then. The server's
    session echo wins over the client's update. Responses can run side by side
    (one out of band beside one in the conversation): their events are told
    apart by response id.

    The loop, as the API defines it: a call of a response completed in the
    conversation is owed its output until it arrives, however many requests
    later (the Agents SDKs run a response's tools concurrently and ask for a
    response as each one finishes; a user may speak while a tool runs). So a
    request made while calls are owed is no finding. What is still owed when
    the socket closes is: unanswered-call when the conversation went on with a
    completed response after the call's (the model answered without it), else
    unanswered-at-close (a hang-up while a tool ran), which fails no audit by
    default. A sideband socket (`?call_id=`, the server's side of a WebRTC or
    SIP call) sees only part of the conversation: its calls are read and
    validated, its loop is not judged.
    """

    api: Api = "realtime"
    SETTINGS = ("model", "tools", "tool_choice", "parallel_tool_calls")

    def __init__(self, url: str, max_turn: int, late: bool = False) -> None:
        super().__init__(url, max_turn)
        query = dict(p.partition("=")[::2] for p in url.partition("?")[2].split("&") if p)
        self.session: dict[str, Any] = {"model": query["model"]} if query.get("model") else {}
        self.sideband = bool(query.get("call_id"))
        self.known = not late  # the session's tools are known
        self.blind = late  # some results or calls went by unseen since the last request
        self.items: list[Mapping[str, Any]] = []
        self.items_size = 0
        # Calls owed a result -> whether the conversation went on without it (a
        # response completed in it after the call's).
        self.owed: OrderedDict[str, bool] = OrderedDict()
        # Calls a result may answer without being owed one: written by the client
        # itself (replayed history), made out of band or in a response that did
        # not complete, or already answered. A result for one is neither an
        # orphan nor checked.
        self.unowed: OrderedDict[str, None] = OrderedDict()
        self.outputs: OrderedDict[str, None] = OrderedDict()  # client event ids of tool results
        self.last_response = ""
        self.waiting: deque[_Create] = deque()
        self.turns: dict[str, _Turn] = {}  # by response id, the responses running

    def feed(self, message: bytes, from_client: bool) -> list[SocketTurn]:
        value, error = loads(message)
        if error is not None or not isinstance(value, dict):
            self.skipped["not_json"] += 1
            return []
        kind = as_str(value.get("type"))
        if from_client:
            if kind == "session.update":
                self._configure(as_dict(value.get("session")))
            elif kind == "conversation.item.create":
                item = as_dict(value.get("item"))
                self._item(item, len(message))
                if as_str(value.get("event_id")) and item.get("type") == "function_call_output":
                    _remember(self.outputs, as_str(value.get("event_id")))
            elif kind == "response.create":
                self._create(as_dict(value.get("response")), as_str(value.get("event_id")))
            return []
        if kind in ("session.created", "session.updated"):
            self._configure(as_dict(value.get("session")), echo=True)
            return []
        if kind == "error":
            return self._error(message, value)
        response = as_dict(value.get("response"))
        if kind == "response.created":
            self._start(message, response)
            return []
        response_id = as_str(response.get("id") if response else value.get("response_id"))
        turn = self.turns.get(response_id)
        if turn is None and not response_id and len(self.turns) == 1:
            response_id, turn = next(iter(self.turns.items()))
        if turn is None:
            # A response not followed (it began before tooltap did, or messages were lost):
            # its calls may be answered, and owe nothing that can be checked.
            if kind == "response.done":
                self._owe(_Turn(b"", detached=True), response)
            return []
        self._add(turn, message)
        if kind == "response.done":
            del self.turns[response_id]
            self._owe(turn, response)
            return [self._done(turn)]
        return []

    def close(self, end: SocketClose | None = None) -> list[SocketTurn]:
        """The turns the close cut off, and the calls still owed.

        end, the close itself, is no session error here, whatever its code: the Realtime API
        states its errors in `error` events (read as they come; the session stays open after
        them) and ends its sessions with 1000, or 1001 at the session's time limit. Another
        code is no part of the API, and could count again a failure an error event said; a
        close that cuts a turn still says so on that turn."""
        turns = [self._done(turn, cut=True) for turn in self.turns.values()]
        turns += (
            SocketTurn(self._exchange(c.request, None), c.prior, cut=True) for c in self.waiting
        )
        # Results written since the last request still answer their calls.
        for item in self.items:
            self.owed.pop(as_str(item.get("call_id")), None)
        errors = owed_at_close(
            [call_id for call_id, went_on in self.owed.items() if went_on],
            [call_id for call_id, went_on in self.owed.items() if not went_on],
            f"the socket's close, after {self.last_response or 'no response'}",
        )
        if errors:
            turns.append(self._said(loop_errors=errors, reason="calls still owed at the close"))
        self.turns, self.waiting, self.items, self.items_size, self.held = {}, deque(), [], 0, 0
        self.owed.clear()
        return turns

    def lost(self, why: str = LOST) -> list[SocketTurn]:
        """Messages went by unread: the tools and the loop are unknown until shown again."""
        turns = []
        for turn in self.turns.values():
            if turn.skipped is None:
                turn.events, turn.skipped = [], why
            turns.append(self._done(turn))
        self.skipped["lost"] += len(self.waiting)
        self.turns, self.waiting, self.items, self.items_size, self.held = {}, deque(), [], 0, 0
        self.known, self.blind = False, True
        self._forget_owed()
        return turns

    def _forget_owed(self) -> None:
        """A result for any call owed may have gone by unseen: none is owed any longer."""
        for call_id in self.owed:
            _remember(self.unowed, call_id)
        self.owed.clear()

    def _configure(self, session: Mapping[str, Any], echo: bool = False) -> None:
        for key in self.SETTINGS:
            if key in session:
                self.session[key] = session[key]
        if echo or "tools" in session:
            self.known = True

    def _item(self, item: Mapping[str, Any], size: int) -> None:
        kind = item.get("type")
        call_id = as_str(item.get("call_id"))
        if kind == "function_call" and call_id:
            _remember(self.unowed, call_id)
        elif kind == "function_call_output":
            if call_id in self.unowed and call_id not in self.owed:
                return
            if len(self.items) >= MAX_ITEMS or self.items_size + size > self.max_turn:
                self.blind = True
                self.skipped["too_many_items"] += 1
                if call_id in self.owed:  # answered, though not kept
                    del self.owed[call_id]
                    _remember(self.unowed, call_id)
                return
            self.items.append(item)
            self.items_size += size
            self.held += size

    def _create(self, params: Mapping[str, Any], event_id: str) -> None:
        request = dict(self.session)
        request.update((k, params[k]) for k in self.SETTINGS if k in params)
        # Out of band (conversation "none") or with its own input, the response
        # does not continue the conversation: nothing is owed to it, and the
        # results written so far wait for the next request that does. Asked for
        # while a response runs in the conversation, it is refused (or waits),
        # and the calls of the running one are not owed yet: its loop is
        # checked with the next request.
        detached = params.get("conversation") == "none" or "input" in params
        running = any(not turn.detached for turn in self.turns.values())
        prior = None
        if not detached and not running:
            previous = self.last_response or "(the session's start)"
            request["previous_response_id"] = previous
            request["input"] = self.items
            # Blind (joined late, or messages went by unread) or sideband: no
            # result can be called an orphan.
            prior = {} if self.blind or self.sideband else {previous: list(self.owed)}
            self._answered(self.items)
            self.held -= self.items_size
            self.items, self.items_size, self.blind = [], 0, False
        body = dumps(request).encode()
        if len(self.waiting) >= MAX_WAITING:
            self.held -= len(self.waiting.popleft().request)
            self.skipped["too_many_waiting"] += 1
        self.waiting.append(_Create(body, prior=prior, detached=detached, event_id=event_id))
        self.held += len(body)

    def _answered(self, outputs: list[Mapping[str, Any]]) -> None:
        """Calls answered by these results are owed nothing more; another result is not read."""
        for item in outputs:
            call_id = as_str(item.get("call_id"))
            if call_id in self.owed:
                del self.owed[call_id]
                _remember(self.unowed, call_id)

    def _start(self, message: bytes, response: Mapping[str, Any]) -> None:
        response_id = as_str(response.get("id"))
        if response_id in self.turns:
            return
        if len(self.turns) >= MAX_LANES:
            self.skipped["too_many_lanes"] += 1
            return
        if self.waiting:
            create = self.waiting.popleft()
            self.held -= len(create.request)
        else:  # started by the server (voice activity): the session's settings, no loop
            create = _Create(dumps(self.session).encode())
        turn = _Turn(
            create.request, create.prior, response_id=response_id, detached=create.detached
        )
        if not self.known:
            turn.skipped = "the session's tools were set before tooltap followed this socket"
        self.turns[response_id] = turn
        self.held += len(turn.request)  # held until the turn is done, as its events are
        self._add(turn, message)

    def _owe(self, turn: _Turn, response: Mapping[str, Any]) -> None:
        """A response finished: its calls are owed a result if it completed in the conversation."""
        calls = [
            as_str(item.get("call_id"))
            for item in map(as_dict, as_list(response.get("output")))
            if item.get("type") == "function_call" and as_str(item.get("call_id"))
        ]
        went_on = not turn.detached and response.get("status") == "completed"
        owed = went_on and not self.sideband
        if went_on:  # the conversation went on without the results still owed
            for call_id in self.owed:
                self.owed[call_id] = True
        for call_id in calls:
            if owed:
                self.owed[call_id] = False
                self.owed.move_to_end(call_id)
                if (
                    len(self.owed) > MAX_OPEN
                ):  # forgotten while owed: its result would look orphaned
                    self.owed.popitem(last=False)
                    self.blind = True
            else:
                _remember(self.unowed, call_id)
        if went_on:
            self.last_response = turn.response_id or self.last_response

    def _error(self, message: bytes, event: dict[str, Any]) -> list[SocketTurn]:
        """An error event: a rejected request, or the session's own.

        Realtime errors answer client events (a response that fails ends with
        response.done). A rejected request is one that refuses a response.create
        (it names the request's event id, or, naming none, refuses a new
        response: its code, or a `response` parameter) or a tool result (it names
        the event id of the conversation.item.create that carried it). Any other
        refuses nothing tooltap reads (an empty audio buffer committed, a
        response.cancel with none running): a session error, counted by its code
        and logged, that leaves the requests waiting. An error that names no
        event id and no response is read as the session's: it cannot be told
        apart from one, and reading it as a rejection could be a false finding.
        """
        error = as_dict(event.get("error"))
        answers = as_str(error.get("event_id"))
        # Only a refusal of a new response, not one about another (response.cancel's).
        about_a_response = as_str(error.get("code")) == "conversation_already_has_active_response"
        about_a_response |= as_str(error.get("param")).startswith("response")
        create = None
        if answers:
            create = next((c for c in self.waiting if c.event_id == answers), None)
        elif self.waiting and about_a_response:
            create = self.waiting[0]
        if create is not None:
            self.waiting.remove(create)
            self.held -= len(create.request)
            return [self._rejection(create, message, event)]
        if answers in self.outputs:  # a tool result refused
            del self.outputs[answers]
            return [self._rejection(_Create(dumps(self.session).encode()), message, event)]
        said = api_error(event)
        code = as_str(error.get("code")) or said.type
        return [
            self._said(
                session_errors=[ApiError(type=code, message=said.message)],
                reason=f"the session sent an error that refused no request: {code}",
            )
        ]


# The server messages a Gemini Live reader acts on, by their key.
ROUTED = frozenset({"serverContent", "toolCall", "toolCallCancellation", "goAway", "usageMetadata"})


@dataclass(slots=True)
class _Owed:
    """A Gemini Live call awaiting its response."""

    name: str
    blocking: bool  # the model waits for it (not NON_BLOCKING)
    named: bool  # it came with an id (else it is answered by its name)
    prompted: bool = False  # the client said something since (text, or a turn of its own)
    went_on: bool = False  # ... and the model then completed a turn while it waited


class GeminiLiveSocket(_Reader):
    """A Gemini Live session: tools from its `setup`, one turn per stretch of model output.

    A turn opens at the model's first sign of output (a part, generationComplete,
    interrupted; a turnComplete that ends a voice turn whose audio tooltap does not hold) and
    ends at a toolCall or at turnComplete; a bare turnComplete right after a toolCall is the end
    of that model turn, not a new one. A turn's request is the session's settings read as
    Gemini's (tooltap.core.dialects.gemini_live.session_request) and the function responses the
    client sent since the last turn began.

    The loop, as the API defines it: a call is owed a response until one comes, however many
    turns later; a call the server cancels (toolCallCancellation) is owed nothing, and a
    response to it is no orphan; a NON_BLOCKING call's response may come at any time, and
    further ones (willContinue) answer the same call. A response that names no call the session
    made is an orphan-result, unless the socket was joined late or resumes a session
    (`sessionResumption.handle`): then its calls may have been made on another socket. What is
    still owed at the close is unanswered-call when the model went on without it (a blocking
    call, and the user said something and a turn completed since), else unanswered-at-close
    (a hang-up while a tool ran, a non-blocking call, or a socket the server said it would close
    with goAway). goAway, the session's error messages and a server's close with an error code
    are counted as session errors, not findings.
    """

    api: Api = "gemini_live"

    def __init__(self, url: str, max_turn: int, late: bool = False) -> None:
        super().__init__(url, max_turn)
        self.vertex = "LlmBidiService" in url
        self.request: dict[str, Any] | None = None  # the session's settings, once seen
        self.blocking: set[str] = set()
        self.free: set[str] = set()  # NON_BLOCKING functions
        self.blind = late  # a response may answer a call this reader never saw
        self.owed: OrderedDict[str, _Owed] = OrderedDict()  # by id, or a name and a number
        self.answerable: OrderedDict[str, None] = OrderedDict()  # answered, cancelled, replayed
        self.results: list[Any] = []  # function responses since the last turn began
        self.answers: list[str] = []  # ... the keys of those that answer a call made
        self.results_size = 0
        self.turn: _Turn | None = None
        self.after_call = False  # the last turn ended at a toolCall
        self.texts = False  # the running turn holds a text piece
        self.completed = 0  # turns ended so far
        self.going_away = False  # the server said it would close the socket
        self._unnamed = 0

    def feed(self, message: bytes, from_client: bool) -> list[SocketTurn]:
        value, error = loads(message)
        if error is not None or not isinstance(value, dict):
            self.skipped["not_json"] += 1
            return []
        if from_client:
            self._client(value, len(message))
            return []
        if b"\n" in message:  # Google's pretty JSON, held as one line: one SSE line to read
            message = dumps(value).encode()
        # A server message is named by its key (usageMetadata may ride beside serverContent).
        key, body = next(
            ((gemini_live.camel(k), v) for k, v in value.items() if gemini_live.camel(k) in ROUTED),
            ("error", value) if isinstance(value.get("error"), dict) else ("", None),
        )
        if key == "serverContent":
            return self._content(message, as_dict(body))
        if key == "toolCall":
            return self._tool_call(message, as_list(gemini.field(body, "functionCalls")))
        if key == "toolCallCancellation":
            for call_id in map(as_str, as_list(gemini.field(body, "ids"))):
                if self.owed.pop(call_id, None) is not None:
                    _remember(self.answerable, call_id)
        elif key == "goAway":
            self.going_away = True
            left = as_str(gemini.field(body, "timeLeft")) or "?"
            return [
                self._said(
                    session_errors=[ApiError(type="goAway", message=f"time left: {left}")],
                    reason="the server will close the socket (goAway)",
                )
            ]
        elif key == "error":
            said = api_error(value)
            code = said.type or "error"
            return [
                self._said(
                    session_errors=[ApiError(type=code, message=said.message)],
                    reason=f"the session sent an error: {code}",
                )
            ]
        elif key == "usageMetadata" and self.turn is not None:
            self._add(self.turn, message)
        return []

    def close(self, end: SocketClose | None = None) -> list[SocketTurn]:
        """The turn the close cut off; the close itself when the server ended the session with
        an error code (the Live API's way of saying most session errors: 1007 for an invalid
        argument, 1008 for a policy such as an invalid key or a quota, 1011 for an internal
        error, with a reason); then the calls still owed, and responses no turn took."""
        turns = [self._done(self.turn, cut=True)] if self.turn is not None else []
        # After goAway the close is the one it announced (at the session's time limit the
        # server closes with 1008 or 1011): counted once, as the goAway already was.
        if end is not None and end.server_error and not self.going_away:
            error = end.error()
            reason = f"the server closed the socket with an error: {error.type}"
            turns.append(self._said(session_errors=[error], reason=reason))
        went_on = [key for key, owed in self.owed.items() if owed.went_on]
        cut_short = [key for key, owed in self.owed.items() if not owed.went_on]
        if self.going_away:  # the session may go on, resumed, on another socket
            went_on, cut_short = [], went_on + cut_short
        errors = gemini_live.owed_at_close(
            [self._label(k) for k in went_on],
            [self._label(k) for k in cut_short],
            f"the socket's close, after {self.completed} turn(s)",
        )
        report = gemini_live.check_loop({"functionResponses": self.results}, self._prior())
        if errors or report.results or report.errors:
            turns.append(
                self._said(
                    loop_errors=report.errors + errors,
                    tool_results=report.results,
                    reason="what the session's close left: calls owed, responses no turn took",
                )
            )
        self._take_results()
        self.turn, self.held = None, 0
        self.owed.clear()
        return turns

    def lost(self, why: str = LOST) -> list[SocketTurn]:
        """Messages went by unread: a call or its response may be among them."""
        turns = []
        if self.turn is not None:
            if self.turn.skipped is None:
                self.turn.events, self.turn.skipped = [], why
            turns.append(self._done(self.turn))
            self.turn = None
        self.skipped["lost"] += len(self.results)
        self._take_results()
        self.held, self.blind = 0, True
        for key in self.owed:
            _remember(self.answerable, key)
        self.owed.clear()
        return turns

    def _label(self, key: str) -> str:
        """A call as loop errors name it: its id, else its name."""
        owed = self.owed[key]
        return key if owed.named else owed.name

    def _prior(self) -> dict[str, list[str]]:
        """What check_loop needs to call a response an orphan; nothing when it cannot."""
        return {} if self.blind else {"answers": list(self.answers)}

    def _take_results(self) -> tuple[list[Any], dict[str, list[str]]]:
        taken = self.results, self._prior()
        self.held -= self.results_size
        self.results, self.answers, self.results_size = [], [], 0
        return taken

    def _client(self, value: dict[str, Any], size: int) -> None:
        setup = gemini.field(value, "setup")
        if isinstance(setup, dict):
            self.request = gemini_live.session_request(setup)
            self.blocking, self.free = gemini_live.blocking_names(setup, self.vertex)
            resumption = as_dict(gemini.field(setup, "sessionResumption"))
            self.blind |= bool(as_str(gemini.field(resumption, "handle")))
            return
        update = gemini.field(value, "contextUpdate")
        if isinstance(update, dict):  # no input of the user's: the tools, if set, are replaced
            tools = gemini.field(update, "tools")
            if isinstance(tools, dict) and self.request is not None:
                listed = {"tools": gemini.field(tools, "tools") or []}
                self.request = self.request | listed
                self.blocking, self.free = gemini_live.blocking_names(listed, self.vertex)
            return
        responses = gemini.field(gemini.field(value, "toolResponse"), "functionResponses")
        if responses is not None:
            self._responses(as_list(responses), size)
            return
        for owed in self.owed.values():  # input of the user's: the model may answer it
            owed.prompted = True
        answered: list[Any] = []
        for content in map(
            as_dict, as_list(gemini.field(gemini.field(value, "clientContent"), "turns"))
        ):
            parts = [as_dict(part) for part in as_list(content.get("parts"))]
            for call in (as_dict(gemini.field(part, "functionCall")) for part in parts):
                if as_str(call.get("id")):  # replayed history: answerable, owed nothing
                    _remember(self.answerable, as_str(call.get("id")))
            answered += [gemini.field(part, "functionResponse") for part in parts]
        self._responses([r for r in answered if isinstance(r, dict)], size)  # its size once

    def _responses(self, responses: list[Any], size: int) -> None:
        """Function responses: each answers its call now, and waits for the next turn."""
        if not responses:
            return
        if len(self.results) >= MAX_ITEMS or self.results_size + size > self.max_turn:
            self.skipped["too_many_items"] += 1
            for response in map(as_dict, responses):
                self._answer(response)
            return
        self.results_size += size
        self.held += size
        for response in map(as_dict, responses):
            self.results.append(response)
            if self._answer(response):
                self.answers.append(gemini_live.response_key(response))

    def _answer(self, response: Mapping[str, Any]) -> bool:
        """Settle the call a response answers; False when it answers none the session made."""
        call_id, name = as_str(response.get("id")), as_str(response.get("name"))
        if call_id in self.owed:
            del self.owed[call_id]
            _remember(self.answerable, call_id)
            return True
        unnamed = next((k for k, o in self.owed.items() if not o.named and o.name == name), None)
        if unnamed is not None:
            del self.owed[unnamed]
            _remember(self.answerable, "name:" + name)
            return True
        return call_id in self.answerable or (not call_id and "name:" + name in self.answerable)

    def _open(self) -> _Turn:
        results, prior = self._take_results()
        if self.request is None:
            turn = _Turn(b"{}", skipped="the session's setup was sent before tooltap followed it")
        else:
            body = dumps(self.request | {"functionResponses": results}).encode()
            turn = _Turn(body, prior)
        self.held += len(turn.request)  # held until the turn is done, as its events are
        self.turn, self.after_call, self.texts = turn, False, False
        return turn

    def _tool_call(self, message: bytes, calls: list[Any]) -> list[SocketTurn]:
        turn = self.turn or self._open()
        self._add(turn, message)
        self.turn = None
        self.completed += 1
        self.after_call = True
        for call in map(as_dict, calls):
            name = as_str(call.get("name")).strip()
            call_id = as_str(call.get("id"))
            if not name:
                continue
            if not call_id:
                self._unnamed += 1
            key = call_id or f"{name}#{self._unnamed}"
            blocking = name not in self.free and (name in self.blocking or not self.vertex)
            self.owed[key] = _Owed(name, blocking, named=bool(call_id))
            self.owed.move_to_end(key)
            if len(self.owed) > MAX_OPEN:  # forgotten while owed: its response would be no orphan
                forgotten, _ = self.owed.popitem(last=False)
                _remember(self.answerable, forgotten)
        return [self._done(turn)]

    def _content(self, message: bytes, content: Mapping[str, Any]) -> list[SocketTurn]:
        complete = gemini.field(content, "turnComplete") is True
        parts = as_list(gemini.field(gemini.field(content, "modelTurn"), "parts"))
        signs = (
            gemini.field(content, "generationComplete") is True
            or gemini.field(content, "interrupted") is True
        )
        turn = self.turn
        if turn is None:
            if not parts and not signs and not (complete and not self.after_call):
                self.after_call &= not complete  # the end of the model turn that made calls
                return []
            turn = self._open()
        # No rule reads the model's words: one text piece a turn says it spoke, and the rest
        # are not held (as Realtime's text deltas are not).
        text_only = bool(parts) and all(set(as_dict(p)) == {"text"} for p in parts)
        if not (text_only and self.texts and not signs and not complete):
            self._add(turn, message)
        self.texts |= text_only
        if not complete:
            return []
        self.turn = None
        self.completed += 1
        for owed in self.owed.values():  # the model answered the user while a blocking call waited
            owed.went_on |= owed.blocking and owed.prompted
        return [self._done(turn)]


def _remember(table: OrderedDict[str, Any], key: str, value: Any = None) -> None:
    """Add a key, newest last; past MAX_OPEN the oldest is forgotten."""
    table[key] = value
    table.move_to_end(key)
    if len(table) > MAX_OPEN:
        table.popitem(last=False)


Reader = ResponsesSocket | RealtimeSocket | GeminiLiveSocket


def socket_reader(api: Api, url: str, max_turn: int, late: bool = False) -> Reader:
    """The reader for a socket that speaks this API (responses, realtime or gemini_live). Pure."""
    if api == "realtime":
        return RealtimeSocket(url, max_turn, late)
    if api == "gemini_live":
        return GeminiLiveSocket(url, max_turn, late)
    return ResponsesSocket(url, max_turn, late)
