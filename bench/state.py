"""Benchmark: the shared state in Redis (`tooltap_state`) against this process's memory.

Two measures, side by side in one run, on loopback with Debian's redis-server:

- the inspector (Inspector.handle: inspect, remember, log, metrics) in this process on a
  Responses chain, a turn that leaves a call and a follow-up with previous_response_id in turn:
  its CPU per exchange, its wall time per exchange (the Redis round trips: time the inspector
  spends, not the flow), and redis-server's own CPU;
- the flow: two `tooltap run` proxies, one with `--state redis://...` and one without, in front
  of one upstream, the same chain sequentially through each, batch by batch in turn: the
  latency a client sees. The store is used by the inspector process only, after the flow.
"""

from __future__ import annotations

import asyncio
import io
import json
import time
from typing import Any

import psutil

from tooltap.addon.handover.record import Record
from tooltap.addon.harness.launch import Proxy, free_port
from tooltap.addon.harness.redis_server import RedisServer
from tooltap.addon.harness.replay import ReplayServer, Reply, Seen
from tooltap.addon.inspection.inspector import Inspector
from tooltap.addon.inspection.state import LocalState, RedisState
from tooltap.addon.sinks.log import LogSink
from tooltap.addon.sinks.metrics import Metrics

from . import bodies, client
from .sizes import Size
from .stats import median, pct

SETTINGS: dict[Size, dict[str, int]] = {
    "full": {"rounds": 7, "exchanges": 3_000, "flows": 400},
    "quick": {"rounds": 3, "exchanges": 500, "flows": 150},
    "smoke": {"rounds": 1, "exchanges": 10, "flows": 4},
}
TOOLS = [{"type": "function", "name": "lookup", "parameters": {"type": "object"}}]
PATH = bodies.RESPONSES_PATH


def request(n: int, run: str) -> bytes:
    """Exchange n of a chain: even, a new turn; odd, the follow-up answering the turn before."""
    body: dict[str, Any] = {"model": "gpt-4o", "tools": TOOLS, "metadata": {"n": f"{run}-{n}"}}
    if n % 2:
        body["previous_response_id"] = f"resp_{run}_{n - 1}"
        body["input"] = [
            {"type": "function_call_output", "call_id": f"call_{n - 1}", "output": "42"}
        ]
    else:
        body["input"] = "look it up"
    return json.dumps(body).encode()


def response(name: str) -> bytes:
    """The reply to request(n, run), named f"{run}-{n}": a call on a new turn, text after."""
    run, _, n = name.rpartition("-")
    output: list[dict[str, Any]] = (
        [{"type": "message", "role": "assistant", "content": [{"type": "output_text"}]}]
        if int(n) % 2
        else [
            {"type": "function_call", "call_id": f"call_{n}", "name": "lookup", "arguments": "{}"}
        ]
    )
    body = {"id": f"resp_{run}_{n}", "status": "completed", "output": output, "tools": TOOLS}
    return json.dumps(body).encode()


def record(n: int, run: str) -> Record:
    return bodies.record("responses", PATH, request(n, run), response(f"{run}-{n}"))


def per_exchange(inspector: Inspector, records: list[Record]) -> tuple[float, float]:
    """(CPU ms, wall ms) per exchange: this process's threads, and the clock."""
    cpu, wall = time.process_time(), time.perf_counter()
    for item in records:
        inspector.handle(item)
    count = len(records)
    return (
        (time.process_time() - cpu) / count * 1e3,
        (time.perf_counter() - wall) / count * 1e3,
    )


def inspector_cost(plan: dict[str, int], redis: RedisServer) -> dict[str, Any]:
    errors = {"count": 0}

    def failed() -> None:
        errors["count"] += 1

    def inspector(state: LocalState | RedisState) -> Inspector:
        return Inspector(LogSink("json", "raw", io.StringIO()), Metrics(), state=state)

    local = inspector(LocalState())
    store = RedisState(redis.url, 3600, failed)
    if not store.answering.wait(10):  # it connects in a thread of its own
        raise RuntimeError(f"redis-server at {redis.url} did not answer")
    shared = inspector(store)
    server = psutil.Process(redis.process.pid) if redis.process is not None else None
    rounds: dict[str, list[float]] = {k: [] for k in ("local", "redis", "local_wall", "redis_wall")}
    redis_cpu: list[float] = []
    warm = [record(n, "warm") for n in range(max(2, plan["exchanges"] // 5))]
    per_exchange(local, warm)
    per_exchange(shared, warm)
    for r in range(plan["rounds"]):
        records = [record(n, f"r{r}") for n in range(plan["exchanges"])]
        cpu, wall = per_exchange(local, records)
        rounds["local"].append(cpu)
        rounds["local_wall"].append(wall)
        before = sum(server.cpu_times()[:2]) if server is not None else 0.0
        cpu, wall = per_exchange(shared, records)
        after = sum(server.cpu_times()[:2]) if server is not None else 0.0
        rounds["redis"].append(cpu)
        rounds["redis_wall"].append(wall)
        redis_cpu.append((after - before) / len(records) * 1e3)
    shared.close()
    found = {k: median(v) for k, v in rounds.items()}
    return {
        **{f"{k}_ms": v for k, v in found.items()},
        "redis_server_cpu_ms": median(redis_cpu),
        "added_cpu_ms": found["redis"] - found["local"],
        "added_wall_ms": found["redis_wall"] - found["local_wall"],
        "ratio": found["redis"] / found["local"] if found["local"] else None,
        "state_errors": errors["count"],
    }


def reply(seen: Seen) -> Reply:
    return Reply(chunks=[response(json.loads(seen.body)["metadata"]["n"])])


async def flow_latency(plan: dict[str, int], redis: RedisServer) -> dict[str, Any]:
    """The same chain through tooltap with and without Redis, batch by batch in turn."""
    with ReplayServer(reply) as upstream:
        proxies = {
            "tooltap": Proxy.tooltap([upstream.url], "--log-format", "json"),
            "tooltap --state redis": Proxy.tooltap(
                [upstream.url], "--log-format", "json", "--state", redis.url
            ),
        }
        try:
            for proxy in proxies.values():
                proxy.start()
            latencies: dict[str, list[float]] = {name: [] for name in proxies}
            errors = dict.fromkeys(proxies, 0)
            sent = 0
            for r in range(plan["rounds"]):
                for index, (name, proxy) in enumerate(proxies.items()):
                    run = f"flow{r}x{index}"
                    batch = await client.run_batch(
                        proxy.url,
                        lambda n, url=proxy.url, run=run: client.build_request(
                            url, PATH, request(n, run)
                        ),
                        plan["flows"],
                        1,
                        expect=lambda answer: answer.status == 200,
                    )
                    latencies[name] += [s * 1e3 for s in batch.latencies]
                    errors[name] += batch.errors
                sent += plan["flows"]
            inspected = {
                name: len(proxy.wait_for("turn", count=sent, timeout=60))
                for name, proxy in proxies.items()
            }
        finally:
            for proxy in proxies.values():
                proxy.stop()
    rows = {
        name: {
            "requests": len(values),
            "errors": errors[name],
            "p50_ms": pct(values, 50),
            "p90_ms": pct(values, 90),
            "p99_ms": pct(values, 99),
            "inspected": inspected[name],
        }
        for name, values in latencies.items()
    }
    plain = rows["tooltap"]["p50_ms"]
    for row in rows.values():
        row["p50_ratio"] = row["p50_ms"] / plain if plain else None
    return rows


def run(size: Size) -> dict[str, Any]:
    plan = SETTINGS[size]
    if RedisServer.missing():
        return {"settings": plan, "skipped": "redis-server is not installed"}
    redis = RedisServer(free_port()).start()
    try:
        inspector = inspector_cost(plan, redis)
        flows = asyncio.run(flow_latency(plan, redis))
    finally:
        redis.stop()
    return {"settings": plan, "inspector": inspector, "flows": flows}


if __name__ == "__main__":
    print(json.dumps(run("quick"), indent=1))
