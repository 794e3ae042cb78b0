"""Tool-loop integrity: every call answered exactly once, by id (seed 001, WIRE.md E).

A request that carries history shows whether the application ran its tool
loop correctly: each call gets one result matched by id; no result is orphaned
or duplicated; Anthropic wants all results in the single next user message
with tool_result blocks first; results are not empty. Results flagged as errors
are tool failures, the third failure layer, kept apart from bad arguments.

The whole history is checked, but only what is new in this request is
reported (the last model turn and what follows it): history is re-sent on
every turn, and a result counted on every turn is counted many times.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .jsontext import loads
from .shapes import as_dict, as_list, as_str
from .wire import CLIENT_CALL_TYPES, RESULT_TYPES, Api, client_call_id, result_call_ids

MAX_HISTORY = 10_000  # Responses input items walked per request; the work on one is bounded

RULES = (
    "unanswered-call",
    "orphan-result",
    "duplicate-result",
    "split-results",
    "results-not-first",
    "empty-result",
    "unanswered-at-close",
)

_ID_FIELD = {
    "responses": "call_id",
    "chat": "tool_call_id",
    "messages": "tool_use_id",
    "realtime": "call_id",
}

REPAIRS = {
    "unanswered-call": (
        "answer every call with exactly one result carrying its {field}, in the "
        "next request; a tool that failed still gets a result describing the "
        "failure, or the API rejects the request."
    ),
    "orphan-result": (
        "send a result only for a call in the preceding model turn, with the "
        "same {field}; restore the call it answers or drop the result."
    ),
    "duplicate-result": (
        "send one result per {field}: a dispatcher that appends inside a nested "
        "loop duplicates results, and the API rejects them."
    ),
    "split-results": (
        "put every tool_result for one assistant turn into the single next user "
        "message; one message per result teaches the model to stop calling tools "
        "in parallel."
    ),
    "results-not-first": (
        "put the tool_result blocks first in the user message and any text after "
        "them; text before a tool_result is a 400."
    ),
    "empty-result": (
        "send a non-empty result: what the tool returned, or a sentence saying it "
        "returned nothing. Empty content is rejected or misread as a failure."
    ),
    "unanswered-at-close": (
        "the session closed while these calls' tools ran, before any response "
        "followed them: fine for a hang-up; if the session should have gone on, "
        "send each function_call_output before closing."
    ),
}
# A Realtime call may be answered several responses later, and nothing is
# refused for want of it: the finding is that the model went on without it.
REALTIME_UNANSWERED = (
    "send a function_call_output with its call_id for every call, as soon as its "
    "tool finishes (a failed tool gets one describing the failure): the model "
    "answered later turns without this result, and the session ended without it."
)


class LoopError(BaseModel):
    """A tool-loop rule the request broke."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    rule: str
    """One of RULES: unanswered-call, orphan-result, duplicate-result, ..."""
    ids: list[str]
    """The call ids involved."""
    where: str
    """Where in the request: input.3, messages.2.content.1, or previous_response_id ..."""
    repair: str
    """What to change in the application's loop."""


class ToolResult(BaseModel):
    """A tool result the request sent back."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    call_id: str
    """The call it answers."""
    where: str
    """Where in the request."""
    outcome: Literal["ok", "error"]
    """error: flagged as a failure (is_error, or an error payload such as {"ok": false})."""


class LoopReport(BaseModel):
    errors: list[LoopError] = Field(default_factory=list)
    results: list[ToolResult] = Field(default_factory=list)
    unchecked: list[str] = Field(default_factory=list)  # history left out to bound the work


def _text(content: Any) -> str:
    """The text of a result's content: a string, or text parts joined."""
    if isinstance(content, str):
        return content
    return "".join(as_str(as_dict(part).get("text")) for part in as_list(content))


def _empty(content: Any) -> bool:
    return content is None or content in ("", [])


def error_payload(content: Any) -> bool:
    """Does a result's content say the tool failed? Pure.

    Chat and Responses have no is_error flag, so failures are encoded in the
    content, conventionally as a JSON object: {"error": ...}, {"ok": false},
    {"success": false}, {"is_error": true} or {"status": "error"|"failed"}.
    """
    text = _text(content).strip()
    if not text.startswith("{"):
        return False
    body = as_dict(loads(text)[0])  # text that does not parse reads as {}
    if not body:
        return False
    return (
        bool(body.get("error"))
        or body.get("ok") is False
        or body.get("success") is False
        or body.get("is_error") is True
        or body.get("status") in ("error", "failed")
    )


class _Checker:
    """Collects findings, keeping only those at or after the new part of the request."""

    def __init__(self, api: Api, prefix: str, new_from: int) -> None:
        self.api = api
        self.prefix = prefix
        self.new_from = new_from
        self.report = LoopReport()

    def where(self, index: int, block: int | None = None) -> str:
        return f"{self.prefix}.{index}" + ("" if block is None else f".content.{block}")

    def error(self, rule: str, ids: Sequence[str], index: int, where: str | None = None) -> None:
        if index >= self.new_from:
            self.report.errors.append(
                LoopError(
                    rule=rule,
                    ids=list(ids),
                    where=where or self.where(index),
                    repair=REPAIRS[rule].format(field=_ID_FIELD[self.api]),
                )
            )

    def result(self, call_id: str, index: int, failed: bool, where: str) -> None:
        if index >= self.new_from:
            self.report.results.append(
                ToolResult(call_id=call_id, where=where, outcome="error" if failed else "ok")
            )

    def unanswered(self, pending: Mapping[str, int]) -> None:
        by_turn: dict[int, list[str]] = {}
        for call_id, index in pending.items():
            by_turn.setdefault(index, []).append(call_id)
        for index, ids in sorted(by_turn.items()):
            self.error("unanswered-call", ids, index)


def _last_index(items: list[Any], is_model: Any) -> int:
    for index in range(len(items) - 1, -1, -1):
        if is_model(as_dict(items[index])):
            return index
    return 0


def _chat(request: Mapping[str, Any]) -> LoopReport:
    messages = as_list(request.get("messages"))
    new_from = _last_index(messages, lambda m: m.get("role") == "assistant")
    check = _Checker("chat", "messages", new_from)
    pending: dict[str, int] = {}
    answered: set[str] = set()
    # Results answer only the assistant message right before them, so the
    # history before the newest one cannot change what is reported.
    for index in range(new_from, len(messages)):
        message = as_dict(messages[index])
        role = message.get("role")
        if role != "tool":
            # Results must directly follow their assistant message: anything
            # else closes the window.
            check.unanswered(pending)
            pending, answered = {}, set()
            if role == "assistant":
                for call in as_list(message.get("tool_calls")):
                    call_id = as_str(as_dict(call).get("id"))
                    if call_id:
                        pending[call_id] = index
            continue
        call_id = as_str(message.get("tool_call_id"))
        content = message.get("content")
        if _empty(content):
            check.error("empty-result", [call_id], index)
        if not call_id:
            continue
        check.result(call_id, index, error_payload(content), check.where(index))
        if call_id in pending:
            del pending[call_id]
            answered.add(call_id)
        elif call_id in answered:
            check.error("duplicate-result", [call_id], index)
        else:
            check.error("orphan-result", [call_id], index)
    check.unanswered(pending)
    return check.report


# Items the client writes into a Responses input. Anything else (an assistant
# message, reasoning, a call of any kind, a compaction) comes from the model,
# and the newest of those starts the part of the request that is new.
_CLIENT_ITEMS = {
    *RESULT_TYPES,
    "message",
    "item_reference",
    "additional_tools",
    "compaction_trigger",
    "configuration_update",
}
# Results whose content is what the model reads back; only these can be empty.
_TEXT_RESULTS = ("function_call_output", "custom_tool_call_output")


def _is_model_item(item: Mapping[str, Any]) -> bool:
    kind = item.get("type")
    if kind is None or kind == "message":
        return item.get("role") == "assistant"
    return isinstance(kind, str) and kind not in _CLIENT_ITEMS


def _is_reference(item: Mapping[str, Any]) -> bool:
    return item.get("type") == "item_reference" or (
        "type" not in item and "id" in item and "role" not in item
    )


def _responses(
    request: Mapping[str, Any],
    prior: Mapping[str, Sequence[str]] | None,
    api: Api,
) -> LoopReport:
    items = [as_dict(item) for item in as_list(request.get("input"))]
    previous = as_str(request.get("previous_response_id"))
    known_prior = prior.get(previous) if previous and prior is not None else None
    # Calls that live out of view (a conversation on the server, item
    # references, a previous response the proxy did not see, history folded
    # into a compaction item) make an unmatched output unprovable, so orphans
    # are only reported when every call is in view.
    # Outputs may answer calls anywhere earlier, so the whole history is walked,
    # up to MAX_HISTORY items: past that, the oldest are out of view.
    start = max(0, len(items) - MAX_HISTORY)
    blind = (
        start > 0
        or bool(request.get("conversation"))
        or (bool(previous) and known_prior is None)
        or any(_is_reference(item) or item.get("type") == "compaction" for item in items)
    )
    # With previous_response_id, every input item is new. Otherwise the new part
    # starts at the newest model turn: its run of items (reasoning, calls, message).
    new_from = 0 if previous else _last_index(items, _is_model_item)
    while new_from > 0 and _is_model_item(items[new_from - 1]):
        new_from -= 1
    # A Realtime turn's input is the items the client created since it last asked
    # for a response, and its previous response is the socket's latest.
    prefix, asked = (
        ("conversation.item.create", f"response.create after {previous}")
        if api == "realtime"
        else ("input", f"previous_response_id {previous}")
    )
    check = _Checker(api, prefix, new_from)
    # call id -> where calls awaiting a result are (a list: some servers reuse
    # call ids across turns, call_0, call_1); -1 is the previous response.
    pending: dict[str, list[int]] = {call_id: [-1] for call_id in known_prior or ()}
    # The previous response's calls, which some clients re-send in `input` beside
    # previous_response_id: the first copy is that same call, owed one result.
    resent = set(known_prior or ())
    # Calls the provider answers itself (a server tool search, a hosted shell):
    # a result for them is not an orphan, and none is owed.
    answerable: set[str] = set()
    answered: set[str] = set()
    if start:
        check.report.unchecked.append(
            f"the {start} oldest of {len(items)} input items were not checked (the last "
            f"{MAX_HISTORY} were)"
        )
    for index in range(start, len(items)):
        item = items[index]
        kind = as_str(item.get("type"))
        if kind in CLIENT_CALL_TYPES or kind.endswith("_call"):
            call_id = client_call_id(item)
            if call_id in resent:
                resent.discard(call_id)
                waiting = pending.get(call_id)
                if waiting and waiting[0] == -1:
                    waiting[0] = index
            elif call_id:
                pending.setdefault(call_id, []).append(index)
            elif as_str(item.get("call_id")):
                answerable.add(as_str(item.get("call_id")))
            continue
        if kind not in RESULT_TYPES:
            continue
        ids = result_call_ids(item)
        call_id = next((i for i in ids if pending.get(i)), ids[0] if ids else "")
        output = item.get("output")
        if kind in _TEXT_RESULTS and _empty(output):
            check.error("empty-result", [call_id], index)
        if not call_id:
            continue
        check.result(call_id, index, error_payload(output), check.where(index))
        if pending.get(call_id):
            pending[call_id].pop(0)
            answered.add(call_id)
        elif call_id in answerable:
            answerable.discard(call_id)
        elif call_id in answered:
            check.error("duplicate-result", [call_id], index)
        elif not blind:
            check.error("orphan-result", [call_id], index)
    leftover = {call_id: where[0] for call_id, where in pending.items() if where and where[0] >= 0}
    check.unanswered(leftover)
    unanswered_prior = [call_id for call_id, where in pending.items() if where and where[0] < 0]
    # A Realtime call may be answered any number of requests later: what is still
    # owed when the socket closes is judged then (owed_at_close).
    if unanswered_prior and api != "realtime":
        check.error("unanswered-call", unanswered_prior, 0, asked)
    return check.report


def owed_at_close(went_on: Sequence[str], cut_short: Sequence[str], where: str) -> list[LoopError]:
    """The Realtime calls still owed their output when the socket closed. Pure.

    went_on: calls the conversation went on without (a later response completed
    in it), so the model answered without their results: unanswered-call.
    cut_short: calls whose tools were still running when the session ended, with
    no response after them (a hang-up while a tool ran): unanswered-at-close,
    which is reported and fails no audit by default.
    """
    errors = []
    if went_on:
        errors.append(
            LoopError(
                rule="unanswered-call", ids=list(went_on), where=where, repair=REALTIME_UNANSWERED
            )
        )
    if cut_short:
        errors.append(
            LoopError(
                rule="unanswered-at-close",
                ids=list(cut_short),
                where=where,
                repair=REPAIRS["unanswered-at-close"],
            )
        )
    return errors


def _blocks(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [as_dict(block) for block in as_list(message.get("content"))]


def _runs(messages: list[Mapping[str, Any]]) -> list[tuple[Any, list[int]]]:
    """Consecutive messages of one role, as (role, their indices).

    The Messages API combines them into one turn (anthropic-sdk-python,
    MessageCreateParams): assistant [A], assistant [B], user [A, B results] is valid.
    """
    runs: list[tuple[Any, list[int]]] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if runs and runs[-1][0] == role:
            runs[-1][1].append(index)
        else:
            runs.append((role, [index]))
    return runs


def _messages(request: Mapping[str, Any]) -> LoopReport:
    messages = [as_dict(m) for m in as_list(request.get("messages"))]
    runs = _runs(messages)
    newest = next((n for n in range(len(runs) - 1, -1, -1) if runs[n][0] == "assistant"), 0)
    # Results answer only the assistant turn right before them, so the history
    # before the newest one cannot change what is reported.
    runs = runs[newest:]
    check = _Checker("messages", "messages", 0)  # the walk starts at the newest turn
    pending: dict[str, int] = {}
    answered: set[str] = set()
    result_runs: list[list[int]] = []  # the user turns holding results for the open calls

    def close_turn() -> None:
        check.unanswered(pending)
        if len(result_runs) > 1:
            where = ", ".join(check.where(i) for run in result_runs for i in run)
            check.error("split-results", sorted(answered), result_runs[0][0], where)

    for role, indices in runs:
        if role == "assistant":
            close_turn()
            pending, answered, result_runs = {}, set(), []
            for index in indices:
                for block in _blocks(messages[index]):
                    # server_tool_use runs on Anthropic's side and needs no result.
                    if block.get("type") == "tool_use" and as_str(block.get("id")):
                        pending[as_str(block.get("id"))] = index
            continue
        if role != "user":
            continue
        holds_results = False
        for index in indices:
            # Results first is checked per message as sent: whether the API also
            # applies it across messages it merges is not documented, so it is
            # not reported there.
            other_first = False
            for position, block in enumerate(_blocks(messages[index])):
                if block.get("type") != "tool_result":
                    other_first = True
                    continue
                where = check.where(index, position)
                call_id = as_str(block.get("tool_use_id"))
                if other_first:
                    check.error("results-not-first", [call_id], index, where)
                    other_first = False
                if _empty(block.get("content")):
                    check.error("empty-result", [call_id], index, where)
                check.result(call_id, index, block.get("is_error") is True, where)
                if call_id in pending:
                    del pending[call_id]
                    answered.add(call_id)
                    holds_results = True
                elif call_id in answered:
                    check.error("duplicate-result", [call_id], index, where)
                else:
                    check.error("orphan-result", [call_id], index, where)
        if holds_results:
            result_runs.append(indices)
    close_turn()
    return check.report


def check_loop(
    api: Api, request: Any, prior: Mapping[str, Sequence[str]] | None = None
) -> LoopReport:
    """Tool-loop findings and tool results for one request body. Pure."""
    body = as_dict(request)
    if api == "chat":
        return _chat(body)
    if api == "messages":
        return _messages(body)
    return _responses(body, prior, api)
