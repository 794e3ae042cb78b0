"""Benchmark 1: JSON throughput and latency, no proxy vs plain mitmdump vs tooltap.

The upstream serves the ~4 KB three-call chat JSON. The targets run side by
side and take turns batch by batch (A B C D, A B C D, ...), so drift of the
machine hits them alike:

- direct           the client talks to the upstream
- mitmdump         plain mitmdump, reverse mode, defaults (JSON buffered)
- mitmdump-stream  plain mitmdump with an addon that streams every response
- mitmdump-large-bodies  plain mitmdump with stream_large_bodies=8m: what
                   mitmproxy's per-body size check costs (tooltap run leaves
                   it off, as mitmdump does; users may opt in)
- tooltap          tooltap run, defaults (JSON buffered, inspected from the buffer)
- tooltap-thread   tooltap run with tooltap_inspector=thread: inspection in a thread
                   of the proxy (the design before the child process; only when the
                   measured tooltap has that option)
- tooltap-stream   tooltap's addon with every response streamed, so through its
                   tap (bench/variants.py); loaded with mitmdump -s

Requests stay buffered in every target. stream_large_bodies would stream them
too, and tooltap skips a flow whose request body mitmproxy did not keep, so
that would measure skipping, not tapping.

Each batch is sequential (one connection) or at concurrency 16. CPU per
request is the proxy process's user+system time over the batch, including
the time tooltap's worker needs to finish inspecting it (we wait for its
`turn` log lines), divided by the requests.
"""

from __future__ import annotations

from typing import Any

import psutil

from . import bodies, client, targets
from .sizes import Size
from .stats import median, pct, ratio

NAMES = (
    "direct",
    "mitmdump",
    "mitmdump-stream",
    "mitmdump-large-bodies",
    "tooltap",
    "tooltap-thread",
    "tooltap-stream",
)


SETTINGS: dict[Size, dict[str, int]] = {
    "full": {"rounds": 7, "sequential": 1500, "concurrent": 3200, "warmup": 500},
    "quick": {"rounds": 3, "sequential": 150, "concurrent": 320, "warmup": 150},
    "smoke": {"rounds": 1, "sequential": 8, "concurrent": 32, "warmup": 16},
}
CALIBRATION: dict[Size, tuple[int, float]] = {  # requests, seconds (ReplayServer can be slow)
    "full": (2000, 10.0),
    "quick": (300, 2.0),
    "smoke": (32, 2.0),
}


async def one_batch(
    target: targets.Target,
    count: int,
    concurrency: int,
    upstream: psutil.Process,
    *,
    deadline: float = 120.0,
    noise: targets.Noise | None = None,
) -> dict[str, Any]:
    quiet_before = noise.wait_quiet() if noise else None
    mark = noise.start() if noise else None
    raw = client.build_request(target.url, bodies.CHAT_PATH, bodies.chat_request())
    proxy = target.proxy
    turns_before = proxy.turns if proxy else 0
    cpu_before, up_before = target.cpu(), targets.cpu_seconds(upstream)
    child_before = target.children_cpu()
    batch = await client.run_batch(
        target.url,
        lambda _n: raw,
        count,
        concurrency,
        deadline=deadline,
        expect=lambda r: r.status == 200,
    )
    inspected = None
    if proxy is not None and target.name.startswith("tooltap"):
        inspected = proxy.wait_turns(turns_before + len(batch.latencies)) - turns_before
    n = max(1, len(batch.latencies))
    return {
        "noise_before": quiet_before,
        "noise": noise.since(mark) if noise and mark else 0.0,
        "target": target.name,
        "concurrency": concurrency,
        "requests": len(batch.latencies),
        "errors": batch.errors,
        "inspected": inspected,
        "rps": batch.rate,
        "p50_ms": pct(batch.latencies, 50) * 1e3,
        "p99_ms": pct(batch.latencies, 99) * 1e3,
        "cpu_ms_per_req": (target.cpu() - cpu_before) / n * 1e3,
        # tooltap's inspector process, when inspection runs in one
        "child_cpu_ms_per_req": (target.children_cpu() - child_before) / n * 1e3,
        "upstream_cpu_ms_per_req": (targets.cpu_seconds(upstream) - up_before) / n * 1e3,
        "latencies_ms": [round(x * 1e3, 4) for x in batch.latencies],
    }


def summarize(batches: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over rounds per (concurrency, target), and tooltap/mitmdump ratios."""
    out: dict[str, Any] = {}
    for concurrency in sorted({b["concurrency"] for b in batches}):
        rows: dict[str, dict[str, float]] = {}
        for name in NAMES:
            every = [b for b in batches if b["concurrency"] == concurrency and b["target"] == name]
            if not every:
                continue
            # Batches during which other jobs used the CPU are left out (if any remain).
            mine = [b for b in every if b["noise"] <= targets.Noise.NOISY] or every
            rows[name] = {
                key: median([b[key] for b in mine])
                for key in (
                    "rps",
                    "p50_ms",
                    "p99_ms",
                    "cpu_ms_per_req",
                    "child_cpu_ms_per_req",
                    "upstream_cpu_ms_per_req",
                )
            }
            rows[name]["batches"] = len(mine)
            rows[name]["noisy_left_out"] = len(every) - len(mine)
            rows[name]["errors"] = sum(b["errors"] for b in mine)
            rows[name]["requests"] = sum(b["requests"] for b in mine)
            if mine[0]["inspected"] is not None:
                rows[name]["not_inspected"] = sum(b["requests"] - b["inspected"] for b in mine)
        ratios = {}
        for ours, base in (
            ("tooltap", "mitmdump"),
            ("tooltap-thread", "mitmdump"),
            ("tooltap-stream", "mitmdump-stream"),
            ("tooltap-stream", "mitmdump"),
            ("mitmdump-large-bodies", "mitmdump"),
        ):
            if ours in rows and base in rows:
                ratios[f"{ours}/{base}"] = {
                    key: ratio(rows[ours][key], rows[base][key])
                    for key in ("rps", "p50_ms", "p99_ms", "cpu_ms_per_req")
                }
        out[f"c{concurrency}"] = {"targets": rows, "ratios": ratios}
    return out


async def calibrate(size: Size) -> dict[str, Any]:
    """Is the upstream the bottleneck? Direct and via mitmdump, ReplayServer vs bench.upstream."""
    count, deadline = CALIBRATION[size]
    out: dict[str, Any] = {}
    noise = targets.noise(size)
    for kind, replay in (("replay-server", True), ("bench-upstream", False)):
        with targets.upstream(replay=replay) as (url, pid):
            upstream = psutil.Process(pid)
            proxy = targets.mitmdump(url)
            with targets.started(proxy):
                for target in (
                    targets.Target("direct", url),
                    targets.Target("mitmdump", proxy.url, proxy),
                ):
                    for concurrency in (1, 16):
                        await one_batch(
                            target, count // 4, concurrency, upstream, deadline=deadline / 4
                        )
                        batch = await one_batch(
                            target, count, concurrency, upstream, deadline=deadline, noise=noise
                        )
                        batch.pop("latencies_ms")
                        out[f"{kind}/{target.name}/c{concurrency}"] = batch
    return out


async def run(size: Size) -> dict[str, Any]:
    cfg = SETTINGS[size]
    noise = targets.noise(size)
    calibration = await calibrate(size)
    batches: list[dict[str, Any]] = []
    with targets.upstream() as (url, pid):
        upstream = psutil.Process(pid)
        proxies = {
            "mitmdump": targets.mitmdump(url),
            "mitmdump-stream": targets.variant(url, "stream-only"),
            "mitmdump-large-bodies": targets.mitmdump(url, "--set", "stream_large_bodies=8m"),
            "tooltap": targets.tooltap(url),
            **(
                {"tooltap-thread": targets.tooltap(url, "--set", "tooltap_inspector=thread")}
                if targets.has_inspector_option()
                else {}
            ),
            "tooltap-stream": targets.variant(url, "stream-responses"),
        }
        with targets.started(*proxies.values()):
            order = [targets.Target("direct", url)] + [
                targets.Target(name, p.url, p) for name, p in proxies.items()
            ]
            for target in order:
                await one_batch(target, cfg["warmup"], 16, upstream)
            for round_ in range(cfg["rounds"]):
                for concurrency, count in ((1, cfg["sequential"]), (16, cfg["concurrent"])):
                    for target in order:
                        batch = await one_batch(target, count, concurrency, upstream, noise=noise)
                        batch["round"] = round_
                        batches.append(batch)
                        print(
                            f"  json r{round_} c{concurrency:<2} {target.name:<16}"
                            f" {batch['rps']:8.0f} req/s  p50 {batch['p50_ms']:6.2f} ms"
                            f"  p99 {batch['p99_ms']:6.2f} ms  cpu {batch['cpu_ms_per_req']:.3f} ms/req"
                            f"  others {batch['noise']:.2f} cores",
                            flush=True,
                        )
            reloads = {name: p.reloads for name, p in proxies.items() if name.startswith("tooltap")}
            glued = {name: p.glued for name, p in proxies.items() if name.startswith("tooltap")}
            dropped = {
                name: p.metric("tooltap_flows_total", outcome="dropped")
                for name, p in proxies.items()
                if name.startswith("tooltap")
            }
    return {
        "settings": cfg,
        "calibration": calibration,
        "summary": summarize(batches),
        "dropped": dropped,
        "reloads": reloads,
        "glued_log_lines": glued,
        "batches": batches,
    }
