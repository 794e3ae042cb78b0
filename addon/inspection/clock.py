"""The loop in time: when each call was issued and answered, and where and when it ran.

A model's response hands the application calls; a later request answers them. Each call's issue
time is remembered by its id in the state (shared by replicas), and the answer times it. Where
the calls ran through tooltap (an MCP tools/call), the runs are linked to the calls
(tooltap.core.timing) and a batch that ran one call after another is said. The arguments a link
needs, and the runs themselves, stay in this process, bounded: a follow-up or a run another
replica saw is timed without a link, and no batch is then said to have run in series.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

from tooltap.core import Exchange, Verdict
from tooltap.core.arguments import unnamed_call
from tooltap.core.definitions import endpoint as endpoint_of
from tooltap.core.encoding import DecodeError, decode
from tooltap.core.jsontext import loads
from tooltap.core.shapes import as_dict, as_str, header
from tooltap.core.timing import (
    CLAUDE_CODE_CALL,
    Issued,
    Run,
    call_names,
    link,
    milliseconds,
    serial,
)
from tooltap.core.turn import given_id
from tooltap.core.verdict import make_tool_time

from .state import State

COUNT = 10_000  # model calls kept for a link, runs begun, and runs ended: each, the newest
BYTES = 4 << 20  # ... and the bytes of arguments each of them keeps


class Bounded[V]:
    """Values by key, the newest last: past `count` of them or `size` bytes of their arguments,
    the oldest go (forgetting one only leaves a link unmade)."""

    def __init__(self, count: int = COUNT, size: int = BYTES) -> None:
        self.count, self.size, self.held = count, size, 0
        self._values: OrderedDict[str, tuple[V, int]] = OrderedDict()

    def put(self, key: str, value: V, size: int) -> None:
        replaced = self._values.pop(key, None)
        if replaced is not None:
            self.held -= replaced[1]
        self._values[key] = (value, size)
        self.held += size
        while len(self._values) > self.count or self.held > self.size:
            _, (_, gone) = self._values.popitem(last=False)
            self.held -= gone

    def pop(self, key: str) -> V | None:
        found = self._values.pop(key, None)
        if found is None:
            return None
        self.held -= found[1]
        return found[0]

    def __len__(self) -> int:
        return len(self._values)

    def items(self) -> Iterator[tuple[str, V]]:
        return ((key, value) for key, (value, _) in self._values.items())


# Made for every response that issues calls: the __init__ is written out (a dataclass's generated
# one stays interpreted in the compiled build), and a batch is itself, by identity.
@dataclass(slots=True, init=False, eq=False)
class Batch:
    """A model's calls, as one response issued them together."""

    calls: tuple[str, ...]
    asked: float  # the issuing request's start (a runtime may start a call mid-stream)

    def __init__(self, calls: tuple[str, ...], asked: float) -> None:
        self.calls = calls
        self.asked = asked


# A model's call, kept for a link to its run: its tool, its raw arguments and its batch. A tuple,
# made for every call issued; its arguments go with it when it is answered or forgotten.
Kept = tuple[str, str, Batch]


@dataclass(frozen=True, slots=True)
class Begun:
    """A tools/call whose result has not come yet."""

    tool: str
    arguments_raw: str
    started: float
    server: str | None
    session: str | None
    model_call: str | None
    api: str | None
    endpoint: str  # the server's URL, without its query


class Clock:
    """Tool time for one session of exchanges. Not thread-safe: one owner."""

    def __init__(self, state: State, deadline: float) -> None:
        self.state = state
        self.deadline = deadline
        self.calls: Bounded[Kept] = Bounded()  # model calls, by id
        self.begun: Bounded[Begun] = Bounded()  # tools/calls running, by endpoint and id
        self.runs: Bounded[Run] = Bounded()  # tools/calls that ended, by endpoint and id

    def turn(self, exchange: Exchange, verdict: Verdict) -> None:
        """A model's exchange: the calls it answers, timed (and linked to their runs, and their
        batch judged), then the calls its response issues, remembered."""
        # A call is its id where its API gave one, else its tool and arguments (unnamed).
        results = verdict.tool_results
        arrived = exchange.request_start
        if results and arrived is not None:
            answered = {r.call_id: r.call_id for r in results if given_id(r.call_id)}
            answered |= {r.unnamed: r.call_id for r in results if r.unnamed}
            if answered:
                self._answer(answered, arrived, verdict, exchange)
        issued_at = exchange.response_end
        if issued_at is None or not verdict.calls or verdict.outcome != "inspected":
            return
        calls = {_key(c.call_id, c.name, c.arguments_raw): c for c in verdict.calls if not c.hosted}
        if not calls:
            return
        self.state.issue({key: (c.name, issued_at) for key, c in calls.items()})
        batch = Batch(tuple(calls), arrived if arrived is not None else issued_at)
        for key, c in calls.items():
            self.calls.put(key, (c.name, c.arguments_raw, batch), len(c.arguments_raw))

    def tool(self, endpoint: str, exchange: Exchange, verdict: Verdict) -> None:
        """A tool server's exchange (endpoint: where it went, its session included): its
        tools/calls begin runs, and its results end them."""
        if exchange.request_start is not None:
            named = _model_calls(exchange.request_body)
            for call in verdict.calls:
                begun = Begun(call.name, call.arguments_raw, exchange.request_start,
                              verdict.server, verdict.session, named.get(call.call_id),
                              verdict.api, endpoint_of(exchange.url))  # fmt: skip
                self.begun.put(f"{endpoint} {call.call_id}", begun, len(call.arguments_raw))
        for result in verdict.tool_results:
            key = f"{endpoint} {result.call_id}"
            running = self.begun.pop(key)
            if running is None or exchange.response_end is None:
                continue
            arguments, error = loads(running.arguments_raw)
            run = Run(key, running.tool, arguments if error is None else None, running.started,
                      exchange.response_end, running.server, running.session,
                      running.model_call, running.endpoint)  # fmt: skip
            self.runs.put(key, run, len(running.arguments_raw))

    def _answer(
        self, answered: dict[str, str], arrived: float, verdict: Verdict, exchange: Exchange
    ) -> None:
        """answered: each call's key -> its id as this request names it."""
        taken = self.state.answer(list(answered))
        # Issued on another replica: the tool's name is not shared, but a stateless API's
        # request carries each call it answers, name and all.
        nameless = [key for key, (name, _) in taken.items() if name is None]
        named = _history_names(exchange, nameless) if nameless else {}
        # Runs are linked, and a batch judged, only once some tools/call ended through tooltap:
        # without one, no call links and no batch is said to have run in series.
        linking = bool(self.runs)
        batches: dict[Batch, list[Issued]] = {}
        for key, (name, issued_at) in taken.items():
            waited = max(0.0, arrived - issued_at)
            verdict.tool_times.append(
                make_tool_time(
                    {
                        "call_id": answered[key],
                        "name": name if name is not None else named.get(key),
                        "waited_ms": milliseconds(waited),
                        "late": waited > self.deadline,
                        "issued_at": issued_at,
                        "answered_at": arrived,
                    }
                )
            )
            kept = self.calls.pop(key)
            if kept is not None and linking:
                tool, arguments_raw, batch = kept
                issued = Issued(key, tool, arguments_raw, batch.asked, arrived)
                batches.setdefault(batch, []).append(issued)
        if verdict.tool_times:
            verdict.tool_wait_ms = max(t.waited_ms for t in verdict.tool_times)
        linked: dict[str, Run] = {}
        for batch, calls in batches.items():
            found = link(calls, [run for _, run in self.runs.items()])
            for run in found.values():
                self.runs.pop(run.key)
            linked |= found
            if len(calls) == len(batch.calls):  # the whole batch is answered: judge its order
                where = f"the tools/call runs of the {len(calls)} calls one response issued"
                error = serial(batch.calls, found, where)
                if error is not None:
                    ids = [answered.get(key, key) for key in error.ids]
                    verdict.loop_errors.append(error.model_copy(update={"ids": ids}))
        if not linked:
            return
        ran = {answered.get(key, key): run for key, run in linked.items()}
        verdict.tool_times = [
            t.model_copy(update=_ran(ran[t.call_id])) if t.call_id in ran else t
            for t in verdict.tool_times
        ]

    def running(self) -> Iterator[tuple[str, Begun]]:
        """The tools/calls whose result has not come yet, oldest first."""
        return self.begun.items()


def _key(call_id: str, name: str, arguments_raw: str) -> str:
    """What a call is remembered by: its id, or where its API gave none, its tool and
    arguments."""
    return call_id if given_id(call_id) else unnamed_call(name, arguments_raw)


def _history_names(exchange: Exchange, call_ids: list[str]) -> dict[str, str]:
    """The tool names the request's history gives these calls; none when it cannot be read."""
    try:
        body = decode(exchange.request_body, header(exchange.request_headers, "content-encoding"))
    except DecodeError:
        return {}
    value, error = loads(body)
    return call_names(value, call_ids) if error is None else {}


def _ran(run: Run) -> dict[str, object]:
    return {"ran_ms": milliseconds(run.ended - run.started), "server": run.server}


def _model_calls(body: bytes) -> dict[str, str]:
    """The model's call ids a client named in its tools/calls' _meta (Claude Code), by the
    JSON-RPC id; the body is parsed only when it holds one."""
    if CLAUDE_CODE_CALL.encode() not in body:
        return {}
    value, error = loads(body)
    messages = value if isinstance(value, list) else [value]
    found = {}
    for message in map(as_dict, messages if error is None else []):
        named = as_str(as_dict(as_dict(message.get("params")).get("_meta")).get(CLAUDE_CODE_CALL))
        rpc = message.get("id")
        if named and isinstance(rpc, str | int) and not isinstance(rpc, bool):
            found[str(rpc)] = named
    return found
