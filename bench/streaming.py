"""Benchmark 2: SSE delivery, event by event, through each proxy.

The upstream (tooltap's ReplayServer, in this process so both clocks are the
same perf_counter) sends a 50-event Chat stream with three parallel tool
calls, one chunk every 20 ms, and records when each chunk left. The client
records when each event completed on its side. Per-event delay is the
difference; time to first event is from sending the request to the first
complete event. Targets take turns stream by stream:

- direct            no proxy
- mitmdump-stream   plain mitmdump with an addon that streams every response
                    (mitmdump buffers by default; the request stays buffered, as
                    in tooltap, where stream_large_bodies=1 would stream it too)
- tooltap           tooltap run, defaults (SSE always goes through its tap)
- mitmdump-buffered plain mitmdump, defaults: the reference for what buffering looks like
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tooltap.addon.harness.replay import ReplayServer, Reply, Seen

from . import bodies, client, targets
from .sizes import Size
from .stats import median, pct

EVENTS = 50
GAP: dict[Size, float] = {"full": 0.020, "quick": 0.020, "smoke": 0.002}  # between events
ROUNDS: dict[Size, int] = {"full": 20, "quick": 3, "smoke": 1}
LATE_MS = 100.0  # five gaps: no streaming proxy should ever hold an event this long
NAMES = ("direct", "mitmdump-stream", "tooltap", "mitmdump-buffered")
SSE_HEADERS = [("content-type", "text/event-stream; charset=utf-8"), ("cache-control", "no-cache")]


def route(gap: float) -> Callable[[Seen], Reply]:
    return lambda _seen: Reply(headers=SSE_HEADERS, chunks=bodies.chat_stream_events(), delay=gap)


async def one_stream(
    target: targets.Target,
    conn: client.Connection,
    server: ReplayServer,
    noise: targets.Noise | None = None,
) -> dict[str, Any]:
    raw = client.build_request(target.url, bodies.CHAT_PATH, bodies.chat_request(stream=True))
    if noise:
        noise.wait_quiet(max_wait=10.0)
    mark = noise.start() if noise else None
    t0 = time.perf_counter()
    response = await conn.request(raw, events=True)
    seen = server.seen[-1]
    arrived = response.event_times
    delays = [(a - s) * 1e3 for a, s in zip(arrived, seen.sent_at, strict=False)]
    return {
        "target": target.name,
        "noise": noise.since(mark) if noise and mark else 0.0,
        "events": len(arrived),
        "sent": len(seen.sent_at),
        "ttfe_ms": (arrived[0] - t0) * 1e3 if arrived else float("nan"),
        "delays_ms": [round(d, 4) for d in delays],
        "total_ms": (arrived[-1] - t0) * 1e3 if arrived else float("nan"),
    }


def summarize(streams: list[dict[str, Any]]) -> dict[str, Any]:
    rows: dict[str, dict[str, float]] = {}
    for name in NAMES:
        every = [s for s in streams if s["target"] == name]
        if not every:
            continue
        # Streams during which other jobs used the CPU are left out (if any remain).
        mine = [s for s in every if s["noise"] <= targets.Noise.NOISY] or every
        delays = [d for s in mine for d in s["delays_ms"]]
        rows[name] = {
            "streams": len(mine),
            "noisy_left_out": len(every) - len(mine),
            "events_ok": sum(s["events"] == EVENTS for s in mine),
            "delay_p50_ms": median(delays),
            "delay_p99_ms": pct(delays, 99),
            "ttfe_p50_ms": median([s["ttfe_ms"] for s in mine]),
            "total_p50_ms": median([s["total_ms"] for s in mine]),
            # Buffering shows as events that arrive long after they were sent.
            "late_events": sum(d > LATE_MS for d in delays),
        }
    direct = rows.get("direct", {}).get("delay_p50_ms", 0.0)
    for row in rows.values():
        row["added_p50_ms"] = row["delay_p50_ms"] - direct
    if "tooltap" in rows and "mitmdump-stream" in rows:
        rows["tooltap"]["vs_mitmdump_p50_ms"] = (
            rows["tooltap"]["delay_p50_ms"] - rows["mitmdump-stream"]["delay_p50_ms"]
        )
        rows["tooltap"]["ttfe_vs_mitmdump_ms"] = (
            rows["tooltap"]["ttfe_p50_ms"] - rows["mitmdump-stream"]["ttfe_p50_ms"]
        )
    return rows


async def run(size: Size) -> dict[str, Any]:
    rounds, gap = ROUNDS[size], GAP[size]
    streams: list[dict[str, Any]] = []
    noise = targets.noise(size)
    with ReplayServer(route(gap)) as server:
        proxies = {
            "mitmdump-stream": targets.variant(server.url, "stream-only"),
            "tooltap": targets.tooltap(server.url),
            "mitmdump-buffered": targets.mitmdump(server.url),
        }
        with targets.started(*proxies.values()):
            order = [targets.Target("direct", server.url)] + [
                targets.Target(name, p.url, p) for name, p in proxies.items()
            ]
            # One keep-alive connection per target, as SDK clients hold them;
            # the warm-up stream opens the proxy's upstream connection too.
            conns = {t.name: await client.Connection(t.url).open() for t in order}
            for target in order:
                await one_stream(target, conns[target.name], server)
            for round_ in range(rounds):
                for target in order:
                    stream = await one_stream(target, conns[target.name], server, noise)
                    stream["round"] = round_
                    streams.append(stream)
                    print(
                        f"  sse r{round_} {target.name:<18} events {stream['events']:>2}"
                        f"  first {stream['ttfe_ms']:8.2f} ms"
                        f"  delay p50 {median(stream['delays_ms']):6.3f} ms"
                        f"  others {stream['noise']:.2f} cores",
                        flush=True,
                    )
                server.seen.clear()  # keep memory flat over rounds
            for conn in conns.values():
                await conn.close()
            inspected = proxies["tooltap"].wait_turns(rounds + 1, timeout=5)
    return {
        "settings": {"rounds": rounds, "events": EVENTS, "gap_ms": gap * 1e3},
        "summary": summarize(streams),
        "tooltap_turns_logged": inspected,
        "streams": streams,
    }
