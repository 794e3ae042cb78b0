"""The OpenAI Realtime API, over its WebSocket (`.../realtime`): a turn per response.

A Realtime response is read as the Responses turn it mirrors (the same items, the same tools),
with the session's tools. Realtime function tools have no strict mode. The loop, as the API
defines it: a call is owed its output until it arrives, however many requests later, so a
request is never found short of one; what is still owed when the socket closes is judged then
(owed_at_close). tooltap.core.sockets follows the session and asks these questions of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .. import parallel
from ..loop import REPAIRS, LoopError, LoopReport
from ..shapes import as_dict, as_list
from ..turn import Turn
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
    tools = [tool.model_copy(update={"strict": None}) for tool in turn.tools]
    return turn.model_copy(update={"api": "realtime", "tools": tools})


class Assembler(responses.Assembler):
    """Realtime server events: the Responses events' names and items, one final event.

    response.done carries the whole response (its status says completed,
    cancelled, failed or incomplete); response.created opens it.
    """

    FINAL = ("response.done",)
    START = ("response.created",)


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


DIALECT = Dialect(
    api="realtime",
    recognise=recognise,
    read_turn=read_turn,
    assembler=Assembler,
    check_loop=check_loop,
    finish_reasons=responses.finish_reasons,
    instructions=responses.instructions,
    state_repairs=state_repairs,
    socket_path="/realtime",
)
