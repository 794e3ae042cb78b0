"""Benchmark 5: where the worker's time goes, for the medium exchange.

The worker path is what tooltap's worker thread runs per flow: inspect, the
log sink, the metrics sink (and whatever else the addon's handler does).
The record is built by the addon's own hooks from a test flow, and the
handler the addon gives its Worker is called in a loop under pyinstrument (a
sampling profiler, so the code runs at full speed); the top functions by own
time and by total time are named, and inspect and the two sinks are also
timed apart. The log sink writes JSON lines to a stream that discards them,
so terminal speed does not count; in the proxy they go to a pipe.

The proxy's own side is timed too: the addon's three hooks per flow on fresh
test flows (up to handing the record over), and pickling the record for the child.
"""

from __future__ import annotations

import pickle
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from mitmproxy.proxy.mode_specs import ProxyMode
from mitmproxy.test import taddons, tflow
from pyinstrument import Profiler

import tooltap.addon.proxy.addon as addon_module
from tooltap.addon.sinks.log import LogSink
from tooltap.addon.sinks.metrics import Metrics
from tooltap.core import Exchange, ValidatorCache, inspect

from . import bodies
from .core_cost import JSON_HEADERS, SSE_HEADERS, TIMING, URLS, Timing, per_call
from .sizes import Size


class _Discard:
    def write(self, _text: str) -> int:
        return 0

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def _hooks_cost(addon: Any, template: Any, count: int) -> float:
    """µs per flow in the addon's hooks on mitmproxy's event loop, up to handing the record over."""
    flows = []
    for _ in range(count):
        flow = template.copy()
        flow.id = str(uuid.uuid4())
        flows.append(flow)
    started = time.perf_counter()
    for flow in flows:
        addon.request(flow)
        addon.responseheaders(flow)
        addon.response(flow)
    return (time.perf_counter() - started) / count * 1e6


@contextmanager
def shipped_worker(
    hook_flows: int, timing: Timing
) -> Iterator[tuple[Callable[[], None], dict[str, float]]]:
    """The addon's own worker handler, the record its hooks made for the medium flow, and
    what the proxy's side costs per flow: the hooks, and pickling the record for the child."""
    captured: dict[str, Any] = {"items": []}

    # Newer addons choose where inspection runs (tooltap_inspector); its thread
    # mode takes the same handler the child process runs. Older ones had Worker.
    if hasattr(addon_module, "ThreadWorker"):
        name, options = "ThreadWorker", {"tooltap_inspector": "thread"}
    else:
        name, options = "Worker", {}
    original = getattr(addon_module, name)

    # The addon's own worker class (so its constructor and stop stay whatever they are now),
    # keeping the handler it is given and the records instead of handling them.
    class Capture(original):  # type: ignore[valid-type, misc]
        def __init__(self, handle: Any, *args: Any, **kwargs: Any) -> None:
            super().__init__(handle, *args, **kwargs)
            captured["handle"] = handle

        def submit(self, item: Any) -> bool:
            captured["items"].append(item)
            return True

    setattr(addon_module, name, Capture)
    try:
        addon = addon_module.Tooltap(log_stream=_Discard())  # type: ignore[arg-type]
        with taddons.context(addon) as tctx:
            tctx.configure(addon, tooltap_log_format="json", tooltap_metrics_port=0, **options)
            if "handle" not in captured:  # mitmproxy logs a configure hook's error and goes on
                raise RuntimeError(f"tooltap started no {name}: see the addon error logged above")
            flow = tflow.tflow(resp=True)
            flow.client_conn.proxy_mode = ProxyMode.parse("reverse:https://api.openai.com")
            flow.request.method, flow.request.path = "POST", bodies.CHAT_PATH
            flow.request.content = bodies.chat_request()
            flow.request.headers["authorization"] = "Bearer sk-bench-not-a-key"  # as the load sends
            flow.response.headers["content-type"] = "application/json"  # type: ignore[union-attr]
            flow.response.content = bodies.chat_response()  # type: ignore[union-attr]
            addon.request(flow)
            addon.responseheaders(flow)
            addon.response(flow)
            handle, record = captured["handle"], captured["items"][-1]
            proxy_side = {
                "proxy_hooks": _hooks_cost(addon, flow, hook_flows),
                "proxy_pickle_record": per_call(
                    lambda: pickle.dumps(record, protocol=5),
                    replace(timing, min_time=0.1) if timing.min_time else timing,
                )
                * 1e6,
            }
            try:
                yield (lambda: handle(record)), proxy_side
            finally:
                addon.done()  # closes the metrics endpoint thread mode opened
    finally:
        setattr(addon_module, name, original)


def parts() -> dict[str, Callable[[], Any]]:
    """inspect and the two sinks, apart, on the medium exchange."""
    exchange = Exchange(
        method="POST",
        url=URLS["chat"],
        request_body=bodies.chat_request(),
        status=200,
        response_headers=JSON_HEADERS,
        response_body=bodies.chat_response(),
    )
    validators, prior = ValidatorCache(), {}  # type: ignore[var-annotated]
    sink, metrics = LogSink("json", "raw", _Discard()), Metrics()  # type: ignore[arg-type]
    verdict = inspect(exchange, prior, validators=validators)
    return {
        "inspect": lambda: inspect(exchange, prior, validators=validators),
        "log_sink": lambda: sink.emit(verdict, "127.0.0.1", bodies.CHAT_PATH, 0.1),
        "metrics_sink": lambda: metrics.record(verdict, 0.0001),
    }


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


ITERATIONS: dict[Size, int] = {"full": 20_000, "quick": 2_000, "smoke": 20}  # profiled
HOOK_FLOWS: dict[Size, int] = {"full": 5_000, "quick": 500, "smoke": 20}


def run(size: Size, out_dir: Path) -> dict[str, Any]:
    timing = TIMING[size]
    stages = {name: per_call(fn, timing) * 1e6 for name, fn in parts().items()}
    # SSE for comparison: the same content as a 50-event stream.
    sse = Exchange(
        method="POST",
        url=URLS["chat"],
        request_body=bodies.chat_request(stream=True),
        status=200,
        response_headers=SSE_HEADERS,
        response_body=b"".join(bodies.chat_stream_events()),
    )
    sse_validators = ValidatorCache()
    stages["inspect_sse_50_events"] = (
        per_call(lambda: inspect(sse, {}, validators=sse_validators), timing) * 1e6
    )

    iterations = ITERATIONS[size]
    profiler = Profiler(interval=0.0001)
    with shipped_worker(HOOK_FLOWS[size], timing) as (one, proxy_side):
        stages["worker_handler_as_shipped"] = per_call(one, timing) * 1e6
        stages.update(proxy_side)
        profiler.start()
        for _ in range(iterations):
            one()
        profiler.stop()
    session = profiler.last_session
    assert session is not None
    root = session.root_frame()
    assert root is not None
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
