"""`tooltap audit`'s report: one line per finding with its repairs, or JSON lines."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any

from tooltap.core import Verdict, parallel, subsets
from tooltap.core.findings import DEFAULT, FORMATS, STATES, findings

from .inputs import Item


@dataclass
class Report:
    show_all: bool
    as_json: bool
    out: Any = field(default_factory=lambda: sys.stdout)
    rows: list[dict[str, Any]] = field(default_factory=list)
    read: int = 0
    findings: int = 0

    def line(self, text: str) -> None:
        if not self.as_json:
            print(text, file=self.out)

    def unreadable(self, item: Item, outcome: str = "unreadable") -> None:
        """An item without a verdict: unreadable, or a socket's turn skipped, and why."""
        if self.as_json:
            print(
                json.dumps({"label": item.label, "outcome": outcome, "reason": item.unreadable}),
                file=self.out,
            )
        self.line(f"{outcome:<19} {item.label}  {item.unreadable}")

    def verdict(self, item: Item, verdict: Verdict) -> None:
        self.read += 1
        label = verdict.response_id or item.label
        if verdict.state is not None:
            self.rows.append({"state": verdict.state, "calls": verdict.call_count})
        found = sum(1 for name in findings(verdict) if name in DEFAULT)
        self.findings += found
        if self.as_json:
            print(
                json.dumps({"label": item.label, "finding": bool(found), **verdict.to_dict()}),
                file=self.out,
            )
        else:
            self._text(label, verdict)

    def _text(self, label: str, v: Verdict) -> None:
        """One verdict as lines: each finding (state, id, detail) with its repairs under it."""
        if v.outcome in ("unparseable", "upstream_error"):
            self.line(f"{v.outcome:<19} {label}  {v.reason}")
        state_repairs = subsets.state_repairs(v.api or "", v.state)
        if v.state in STATES or (self.show_all and v.state):
            self.line(f"{v.state:<19} {label:<14} {v.detail}")
            if v.state == "strict-void":
                self.line(f"  calls: {', '.join(c.name for c in v.calls)}")
            if line := parallel.duplicate_line(v.duplicates):
                self.line(f"  {line}")
            if v.state in ("strict-void", "fanout-no-strict"):
                for repair in state_repairs:
                    self.line(f"  repair: {repair}")
        if v.format_state in FORMATS or (
            v.format_state and (self.show_all or v.format_state == "unknown-format")
        ):
            self.line(f"{v.format_state:<19} {label}  {v.format_detail}")
            if v.format_state in FORMATS:
                for repair in v.repairs:
                    if repair not in state_repairs and not repair.startswith(
                        ("duplicate:", "answer ")
                    ):
                        self.line(f"  repair: {repair}")
        for call in v.calls:
            if call.parse_error is not None:
                self.line(
                    f"{'argument-parse':<19} {label}  call {call.call_id} ({call.name}): {call.parse_error.message} at {call.parse_error.position}"
                )
            if call.schema_errors:
                errors = "; ".join(f"{e.path}: {e.message}" for e in call.schema_errors)
                self.line(
                    f"{'argument-schema':<19} {label}  call {call.call_id} ({call.name}): {errors}"
                )
        for error in v.loop_errors:
            self.line(f"{error.rule:<19} {label}  {', '.join(error.ids)} at {error.where}")
            self.line(f"  repair: {error.repair}")
        for result in v.tool_results:
            if result.outcome == "error":
                self.line(f"{'tool-failure':<19} {label}  {result.call_id} at {result.where}")
        if v.rejected is not None:
            self.line(
                f"{'rejected':<19} {label}  {v.rejected.status} {v.rejected.type}: {v.rejected.message}"
            )
            for blocker in v.rejected.blockers:
                self.line(f"  blocker: {blocker}")

    def summary(self) -> None:
        shape = parallel.exposure(row["state"] for row in self.rows)
        if self.as_json:
            out = {
                "summary": True,
                "read": self.read,
                "findings": self.findings,
                **shape,
                "unguaranteed_arguments": parallel.unvalidated_calls(self.rows),
            }
            print(json.dumps(out), file=self.out)
            return
        if shape["rate"] is None:
            self.line(
                "no turn in this sample declared a strict tool with parallel calls left on, so there is no exposure to report"
            )
        else:
            self.line(
                f"exposure: {shape['void']} of {shape['at_risk']} at-risk turn(s) fanned out ({shape['rate'] * 100:.1f}%), "
                f"covering {parallel.unvalidated_calls(self.rows)} argument object(s) with no guarantee"
            )
            if shape["void"] == 0:
                self.line(
                    "  every at-risk turn happened to return one call. That is luck, not configuration: set "
                    "parallel_tool_calls false before it stops being lucky."
                )
        self.line(f"{self.read} response(s) read, {self.findings} finding(s)")
