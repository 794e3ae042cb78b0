"""`tooltap audit`'s report: text, JSON lines, JUnit XML or GitHub workflow commands.

Every finding is reported; those `--fail-on` names, and that a baseline does
not already hold, fail the audit, as does an exposure rate over its budget.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from xml.etree import ElementTree

from tooltap.core import Verdict, parallel, subsets
from tooltap.core.findings import DEFAULT, FORMATS, STATES, occurrences

from ..sinks.timing import time_line
from .budget import Baseline, Key, key_of
from .inputs import Item
from .times import UNTIMED, Times


@dataclass
class Case:
    """One item, for the reports written at the end (JUnit)."""

    item: Item
    failing: list[tuple[str, str]] = field(default_factory=list)  # (finding, what and repair)
    error: str | None = None  # why it could not be read
    not_read: str | None = None  # why no dialect reads it
    seconds: float | None = None  # the exchange's duration, where its recording kept times
    properties: dict[str, str] = field(default_factory=dict)  # its other times and tokens


@dataclass
class Report:
    show_all: bool = False
    format: str = "text"
    out: Any = field(default_factory=lambda: sys.stdout)
    fail_on: frozenset[str] = DEFAULT
    baseline: Baseline | None = None
    max_exposure: float | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)
    read: int = 0
    not_read: Counter[str] = field(default_factory=Counter)  # exchanges no dialect reads, by why
    findings: int = 0  # over the budget: these fail the audit
    baselined: int = 0
    seen: Counter[Key] = field(default_factory=Counter)  # every finding named by --fail-on
    cases: list[Case] = field(default_factory=list)
    over_exposure: bool = False
    times: Times = field(default_factory=Times)

    def line(self, text: str) -> None:
        if self.format == "text":
            print(text, file=self.out)

    def unreadable(self, item: Item, outcome: str = "unreadable") -> None:
        """An item without a verdict: unreadable, or a socket's turn skipped, and why."""
        if self.format == "json":
            print(
                json.dumps({"label": item.label, "outcome": outcome, "reason": item.unreadable}),
                file=self.out,
            )
        elif self.format == "github":
            self._command("warning", f"tooltap: {outcome}", item.unreadable or "", item)
        self.cases.append(Case(item, error=f"{outcome}: {item.unreadable}"))
        self.line(f"{outcome:<19} {item.label}  {item.unreadable}")

    def verdict(self, item: Item, verdict: Verdict) -> None:
        if verdict.outcome == "not_read":
            self._not_read(item, verdict)
            return
        self.read += 1
        label = verdict.response_id or item.label
        if verdict.state is not None:
            self.rows.append({"state": verdict.state, "calls": verdict.call_count})
        failing = []
        for finding in occurrences(verdict):
            if finding.name not in self.fail_on:
                continue
            key = key_of(item, finding)
            self.seen[key] += 1
            if self.baseline is not None and self.baseline.absorbs(key):
                self.baselined += 1
            else:
                failing.append((finding.name, finding.message))
        self.findings += len(failing)
        self.times.add(item, verdict)
        self.cases.append(Case(item, failing, **_timed(verdict)))
        if self.format == "json":
            names = [name for name, _ in failing]
            row = {"label": item.label, "finding": bool(failing), "failing": names}
            print(json.dumps({**row, **verdict.to_dict()}), file=self.out)
        elif self.format == "github":
            for name, message in failing:
                self._command("error", f"tooltap: {name}", f"{label}: {message}", item)
        else:
            self._text(label, verdict)

    def _not_read(self, item: Item, verdict: Verdict) -> None:
        """An exchange no dialect reads: counted by why, a row of its own, never a finding."""
        why = verdict.reason or ""
        self.not_read[why] += 1
        self.cases.append(Case(item, not_read=why))
        if self.format == "json":
            row = {"label": item.label, "finding": False, "failing": []}
            print(json.dumps({**row, **verdict.to_dict()}), file=self.out)
        elif self.show_all:
            self.line(f"{'not read':<19} {item.label}  {why}")

    def _text(self, label: str, v: Verdict) -> None:
        """One verdict as lines: each finding (state, id, detail) with its repairs under it."""
        if v.outcome in ("unparseable", "upstream_error", "client_gone"):
            self.line(f"{v.outcome:<19} {label}  {v.reason}")
        state_repairs = subsets.state_repairs(v.api or "", v.state)
        if v.state in STATES or (self.show_all and v.state):
            self.line(f"{v.state:<19} {label:<14} {v.detail}")
            if v.state == "strict-void":
                self.line(f"  calls: {', '.join(c.name for c in v.calls if not c.hosted)}")
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
        for finding in occurrences(v):
            if finding.name not in (*STATES, *FORMATS):  # said above, with their repairs
                self.line(f"{finding.name:<19} {label}  {finding.message}")
        for result in v.tool_results:
            if result.outcome == "error":
                self.line(f"{'tool-failure':<19} {label}  {result.call_id} at {result.where}")
        for error in v.stream_errors:  # the API's error under a 200: no finding, never unsaid
            self.line(f"{'stream-error':<19} {label}  {error.type}: {error.message}".rstrip())
        if said := time_line(v):
            self.line(f"{'time':<19} {label}  {said}")

    def summary(self) -> None:
        shape = parallel.exposure(row["state"] for row in self.rows)
        rate = shape["rate"]
        over = self.max_exposure is not None and rate is not None and rate > self.max_exposure
        self.over_exposure = over
        budget = f" (budget {self.max_exposure:.1%})" if self.max_exposure is not None else ""
        exposure = (
            "no exposure to report: no turn declared a strict tool with parallel calls left on"
            if rate is None
            else f"exposure {rate:.1%}{budget}: {shape['void']} of {shape['at_risk']} at-risk "
            f"turn(s) fanned out, covering {parallel.unvalidated_calls(self.rows)} argument "
            "object(s) with no guarantee"
        )
        if self.format == "json":
            out = {
                "summary": True,
                "read": self.read,
                "not_read": self.not_read.total(),
                "not_read_by_reason": dict(self.not_read.most_common()),
                "findings": self.findings,
                "baselined": self.baselined,
                "exposure_over_budget": over,
                **shape,
                "unguaranteed_arguments": parallel.unvalidated_calls(self.rows),
                "time": self.times.to_dict(),
            }
            print(json.dumps(out), file=self.out)
            return
        if self.format == "junit":
            self._junit(exposure, over)
            return
        if self.format == "github":
            if over:
                self._command("error", "tooltap: exposure over budget", exposure, None)
            if said := self.times.text():  # before the counts, which stay the last line
                self._command("notice", "tooltap time", "\n".join(said), None)
            self._command("notice", "tooltap audit", self._counts() + "; " + exposure, None)
            return
        if rate is None:
            self.line(
                "no turn in this sample declared a strict tool with parallel calls left on, so there is no exposure to report"
            )
        else:
            self.line(
                f"exposure: {shape['void']} of {shape['at_risk']} at-risk turn(s) fanned out ({rate * 100:.1f}%), "
                f"covering {parallel.unvalidated_calls(self.rows)} argument object(s) with no guarantee"
            )
            if shape["void"] == 0:
                self.line(
                    "  every at-risk turn happened to return one call. That is luck, not configuration: set "
                    "parallel_tool_calls false before it stops being lucky."
                )
            if over:
                self.line(f"  over the budget of {self.max_exposure:.1%}")
        for line in self.times.text():
            self.line(line)
        self.line(self._counts())
        for why, count in self.not_read.most_common():
            self.line(f"  not read: {count} {why}")

    def _counts(self) -> str:
        known = f" ({self.baselined} more in the baseline)" if self.baseline is not None else ""
        unread = f", {self.not_read.total()} not read" if self.not_read else ""
        return f"{self.read} response(s) read{unread}, {self.findings} finding(s){known}"

    def _command(self, level: str, title: str, message: str, item: Item | None) -> None:
        """A GitHub Actions workflow command: an annotation on the file and line, if known."""
        properties = {"title": title}
        if item is not None and item.source:
            properties["file"] = item.source
            if item.line:
                properties["line"] = str(item.line)
        props = ",".join(f"{k}={_escape(v, True)}" for k, v in properties.items())
        print(f"::{level} {props}::{_escape(message)}", file=self.out)

    def _junit(self, exposure: str, over: bool) -> None:
        """One test suite per input file, a test case per exchange; findings are failures."""
        suites: dict[str, ElementTree.Element] = {}
        root = ElementTree.Element("testsuites", name="tooltap audit")
        for case in self.cases:
            source = case.item.source or "tooltap audit"
            suite = suites.get(source)
            if suite is None:
                suite = suites[source] = ElementTree.SubElement(root, "testsuite", name=source)
            attributes = {"classname": source, "name": case.item.label}
            if case.item.source:
                attributes["file"] = case.item.source
            if case.item.line:
                attributes["line"] = str(case.item.line)
            if case.seconds is not None:
                attributes["time"] = f"{case.seconds:.3f}"
            element = ElementTree.SubElement(suite, "testcase", attributes)
            if case.properties:
                properties = ElementTree.SubElement(element, "properties")
                for name, value in case.properties.items():
                    ElementTree.SubElement(properties, "property", name=name, value=value)
            if case.error is not None:
                ElementTree.SubElement(element, "error", message=case.error, type="unreadable")
            elif case.not_read is not None:
                ElementTree.SubElement(element, "skipped", message=f"not read: {case.not_read}")
            elif case.failing:
                failure = ElementTree.SubElement(
                    element,
                    "failure",
                    message=", ".join(name for name, _ in case.failing),
                    type=case.failing[0][0],
                )
                failure.text = "\n".join(f"{name}: {text}" for name, text in case.failing)
        for source, suite in suites.items():
            if source in self.times.untimed:  # said plainly, rather than a time of 0
                properties = ElementTree.Element("properties")
                ElementTree.SubElement(properties, "property", name="tooltap.times",
                                       value=UNTIMED)  # fmt: skip
                suite.insert(0, properties)
        budget = ElementTree.SubElement(root, "testsuite", name="exposure")
        element = ElementTree.SubElement(
            budget, "testcase", classname="exposure", name="exposure rate"
        )
        if over:
            ElementTree.SubElement(element, "failure", message=exposure, type="exposure")
        for suite in root:
            cases = list(suite)
            suite.set("tests", str(len(cases)))
            suite.set("failures", str(sum(1 for c in cases if c.find("failure") is not None)))
            suite.set("errors", str(sum(1 for c in cases if c.find("error") is not None)))
            suite.set("skipped", str(sum(1 for c in cases if c.find("skipped") is not None)))
        for name in ("tests", "failures", "errors", "skipped"):
            root.set(name, str(sum(int(suite.get(name, "0")) for suite in root)))
        ElementTree.indent(root)
        text = ElementTree.tostring(root, encoding="unicode", xml_declaration=True)
        print(text, file=self.out)


def _timed(v: Verdict) -> dict[str, Any]:
    """A JUnit case's time (the exchange's duration) and its other figures, as properties."""
    said: dict[str, Any] = {
        "tooltap.first_token_ms": v.first_token_ms,
        "tooltap.input_tokens": v.usage.get("input_tokens"),
        "tooltap.output_tokens": v.usage.get("output_tokens"),
        "tooltap.tool_wait_ms": v.tool_wait_ms,
    }
    seconds = v.duration_ms / 1000 if v.duration_ms is not None else None
    return {
        "seconds": seconds,
        "properties": {k: f"{value:g}" for k, value in said.items() if value is not None},
    }


def _escape(text: str, property: bool = False) -> str:
    """GitHub's workflow-command escaping; properties also escape `:` and `,`."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if property else text
