"""Time in `tooltap audit`: each exchange's model time, first token, tokens and tool waits, and
what a recording's exchanges add up to by model.

Only flow files and HAR keep times. JSONL exchanges and VCR cassettes keep none: their
exchanges are counted apart and named, never given a time of 0 (nor are stored responses,
read at audit time). Tokens are the API's own counts, read from any recording that holds the
response.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tooltap.core import Verdict

from ..sinks.timing import seconds
from .inputs import Item

UNTIMED = (
    "none: JSONL exchanges and VCR cassettes record no times, so they have no model time, first "
    "token or tool wait; their tokens are counted"
)


def quantile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank quantile (p95 of 3 values is the largest); None for no values. Pure."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def at(values: list[float], q: float) -> str:
    """A quantile of some times, in seconds."""
    found = quantile(values, q)
    return seconds(found) if found is not None else "unknown"


@dataclass
class Model:
    """One model's exchanges, as the report sums them."""

    durations: list[float] = field(default_factory=list)  # ms, exchanges with a time
    first_tokens: list[float] = field(default_factory=list)  # ms, streams with output
    input_tokens: int | None = None
    output_tokens: int | None = None
    timed_output: tuple[int, float] = (0, 0.0)  # output tokens, and the ms that produced them

    def add(self, v: Verdict) -> None:
        if v.duration_ms is not None:
            self.durations.append(v.duration_ms)
        if v.first_token_ms is not None:
            self.first_tokens.append(v.first_token_ms)
        said_in, said_out = v.usage.get("input_tokens"), v.usage.get("output_tokens")
        if said_in is not None:
            self.input_tokens = (self.input_tokens or 0) + said_in
        if said_out is not None:
            self.output_tokens = (self.output_tokens or 0) + said_out
            if v.duration_ms:
                tokens, ms = self.timed_output
                self.timed_output = (tokens + said_out, ms + v.duration_ms)

    @property
    def per_second(self) -> float | None:
        """Output tokens over the model time of the exchanges that counted both."""
        tokens, ms = self.timed_output
        return tokens / (ms / 1000) if ms else None

    def to_dict(self) -> dict[str, Any]:
        def spread(values: list[float]) -> dict[str, float | None] | None:
            if not values:
                return None
            return {"p50": quantile(values, 0.5), "p95": quantile(values, 0.95),
                    "max": max(values)}  # fmt: skip

        rate = self.per_second
        return {
            "exchanges_timed": len(self.durations),
            "duration_ms": spread(self.durations),
            "first_token_ms": spread(self.first_tokens),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "output_tokens_per_second": round(rate, 1) if rate is not None else None,
        }


@dataclass
class Times:
    """What the audited exchanges say of time, summed for the report's end."""

    models: dict[str, Model] = field(default_factory=dict)
    waits: list[float] = field(default_factory=list)  # ms, each answered call
    late: int = 0
    serial: int = 0  # batches run one call after another
    timed: int = 0  # model exchanges with a time
    untimed: dict[str, int] = field(default_factory=dict)  # exchanges, by recording kept no time

    def add(self, item: Item, v: Verdict) -> None:
        # A recording that keeps no times (a stored response is read now: no time is its own).
        if item.source and item.exchange is not None and item.exchange.request_start is None:
            self.untimed[item.source] = self.untimed.get(item.source, 0) + 1
        self.serial += sum(1 for e in v.loop_errors if e.rule == "serial-execution")
        self.waits += [t.waited_ms for t in v.tool_times]
        self.late += sum(1 for t in v.tool_times if t.late)
        if v.scope != "turn" or v.state is None:  # a finished turn, as the metrics count it
            return
        self.timed += v.duration_ms is not None
        self.models.setdefault(v.model or v.request_model or "unknown", Model()).add(v)

    def text(self) -> list[str]:
        """The summary's lines: by model, the tool waits, serial batches, what kept no time."""
        lines = []
        if self.timed:
            lines.append(f"time: {self.timed} model exchange(s) timed")
        for name, model in sorted(self.models.items()):
            if not model.durations:
                continue
            said = [
                f"model p50 {at(model.durations, 0.5)}",
                f"p95 {at(model.durations, 0.95)}",
            ]
            if model.first_tokens:
                said.append(
                    f"first token p50 {at(model.first_tokens, 0.5)} "
                    f"({len(model.first_tokens)} stream(s))"
                )
            if model.output_tokens is not None:
                said.append(
                    f"{model.input_tokens or 'unknown'} in / {model.output_tokens} out tokens"
                )
            if (rate := model.per_second) is not None:
                said.append(f"{rate:.1f} output tokens/s")
            lines.append(f"  {name} ({len(model.durations)}): " + ", ".join(said))
        if self.waits:
            late = f", {self.late} past the deadline" if self.late else ""
            lines.append(
                f"  tool wait: {len(self.waits)} call(s) answered, p95 "
                f"{at(self.waits, 0.95)}, longest {seconds(max(self.waits))}{late}"
            )
        if self.serial:
            lines.append(f"  batches run one call after another (serial-execution): {self.serial}")
        if self.untimed:
            count = sum(self.untimed.values())
            lines.append(
                f"times: {UNTIMED}. {count} exchange(s) came from such recordings: "
                + ", ".join(self.untimed)
            )
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {
            "timed": self.timed,
            "models": {name: m.to_dict() for name, m in sorted(self.models.items())},
            "tool_waits": {
                "calls": len(self.waits),
                "p95_ms": quantile(self.waits, 0.95),
                "max_ms": max(self.waits, default=None),
                "late": self.late,
            },
            "serial_batches": self.serial,
            "untimed": sum(self.untimed.values()),
            "untimed_sources": self.untimed,
        }
