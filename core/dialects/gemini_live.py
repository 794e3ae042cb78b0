"""Google's Gemini Live API: `BidiGenerateContent` over a WebSocket, on the Gemini API
(`/ws/google.ai.generativelanguage.{v1beta,v1alpha}.GenerativeService.BidiGenerateContent`, and
`...BidiGenerateContentConstrained` with ephemeral tokens) and on Vertex AI
(`/ws/google.cloud.aiplatform.v1beta1.LlmBidiService/BidiGenerateContent`).

Realtime's twin, read with Gemini's own readings (tooltap.core.dialects.gemini): one session a
socket, its tools declared once, in the client's first message (`setup`). What is read, and why
(google-genai's live.py and types, the Live API reference):
- Messages are JSON objects named by their one key (`setup`, `clientContent`, `realtimeInput`,
  `toolResponse`; `setupComplete`, `serverContent`, `toolCall`, `toolCallCancellation`,
  `goAway`, `sessionResumptionUpdate`, `usageMetadata`), in camelCase or snake_case (google-genai
  sends `tool_response`), as text or binary frames (Google's servers send binary).
- A turn is the model's output from its first sign (a part, `generationComplete`, `interrupted`)
  to a `toolCall` (the model stops for its calls, as a generateContent response ending in
  functionCall parts does) or to `turnComplete`. A `turnComplete` with nothing before it right
  after a toolCall ends that same model turn: no new turn. Audio is never held (tooltap reads no
  media), so a voice turn opens at its `generationComplete` or `turnComplete`.
- Its calls are `toolCall.functionCalls` (`id`, `name`, `args`): validated against the setup's
  `functionDeclarations`, with Gemini's Schema reading. functionCall parts inside `modelTurn`
  are output, not calls: google-genai runs only toolCall's.
- The setup of the Live API has no function-calling mode (no `toolConfig` in
  BidiGenerateContentSetup, none in google-genai's LiveConnectConfig): a session's tools are
  read as Gemini reads them under AUTO, so none is strict; a `toolConfig` a client sends anyway
  is read as Gemini reads it.
- The loop is read by id, as the API defines it, at the session's scope (GeminiLiveSocket
  follows it): a call is owed a response until one comes, however late; a cancelled call
  (`toolCallCancellation.ids`) is owed nothing; what is still owed when the socket closes is
  judged then (owed_at_close).
- Most session errors come as the server's close, with a code and a reason (1007, 1008, 1011),
  which google-genai raises as an APIError: a server's close with any code but 1000, 1001 or
  1005 is a session error (SocketClose.server_error), as goAway and error messages are.
"""

from __future__ import annotations

import functools
import re
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..errors import ApiError, api_error
from ..hidden import scan
from ..jsontext import dumps, loads
from ..loop import REPAIRS, LoopReport, error_payload
from ..records import Limits, LoopError, ToolResult
from ..shapes import as_dict, as_list, as_str
from ..sockets import (
    HEAD,
    LOST,
    MAX_ITEMS,
    MAX_OPEN,
    HeldTurn,
    SocketClose,
    SocketReader,
    SocketReading,
    SocketTurn,
    remember,
)
from ..turn import Api, Turn
from . import gemini, realtime
from .base import Dialect, Prior, fanout_repairs
from .gemini import field

# The paths' endings, Gemini API then Vertex AI.
SOCKET_PATHS = (
    "GenerativeService.BidiGenerateContent",
    "GenerativeService.BidiGenerateContentConstrained",
    "LlmBidiService/BidiGenerateContent",
)
UNANSWERED = (
    "send a toolResponse with a functionResponse bearing the call's id for every call that "
    "was not cancelled (a failed tool gets one whose response says so): the model answered "
    "later turns without this result, and the session ended without it."
)
AT_CLOSE = (
    "the socket closed while these calls' tools ran, before a response to them: fine for a "
    "hang-up or a resumed session; if the session should have gone on, send each "
    "functionResponse before closing."
)


def recognise(method: str, path: str) -> bool:
    """Never over HTTP: the Live API is read off its WebSocket. Pure."""
    return False


def model_name(setup_model: str) -> str | None:
    """The model a setup names, as the HTTP dialect's path names it: `models/gemini-live-2.5`
    and Vertex's `projects/p/locations/l/publishers/google/models/gemini-live-2.5` are both
    `gemini-live-2.5`. Pure."""
    name = setup_model.rpartition("models/")[2].strip("/")
    return name or None


def session_request(setup: Mapping[str, Any]) -> dict[str, Any]:
    """The session's settings as the generateContent request Gemini's reading takes. Pure.

    No toolConfig reads as AUTO: the Live API documents no other default (the VALIDATED
    default beside built-in tools is generateContent's)."""
    request: dict[str, Any] = {
        "tools": field(setup, "tools"),
        "toolConfig": field(setup, "toolConfig") or {"functionCallingConfig": {"mode": "AUTO"}},
    }
    model = model_name(as_str(setup.get("model")))
    if model:
        request["model"] = model
    config = field(setup, "generationConfig")
    if config is not None:
        request["generationConfig"] = config
    return request


def blocking_names(setup: Mapping[str, Any], vertex: bool) -> tuple[set[str], set[str]]:
    """The declared functions whose calls hold the model until answered, and those that do not
    (`behavior: NON_BLOCKING`). Unset, a declaration blocks on the Gemini API (Behavior's
    default) and not on Vertex AI, where "all function calls are non-blocking by default". Pure.
    """
    blocking: set[str] = set()
    free: set[str] = set()
    for tool in map(as_dict, as_list(field(setup, "tools"))):
        for declaration in map(as_dict, as_list(field(tool, "functionDeclarations"))):
            name = as_str(declaration.get("name")).strip()
            behavior = field(declaration, "behavior")
            if behavior in ("NON_BLOCKING", 2) or (behavior in (None, "UNSPECIFIED", 0) and vertex):
                free.add(name)
            elif name:
                blocking.add(name)
    return blocking, free


# --- the turn --------------------------------------------------------------------------------


def read_turn(request: Mapping[str, Any], response: Mapping[str, Any]) -> Turn:
    """A Live turn, read as the generateContent turn it mirrors, with the session's tools."""
    return replace(gemini.read_turn(request, response), api="gemini_live")


class Assembler(gemini.Assembler):
    """A turn's server messages, folded into the GenerateContentResponse it mirrors: modelTurn
    parts in order, then each toolCall's functionCalls as functionCall parts. The message that
    ends the turn (a toolCall, or turnComplete) gives its finish reason."""

    def __init__(self) -> None:
        super().__init__()
        self.interrupted = False

    def event(self, event: Mapping[str, Any]) -> None:
        if "error" in event:
            self.errors.append(api_error(event))
            return
        content = as_dict(field(event, "serverContent"))
        parts = [
            part
            for part in map(as_dict, as_list(field(field(content, "modelTurn"), "parts")))
            if field(part, "functionCall") is None
        ]
        calls = as_list(field(field(event, "toolCall"), "functionCalls"))
        parts += [{"functionCall": call} for call in calls if isinstance(call, dict)]
        candidate: dict[str, Any] = {"content": {"parts": parts}}
        self.interrupted |= field(content, "interrupted") is True
        if field(event, "toolCall") is not None:
            candidate["finishReason"] = "toolCall"
        elif field(content, "turnComplete") is True:
            candidate["finishReason"] = "interrupted" if self.interrupted else "turnComplete"
        usage = as_dict(field(event, "usageMetadata"))
        chunk: dict[str, Any] = {"candidates": [candidate]}
        if usage:  # Live counts the response's tokens as responseTokenCount
            chunk["usageMetadata"] = {
                "promptTokenCount": field(usage, "promptTokenCount"),
                "candidatesTokenCount": field(usage, "responseTokenCount"),
                "thoughtsTokenCount": field(usage, "thoughtsTokenCount"),
                "cachedContentTokenCount": field(usage, "cachedContentTokenCount"),
            }
        super().event(chunk)


# --- the loop --------------------------------------------------------------------------------


def response_key(response: Mapping[str, Any]) -> str:
    """What a functionResponse names its call by: its id, else (Vertex AI) its name. Pure."""
    return as_str(response.get("id")) or as_str(response.get("name"))


def check_loop(request: Mapping[str, Any], prior: Prior = None) -> LoopReport:
    """The function responses the client sent since the last turn began. Pure.

    prior["answers"] names those that answer a call the session made (by response_key); any
    other is an orphan-result. Without it the session was not followed from its start (or
    resumes one followed elsewhere), so no response can be called an orphan.
    """
    report = LoopReport()
    listed = prior.get("answers") if prior is not None else None
    answers = set(listed) if listed is not None else None
    for index, response in enumerate(map(as_dict, as_list(request.get("functionResponses")))):
        where = f"functionResponses.{index}"
        key = response_key(response)
        if answers is not None and key not in answers:
            report.errors.append(
                LoopError(
                    rule="orphan-result",
                    ids=[key],
                    where=where,
                    repair=REPAIRS["orphan-result"].format(field="id"),
                )
            )
            continue
        said = field(response, "response")
        failed = error_payload(dumps(said))
        report.results.append(
            ToolResult(
                call_id=key, where=where, outcome="error" if failed else "ok", hidden=scan(said)[0]
            )
        )
    return report


def owed_at_close(went_on: Sequence[str], cut_short: Sequence[str], where: str) -> list[LoopError]:
    """The calls still owed a response when the socket closed, as Realtime's are judged: those
    the model went on without (the user said something, and a turn completed, while a blocking
    call waited) are unanswered-call; the rest (a non-blocking call, or a hang-up while a tool
    ran) are unanswered-at-close, which fails no audit by default. Pure."""
    return realtime.owed_at_close(
        went_on, cut_short, where, unanswered=UNANSWERED, at_close=AT_CLOSE
    )


# --- repairs -----------------------------------------------------------------------------------


def format_repairs(
    response: Mapping[str, Any], state: Any, loose: list[tuple[str, Any]], limits: Limits
) -> list[str]:
    """The repair for an output-format state, in the Live API's terms. Pure."""
    if state == "advisory-tools":
        return [
            "validate the tool arguments in your handler: the Live API's setup has no "
            "function-calling mode that holds calls to their schemas."
        ]
    return gemini.format_repairs(response, state, loose, limits)


# --- the hot path: what the proxy holds, from a look at each message --------------------------

_FIRST_KEY = re.compile(rb'\s*\{\s*"([A-Za-z_]{1,60})"\s*:')
# Server content that is only media or a transcription: frequent and, for audio, large.
_MEDIA = re.compile(rb'"inline_?[dD]ata"|[tT]ranscription"')
# The client's realtime input that is media (audio, video, images) rather than text or a signal.
_MEDIA_IN = re.compile(rb'"(?:audio|video|media|media_?[cC]hunks)"')
_ENDS = re.compile(rb'"(?:turn_?[cC]omplete|generation_?[cC]omplete|interrupted)"')
_TURN_ENDS = re.compile(rb'"turn_?[cC]omplete"')
_CALL_PARTS = re.compile(rb'"function_?(?:[cC]all|[rR]esponse)"')
# What the reader uses, by the message's key: the rest (the setup's acknowledgement,
# resumption handles) is never held.
NEEDED = frozenset(
    {"setup", "contextUpdate", "toolResponse", "clientContent", "realtimeInput", "serverContent",
     "toolCall", "toolCallCancellation", "goAway", "usageMetadata", "error"}
)  # fmt: skip


@functools.lru_cache(maxsize=256)  # a message's key is one of a few
def camel(key: str) -> str:
    """A key in camelCase, whichever spelling it came in (`tool_response`). Pure."""
    head, *rest = key.split("_")
    return head + "".join(word.title() for word in rest)


def kind(message: bytes) -> str | None:
    """A message's one key, in camelCase, read from its head; None when it is not found there.
    Pure."""
    match = _FIRST_KEY.match(message, 0, HEAD)
    return None if match is None else camel(match.group(1).decode("ascii"))


def needed(message: bytes, key: str | None) -> bool:
    """Is a message worth holding for inspection? Pure and cheap: it reads the head, and the
    tail of server content, without copying either.

    Client content is held unless it carries media without function parts; realtime input
    only when it is text or a signal (never audio, video or images); server content that is
    media or a transcription only when it also ends a turn (its marker comes last). A message
    whose key is not found in its head is held: the reader decides.
    """
    if key is None:
        return True
    if key not in NEEDED:
        return False
    if key == "clientContent":
        return _MEDIA.search(message, 0, HEAD) is None or _CALL_PARTS.search(message) is not None
    if key == "realtimeInput":
        return _MEDIA_IN.search(message, 0, HEAD) is None
    if key == "serverContent":
        return (
            _MEDIA.search(message, 0, HEAD) is None
            or _ENDS.search(message, max(0, len(message) - HEAD)) is not None
        )
    return True


def ends_turn(message: bytes, key: str | None) -> bool:
    """May a held message end a turn (worth handing over at once)? Pure."""
    if key in ("toolCall", "toolCallCancellation", "goAway", "error", None):
        return True
    return key == "serverContent" and (
        _TURN_ENDS.search(message, 0, HEAD) is not None
        or _TURN_ENDS.search(message, max(0, len(message) - HEAD)) is not None
    )


# --- the socket ---------------------------------------------------------------------------------

# The server messages the reader acts on, by their key.
ROUTED = frozenset({"serverContent", "toolCall", "toolCallCancellation", "goAway", "usageMetadata"})


@dataclass(slots=True)
class _Owed:
    """A Gemini Live call awaiting its response."""

    name: str
    blocking: bool  # the model waits for it (not NON_BLOCKING)
    named: bool  # it came with an id (else it is answered by its name)
    prompted: bool = False  # the client said something since (text, or a turn of its own)
    went_on: bool = False  # ... and the model then completed a turn while it waited
    at: float | None = None  # when the toolCall that made it came


class GeminiLiveSocket(SocketReader):
    """A Gemini Live session: tools from its `setup`, one turn per stretch of model output.

    A turn opens at the model's first sign of output (a part, generationComplete,
    interrupted; a turnComplete that ends a voice turn whose audio tooltap does not hold) and
    ends at a toolCall or at turnComplete; a bare turnComplete right after a toolCall is the end
    of that model turn, not a new one. A turn's request is the session's settings read as
    Gemini's (tooltap.core.dialects.session_request) and the function responses the
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
        self.turn: HeldTurn | None = None
        self.after_call = False  # the last turn ended at a toolCall
        self.texts = False  # the running turn holds a text piece
        self.completed = 0  # turns ended so far
        self.going_away = False  # the server said it would close the socket
        self.asked: float | None = None  # when the client last said something since a turn
        self._unnamed = 0

    def _read(self, message: bytes, from_client: bool) -> list[SocketTurn]:
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
            ((camel(k), v) for k, v in value.items() if camel(k) in ROUTED),
            ("error", value) if isinstance(value.get("error"), dict) else ("", None),
        )
        if key == "serverContent":
            return self._content(message, as_dict(body))
        if key == "toolCall":
            return self._tool_call(message, as_list(gemini.field(body, "functionCalls")))
        if key == "toolCallCancellation":
            for call_id in map(as_str, as_list(gemini.field(body, "ids"))):
                if self.owed.pop(call_id, None) is not None:
                    remember(self.answerable, call_id)
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
        errors = owed_at_close(
            [self._label(k) for k in went_on],
            [self._label(k) for k in cut_short],
            f"the socket's close, after {self.completed} turn(s)",
        )
        report = check_loop({"functionResponses": self.results}, self._prior())
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
        turns = self._drop([self.turn] if self.turn is not None else [], why)
        self.turn = None
        self.skipped["lost"] += len(self.results)
        self._take_results()
        self.held, self.blind = 0, True
        for key in self.owed:
            remember(self.answerable, key)
        self.owed.clear()
        return turns

    def owed_calls(self) -> dict[str, tuple[str, float, str]]:
        return {
            self._label(key): (owed.name, owed.at, "")
            for key, owed in self.owed.items()
            if owed.at is not None
        }

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
            self.request = session_request(setup)
            self.blocking, self.free = blocking_names(setup, self.vertex)
            resumption = as_dict(gemini.field(setup, "sessionResumption"))
            self.blind |= bool(as_str(gemini.field(resumption, "handle")))
            return
        update = gemini.field(value, "contextUpdate")
        if isinstance(update, dict):  # no input of the user's: the tools, if set, are replaced
            tools = gemini.field(update, "tools")
            if isinstance(tools, dict) and self.request is not None:
                listed = {"tools": gemini.field(tools, "tools") or []}
                self.request = self.request | listed
                self.blocking, self.free = blocking_names(listed, self.vertex)
            return
        self.asked = self.now  # the client said something the model may answer
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
                    remember(self.answerable, as_str(call.get("id")))
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
                self.answers.append(response_key(response))

    def _answer(self, response: Mapping[str, Any]) -> bool:
        """Settle the call a response answers; False when it answers none the session made."""
        call_id, name = as_str(response.get("id")), as_str(response.get("name"))
        if call_id in self.owed:
            del self.owed[call_id]
            remember(self.answerable, call_id)
            return True
        unnamed = next((k for k, o in self.owed.items() if not o.named and o.name == name), None)
        if unnamed is not None:
            del self.owed[unnamed]
            remember(self.answerable, "name:" + name)
            return True
        return call_id in self.answerable or (not call_id and "name:" + name in self.answerable)

    def _open(self) -> HeldTurn:
        results, prior = self._take_results()
        if self.request is None:
            turn = HeldTurn(
                b"{}", skipped="the session's setup was sent before tooltap followed it"
            )
        else:
            body = dumps(self.request | {"functionResponses": results}).encode()
            turn = HeldTurn(body, prior)
        # Timed from what the client last said before it (its words, its tool responses), else
        # from the turn's first message (the model spoke first, or to a voice tooltap does not
        # hold).
        turn.started = self.asked if self.asked is not None else self.now
        self.asked = None
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
            self.owed[key] = _Owed(name, blocking, named=bool(call_id), at=self.now)
            self.owed.move_to_end(key)
            if len(self.owed) > MAX_OPEN:  # forgotten while owed: its response would be no orphan
                forgotten, _ = self.owed.popitem(last=False)
                remember(self.answerable, forgotten)
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


DIALECT = Dialect.from_names(
    globals(),
    api="gemini_live",
    finish_reasons=gemini.finish_reasons,
    usage=gemini.usage,
    blockers=gemini.blockers,
    instructions=gemini.instructions,
    state_repairs=fanout_repairs(
        "answer an invalid call with a functionResponse whose response carries an error: the "
        "Live API has no function-calling mode that holds calls to their schemas."
    ),
    parallel_voids_strict=False,
    argument_repair=(
        "answer {calls} with a functionResponse bearing the call's id whose response carries "
        "the error, rather than dropping the call, and keep the raw arguments for the "
        "post-mortem: a blocking call left unanswered holds the model, and the session ends "
        "owing it."
    ),
    socket=SocketReading(
        path=SOCKET_PATHS,
        reader=GeminiLiveSocket,
        needed=needed,
        ends_turn=ends_turn,
        kind=kind,
        binary=True,
    ),
)
