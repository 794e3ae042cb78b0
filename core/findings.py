"""What counts as a finding: one definition for its name, its key, its message, the log's level
and audit's exit code.

A finding is named: a parallel/strict state, an output-format state, a bad
argument (a client's call or one the provider ran), a tool server's result that
breaks its outputSchema, a tool-loop rule, a rejected request, an error a
session sent that refused nothing, a tool definition that changed, or hidden text in a
definition or a tool result. occurrences() lists each occurrence once, with
what tells it apart (the key a baseline counts, free of ids) and what a report
says of it, so that every reader (log, audit, mitmweb, spans) counts the same.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from . import schema, subsets
from .loop import RULES
from .records import HiddenText, ToolChange
from .verdict import Verdict

STATES = ("strict-void", "strict-at-risk", "fanout-no-strict")
FORMATS = schema.FINDINGS  # advisory-schema, no-schema, advisory-tools
ARGUMENTS = ("argument-parse", "argument-schema")
DEFINITIONS = ("tool-changed", "hidden-text")
NAMES = (
    *STATES,
    *FORMATS,
    *ARGUMENTS,
    "result-schema",
    *RULES,
    "rejected",
    "session-error",
    *DEFINITIONS,
)

# What fails an audit and raises a log line to warning. A strict-at-risk turn
# has not gone wrong yet, and a fan-out without strict never had a guarantee
# to lose: both are reported, neither fails. Nor does a Realtime session that
# closed while a tool ran (a hang-up), nor a session error that refused nothing
# (an empty audio buffer committed is routine in voice sessions), nor a batch whose calls
# ran one after another (only the team knows whether they were independent).
DEFAULT = frozenset(NAMES) - {
    "strict-at-risk",
    "fanout-no-strict",
    "unanswered-at-close",
    "session-error",
    "serial-execution",
}
# Response, call and event ids inside a loop error's `where` (Realtime names the response).
_IDS = re.compile(r"\b(?:resp|call|toolu|msg|chatcmpl|fc|item|event)_[A-Za-z0-9_-]+")


class Finding(NamedTuple):
    """One occurrence of a finding."""

    name: str  # one of NAMES
    detail: str  # what tells it apart, free of ids: a re-recording has new ones
    message: str  # what it is and its repair, in a report's words


def findings(verdict: Verdict) -> list[str]:
    """Every finding in one verdict, a name per occurrence, in report order. Pure."""
    return [finding.name for finding in occurrences(verdict)]


def occurrences(verdict: Verdict) -> list[Finding]:
    """Every finding of one verdict, in report order. Pure.

    The detail is the call names for a state, the tool and the paths for an
    argument or result error, where in the request for a loop rule, the status and
    type for a rejection, the error's type for a session error.
    """
    found: list[Finding] = []
    if verdict.state in STATES:
        client = (c.name for c in verdict.calls if not c.hosted)  # the state is the client's
        repairs = subsets.state_repairs(verdict.api or "", verdict.state)
        said = f"{verdict.detail} Repair: {repairs[0]}" if repairs else str(verdict.detail)
        found.append(Finding(verdict.state, ",".join(sorted(client)), said))
    if verdict.format_state in FORMATS:
        found.append(Finding(verdict.format_state, "", str(verdict.format_detail)))
    for call in verdict.calls:
        named = f"call {call.call_id} ({call.name})"
        if call.parse_error is not None:
            error = call.parse_error
            said = f"{named}: arguments are not JSON: {error.message} at {error.position}"
            found.append(Finding("argument-parse", call.name, said))
        if call.schema_errors:
            paths = ",".join(sorted({e.path for e in call.schema_errors}))
            errors = "; ".join(f"{e.path}: {e.message}" for e in call.schema_errors)
            found.append(Finding("argument-schema", f"{call.name} {paths}", f"{named}: {errors}"))
    names = {call.call_id: call.name for call in verdict.calls}
    for result in verdict.tool_results:
        if result.schema_errors:
            name = result.name or names.get(result.call_id, "")
            paths = ",".join(sorted({e.path for e in result.schema_errors}))
            errors = "; ".join(f"{e.path}: {e.message}" for e in result.schema_errors)
            said = f"result of {result.call_id} ({name}): {errors}"
            found.append(Finding("result-schema", f"{name} {paths}", said))
    for loop_error in verdict.loop_errors:
        said = f"{', '.join(loop_error.ids)} at {loop_error.where}. Repair: {loop_error.repair}"
        found.append(Finding(loop_error.rule, _IDS.sub("<id>", loop_error.where), said))
    if (rejected := verdict.rejected) is not None:
        blockers = "".join(f" Blocker: {b}" for b in rejected.blockers)
        said = f"{rejected.status} {rejected.type}: {rejected.message}{blockers}"
        found.append(Finding("rejected", f"{rejected.status} {rejected.type}", said))
    for session_error in verdict.session_errors:
        said = f"the session said {session_error.type}: {session_error.message}"
        found.append(Finding("session-error", session_error.type, said))
    found.extend(_changed(change) for change in verdict.tool_changes)
    found.extend(_hidden(hidden) for hidden in verdict.hidden_text)
    return found


def _changed(change: ToolChange) -> Finding:
    """A changed definition, keyed by the server (not its endpoint, which a recording moves),
    the tool, the change and the new fingerprint."""
    against = "the lock" if change.against == "lock" else "the first seen"
    prints = f" ({change.before or '-'} -> {change.after or '-'})" if change.before else ""
    announced = ", announced by notifications/tools/list_changed" if change.announced else ""
    said = (
        f"{change.source}: tool {change.tool} {change.change} against {against}{prints}"
        f"{announced}: {'; '.join(change.details)}"
    )
    key = f"{change.server or 'app'} {change.tool} {change.change} {change.after or ''}".strip()
    return Finding("tool-changed", key, said)


def _hidden(hidden: HiddenText) -> Finding:
    """Hidden characters, keyed by where they are (a result's call id is left out)."""
    definition = hidden.part == "definition"
    of = f"the definition of tool {hidden.tool}" if definition else f"the result of {hidden.tool}"
    spelled = f", spelling {hidden.spelled!r}" if hidden.spelled else ""
    said = (
        f"{of} at {hidden.where}: {hidden.count} invisible {hidden.kind} character(s) "
        f"({', '.join(hidden.chars)}) at offset {hidden.at}{spelled}"
    )
    named = f" {hidden.tool}" if hidden.part == "definition" else ""
    return Finding("hidden-text", f"{hidden.part}{named} {hidden.where} {hidden.kind}", said)
