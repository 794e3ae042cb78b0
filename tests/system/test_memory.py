"""The memory budget through a real `tooltap run`: what it holds for inspection stays within
tooltap_memory_budget, every flow still reaches the client byte for byte, and every flow is
counted (inspected, or skipped with the budget's reason)."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tooltap.addon.harness.launch import Proxy
from tooltap.addon.harness.replay import ReplayServer, Reply, Seen
from tooltap.addon.proxy.addon import OVER_BUDGET

BUDGET = 1 << 20  # the smallest allowed
FLOWS = 48  # at once, each ~320 KB: about 15 times the budget
SSE = [("content-type", "text/event-stream")]
JSON = [("content-type", "application/json")]


def sse_body(index: int) -> list[bytes]:
    """A chat stream in 32 events of ~10 KB, sent 10 ms apart."""
    head = {"id": f"chatcmpl-{index}", "model": "gpt-4o"}
    delta = {"index": 0, "delta": {"content": "x" * 10_000}}
    events = [
        b"data: " + json.dumps(head | {"choices": [delta]}).encode() + b"\n\n" for _ in range(32)
    ]
    return [*events, b"data: [DONE]\n\n"]


def json_body(index: int) -> bytes:
    message = {"role": "assistant", "content": "y" * 320_000}
    return json.dumps(
        {
            "id": f"chatcmpl-{index}",
            "model": "gpt-4o",
            "choices": [{"index": 0, "message": message}],
        }
    ).encode()


def route(seen: Seen) -> Reply:
    index = int(seen.headers["x-index"])
    if index % 2:
        return Reply(headers=SSE, chunks=sse_body(index), delay=0.01)
    return Reply(headers=JSON, chunks=[json_body(index)])


def metrics(proxy: Proxy) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    assert proxy.metrics_url
    text = httpx.get(proxy.metrics_url, timeout=5).text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_concurrent_large_bodies_stay_within_the_budget_arrive_intact_and_are_all_counted():
    extra = ("--set", f"tooltap_memory_budget={BUDGET}")
    with (
        ReplayServer(route) as upstream,
        Proxy.tooltap([upstream.url], "--log-format", "json", extra=extra) as proxy,
    ):

        def fetch(index: int) -> tuple[int, bytes]:
            with httpx.Client(base_url=proxy.url, timeout=30) as client:
                reply = client.post(
                    "/v1/chat/completions", json={"model": "m"}, headers={"x-index": str(index)}
                )
                return index, reply.content

        with ThreadPoolExecutor(FLOWS) as pool:
            received = dict(pool.map(fetch, range(FLOWS)))
        for index in range(FLOWS):
            sent = b"".join(sse_body(index)) if index % 2 else json_body(index)
            assert received[index] == sent, index

        turns = proxy.wait_for("turn", FLOWS, timeout=30)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            values = metrics(proxy)
            outcomes = {
                dict(labels)["outcome"]: value
                for (name, labels), value in values.items()
                if name == "tooltap_flows_total" and dict(labels)["api"] == "chat" and value
            }
            if sum(outcomes.values()) == FLOWS:
                break
            time.sleep(0.1)
    assert sum(outcomes.values()) == FLOWS, outcomes
    assert set(outcomes) <= {"inspected", "skipped"}
    over = [t for t in turns if t["reason"] == OVER_BUDGET]
    assert over and len(over) == outcomes.get("skipped", 0)
    assert 0 < values[("tooltap_held_peak_bytes", ())] <= BUDGET
