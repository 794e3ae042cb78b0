"""The OpenAI Realtime API, over its WebSocket (`.../realtime`): a turn per response.

A Realtime response is read as the Responses turn it mirrors (the same items, the same tools),
with the session's tools. Realtime function tools have no strict mode. The loop, as the API
defines it: a call is owed its output until it arrives, however many requests later, so a
request is never found short of one; what is still owed when the socket closes is judged then
(owed_at_close). RealtimeSocket follows the session.
"""

from __future__ import annotations

import re
from collections import OrderedDict, deque
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from .. import parallel
from ..errors import ApiError, api_error
from ..jsontext import dumps, loads
from ..loop import REPAIRS, LoopReport
from ..records import LoopError
from ..shapes import as_dict, as_list, as_str
from ..sockets import (
    HEAD,
    LOST,
    MAX_ITEMS,
    MAX_LANES,
    MAX_OPEN,
    MAX_WAITING,
    HeldTurn,
    SocketClose,
    SocketReader,
    SocketReading,
    SocketTurn,
    Waiting,
    remember,
)
from ..turn import Api, Turn
from . import responses
from .base import Dialect, Prior

# A Realtime call may be answered several responses later, and nothing is
# refused for want of it: the finding is that the model went on without it.
UNANSWERED = (
    "send a function_call_output with its call_id for every call, as soon as its "
    "tool finishes (a failed tool gets one describing the failure): the model "
    "answered later turns without this result, and the session ended without it."
)


def recognise(method: str, path: str) -> bool:
    """Never over HTTP: Realtime is read off its WebSocket. Pure."""
    return False


def read_turn(request: Mapping[str, Any], response: Mapping[str, Any]) -> Turn:
    """A Realtime response, read as the Responses turn it mirrors (same items, same tools).

    The request is the session's tool settings as tooltap saw them. Realtime
    function tools have no strict mode: a `strict` key there is not honoured,
    so it is not read as one.
    """
    # A call cut off when the response was cancelled (the user spoke over it) never runs:
    # its partial arguments are not the model's answer.
    output = [
        item
        for item in as_list(response.get("output"))
        if not (
            as_dict(item).get("type") == "function_call"
            and as_dict(item).get("status") == "incomplete"
        )
    ]
    read = {k: v for k, v in response.items() if k != "tools"} | {"output": output}
    turn = responses.read_turn(request, read)
    tools = [replace(tool, strict=None) for tool in turn.tools]
    return replace(turn, api="realtime", tools=tools)


class Assembler(responses.Assembler):
    """Realtime server events: the Responses events' names and items, one final event.

    response.done carries the whole response (its status says completed,
    cancelled, failed or incomplete); response.created opens it.
    """

    FINAL: tuple[str, ...] = ("response.done",)
    START: tuple[str, ...] = ("response.created",)


def check_loop(request: Mapping[str, Any], prior: Prior = None) -> LoopReport:
    """The results a request carries, against the calls owed when it was made. Pure.

    The input is the items the client created since it last asked for a response, and the
    calls owed are not owed by this request: they may be answered later.
    """
    return responses.check_loop(
        request, prior, items_from="conversation.item.create", owed_in_this_request=False
    )


def state_repairs(state: Any) -> list[str]:
    """The repair for a parallel/strict state: Realtime tools cannot be strict. Pure."""
    if state == "fanout-no-strict":
        return [
            "Realtime function tools have no strict mode, so no schema guarantee was in place "
            "to lose. Validate the arguments in your handler before running the tool, and "
            "answer an invalid call with a function_call_output that says what was wrong."
        ]
    return parallel.repair_lines(state)


def owed_at_close(
    went_on: Sequence[str],
    cut_short: Sequence[str],
    where: str,
    *,
    unanswered: str = UNANSWERED,
    at_close: str = REPAIRS["unanswered-at-close"],
) -> list[LoopError]:
    """The Realtime calls still owed their output when the socket closed. Pure.

    went_on: calls the conversation went on without (a later response completed
    in it), so the model answered without their results: unanswered-call.
    cut_short: calls whose tools were still running when the session ended, with
    no response after them (a hang-up while a tool ran): unanswered-at-close,
    which is reported and fails no audit by default.
    unanswered, at_close: their repairs, in another API's words (Gemini Live's).
    """
    errors = []
    if went_on:
        errors.append(
            LoopError(rule="unanswered-call", ids=list(went_on), where=where, repair=unanswered)
        )
    if cut_short:
        errors.append(
            LoopError(
                rule="unanswered-at-close",
                ids=list(cut_short),
                where=where,
                repair=at_close,
            )
        )
    return errors


# --- the socket ---------------------------------------------------------------------------------

# The events a turn needs. The rest (audio and text deltas, transcripts, rate limits) is never
# held: over a long socket it is nearly everything.
EVENTS = frozenset(
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
ENDS = frozenset({"response.done", "error"})  # after one, a turn may be complete
# Item types a Realtime client creates that the loop check reads.
_CALL_ITEMS = (b"function_call", b"function_call_output")
_MEDIA = (b'"input_audio"', b'"input_image"', b'"audio"')
_ITEM_TYPE = re.compile(
    rb'"item"\s*:\s*\{\s*(?:"[^"\\]*"\s*:\s*"[^"\\]*"\s*,\s*)*"type"\s*:\s*"([^"\\]{1,100})"'
)


def needed(message: bytes, kind: str | None) -> bool:
    """Is a message worth holding for inspection? Pure, and cheap: it reads the head.

    A message whose type is not its first key is held (the reader decides). An item that
    carries audio or an image is not, unless it may be a call or a result.
    """
    if kind is None:
        return True
    if kind not in EVENTS:
        return False
    if kind == "conversation.item.create":
        head = message[:HEAD]
        item = _ITEM_TYPE.search(head)
        if item is not None:
            return item.group(1) in _CALL_ITEMS
        return not any(m in head for m in _MEDIA)
    return True


def ends_turn(message: bytes, kind: str | None) -> bool:
    """May a held message finish a turn? Pure."""
    return kind in ENDS


class RealtimeSocket(SocketReader):
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
        # When each call was issued, by id (what owed_calls reads, for the calls still owed).
        self.issued: OrderedDict[str, tuple[str, float, str]] = OrderedDict()
        self.waiting: deque[Waiting] = deque()
        self.turns: dict[str, HeldTurn] = {}  # by response id, the responses running

    def _read(self, message: bytes, from_client: bool) -> list[SocketTurn]:
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
                    remember(self.outputs, as_str(value.get("event_id")))
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
                self._owe(HeldTurn(b"", detached=True), response)
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
        turns = self._drop(self.turns.values(), why)
        self.skipped["lost"] += len(self.waiting)
        self.turns, self.waiting, self.items, self.items_size, self.held = {}, deque(), [], 0, 0
        self.known, self.blind = False, True
        self._forget_owed()
        return turns

    def owed_calls(self) -> dict[str, tuple[str, float, str]]:
        # Results written since the last request answer their calls already.
        written = {as_str(item.get("call_id")) for item in self.items}
        return {
            call_id: self.issued[call_id]
            for call_id in self.owed
            if call_id in self.issued and call_id not in written
        }

    def _forget_owed(self) -> None:
        """A result for any call owed may have gone by unseen: none is owed any longer."""
        for call_id in self.owed:
            remember(self.unowed, call_id)
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
            remember(self.unowed, call_id)
        elif kind == "function_call_output":
            if call_id in self.unowed and call_id not in self.owed:
                return
            if len(self.items) >= MAX_ITEMS or self.items_size + size > self.max_turn:
                self.blind = True
                self.skipped["too_many_items"] += 1
                if call_id in self.owed:  # answered, though not kept
                    del self.owed[call_id]
                    remember(self.unowed, call_id)
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
        self.waiting.append(
            Waiting(body, prior=prior, detached=detached, event_id=event_id, at=self.now)
        )
        self.held += len(body)

    def _answered(self, outputs: list[Mapping[str, Any]]) -> None:
        """Calls answered by these results are owed nothing more; another result is not read."""
        for item in outputs:
            call_id = as_str(item.get("call_id"))
            if call_id in self.owed:
                del self.owed[call_id]
                remember(self.unowed, call_id)

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
            create = Waiting(dumps(self.session).encode(), at=self.now)
        turn = HeldTurn(
            create.request,
            create.prior,
            response_id=response_id,
            detached=create.detached,
            started=create.at,
        )
        if not self.known:
            turn.skipped = "the session's tools were set before tooltap followed this socket"
        self.turns[response_id] = turn
        self.held += len(turn.request)  # held until the turn is done, as its events are
        self._add(turn, message)

    def _owe(self, turn: HeldTurn, response: Mapping[str, Any]) -> None:
        """A response finished: its calls are owed a result if it completed in the conversation."""
        items = [
            item
            for item in map(as_dict, as_list(response.get("output")))
            if item.get("type") == "function_call" and as_str(item.get("call_id"))
        ]
        calls = [as_str(item.get("call_id")) for item in items]
        if self.now is not None:  # when each was issued: the overdue watch's
            for item in items:
                self.issued[as_str(item.get("call_id"))] = (
                    as_str(item.get("name")), self.now, turn.response_id
                )  # fmt: skip
            while len(self.issued) > MAX_OPEN:
                self.issued.popitem(last=False)
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
                remember(self.unowed, call_id)
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
            return [
                self._rejection(Waiting(dumps(self.session).encode(), at=self.now), message, event)
            ]
        said = api_error(event)
        code = as_str(error.get("code")) or said.type
        return [
            self._said(
                session_errors=[ApiError(type=code, message=said.message)],
                reason=f"the session sent an error that refused no request: {code}",
            )
        ]


DIALECT = Dialect.from_names(
    globals(),
    api="realtime",
    finish_reasons=responses.finish_reasons,
    instructions=responses.instructions,
    socket=SocketReading(
        path="/realtime", reader=RealtimeSocket, needed=needed, ends_turn=ends_turn
    ),
)
