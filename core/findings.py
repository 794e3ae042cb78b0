"""What counts as a finding: one definition for the log's level and audit's exit code.

A finding is named: a parallel/strict state, an output-format state, a bad
argument, a tool server's result that breaks its outputSchema, a tool-loop rule,
or a rejected request. Every name a verdict holds
is listed once per occurrence, so a count of findings counts occurrences.
"""

from __future__ import annotations

import re

from . import schema
from .inspection import Verdict
from .loop import RULES

STATES = ("strict-void", "strict-at-risk", "fanout-no-strict")
FORMATS = schema.FINDINGS  # advisory-schema, no-schema, advisory-tools
ARGUMENTS = ("argument-parse", "argument-schema")
NAMES = (*STATES, *FORMATS, *ARGUMENTS, "result-schema", *RULES, "rejected", "session-error")

# What fails an audit and raises a log line to warning. A strict-at-risk turn
# has not gone wrong yet, and a fan-out without strict never had a guarantee
# to lose: both are reported, neither fails. Nor does a Realtime session that
# closed while a tool ran (a hang-up), nor a session error that refused nothing
# (an empty audio buffer committed is routine in voice sessions).
DEFAULT = frozenset(NAMES) - {
    "strict-at-risk",
    "fanout-no-strict",
    "unanswered-at-close",
    "session-error",
}
# Response, call and event ids inside a loop error's `where` (Realtime names the response).
_IDS = re.compile(r"\b(?:resp|call|toolu|msg|chatcmpl|fc|item|event)_[A-Za-z0-9_-]+")


def findings(verdict: Verdict) -> list[str]:
    """Every finding in one verdict, a name per occurrence, in report order. Pure."""
    return [name for name, _ in occurrences(verdict)]


def occurrences(verdict: Verdict) -> list[tuple[str, str]]:
    """Every finding with what tells it apart, free of ids (a re-recording has new ones). Pure.

    The detail is the call names for a state, the tool and the paths for an
    argument or result error, where in the request for a loop rule, the status and
    type for a rejection.
    """
    found: list[tuple[str, str]] = []
    if verdict.state in STATES:
        found.append((verdict.state, ",".join(sorted(c.name for c in verdict.calls))))
    if verdict.format_state in FORMATS:
        found.append((verdict.format_state, ""))
    for call in verdict.calls:
        if call.parse_error is not None:
            found.append(("argument-parse", call.name))
        if call.schema_errors:
            paths = ",".join(sorted({e.path for e in call.schema_errors}))
            found.append(("argument-schema", f"{call.name} {paths}"))
    names = {call.call_id: call.name for call in verdict.calls}
    for result in verdict.tool_results:
        if result.schema_errors:
            paths = ",".join(sorted({e.path for e in result.schema_errors}))
            found.append(("result-schema", f"{names.get(result.call_id, '')} {paths}"))
    found.extend((error.rule, _IDS.sub("<id>", error.where)) for error in verdict.loop_errors)
    if verdict.rejected is not None:
        found.append(("rejected", f"{verdict.rejected.status} {verdict.rejected.type}"))
    found.extend(("session-error", error.type) for error in verdict.session_errors)
    return found
