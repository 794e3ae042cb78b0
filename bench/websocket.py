"""Benchmark: the latency each proxy adds to the messages of a WebSocket.

One socket per run carries one Responses WebSocket-mode turn of 1,000 small
events: the client sends `response.create`, the upstream answers with
response.created, 997 deltas and response.completed. Two kinds of turn:

- text       the deltas are output_text deltas: tooltap looks at each head and
             holds none of them;
- arguments  the deltas are function_call_arguments deltas: tooltap holds every
             one and hands them to its inspector in batches (its most work).

The upstream runs in this process, on the client's event loop, so the send
and receive clocks are one perf_counter: a message's delay is when the client
had it minus when the upstream sent it. Paced: one event every 2 ms (a fast
token stream). Burst: all 1,000 back to back, timed from the first send to the
last receipt. Targets take turns, run by run: direct (no proxy), plain
mitmdump, tooltap run (reverse mode, defaults).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve

from . import targets
from .sizes import Size
from .stats import median, pct

EVENTS: dict[Size, int] = {"full": 1_000, "quick": 1_000, "smoke": 50}  # per turn
ROUNDS: dict[Size, int] = {"full": 5, "quick": 2, "smoke": 1}
GAP = 0.002
KINDS = ("text", "arguments")
NAMES = ("direct", "mitmdump", "tooltap")


def turn(kind: str, number: int, count: int) -> list[str]:
    """One turn's events, as WebSocket mode sends them (compact JSON, type first)."""
    response_id = f"resp_bench{number:06d}"
    item = (
        {"id": "fc_bench", "type": "function_call", "status": "in_progress", "arguments": "",
         "call_id": "call_bench", "name": "get_weather"}
        if kind == "arguments"
        else {"id": "msg_bench", "type": "message", "status": "in_progress", "role": "assistant",
              "content": []}
    )  # fmt: skip
    delta = (
        {"type": "response.function_call_arguments.delta", "item_id": "fc_bench",
         "output_index": 0, "delta": "aa"}
        if kind == "arguments"
        else {"type": "response.output_text.delta", "item_id": "msg_bench", "output_index": 0,
              "content_index": 0, "delta": "aa"}
    )  # fmt: skip
    response = {"id": response_id, "object": "response", "status": "in_progress",
                "model": "gpt-5.1", "output": [], "parallel_tool_calls": True,
                "tools": [{"type": "function", "name": "get_weather", "strict": True,
                           "parameters": {"type": "object", "properties": {},
                                          "additionalProperties": False}}]}  # fmt: skip
    done_item = item | {"status": "completed"}
    if kind == "arguments":
        done_item["arguments"] = "a" * 2 * (count - 3)
    events = [{"type": "response.created", "response": response}]
    events += [delta | {"sequence_number": n} for n in range(1, count - 2)]
    events[1] = {"type": "response.output_item.added", "output_index": 0, "item": item}
    events.append({"type": "response.output_item.done", "output_index": 0, "item": done_item})
    events.append(
        {"type": "response.completed",
         "response": response | {"status": "completed", "output": [done_item]}}
    )  # fmt: skip
    return [json.dumps(e, separators=(",", ":")) for e in events]


class Upstream:
    """Answers each response.create with the next scripted turn; records send times."""

    def __init__(self) -> None:
        self.plan: list[str] = []
        self.gap = 0.0
        self.sent: list[float] = []

    async def handle(self, ws: ServerConnection) -> None:
        async for _ in ws:
            self.sent = []
            for event in self.plan:
                self.sent.append(time.perf_counter())
                await ws.send(event)
                if self.gap:
                    await asyncio.sleep(self.gap)


async def one_socket(url: str, upstream: Upstream, plan: list[str], gap: float) -> dict[str, Any]:
    upstream.plan, upstream.gap = plan, gap
    received: list[float] = []
    ws_url = url.replace("http://", "ws://", 1) + "/v1/responses"
    async with connect(ws_url, max_size=None, compression=None, proxy=None) as ws:
        await ws.send(json.dumps({"type": "response.create", "model": "gpt-5.1", "input": "hi"}))
        for _ in plan:
            await asyncio.wait_for(ws.recv(), 15)
            received.append(time.perf_counter())
    delays = [(r - s) * 1e3 for r, s in zip(received, upstream.sent, strict=True)]
    return {
        "delay_p50_ms": median(delays),
        "delay_p99_ms": pct(delays, 99),
        "total_ms": (received[-1] - upstream.sent[0]) * 1e3,
    }


async def run(size: Size) -> dict[str, Any]:
    rounds, count = ROUNDS[size], EVENTS[size]
    upstream = Upstream()
    server = await serve(upstream.handle, "127.0.0.1", 0, max_size=None, compression=None)
    port = server.sockets[0].getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    runs: list[dict[str, Any]] = []
    mitmdump, tooltap = targets.mitmdump(url), targets.tooltap(url)
    try:
        await asyncio.to_thread(mitmdump.start)
        await asyncio.to_thread(tooltap.start)
        where = {"direct": url, "mitmdump": mitmdump.url, "tooltap": tooltap.url}
        number = 0
        for round_number in range(rounds):
            for kind in KINDS:
                for pace, gap in (("paced", GAP), ("burst", 0.0)):
                    for name in NAMES:
                        number += 1
                        plan = turn(kind, number, count)
                        row = await one_socket(where[name], upstream, plan, gap)
                        runs.append({"round": round_number, "kind": kind, "pace": pace,
                                     "target": name} | row)  # fmt: skip
        turns = await asyncio.to_thread(tooltap.wait_turns, number // len(NAMES))
    finally:
        await asyncio.to_thread(tooltap.stop)
        await asyncio.to_thread(mitmdump.stop)
        server.close()
    return {"events": count, "gap_ms": GAP * 1e3, "rounds": rounds, "turns_inspected": turns,
            "sockets_per_target": number // len(NAMES), "rows": summarize(runs, count)}  # fmt: skip


def summarize(runs: list[dict[str, Any]], count: int) -> dict[str, dict[str, Any]]:
    """Medians over the rounds, per kind, pace and target; tooltap against mitmdump."""
    rows: dict[str, dict[str, Any]] = {}
    for kind in KINDS:
        for pace in ("paced", "burst"):
            row: dict[str, Any] = {}
            for name in NAMES:
                mine = [
                    r for r in runs if (r["kind"], r["pace"], r["target"]) == (kind, pace, name)
                ]
                row[name] = {
                    "delay_p50_ms": round(median([r["delay_p50_ms"] for r in mine]), 3),
                    "delay_p99_ms": round(median([r["delay_p99_ms"] for r in mine]), 3),
                    "per_message_ms": round(median([r["total_ms"] for r in mine]) / count, 4),
                }
            tt, md = row["tooltap"], row["mitmdump"]
            row["added_p50_ms"] = round(tt["delay_p50_ms"] - md["delay_p50_ms"], 3)
            row["added_p99_ms"] = round(tt["delay_p99_ms"] - md["delay_p99_ms"], 3)
            row["added_per_message_ms"] = round(tt["per_message_ms"] - md["per_message_ms"], 4)
            rows[f"{kind} {pace}"] = row
    return rows
