"""Benchmark: the sequential gap taken apart, with the proxy alone on a core of its own.

On two cores the proxy, tooltap's inspector, the bench's client and its upstream share the CPUs,
and where the scheduler puts them, what the inspector spends and what the proxy's hooks spend all
end up in one ratio. Here every thread of the proxy runs on the first CPU alone, and the client,
the upstream and the inspector on the others. In each round, taking turns, on one connection: plain
mitmdump; `tooltap run` with its flow hooks doing nothing (bench/idle_run.py: the shell alone, with
its options, endpoints and idle inspector); `tooltap run` with its inspector stopped (SIGSTOP) for
the batch, so that what is left of the gap is the proxy's own part (the shell, its hooks and the
hand-over: the records wait in the pipe and the backlog, or are counted as dropped once that is
full, and are handled once the inspector goes on); and `tooltap run` itself. Each is a ratio to
plain mitmdump in the same round, beside the proxy's and the inspector's CPU per request and how
often something else took the proxy's core from it (involuntary context switches per request).

    python -m bench --only apart [--quick | --smoke]
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from typing import Any

import psutil

from . import bodies, client, targets
from .sizes import Size
from .stats import median, ratio

SETTINGS: dict[Size, dict[str, int]] = {
    # A stopped inspector is restarted once it handles nothing for 10 s while records wait
    # (tooltap.addon.handover.supervisor): a batch stays well inside that.
    "full": {"rounds": 9, "requests": 1500, "warmup": 300},
    "quick": {"rounds": 3, "requests": 600, "warmup": 150},
    "smoke": {"rounds": 1, "requests": 8, "warmup": 8},
}
VARIANTS = ("mitmdump", "idle", "stopped", "tooltap")


def cores() -> tuple[set[int], set[int]] | None:
    """The proxy's CPU, and the others', from the CPUs this process may use; None with one."""
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        return None
    return {allowed[0]}, set(allowed[1:])


def pin(pid: int, cpus: set[int]) -> None:
    """Every thread of a process onto these CPUs (a thread started later inherits its maker's)."""
    for thread in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(ProcessLookupError):  # a thread may end meanwhile
            os.sched_setaffinity(int(thread), cpus)


@contextlib.contextmanager
def pinned_here(cpus: set[int]) -> Iterator[None]:
    """This thread (the client's event loop, and the reader threads it starts) on these CPUs."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def _inspectors(proxy: psutil.Process) -> list[psutil.Process]:
    return [
        child
        for child in proxy.children(recursive=True)
        if "tooltap.addon.inspection" in " ".join(child.cmdline())
    ]


async def _batch(
    proxy: targets.BenchProxy,
    count: int,
    others: set[int],
    *,
    stop: bool = False,
    inspects: bool = True,
) -> dict[str, Any]:
    """One batch through a proxy pinned as this benchmark has it; stop: with its inspector
    stopped for the batch; inspects: the proxy hands its flows over (it is waited for)."""
    process = psutil.Process(proxy.pid)
    inspectors = _inspectors(process)
    for inspector in inspectors:  # a restarted inspector starts anywhere
        pin(inspector.pid, others)
    raw = client.build_request(proxy.url, bodies.CHAT_PATH, bodies.chat_request())
    before, switches = process.cpu_times(), process.num_ctx_switches().involuntary
    inspected, turns = sum(map(targets.cpu_seconds, inspectors)), proxy.turns
    if stop:
        for inspector in inspectors:
            inspector.send_signal(signal.SIGSTOP)
    try:
        batch = await client.run_batch(
            proxy.url, lambda _n: raw, count, 1, deadline=8.0, expect=lambda r: r.status == 200
        )
        after, spent = process.cpu_times(), sum(map(targets.cpu_seconds, inspectors))
        preempted = process.num_ctx_switches().involuntary - switches
    finally:  # measured before a stopped inspector goes on
        for inspector in inspectors if stop else ():
            with contextlib.suppress(psutil.Error):
                inspector.send_signal(signal.SIGCONT)
    n = max(1, len(batch.latencies))
    measured = {
        "rps": batch.rate,
        "requests": len(batch.latencies),
        "errors": batch.errors,
        "proxy_user_ms": (after.user - before.user) / n * 1e3,
        "proxy_system_ms": (after.system - before.system) / n * 1e3,
        "inspector_cpu_ms": (spent - inspected) / n * 1e3,
        "preempted_per_request": preempted / n,
    }
    if inspectors and inspects:  # what the batch left the inspector is done before the next
        measured["inspected"] = proxy.wait_turns(turns + len(batch.latencies)) - turns
    return measured


async def run(size: Size) -> dict[str, Any]:
    cfg = SETTINGS[size]
    split = cores()
    if split is None:
        return {"settings": cfg, "skipped": "needs two CPUs", "rounds": [], "summary": {}}
    mine, others = split
    rounds: list[dict[str, Any]] = []
    with pinned_here(others), targets.upstream() as (url, upstream):
        pin(upstream, others)
        plain, idle, ours = targets.mitmdump(url), targets.idle_tooltap(url), targets.tooltap(url)
        with targets.started(plain, idle, ours):
            for proxy in (plain, idle, ours):
                pin(proxy.pid, mine)
            proxies = {"mitmdump": plain, "idle": idle, "stopped": ours, "tooltap": ours}
            for proxy in (plain, idle, ours):
                await _batch(proxy, cfg["warmup"], others, inspects=proxy is not idle)
            for round_ in range(cfg["rounds"]):
                row: dict[str, Any] = {"round": round_}
                turn = round_ % len(VARIANTS)
                for name in VARIANTS[turn:] + VARIANTS[:turn]:
                    row[name] = await _batch(
                        proxies[name], cfg["requests"], others,
                        stop=name == "stopped", inspects=name != "idle",
                    )  # fmt: skip
                for name in VARIANTS[1:]:
                    row[f"{name}/ratio"] = ratio(row[name]["rps"], row["mitmdump"]["rps"])
                rounds.append(row)
                print(
                    f"  apart round {round_}: hooks doing nothing {row['idle/ratio']:.3f}, inspector"
                    f" stopped {row['stopped/ratio']:.3f}, tooltap {row['tooltap/ratio']:.3f}",
                    flush=True,
                )
    summary = {
        name: {
            "ratio": median([r[f"{name}/ratio"] for r in rounds]) if name != "mitmdump" else 1.0,
            **{
                key: median([r[name][key] for r in rounds])
                for key in (
                    "proxy_user_ms",
                    "proxy_system_ms",
                    "inspector_cpu_ms",
                    "preempted_per_request",
                )
            },
        }
        for name in VARIANTS
    }
    return {"settings": cfg, "rounds": rounds, "summary": summary}
