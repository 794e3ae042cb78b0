"""Tool-loop integrity: every call answered exactly once, by id.

A request that carries history shows whether the application ran its tool
loop correctly: each call gets one result matched by id; no result is orphaned
or duplicated; Anthropic wants all results in the single next user message
with tool_result blocks first; results are not empty. Results flagged as errors
are tool failures, the third failure layer, kept apart from bad arguments.

The whole history is checked, but only what is new in this request is
reported (the last model turn and what follows it): history is re-sent on
every turn, and a result counted on every turn is counted many times.

Here are the rules and the checker they share (the findings, LoopError and ToolResult, are
records: tooltap.core.records); each dialect (tooltap.core.dialects) reads its own history with
them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .built import builder
from .hidden import scan
from .jsontext import loads
from .records import LoopError, ToolResult
from .shapes import as_dict, as_list, as_str

MAX_HISTORY = 10_000  # history items walked per request; the work on one is bounded

RULES = (
    "unanswered-call",
    "orphan-result",
    "duplicate-result",
    "split-results",
    "results-not-first",
    "empty-result",
    "unanswered-at-close",
    "missing-thought-signature",
    "unlisted-tool",
    "serial-execution",
)

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
    "missing-thought-signature": (
        "send each model content back exactly as it came, parts in order and each "
        "thoughtSignature with its part: Gemini 3 refuses a function call step of the "
        "current turn whose first functionCall part has lost its signature."
    ),
    "unlisted-tool": (
        "call only the tools the server listed in this session (tools/list, every page "
        "by nextCursor), and list them again after notifications/tools/list_changed."
    ),
    "serial-execution": (
        "run a batch's independent calls together (asyncio.gather, a thread pool, your "
        "runtime's parallel tool execution): each waited for the one before it."
    ),
}


# From values the dialects' loop readings typed themselves (core/built.py).
build_error = builder(LoopError)
build_result = builder(ToolResult)


@dataclass(slots=True, init=False)
class LoopReport:
    errors: list[LoopError]
    results: list[ToolResult]
    unchecked: list[str]  # history left out to bound the work

    # Written out, not generated: compiled (setup.py), a dataclass's generated __init__ stays
    # interpreted, and every request makes a report.
    def __init__(
        self,
        errors: list[LoopError] | None = None,
        results: list[ToolResult] | None = None,
        unchecked: list[str] | None = None,
    ) -> None:
        self.errors = [] if errors is None else errors
        self.results = [] if results is None else results
        self.unchecked = [] if unchecked is None else unchecked


def _text(content: Any) -> str:
    """The text of a result's content: a string, or text parts joined."""
    if isinstance(content, str):
        return content
    return "".join(as_str(as_dict(part).get("text")) for part in as_list(content))


def is_empty(content: Any) -> bool:
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


class Checker:
    """Collects findings, keeping only those at or after the new part of the request."""

    def __init__(self, field: str, prefix: str, new_from: int) -> None:
        self.field = field  # the key a result names its call by, for the repairs
        self.prefix = prefix
        self.new_from = new_from
        self.report = LoopReport()

    def where(self, index: int, block: int | None = None) -> str:
        return f"{self.prefix}.{index}" + ("" if block is None else f".content.{block}")

    def error(self, rule: str, ids: Sequence[str], index: int, where: str | None = None) -> None:
        if index >= self.new_from:
            self.report.errors.append(
                build_error(
                    rule=rule,
                    ids=list(ids),
                    where=where or self.where(index),
                    repair=REPAIRS[rule].format(field=self.field),
                )
            )

    def result(
        self,
        call_id: str,
        index: int,
        failed: bool,
        where: str,
        content: Any = None,
        *,
        unnamed: str | None = None,
    ) -> None:
        """A result; unnamed: the call it answers, when its API gave that call no id
        (arguments.unnamed_call)."""
        if index >= self.new_from:
            hidden, _ = scan(content)
            outcome: Literal["ok", "error"] = "error" if failed else "ok"
            self.report.results.append(
                build_result(
                    call_id=call_id, where=where, outcome=outcome, hidden=hidden, unnamed=unnamed
                )
            )

    def unanswered(self, pending: Mapping[str, int]) -> None:
        if not pending:
            return
        by_turn: dict[int, list[str]] = {}
        for call_id, index in pending.items():
            by_turn.setdefault(index, []).append(call_id)
        for index, ids in sorted(by_turn.items()):
            self.error("unanswered-call", ids, index)


def last_index(items: list[Any], is_model: Any) -> int:
    for index in range(len(items) - 1, -1, -1):
        if is_model(as_dict(items[index])):
            return index
    return 0
