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
- The loop is read by id, as the API defines it, at the session's scope (tooltap.core.sockets
  follows it): a call is owed a response until one comes, however late; a cancelled call
  (`toolCallCancellation.ids`) is owed nothing; what is still owed when the socket closes is
  judged then (owed_at_close).
- Most session errors come as the server's close, with a code and a reason (1007, 1008, 1011),
  which google-genai raises as an APIError: a server's close with any code but 1000, 1001 or
  1005 is a session error (tooltap.core.sockets.SocketClose), as goAway and error messages are.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import api_error
from ..hidden import scan
from ..jsontext import dumps
from ..loop import REPAIRS, LoopError, LoopReport, ToolResult, error_payload
from ..schema import Limits
from ..shapes import as_dict, as_list, as_str
from ..turn import Turn
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
    return gemini.read_turn(request, response).model_copy(update={"api": "gemini_live"})


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
HEAD = 256  # bytes of a message looked at to place it
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


DIALECT = Dialect(
    api="gemini_live",
    recognise=recognise,
    read_turn=read_turn,
    assembler=Assembler,
    check_loop=check_loop,
    finish_reasons=gemini.finish_reasons,
    blockers=gemini.blockers,
    instructions=gemini.instructions,
    state_repairs=fanout_repairs(
        "answer an invalid call with a functionResponse whose response carries an error: the "
        "Live API has no function-calling mode that holds calls to their schemas."
    ),
    format_repairs=format_repairs,
    parallel_voids_strict=False,
    argument_repair=(
        "answer {calls} with a functionResponse bearing the call's id whose response carries "
        "the error, rather than dropping the call, and keep the raw arguments for the "
        "post-mortem: a blocking call left unanswered holds the model, and the session ends "
        "owing it."
    ),
    socket_path=SOCKET_PATHS,
)
