"""Parallel tool calls void the strict schema guarantee.

OpenAI does not support Structured Outputs alongside parallel function calls,
and parallel_tool_calls defaults to true. A turn that returns more than one
tool call while any tool declares strict: true came back without the guarantee
the parser relies on, and it did so with an HTTP 200.

The functions on dicts take the Responses-API response shape (as
GET /v1/responses/{id} returns it); `classify_turn` reads a Turn of any dialect
(tooltap.core.turn), as inspect does. Both come to `judge`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .shapes import as_dict, as_list
from .turn import Turn

CALL_TYPES = ("function_call", "custom_tool_call")

STATES = (
    "no-tools",
    "no-strict-declared",
    "fanout-no-strict",
    "strict-serialised",
    "strict-void",
    "strict-at-risk",
)

FINDINGS = ("strict-void",)
AT_RISK = ("strict-void", "strict-at-risk")


def _int(value: Any) -> int:
    """Read a count as an int. Pure. Missing and unreadable both mean 0."""
    try:
        return int(value or 0)
    except (TypeError, ValueError, OverflowError):
        return 0


def parse_ids(text: Any) -> list[str]:
    """Response ids out of a plain text file. Pure. Order kept, duplicates dropped.

    Also the guard that stops an arbitrary line of a file becoming a URL path
    segment: anything that is not a plausible response id is discarded rather
    than interpolated into a provider URL.
    """
    out: list[str] = []
    seen: set[str] = set()
    for line in str(text or "").splitlines():
        candidate = line.split("#", 1)[0].strip()
        if not candidate.startswith("resp_"):
            continue
        if not all((ch.isascii() and ch.isalnum()) or ch in "_-" for ch in candidate):
            continue
        if candidate not in seen:
            seen.add(candidate)
            out.append(candidate)
    return out


def tool_name(tool: Any) -> str | None:
    """The function name out of either tool shape. Pure. None when absent."""
    if not isinstance(tool, dict):
        return None
    name = tool.get("name")
    if not name and isinstance(tool.get("function"), dict):
        name = tool["function"].get("name")
    text = str(name or "").strip()
    return text or None


def _named(response: Any) -> tuple[set[str], set[str]]:
    """The named tools declared, and those of them declaring strict: true, in one pass."""
    names: set[str] = set()
    strict: set[str] = set()
    for tool in as_list(as_dict(response).get("tools")):
        name = tool_name(tool)
        if name is None:
            continue
        names.add(name)
        if tool.get("strict") is True or as_dict(tool.get("function")).get("strict") is True:
            strict.add(name)
    return names, strict


def declared_names(response: Any) -> list[str]:
    """Every named tool the request declared. Pure. Sorted."""
    return sorted(_named(response)[0])


def strict_tools(response: Any) -> list[str]:
    """Tools declaring strict: true, in either shape. Pure. Sorted.

    strict false and strict absent are the same thing here and neither counts.
    A note about a voided guarantee has to be certain the guarantee was claimed.
    """
    return sorted(_named(response)[1])


def parallel_allowed(response: Any) -> bool:
    """Could the model return more than one tool call in this turn? Pure.

    An absent parallel_tool_calls is true, and reading it as false is the exact
    mistake that makes this whole class of failure invisible.
    """
    return as_dict(response).get("parallel_tool_calls") is not False


def function_calls(response: Any) -> list[dict[str, str]]:
    """The tool calls in one turn, in order. Pure.

    call_id is kept because half the repair depends on it: a handler keyed on
    call_id cannot double-apply when the same tool is called twice.
    """
    out: list[dict[str, str]] = []
    for item in as_list(as_dict(response).get("output")):
        if not isinstance(item, dict) or item.get("type") not in CALL_TYPES:
            continue
        name = str(item.get("name") or "").strip()
        if name:
            out.append({"name": name, "call_id": str(item.get("call_id") or "")})
    return out


def duplicate_names(calls: Iterable[Any] | None) -> dict[str, int]:
    """Tool names called more than once in one turn. Pure.

    A separate fault with the same trigger. It costs side effects rather than
    correctness, and turning parallel calls off is not the only fix for it.
    """
    counts: dict[str, int] = {}
    for call in calls or []:
        name = str(as_dict(call).get("name") or "")
        if name:
            counts[name] = counts.get(name, 0) + 1
    return {name: n for name, n in counts.items() if n > 1}


def classify(response: Any, *, parallel_voids_strict: bool = True) -> tuple[str, str]:
    """Classify one turn, in the Responses-API shape. Pure. Returns (state, detail).

    The unit is the turn and not the corpus, because the guarantee is voided or
    kept per response and a rate computed over anything else means nothing.

    parallel_voids_strict is False for providers that do not document the
    limitation (Anthropic): a voided guarantee nobody documented is not reported.
    """
    declared, strict = _named(response)
    calls = [c["name"] for c in function_calls(response)]
    return judge(
        len(declared), len(strict), calls, parallel_allowed(response), parallel_voids_strict
    )


def classify_turn(turn: Turn, *, parallel_voids_strict: bool = True) -> tuple[str, str]:
    """classify, reading a Turn: its tools that tool_choice leaves callable, by name (those of a
    provider that holds every call to its schema count as strict), and its client's calls.
    Pure."""
    declared: set[str] = set()
    strict: set[str] = set()
    for tool in turn.callable_tools():
        name = tool.name.strip()
        if name:
            declared.add(name)
            if tool.strict is True or turn.calls_held:
                strict.add(name)
    calls = [name for call in turn.calls if (name := call.name.strip())]
    allowed = turn.parallel_tool_calls is not False
    return judge(len(declared), len(strict), calls, allowed, parallel_voids_strict)


def judge(
    declared: int,
    strict: int,
    calls: list[str],
    parallel_allowed: bool,
    parallel_voids_strict: bool = True,
) -> tuple[str, str]:
    """The state of a turn that declared this many named tools, this many of them strict, and
    returned these calls (by name). Pure. Returns (state, detail)."""
    if not declared:
        return ("no-tools", "no named tools declared in this turn")

    names = ", ".join(calls)  # only shown for two calls or more

    if not strict:
        if len(calls) > 1:
            return (
                "fanout-no-strict",
                f"{len(calls)} function_call item(s) in one turn ({names}) and no tool "
                "declares strict. There was no guarantee to void here: the arguments "
                "were never validated by the API at all, which is a different fault "
                "with a different repair.",
            )
        return (
            "no-strict-declared",
            f"{declared} tool(s) declared, none of them strict. Nothing in this "
            "turn was schema-guaranteed.",
        )

    if not parallel_allowed:
        return (
            "strict-serialised",
            f"strict declared on {strict} tool(s) and parallel_tool_calls is "
            "false. The guarantee holds.",
        )

    if not parallel_voids_strict:
        return (
            "strict-serialised",
            f"strict declared on {strict} tool(s); this provider documents no "
            "conflict between strict tools and parallel calls. The guarantee holds.",
        )

    if len(calls) > 1:
        return (
            "strict-void",
            f"{len(calls)} function_call item(s) in one turn with strict declared and "
            f"parallel_tool_calls left on ({names}). Structured Outputs is not "
            "supported alongside parallel calls, so these argument objects carry no "
            "schema guarantee.",
        )

    return (
        "strict-at-risk",
        f"strict declared on {strict} tool(s) with parallel_tool_calls left on, "
        f"and this turn happened to return {len(calls)} call(s). The configuration "
        "is loaded; it did not fire here.",
    )


def exposure(states: Iterable[Any] | None) -> dict[str, Any]:
    """How often the fan-out that voids the guarantee actually happens. Pure.

    The denominator is turns that were at risk, never all turns: a rate over
    responses that declared no strict tools flatters the number by however much
    unrelated traffic happened to be in the sample. None when nothing was at
    risk, because a rate over an empty denominator invents a number.
    """
    listed = list(states or [])
    at_risk = sum(1 for s in listed if s in AT_RISK)
    void = sum(1 for s in listed if s == "strict-void")
    if at_risk <= 0:
        return {"at_risk": 0, "void": void, "rate": None}
    return {"at_risk": at_risk, "void": void, "rate": void / at_risk}


def unvalidated_calls(rows: Iterable[Any] | None) -> int:
    """Argument objects that came back with no guarantee behind them. Pure.

    Counted only in the turns where the guarantee was actually void. The number
    the parser cares about is objects, not turns.
    """
    return sum(
        _int(as_dict(row).get("calls"))
        for row in rows or []
        if as_dict(row).get("state") == "strict-void"
    )


def repair_lines(state: Any) -> list[str]:
    """The repair for one classified turn. Pure."""
    if state == "strict-void":
        return [
            "set parallel_tool_calls false whenever strict schemas matter. It "
            "defaults to true, which is why this was never a decision anyone made.",
            "if you need the fan-out for latency, drop strict and validate the "
            "arguments yourself. Do not keep a guarantee you know is not held.",
            "key every tool handler on call_id and make it idempotent, so a "
            "duplicate parallel call cannot double-apply.",
        ]
    if state == "strict-at-risk":
        return [
            "this turn was fine and the configuration is not. The same request "
            "shape returns several calls whenever the model decides to, so set "
            "parallel_tool_calls false before it does.",
        ]
    if state == "fanout-no-strict":
        return [
            "no schema guarantee was in place to lose. Validate tool arguments in "
            "your own handler, or declare strict and serialise the calls.",
        ]
    return []


def duplicate_line(duplicates: Mapping[str, int]) -> str | None:
    """The duplicate warning for one turn. Pure. None when there is none."""
    if not duplicates:
        return None
    counts = "; ".join(
        f"{name} called {n} time(s) in one turn" for name, n in sorted(duplicates.items())
    )
    return f"duplicate: {counts}. Handlers keyed on the tool name rather than call_id will double apply."
