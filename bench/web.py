"""Benchmark: what `tooltap web` costs beside plain mitmweb, and `tooltap run` beside mitmdump.

Under mitmweb, tooltap inspects each flow a second time in the proxy process, on one worker
thread, to put the verdict on the flow (the inspector child still does the log and the
metrics). So the web pair differs from the run pair by that work. All four proxies run side by
side in one run, taking turns batch by batch: the chat JSON turn (three tool calls) sent one
request at a time. Reported per request: median latency and the proxy's CPU (its process, and
its children: tooltap's inspector). Then, in this process, the annotation work alone on the
same flow: inspect, mask and store the verdict, as the worker does.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import psutil
from mitmproxy.test import tflow, tutils

from tooltap.addon.harness.launch import free_port
from tooltap.addon.inspection.flows import flow_exchange
from tooltap.addon.inspection.scrub import scrub
from tooltap.addon.sinks.redaction import ArgumentPolicy
from tooltap.addon.web.annotate import WebAnnotations

from . import bodies, targets
from .json_load import one_batch
from .sizes import Size
from .stats import median

NAMES = ("mitmdump", "tooltap run", "mitmweb", "tooltap web")


SETTINGS: dict[Size, dict[str, int]] = {
    "full": {"rounds": 5, "requests": 600, "warmup": 200, "annotations": 3_000},
    "quick": {"rounds": 3, "requests": 150, "warmup": 50, "annotations": 300},
    "smoke": {"rounds": 1, "requests": 8, "warmup": 2, "annotations": 5},
}


def mitmweb(upstream_url: str, tooltap: bool) -> targets.BenchProxy:
    """mitmweb in reverse mode, its UI on a free loopback port: plain, or as `tooltap web`."""
    if tooltap:
        proxy = targets.BenchProxy.tooltap([upstream_url], "--log-format", "json", web=True)
    else:
        executable = (
            targets.BenchProxy.mitmdump(upstream_url).argv[0].replace("mitmdump", "mitmweb")
        )
        argv = [executable, "--listen-host", "127.0.0.1", "-p", "0", "--mode",
                f"reverse:{upstream_url}", "--set", f"web_port={free_port()}",
                "--set", "web_open_browser=false"]  # fmt: skip
        proxy = targets.BenchProxy(argv, modes=1, has_metrics=False, has_web=True)
    assert isinstance(proxy, targets.BenchProxy)
    return proxy


def annotation_ms(count: int) -> float:
    """The worker's work for one flow, alone: read it, inspect, scrub, mask, store the verdict."""
    request = tutils.treq(
        method=b"POST", host="api.openai.com", port=443, scheme=b"https",
        path=b"/v1/chat/completions",
        headers=((b"content-type", b"application/json"),), content=bodies.chat_request(),
    )  # fmt: skip
    response = tutils.tresp(
        headers=((b"content-type", b"application/json"),), content=bodies.chat_response()
    )
    flow = tflow.tflow(req=request, resp=response)
    annotations = WebAnnotations()
    policy = ArgumentPolicy("raw")
    (verdict,) = annotations._inspect(flow_exchange(flow), "chat")
    assert verdict.state == "strict-void", verdict  # the real work, not a skip
    started = time.perf_counter()
    for _ in range(count):
        (verdict,) = annotations._inspect(flow_exchange(flow), "chat")
        policy.verdict(scrub(verdict, ())).model_dump(mode="json")
    return (time.perf_counter() - started) / count * 1e3


async def run(size: Size) -> dict[str, Any]:
    plan = SETTINGS[size]
    with targets.upstream() as (url, upstream_pid):
        upstream = psutil.Process(upstream_pid)
        proxies = {
            "mitmdump": targets.mitmdump(url),
            "tooltap run": targets.tooltap(url),
            "mitmweb": mitmweb(url, tooltap=False),
            "tooltap web": mitmweb(url, tooltap=True),
        }
        with targets.started(*proxies.values()):
            runs = {name: targets.Target(name, proxy.url, proxy) for name, proxy in proxies.items()}
            for target in runs.values():
                await one_batch(target, plan["warmup"], 1, upstream)
            batches: dict[str, list[dict[str, Any]]] = {name: [] for name in NAMES}
            for _ in range(plan["rounds"]):
                for name in NAMES:
                    batch = await one_batch(runs[name], plan["requests"], 1, upstream)
                    batch.pop("latencies_ms")
                    batches[name].append(batch)
    rows = {
        name: {
            "p50_ms": median([b["p50_ms"] for b in found]),
            "p99_ms": median([b["p99_ms"] for b in found]),
            "cpu_ms_per_req": median([b["cpu_ms_per_req"] for b in found]),
            "child_cpu_ms_per_req": median([b["child_cpu_ms_per_req"] for b in found]),
            "inspected": sum(b["inspected"] or 0 for b in found),
            "requests": sum(b["requests"] for b in found),
        }
        for name, found in batches.items()
    }
    return {"settings": plan, "rows": rows, "annotation_ms": annotation_ms(plan["annotations"])}


if __name__ == "__main__":
    import json

    print(json.dumps(asyncio.run(run("quick")), indent=1))
