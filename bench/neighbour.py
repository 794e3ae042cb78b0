"""Benchmark: plain mitmdump beside a process doing the inspector's work, against it alone.

tooltap inspects in a child process, and on this two-core machine that child shares the cores
with the proxy, the load and the upstream. This puts a number on what the sharing alone costs a
proxy that runs none of tooltap's code. In each round, taking turns, sequential and at
concurrency 16: plain mitmdump alone; `tooltap run`; and the same plain mitmdump beside a
neighbour process that runs the inspector's own handler on the bench's exchange (at nice 10,
as the inspector runs) as many times a second as tooltap handled in the round before. The
neighbour's CPU per request is reported beside the inspector's, so the two can be compared.

    python -m bench --only neighbour [--quick | --smoke]
    python -m bench.neighbour RATE    the neighbour alone: RATE records a second until stdin closes
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import psutil

from . import json_load, targets
from .sizes import Size
from .stats import median, ratio

SETTINGS: dict[Size, dict[str, int]] = {
    "full": {"rounds": 6, "sequential": 1500, "concurrent": 3200, "warmup": 500},
    "quick": {"rounds": 4, "sequential": 300, "concurrent": 640, "warmup": 150},
    "smoke": {"rounds": 1, "sequential": 8, "concurrent": 32, "warmup": 16},
}
LOADS = (("sequential", 1), ("c16", 16))


def main(rate: float) -> None:
    """Handle the bench's record `rate` times a second, paced, until stdin closes."""
    from .core_cost import TIMING
    from .profile_worker import shipped_worker

    os.nice(10)  # as the inspector (tooltap.addon.inspection)
    closed = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), closed.set()), daemon=True).start()
    with shipped_worker(1, TIMING["smoke"]) as (handle, _proxy_side):
        print("ready", flush=True)
        started, done = time.monotonic(), 0
        while not closed.is_set():
            handle()
            done += 1
            ahead = done / rate - (time.monotonic() - started)
            if ahead > 0:
                closed.wait(ahead)


@contextlib.contextmanager
def neighbour(rate: float) -> Iterator[psutil.Process]:
    with targets.helper("bench.neighbour", f"{rate:.1f}") as (process, line):
        if line.strip() != "ready":
            raise RuntimeError("the neighbour did not start")
        yield psutil.Process(process.pid)


async def run(size: Size) -> dict[str, Any]:
    cfg = SETTINGS[size]
    rounds: list[dict[str, Any]] = []
    with targets.upstream() as (url, pid):
        upstream = psutil.Process(pid)
        plain, ours = targets.mitmdump(url), targets.tooltap(url)
        with targets.started(plain, ours):
            alone = targets.Target("mitmdump", plain.url, plain)
            tooltap = targets.Target("tooltap", ours.url, ours)
            rate: dict[str, float] = {}
            for load, concurrency in LOADS:
                await json_load.one_batch(alone, cfg["warmup"], concurrency, upstream)
                warm = await json_load.one_batch(tooltap, cfg["warmup"], concurrency, upstream)
                rate[load] = warm["rps"]
            for round_ in range(cfg["rounds"]):
                row: dict[str, Any] = {"round": round_}
                for load, concurrency in LOADS:
                    count = cfg["sequential"] if concurrency == 1 else cfg["concurrent"]
                    order = ["alone", "tooltap", "beside"]
                    for name in order if round_ % 2 == 0 else order[::-1]:
                        if name == "beside":
                            with neighbour(rate[load]) as process:
                                before = targets.cpu_seconds(process)
                                batch = await json_load.one_batch(
                                    alone, count, concurrency, upstream
                                )
                                work = targets.cpu_seconds(process) - before
                        else:
                            target = alone if name == "alone" else tooltap
                            before = target.children_cpu()
                            batch = await json_load.one_batch(target, count, concurrency, upstream)
                            work = target.children_cpu() - before
                            if name == "tooltap":
                                rate[load] = batch["rps"]
                        row[f"{load}/{name}"] = {
                            "rps": batch["rps"],
                            "helper_cpu_ms": work / max(1, batch["requests"]) * 1e3,
                            "errors": batch["errors"],
                        }
                    base = row[f"{load}/alone"]["rps"]
                    for name in ("tooltap", "beside"):
                        row[f"{load}/{name}/ratio"] = ratio(row[f"{load}/{name}"]["rps"], base)
                rounds.append(row)
                print(
                    f"  neighbour round {round_}: "
                    + "  ".join(
                        f"{load} tooltap {row[f'{load}/tooltap/ratio']:.3f}, mitmdump beside"
                        f" the neighbour {row[f'{load}/beside/ratio']:.3f}"
                        for load, _ in LOADS
                    ),
                    flush=True,
                )
    summary = {
        load: {
            name: median([r[f"{load}/{name}/ratio"] for r in rounds])
            for name in ("tooltap", "beside")
        }
        | {
            f"{name}_cpu_ms": median([r[f"{load}/{name}"]["helper_cpu_ms"] for r in rounds])
            for name in ("tooltap", "beside")
        }
        for load, _ in LOADS
    }
    return {"settings": cfg, "rounds": rounds, "summary": summary}


if __name__ == "__main__":
    main(float(sys.argv[1]))
