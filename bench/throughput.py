"""Benchmark: tooltap's JSON throughput against plain mitmdump, in independent runs, with the
spread between them.

One run starts a fresh upstream, a fresh plain mitmdump and a fresh `tooltap run` side by side
(as section 1 does), warms both, then lets them take turns batch by batch: sequential (one
connection) and at concurrency 16, the chat JSON turn of section 1, mitmdump first in one round
and tooltap first in the next. A round's ratio is tooltap's req/s over mitmdump's in that
round; a run's figure is the median over its rounds. The run is repeated with new processes:
on this shared machine plain mitmdump itself moves by a third from run to run, so one run's
ratio says little, and the spread of several says how much.

Before each batch it waits (up to a few seconds) for other jobs to quiet down, and records what
they used during the batch, as section 1 does; every batch counts (the noise is reported).
"""

from __future__ import annotations

import statistics
from typing import Any

import psutil

from . import json_load, targets
from .sizes import Size
from .stats import median

SETTINGS: dict[Size, dict[str, int]] = {
    "full": {"runs": 5, "rounds": 5, "sequential": 1500, "concurrent": 3200, "warmup": 500},
    "quick": {"runs": 3, "rounds": 3, "sequential": 300, "concurrent": 640, "warmup": 150},
    "smoke": {"runs": 3, "rounds": 1, "sequential": 8, "concurrent": 32, "warmup": 16},
}
LOADS = (("sequential", 1), ("c16", 16))
QUIET_WAIT = 5.0  # seconds a batch waits at most for other jobs to quiet down


async def one_run(size: Size, number: int) -> dict[str, Any]:
    cfg = SETTINGS[size]
    noise = targets.noise(size)
    rounds: list[dict[str, Any]] = []
    with targets.upstream() as (url, pid):
        upstream = psutil.Process(pid)
        proxies = {"mitmdump": targets.mitmdump(url), "tooltap": targets.tooltap(url)}
        with targets.started(*proxies.values()):
            order = [targets.Target(name, p.url, p) for name, p in proxies.items()]
            for target in order:
                await json_load.one_batch(target, cfg["warmup"], 16, upstream)
            for round_ in range(cfg["rounds"]):
                row: dict[str, Any] = {"round": round_}
                for load, concurrency in LOADS:
                    count = cfg["sequential"] if concurrency == 1 else cfg["concurrent"]
                    for target in order if round_ % 2 == 0 else order[::-1]:
                        if noise is not None:
                            noise.wait_quiet(max_wait=QUIET_WAIT)
                        mark = noise.start() if noise is not None else None
                        batch = await json_load.one_batch(target, count, concurrency, upstream)
                        row[f"{load}/{target.name}"] = {
                            "rps": batch["rps"],
                            "p50_ms": batch["p50_ms"],
                            "errors": batch["errors"],
                            "not_inspected": (
                                batch["requests"] - batch["inspected"]
                                if batch["inspected"] is not None
                                else None
                            ),
                            "others_cores": noise.since(mark) if noise and mark else 0.0,
                        }
                    ours, base = row[f"{load}/tooltap"], row[f"{load}/mitmdump"]
                    row[f"{load}/ratio"] = ours["rps"] / base["rps"] if base["rps"] else 0.0
                rounds.append(row)
                print(
                    f"  throughput run {number} round {round_}: "
                    + "  ".join(
                        f"{load} {row[f'{load}/tooltap']['rps']:.0f}/"
                        f"{row[f'{load}/mitmdump']['rps']:.0f} req/s = {row[f'{load}/ratio']:.3f}"
                        for load, _ in LOADS
                    ),
                    flush=True,
                )
    return {
        "rounds": rounds,
        **{load: median([r[f"{load}/ratio"] for r in rounds]) for load, _ in LOADS},
        "errors": sum(v["errors"] for r in rounds for v in r.values() if isinstance(v, dict)),
        "not_inspected": sum(
            v["not_inspected"] or 0
            for r in rounds
            for k, v in r.items()
            if isinstance(v, dict) and k.endswith("/tooltap")
        ),
    }


async def run(size: Size) -> dict[str, Any]:
    runs = []
    for number in range(SETTINGS[size]["runs"]):
        runs.append(await one_run(size, number))
        print(
            f"  throughput run {number}: tooltap/mitmdump req/s, median of its rounds: "
            + ", ".join(f"{load} {runs[-1][load]:.3f}" for load, _ in LOADS),
            flush=True,
        )
    summary = {}
    for load, _ in LOADS:
        ratios = [r[load] for r in runs]
        summary[load] = {
            "runs": ratios,
            "median": statistics.median(ratios),
            "min": min(ratios),
            "max": max(ratios),
        }
    return {"settings": SETTINGS[size], "runs": runs, "summary": summary}
