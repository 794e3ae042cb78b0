"""Why tooltap costs the proxy throughput: the JSON load against variants of the addon.

    python -m bench --only why [--quick | --smoke]

Same load and method as benchmark 1 (bench/json_load.py), interleaved, with
plain mitmdump as the baseline and each variant of bench/variants.py loaded
into mitmdump with -s. CPU is split into the proxy process and its children
(the prototype's worker process).
"""

from __future__ import annotations

from typing import Any

import psutil

from . import json_load, targets
from .sizes import Size
from .stats import median, ratio
from .variants import NAMES

SKIPPED = (
    "its variants replace the addon's single in-process Worker, which tooltap had up to 8f498a8;"
    " the diagnosis was made on dc86e40 (bench/README.md, Why)"
)


def applicable() -> bool:
    """The variants replace the addon's single in-process Worker: the design up to 8f498a8.

    Later, inspection runs in a child process by default (the fix this
    experiment led to), and there is no Worker to replace.
    """
    import tooltap.addon.proxy.addon as addon_module

    return hasattr(addon_module, "Worker")


ROUNDS: dict[Size, tuple[int, int, int]] = {  # rounds, sequential and concurrent requests
    "full": (5, 1000, 2400),
    "quick": (2, 200, 480),
    "smoke": (1, 8, 32),
}


async def run(size: Size) -> dict[str, Any]:
    rounds, seq, conc = ROUNDS[size]
    rows: list[dict[str, Any]] = []
    noise = targets.noise(size)
    with targets.upstream() as (url, pid):
        upstream = psutil.Process(pid)
        proxies = {"mitmdump": targets.mitmdump(url)}
        proxies.update({f"tooltap:{name}": targets.variant(url, name) for name in NAMES})
        with targets.started(*proxies.values()):
            order = [targets.Target(name, p.url, p) for name, p in proxies.items()]
            for target in order:
                await json_load.one_batch(target, min(200, conc), 16, upstream)
            for round_ in range(rounds):
                for concurrency, count in ((1, seq), (16, conc)):
                    for target in order:
                        children = target.children_cpu()
                        batch = await json_load.one_batch(
                            target, count, concurrency, upstream, noise=noise
                        )
                        batch.pop("latencies_ms")
                        n = max(1, batch["requests"])
                        batch["child_cpu_ms_per_req"] = (target.children_cpu() - children) / n * 1e3
                        rows.append(batch)
                        print(
                            f"  why r{round_} c{concurrency:<2} {target.name:<24} {batch['rps']:6.0f} req/s"
                            f"  p50 {batch['p50_ms']:6.2f} ms  proxy cpu {batch['cpu_ms_per_req']:.3f}"
                            f"  child cpu {batch['child_cpu_ms_per_req']:.3f} ms/req"
                            f"  others {batch['noise']:.2f} cores"
                            f"  not inspected {(batch['requests'] - batch['inspected']) if batch['inspected'] is not None else '-'}",
                            flush=True,
                        )
    summary: dict[str, Any] = {}
    for concurrency in (1, 16):
        block: dict[str, Any] = {}
        for name in proxies:
            every = [r for r in rows if r["target"] == name and r["concurrency"] == concurrency]
            mine = [r for r in every if r["noise"] <= targets.Noise.NOISY] or every
            block[name] = {
                key: median([r[key] for r in mine])
                for key in ("rps", "p50_ms", "p99_ms", "cpu_ms_per_req", "child_cpu_ms_per_req")
            } | {"noisy_left_out": len(every) - len(mine)}
        base = block["mitmdump"]
        for row in block.values():
            row["rps_ratio"] = ratio(row["rps"], base["rps"])
            row["p50_ratio"] = ratio(row["p50_ms"], base["p50_ms"])
        summary[f"c{concurrency}"] = block
    return {
        "settings": {"rounds": rounds, "sequential": seq, "concurrent": conc},
        "summary": summary,
        "rows": rows,
    }
