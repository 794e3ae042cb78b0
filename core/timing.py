"""Where a turn's calls ran, and in what order: a model's calls linked to the MCP tools/call
runs tooltap saw, and whether a batch that could run together ran one call after another.

Agent runtimes name an MCP tool to the model their own way (a prefix, a server's name, characters
replaced) and may fill defaults or drop nulls in the arguments they forward. A link is made
forward from what the server listed, by name under those rules, by arguments equal as a
normalised subset, inside the call's wait, and only when it is the only one; Claude Code's
`_meta` names the model's call outright. A link that is not certain is no link, and a batch whose
every call was not seen to start and end is never said to have run in series. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .arguments import normalised
from .jsontext import dumps, loads
from .loop import REPAIRS
from .records import LoopError

# What runtimes replace in a name (WIRE: Claude Code and the OpenAI Agents SDK; smolagents;
# Microsoft's agent framework), and the separators their prefixes end with.
_NOT_WORD = re.compile(r"[^A-Za-z0-9_-]")
_NOT_IDENTIFIER = re.compile(r"[^0-9A-Za-z_]")
_NOT_AGENT_FRAMEWORK = re.compile(r"[^A-Za-z0-9_.-]")
# Claude Code's exact link: the tool_use id it puts in the tools/call's _meta.
CLAUDE_CODE_CALL = "claudecode/toolUseId"


def milliseconds(seconds: float) -> float:
    """Seconds as the milliseconds a verdict gives, to the microsecond. (round(x, 3) rounds
    through a decimal conversion, a few times the cost, on every timed exchange.) Pure."""
    return round(seconds * 1e6) / 1e3


@dataclass(frozen=True, slots=True)
class Run:
    """An MCP tools/call seen from its request to its result."""

    key: str  # which run: its server's endpoint, session and JSON-RPC id
    tool: str
    arguments: Any  # parsed; None when they did not parse
    started: float
    ended: float
    server: str | None = None  # "name version"
    session: str | None = None  # the MCP session, as logged
    model_call: str | None = None  # the model's call id the client named (Claude Code)
    endpoint: str | None = None  # the server's URL, without its query


@dataclass(frozen=True, slots=True)
class Issued:
    """A model's call, as the linker needs it: its id, tool name, raw arguments, and its wait
    (from the issuing request's start, as a runtime may start a call mid-stream, to its
    answer's arrival)."""

    call_id: str
    name: str
    arguments_raw: str
    asked: float
    answered: float


# Where a request's history holds a model's call: its id under one of these keys, its tool's
# name beside it or in its `function` (Chat, Cohere) or `custom` object.
_CALL_IDS = ("id", "call_id", "toolUseId")
_NAME_HOLDERS = ("function", "custom")


def call_names(request: Any, ids: Collection[str]) -> dict[str, str]:
    """The tool names a request's history gives the calls with these ids (a stateless API sends
    the calls it answers back with its results): each id that one name only goes with. Pure."""
    wanted = set(ids)
    found: dict[str, str] = {}
    doubtful: set[str] = set()
    stack = [request]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        stack.extend(v for v in node.values() if isinstance(v, dict | list))
        for key in _CALL_IDS:
            call_id = node.get(key)
            if not isinstance(call_id, str) or call_id not in wanted:
                continue
            name = _name_of(node)
            if name and found.setdefault(call_id, name) != name:
                doubtful.add(call_id)  # two names for one id: neither is sure
    return {call_id: name for call_id, name in found.items() if call_id not in doubtful}


def _name_of(call: dict[str, Any]) -> str:
    name = call.get("name")
    for holder in _NAME_HOLDERS:
        if not isinstance(name, str) and isinstance(inner := call.get(holder), dict):
            name = inner.get("name")
    return name.strip() if isinstance(name, str) else ""


def names_for(tool: str) -> tuple[set[str], tuple[str, ...]]:
    """The names a runtime may show the model for this MCP tool: exact names, and endings after
    a prefix whose text is the runtime's own (a server's configured name, a user's prefix). Pure.
    """
    exact = {
        tool,
        _NOT_IDENTIFIER.sub("", tool.replace("-", "_")),  # smolagents' Python identifier
        _NOT_AGENT_FRAMEWORK.sub("-", tool),  # Microsoft's agent framework
    }
    sanitised = _NOT_WORD.sub("_", tool)
    # mcp__<server>__<tool> (Claude Code), mcp_<server>__<tool> (the OpenAI Agents SDK), and
    # <prefix>_<tool> (pydantic-ai, LangGraph, Google's ADK, CrewAI lowercased).
    endings = (f"__{sanitised}", f"_{tool}", f"_{_snake(tool)}")
    return exact, endings


def _snake(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def name_matches(model_name: str, tool: str) -> bool:
    """Could the model's name for a call be this MCP tool's, under a runtime's naming? Pure."""
    exact, endings = names_for(tool)
    return model_name in exact or model_name.endswith(endings)


def _within(small: Any, large: Any) -> bool:
    if isinstance(small, dict) and isinstance(large, dict):
        return all(k in large and _within(v, large[k]) for k, v in small.items())
    return bool(small == large)


def arguments_match(model: Any, sent: Any) -> bool:
    """Are the model's arguments and the ones a tools/call sent the same, as a normalised
    subset either way (a runtime fills defaults, or keeps only declared keys)? Pure."""
    a, b = normalised(model), normalised(sent)
    return _within(a, b) or _within(b, a)


def link(batch: Sequence[Issued], runs: Sequence[Run]) -> dict[str, Run]:
    """Each call of a batch to the one run that is its, where that is certain: by Claude Code's
    _meta id, else by name, arguments and the call's wait, as a multiset (identical calls are
    told apart by no one: k of them take k runs, or none). A run claimed by two groups links
    neither. Pure."""
    linked: dict[str, Run] = {}
    if not runs:  # most traffic: no tool ran through tooltap, and no arguments are read
        return linked
    exact = {run.model_call: run for run in runs if run.model_call}
    for call in batch:
        if call.call_id in exact:
            linked[call.call_id] = exact[call.call_id]
    free = [r for r in runs if r.model_call is None and r not in linked.values()]
    groups: dict[tuple[str, str], list[Issued]] = {}
    for call in batch:
        if call.call_id not in linked:
            value, error = loads(call.arguments_raw or "{}")
            key = (call.name, dumps(normalised(value)) if error is None else call.arguments_raw)
            groups.setdefault(key, []).append(call)
    candidates: dict[tuple[str, str], list[Run]] = {}
    for key, calls in groups.items():
        name, arguments = key
        value, error = loads(arguments)
        first = calls[0]
        candidates[key] = [
            run
            for run in free
            if name_matches(name, run.tool)
            and error is None
            and arguments_match(value, run.arguments)
            and first.asked <= run.started
            and run.ended <= first.answered
        ]
    claimed: dict[int, int] = {}
    for found in candidates.values():
        for run in found:
            claimed[id(run)] = claimed.get(id(run), 0) + 1
    for key, calls in groups.items():
        found = sorted(candidates[key], key=lambda r: r.started)
        if len(found) == len(calls) and all(claimed[id(r)] == 1 for r in found):
            linked.update((call.call_id, run) for call, run in zip(calls, found, strict=True))
    return linked


# A client that sends one session's requests one at a time runs a batch its runtime started
# together in series. Who serialised it cannot be seen on the wire (a loop awaiting each call
# looks the same), so the cause is said as the condition it rests on.
ONE_CLIENT = (
    " All of them went {over}: if your runtime starts a batch's calls together, its MCP client "
    "sent them one at a time (the OpenAI Agents SDK's MCPServerStreamableHttp does); give each "
    "call a client or session of its own, or use a client that sends them together."
)
CLAUDE_CODE = (
    " Claude Code runs at the same time only tools its MCP server annotates readOnlyHint: true;"
    " annotate the tools that are."
)


def serial(batch: Sequence[str], runs: Mapping[str, Run], where: str) -> LoopError | None:
    """A batch of two or more calls that all ran where tooltap saw them start and end, and in
    which a call started only once another had completed: the last start is not before the
    first completion. None otherwise: with one start or end unseen, nothing is said. Pure."""
    if len(batch) < 2 or any(call_id not in runs for call_id in batch):
        return None
    ran = [runs[call_id] for call_id in batch]
    if max(r.started for r in ran) < min(r.ended for r in ran):
        return None  # every call was running at one moment: together
    took = max(r.ended for r in ran) - min(r.started for r in ran)
    longest = max(r.ended - r.started for r in ran)
    cause = CLAUDE_CODE if any(r.model_call for r in ran) else _one_client(ran)
    said = (
        f"the batch took {took * 1000:.0f} ms; run together it would have taken about "
        f"{longest * 1000:.0f} ms (its longest call). "
    )
    repair = REPAIRS["serial-execution"]
    return LoopError(
        rule="serial-execution",
        ids=list(batch),
        where=where,
        repair=said + repair[:1].upper() + repair[1:] + cause,
    )


def _one_client(ran: Sequence[Run]) -> str:
    """The one-client cause, where it is possible: every run went to one server endpoint, in
    one session, or in none (the protocol's stateless version names none). Runs in different
    sessions came from different clients, or a client that opens one per call: not it."""
    endpoints = {r.endpoint for r in ran}
    sessions = {r.session for r in ran}
    if len(endpoints) != 1 or None in endpoints or len(sessions) != 1:
        return ""
    over = "over one MCP session" if None not in sessions else "to one MCP server, in no session"
    return ONE_CLIENT.format(over=over)
