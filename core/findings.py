"""What counts as a finding: one definition for the log's level and audit's exit code.

A finding is named: a parallel/strict state, an output-format state, a bad
argument, a tool-loop rule, or a rejected request. Every name a verdict holds
is listed once per occurrence, so a count of findings counts occurrences.
"""

from __future__ import annotations

from . import schema
from .inspection import Verdict
from .loop import RULES

STATES = ("strict-void", "strict-at-risk", "fanout-no-strict")
FORMATS = schema.FINDINGS  # advisory-schema, no-schema, advisory-tools
ARGUMENTS = ("argument-parse", "argument-schema")
NAMES = (*STATES, *FORMATS, *ARGUMENTS, *RULES, "rejected")

# What fails an audit and raises a log line to warning. A strict-at-risk turn
# has not gone wrong yet, and a fan-out without strict never had a guarantee
# to lose: both are reported, neither fails.
DEFAULT = frozenset(NAMES) - {"strict-at-risk", "fanout-no-strict"}


def findings(verdict: Verdict) -> list[str]:
    """Every finding in one verdict, a name per occurrence, in report order. Pure."""
    found: list[str] = []
    if verdict.state in STATES:
        found.append(verdict.state)
    if verdict.format_state in FORMATS:
        found.append(verdict.format_state)
    for call in verdict.calls:
        if call.parse_error is not None:
            found.append("argument-parse")
        if call.schema_errors:
            found.append("argument-schema")
    found.extend(error.rule for error in verdict.loop_errors)
    if verdict.rejected is not None:
        found.append("rejected")
    return found
