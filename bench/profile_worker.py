"""Benchmark 5: where the worker's time goes, for the medium exchange.

The worker path is what tooltap's worker thread runs per flow: inspect, the
log sink, the metrics sink. It runs here in a loop under pyinstrument (a
sampling profiler, so the code runs at full speed); the top functions by own
time and by total time are named, and the three stages are timed apart.
The log sink writes JSON lines to a stream that discards them, so terminal
speed does not count; in the proxy they go to a pipe (see the README).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pyinstrument import Profiler

from tooltap.addon.logsink import LogSink
from tooltap.addon.metrics import Metrics
from tooltap.core import Exchange, ValidatorCache, inspect

from . import bodies
from .core_cost import JSON_HEADERS, SSE_HEADERS, URLS, per_call


class _Discard:
    def write(self, _text: str) -> int:
        return 0

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def worker_path() -> tuple[Any, dict[str, Any]]:
    """A closure running inspect + both sinks on the medium exchange, and its parts."""
    exchange = Exchange(
        "POST", URLS["chat"], bodies.chat_request(), 200, JSON_HEADERS, bodies.chat_response()
    )
    validators, prior = ValidatorCache(), {}
    sink, metrics = LogSink("json", "raw", _Discard()), Metrics()  # type: ignore[arg-type]
    verdict = inspect(exchange, prior, validators=validators)

    def one() -> None:
        started = time.perf_counter()
        v = inspect(exchange, prior, validators=validators)
        sink.emit(v, "127.0.0.1", "/v1/chat/completions", (time.perf_counter() - started) * 1e3)
        metrics.record(v, time.perf_counter() - started)

    parts = {
        "inspect": lambda: inspect(exchange, prior, validators=validators),
        "log_sink": lambda: sink.emit(verdict, "127.0.0.1", "/v1/chat/completions", 0.1),
        "metrics_sink": lambda: metrics.record(verdict, 0.0001),
    }
    return one, parts


def _walk(
    frame: Any, stack: tuple[str, ...], own: dict[str, float], total: dict[str, float]
) -> None:
    """Own time (leaf samples, and a parent's "[self]" samples) and total time per function."""
    if frame.is_synthetic_leaf:  # pyinstrument's "[self]": time spent in the parent itself
        own[stack[-1]] = own.get(stack[-1], 0.0) + frame.time
        return
    name = f"{frame.function} ({frame.file_path_short}:{frame.line_no})"
    if not frame.children:
        own[name] = own.get(name, 0.0) + frame.time
    if name not in stack:  # recursion counted once
        total[name] = total.get(name, 0.0) + frame.time
    for child in frame.children:
        _walk(child, (*stack, name), own, total)


def run(quick: bool, out_dir: Path) -> dict[str, Any]:
    one, parts = worker_path()
    min_time = 0.05 if quick else 0.3
    stages = {name: per_call(fn, min_time) * 1e6 for name, fn in parts.items()}
    stages["whole"] = per_call(one, min_time) * 1e6
    # SSE for comparison: the same content as a 50-event stream.
    sse = Exchange(
        "POST",
        URLS["chat"],
        bodies.chat_request(stream=True),
        200,
        SSE_HEADERS,
        b"".join(bodies.chat_stream_events()),
    )
    sse_validators = ValidatorCache()
    stages["inspect_sse_50_events"] = (
        per_call(lambda: inspect(sse, {}, validators=sse_validators), min_time) * 1e6
    )

    iterations = 2_000 if quick else 20_000
    profiler = Profiler(interval=0.0001)
    profiler.start()
    for _ in range(iterations):
        one()
    profiler.stop()
    session = profiler.last_session
    root = session.root_frame()
    own: dict[str, float] = {}
    total: dict[str, float] = {}
    _walk(root, (), own, total)
    duration = root.time or 1.0
    top_own = sorted(own.items(), key=lambda kv: -kv[1])[:20]
    top_total = sorted(total.items(), key=lambda kv: -kv[1])[:30]
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "profile.txt").write_text(profiler.output_text(unicode=True, color=False))
    (out_dir / "profile.html").write_text(profiler.output_html())
    for label, rows in (("own time", top_own[:12]), ("total time", top_total[:18])):
        print(f"  profile, top by {label}:")
        for name, seconds in rows:
            print(f"    {seconds / duration * 100:5.1f}%  {name}")
    return {
        "iterations": iterations,
        "stages_us": stages,
        "top_own": [{"function": n, "share": s / duration} for n, s in top_own],
        "top_total": [{"function": n, "share": s / duration} for n, s in top_total],
    }
