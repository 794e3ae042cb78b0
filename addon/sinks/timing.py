"""A verdict's times in words, as people read them: the audit's text report and tooltap web.

Only what was measured is said: an exchange from a recording that keeps no times says nothing
of them, never 0.
"""

from __future__ import annotations

from tooltap.core import Verdict


def seconds(ms: float) -> str:
    """A time in seconds, to the millisecond under 10 s."""
    return f"{ms / 1000:.3f} s" if ms < 10_000 else f"{ms / 1000:.1f} s"


def tokens(v: Verdict, detail: bool = False) -> str | None:
    """The tokens the API counted: "80 in / 20 out tokens" (detail: the cached and reasoning
    ones among them, where it says)."""
    usage = v.usage
    said = [f"{usage[k]} {w}" for k, w in (("input_tokens", "in"), ("output_tokens", "out"))
            if k in usage]  # fmt: skip
    extra = [f"{usage[k]} {w}" for k, w in (("cached_input_tokens", "cached"),
                                            ("reasoning_tokens", "reasoning")) if k in usage]  # fmt: skip
    if not said:
        return None
    among = f" ({', '.join(extra)})" if extra and detail else ""
    return " / ".join(said) + " tokens" + among


def time_line(v: Verdict) -> str | None:
    """One exchange's times: the model's time, its first token, its tokens, and the wait of the
    calls it answers; None when it carries no time."""
    said = []
    if v.scope == "turn" and v.duration_ms is not None:
        said.append(f"model {seconds(v.duration_ms)}")
        if v.first_token_ms is not None:
            said.append(f"first token {seconds(v.first_token_ms)}")
        if counted := tokens(v):
            said.append(counted)
    if v.tool_wait_ms is not None:
        late = sum(1 for t in v.tool_times if t.late)
        also = f", {late} late" if late else ""
        said.append(
            f"tool wait {seconds(v.tool_wait_ms)} ({len(v.tool_times)} call(s) answered{also})"
        )
    return ", ".join(said) or None
