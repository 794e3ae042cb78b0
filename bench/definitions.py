"""Benchmark: what reading tool definitions costs per exchange, against the same exchange
without it.

The inspector (Inspector.handle: inspect, the pins, log, metrics) runs in this process on two
exchanges as the proxy hands them over: the chat JSON turn (three strict tools declared, a
history round of three results) and an MCP tools/list answering twenty tools. "Without" is the
same code with the definitions' reading replaced by no-ops (the fingerprints, the hidden-text
scans of definitions and results, and so the pins' work): the difference is what fingerprinting
costs. With and without take turns, in many short rounds, in one run; each is its fastest round
(on a shared machine a slower round measured a neighbour, not tooltap). Beside it, the
definitions' own work timed alone on the same exchange (fingerprints, hidden-text scan, pins),
which a busy neighbour disturbs less.
"""

from __future__ import annotations

import contextlib
import io
import json
import time
import timeit
from collections.abc import Iterator
from typing import Any

import orjson

from tooltap.addon.handover.record import Record
from tooltap.addon.inspection.inspector import Inspector
from tooltap.addon.inspection.pins import Pins
from tooltap.addon.sinks.log import LogSink
from tooltap.addon.sinks.metrics import Metrics
from tooltap.core import inspect, inspection, loop
from tooltap.core.definitions import ToolDefinitions, declared_in, hidden_in, served_in
from tooltap.core.dialects import dialect, mcp, responses
from tooltap.core.wire import read_turn

from . import bodies
from .sizes import Size

SETTINGS: dict[Size, dict[str, int]] = {
    "full": {"rounds": 60, "exchanges": 300},
    "quick": {"rounds": 30, "exchanges": 150},
    "smoke": {"rounds": 1, "exchanges": 10},
}
LISTED = 20  # tools in the MCP list


def mcp_tools() -> list[dict[str, Any]]:
    """Twenty tools as servers describe theirs: a paragraph each, a schema of a few fields."""
    return [
        {
            "name": f"tool_{n}",
            "title": f"Tool {n}",
            "description": f"Tool {n} looks up records in the ledger by their key and date range."
            " It returns at most one page; call it again with the cursor for the next."
            " Keys are case sensitive.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "key": {"type": "string", "description": "the record's key"},
                    "from": {"type": "string", "format": "date"},
                    "to": {"type": "string", "format": "date"},
                    "cursor": {"type": "string"},
                },
                "required": ["key"],
            },
            "annotations": {"readOnlyHint": True, "openWorldHint": False},
        }
        for n in range(LISTED)
    ]


def records() -> dict[str, Record]:
    listing = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).encode()
    answer = json.dumps({"jsonrpc": "2.0", "id": 2, "result": {"tools": mcp_tools()}}).encode()
    return {
        "chat turn, 3 tools, 3 results": bodies.record(
            "chat", bodies.CHAT_PATH, bodies.chat_request(), bodies.chat_response()
        ),
        f"MCP tools/list, {LISTED} tools": bodies.record("mcp", "/mcp", listing, answer),
    }


def _no_results_scan(value: Any, where: str = "$") -> tuple[list[Any], int]:
    return [], 0


@contextlib.contextmanager
def without_definitions() -> Iterator[None]:
    """The inspector with the definitions' reading made a no-op, for as long as this lasts."""
    patched = [
        (inspection, "declared_in", lambda *a, **k: ToolDefinitions()),
        (inspection, "served_in", lambda *a, **k: ToolDefinitions()),
        (inspection, "hidden_in", lambda declared: []),
        (loop, "scan", _no_results_scan),
        (mcp, "scan", _no_results_scan),
        (responses, "scan", _no_results_scan),
    ]
    saved = [(module, name, getattr(module, name)) for module, name, _ in patched]
    try:
        for module, name, replacement in patched:
            setattr(module, name, replacement)
        yield
    finally:
        for module, name, original in saved:
            setattr(module, name, original)


def cpu_per_exchange(inspector: Inspector, item: Record, count: int) -> float:
    """CPU ms per exchange, this process's."""
    started = time.process_time()
    for _ in range(count):
        inspector.handle(item)
    return (time.process_time() - started) / count * 1e3


def own_work(item: Record, repeats: int) -> float:
    """The definitions' own work on one exchange, in ms: reading them (fingerprints), scanning
    them for hidden text and checking them against warm pins; the fastest of `repeats` runs."""
    exchange = item.exchange()
    verdict = inspect(exchange)
    request, answer = orjson.loads(exchange.request_body), orjson.loads(exchange.response_body)
    if verdict.api == "mcp":
        served = mcp.serve(request, answer, None)

        def read() -> ToolDefinitions:
            return served_in(served, exchange.url)
    else:
        api = verdict.api or "chat"
        turn = read_turn(api, request, answer)
        said = dialect(api).instructions(request)

        def read() -> ToolDefinitions:
            return declared_in(turn, turn, url=exchange.url, instructions=said)

    pins = Pins()
    pins.check(read())

    def work() -> None:
        found = read()
        hidden_in(found.declared)
        pins.check(found)

    number = 50
    return min(timeit.repeat(work, number=number, repeat=max(1, repeats))) / number * 1e3


def run(size: Size) -> dict[str, Any]:
    plan = SETTINGS[size]
    results: dict[str, Any] = {}
    for name, item in records().items():
        with_ = Inspector(LogSink("json", "raw", io.StringIO()), Metrics())
        without = Inspector(LogSink("json", "raw", io.StringIO()), Metrics())
        cpu_per_exchange(with_, item, plan["exchanges"] // 5)  # warm: validators, pins
        with without_definitions():
            cpu_per_exchange(without, item, plan["exchanges"] // 5)
        rounds: dict[str, list[float]] = {"with": [], "without": []}
        for _ in range(plan["rounds"]):
            rounds["with"].append(cpu_per_exchange(with_, item, plan["exchanges"]))
            with without_definitions():
                rounds["without"].append(cpu_per_exchange(without, item, plan["exchanges"]))
        on, off = min(rounds["with"]), min(rounds["without"])
        results[name] = {
            "with_ms": on,
            "without_ms": off,
            "added_ms": on - off,
            "ratio": on / off if off else None,
            "own_ms": own_work(item, plan["rounds"]),
        }
    return {"settings": plan, "exchanges": results}


if __name__ == "__main__":
    print(json.dumps(run("quick"), indent=1))
