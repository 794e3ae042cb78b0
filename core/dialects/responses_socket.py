"""The Responses API's WebSocket mode (`GET .../responses` upgraded): each response.create and
the events that answer it, read as the turns the same requests make over HTTP.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Mapping
from typing import Any

from ..jsontext import loads
from ..shapes import as_dict, as_list, as_str
from ..sockets import (
    LOST,
    MAX_LANES,
    MAX_OPEN,
    MAX_WAITING,
    HeldTurn,
    SocketClose,
    SocketReader,
    SocketReading,
    SocketTurn,
    Waiting,
)
from ..turn import Api
from .responses_items import client_call_id, result_call_ids

# The events a turn needs. The rest (text deltas, rate limits) is never held: over a long socket
# it is nearly everything.
EVENTS = frozenset(
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
# After one of these a turn may be complete: worth handing over at once.
ENDS = frozenset({"response.completed", "response.incomplete", "response.failed", "error"})


def needed(message: bytes, kind: str | None) -> bool:
    """Is a message worth holding for inspection? Its type, read from its head, says; one whose
    type is not its first key is held (the reader decides). Pure."""
    return kind is None or kind in EVENTS


def ends_turn(message: bytes, kind: str | None) -> bool:
    """May a held message finish a turn? Pure."""
    return kind in ENDS


class ResponsesSocket(SocketReader):
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
        self.waiting: dict[str, deque[Waiting]] = {}
        self.active: dict[str, HeldTurn] = {}
        self._late: set[str] | None = set() if late else None  # lanes seen since joining
        # Calls a completed response issued on this socket, not answered on it since:
        # id -> (tool, when, the response). What the overdue watch reads.
        self.owed: OrderedDict[str, tuple[str, float, str]] = OrderedDict()

    def _read(self, message: bytes, from_client: bool) -> list[SocketTurn]:
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
                for item in map(as_dict, as_list(value.get("input"))):
                    # Answered (an output, an approval), or the call itself replayed.
                    for call_id in (as_str(item.get("call_id")), client_call_id(item),
                                    *result_call_ids(item)):  # fmt: skip
                        self.owed.pop(call_id, None)
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
            self._owe(response)
            done.append(self._done(self.active.pop(lane)))
        return done

    def owed_calls(self) -> dict[str, tuple[str, float, str]]:
        return dict(self.owed)

    def _owe(self, response: Mapping[str, Any]) -> None:
        """A completed response's client calls are owed an output, on this socket or another
        request; only the time of each is kept, for the overdue watch."""
        if response.get("status") != "completed" or self.now is None:
            return
        for item in map(as_dict, as_list(response.get("output"))):
            # Every call the client answers: a function's, a computer's, a local shell's, a
            # patch, an approval (named by its tool where it has one, else by its kind).
            call_id = client_call_id(item)
            if call_id:
                name = as_str(item.get("name")) or as_str(item.get("type"))
                self.owed[call_id] = (name, self.now, as_str(response.get("id")))
        while len(self.owed) > MAX_OPEN:
            self.owed.popitem(last=False)

    def close(self, end: SocketClose | None = None) -> list[SocketTurn]:
        """The turns the socket's end cut off, and the requests that never got a response.

        end, the close itself, says nothing more: the Responses API states its errors in
        `error` events."""
        turns = [self._done(turn, cut=not turn.errored) for turn in self.active.values()]
        for queue in self.waiting.values():
            turns += (SocketTurn(self._exchange(c.request, None), cut=True) for c in queue)
        self.active, self.waiting, self.held = {}, {}, 0
        self.owed.clear()
        return turns

    def lost(self, why: str = LOST) -> list[SocketTurn]:
        """Messages went by unread: forget what was in flight rather than misread it."""
        turns = self._drop(self.active.values(), why)
        self.skipped["lost"] += sum(len(q) for q in self.waiting.values())
        self.active, self.waiting, self.held = {}, {}, 0
        self.owed.clear()  # an answer may have gone by unread
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
            create = Waiting(
                b"{}", previous, skipped="the request passed tooltap_max_body", at=self.now
            )
        else:
            create = Waiting(message, previous, at=self.now)
        queue.append(create)
        self.held += len(create.request)

    def _take(self, lane: str, previous: str | None = None) -> Waiting | None:
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
        turn = HeldTurn(
            create.request if create else b"{}",
            response_id=as_str(response.get("id")),
            started=create.at if create else self.now,  # a request, else its first event
        )
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
        return [self._rejection(create or Waiting(b"{}", at=self.now), message, event)]

    def _unreadable(self, message: bytes, from_client: bool) -> list[SocketTurn]:
        """Not a JSON object: a server's goes to its turn (read there as a malformed
        event) when only one turn runs; anything else is counted and dropped."""
        if not from_client and len(self.active) == 1:
            self._add(next(iter(self.active.values())), message)
        else:
            self.skipped["not_json"] += 1
        return []


SOCKET = SocketReading(
    path="/responses", reader=ResponsesSocket, needed=needed, ends_turn=ends_turn
)
