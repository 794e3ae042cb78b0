"""Load and soak: mixed traffic at concurrency 32 through a real `tooltap run`, 5% malformed.

Every response must reach the client exactly as the upstream sent it; every
flow must be logged and counted with the outcome its kind calls for; nothing
may be dropped (the bounded queue never filled) and nothing may raise inside
tooltap; the proxy's RSS must stay flat.

CI runs 2,000 requests (well under a minute). The full soak is a local run:

    TOOLTAP_SOAK=20000 .venv/bin/pytest -q -s tests/test_soak.py

It prints the figures (requests, concurrency, malformed share, differences,
internal errors, drops, RSS at the start and the end). Every loop is bounded
in count and in time.
"""

from __future__ import annotations

import gzip
import itertools
import json
import os
import threading
import time
from dataclasses import dataclass

import httpx
import psutil
from prometheus_client.parser import text_string_to_metric_families
from support.captures import SSE, WIRE, pairs, stream_bytes
from support.scenarios import events

from tooltap.addon.harness.launch import Proxy
from tooltap.addon.harness.replay import ReplayServer, Reply, Seen

REQUESTS = int(os.environ.get("TOOLTAP_SOAK", "2000"))
CONCURRENCY = 32
MALFORMED_EVERY = 20  # one request in 20: 5%
DEADLINE = 60 + REQUESTS * 0.05  # seconds for the whole run: a bound, not a speed target
TIMEOUT = 10.0
MB = 1 << 20

JSON = [("content-type", "application/json"), ("x-request-id", "req_soak")]
STREAM = [("content-type", SSE["content-type"]), ("cache-control", "no-cache")]
CHAT = (WIRE / "chat_nonstream_parallel_tool_calls.json").read_bytes()
RESPONSES = (WIRE / "openapi_responses_functions_response.json").read_bytes()
MESSAGES = pairs("anthropic_roundtrip_tool_use_tool_result.json")[0].body
REJECTED = pairs("anthropic_400_orphan_tool_result.json")[1].body
OVERLOADED = b'{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}'


@dataclass(frozen=True)
class Kind:
    path: str
    outcome: str
    status: int
    headers: list[tuple[str, str]]
    chunks: list[bytes]


def _model(body: bytes, model: str) -> bytes:
    """The body with its model replaced: every request brings a new model name."""
    return body.replace(b'"gpt-4o-2024-08-06"', json.dumps(model).encode())


NORMAL = {
    "chat-json": Kind("/v1/chat/completions", "inspected", 200, JSON, [CHAT]),
    "chat-sse": Kind(
        "/v1/chat/completions",
        "inspected",
        200,
        STREAM,
        events(stream_bytes("chat_stream_parallel_tool_calls_with_usage.sse")),
    ),
    "chat-gzip": Kind(
        "/v1/chat/completions",
        "inspected",
        200,
        [*JSON, ("content-encoding", "gzip")],
        [gzip.compress(CHAT, mtime=0)],
    ),
    "responses-json": Kind("/v1/responses", "inspected", 200, JSON, [RESPONSES]),
    "responses-sse": Kind(
        "/v1/responses",
        "inspected",
        200,
        STREAM,
        events(stream_bytes("responses_stream_function_call_gpt51.jsonl")),
    ),
    "messages-json": Kind("/v1/messages", "inspected", 200, JSON, [MESSAGES]),
    "messages-sse": Kind(
        "/v1/messages",
        "inspected",
        200,
        STREAM,
        events(stream_bytes("anthropic_stream_text_then_tool_use.sse")),
    ),
    "messages-400": Kind("/v1/messages", "inspected", 400, JSON, [REJECTED]),
    "messages-529": Kind("/v1/messages", "upstream_error", 529, JSON, [OVERLOADED]),
}
MALFORMED = {
    "invalid-json": Kind("/v1/chat/completions", "unparseable", 200, JSON, [CHAT[:-7]]),
    "wrong-shape": Kind("/v1/chat/completions", "unparseable", 200, JSON, [b"[1, 2, 3]"]),
    "invalid-utf8": Kind("/v1/responses", "unparseable", 200, JSON, [b'{"id": "\xff\xfe"}']),
    "corrupt-gzip": Kind(
        "/v1/chat/completions",
        "unparseable",
        200,
        [*JSON, ("content-encoding", "gzip")],
        [gzip.compress(CHAT, mtime=0)[:200] + b"\x00" * 64],
    ),
    "sse-without-events": Kind("/v1/messages", "unparseable", 200, STREAM, [b": ping\n\n"] * 3),
}


def kind_of(index: int) -> str:
    if index % MALFORMED_EVERY == 0:
        return list(MALFORMED)[(index // MALFORMED_EVERY) % len(MALFORMED)]
    return list(NORMAL)[index % len(NORMAL)]


def expected(name: str, index: int) -> Reply:
    """What the upstream sends for request `index`: the test and the upstream both call this."""
    kind = NORMAL.get(name) or MALFORMED[name]
    chunks = [_model(c, f"soak-model-{index}") for c in kind.chunks]
    return Reply(status=kind.status, headers=kind.headers, chunks=chunks)


def route(seen: Seen) -> Reply:
    return expected(seen.headers["x-kind"], int(seen.headers["x-index"]))


def samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


class RssMonitor(threading.Thread):
    """The proxy's RSS every 0.2 s, with the number of requests done so far."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.process = psutil.Process(pid)
        self.done = 0  # requests answered so far (written under the clients' lock)
        self.samples: list[tuple[int, int]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.2):
            self.samples.append((self.done, self.process.memory_info().rss))


def test_mixed_load_at_concurrency_32_reaches_clients_untouched_and_is_all_counted():
    assert REQUESTS >= 100
    malformed = sum(1 for i in range(REQUESTS) if kind_of(i) in MALFORMED)
    outcomes: dict[str, int] = {}
    for i in range(REQUESTS):
        name = kind_of(i)
        outcome = (NORMAL.get(name) or MALFORMED[name]).outcome
        outcomes[outcome] = outcomes.get(outcome, 0) + 1

    with (
        ReplayServer(route) as upstream,
        Proxy.tooltap([upstream.url], "--log-format", "json") as proxy,
    ):
        tickets = itertools.count()
        lock = threading.Lock()
        differences: list[str] = []
        deadline = time.monotonic() + DEADLINE
        monitor = RssMonitor(proxy.process.pid)
        idle_rss = monitor.process.memory_info().rss
        monitor.start()

        def client_loop() -> None:
            with httpx.Client(base_url=proxy.url, timeout=TIMEOUT) as client:
                while time.monotonic() < deadline:
                    with lock:
                        index = next(tickets)
                    if index >= REQUESTS:
                        return
                    name = kind_of(index)
                    want = expected(name, index)
                    kind = NORMAL.get(name) or MALFORMED[name]
                    try:
                        with client.stream(
                            "POST",
                            kind.path,
                            json={"model": f"soak-model-{index}", "messages": []},
                            headers={"x-kind": name, "x-index": str(index)},
                        ) as response:
                            body = b"".join(response.iter_raw())
                        problems = []
                        if response.status_code != want.status:
                            problems.append(f"status {response.status_code}")
                        if body != want.body:
                            problems.append(f"body of {len(body)} bytes")
                        problems += [
                            f"header {k}" for k, v in want.headers if response.headers.get(k) != v
                        ]
                    except httpx.HTTPError as exc:
                        problems = [repr(exc)]
                    if problems:
                        with lock:
                            differences.append(f"#{index} {name}: {', '.join(problems)}")
                    with lock:
                        monitor.done += 1

        threads = [threading.Thread(target=client_loop) for _ in range(CONCURRENCY)]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(DEADLINE + TIMEOUT)
        elapsed = time.monotonic() - started
        completed = monitor.done

        # The worker is asynchronous: wait (bounded) until every flow is counted.
        settle = time.monotonic() + 60
        while True:
            text = httpx.get(proxy.metrics_url, timeout=5).text
            counted = samples(text, "tooltap_flows_total")
            if sum(counted.values()) >= REQUESTS or time.monotonic() > settle:
                break
            time.sleep(0.1)
        monitor.stop.set()
        monitor.join(5)
        end_rss = psutil.Process(proxy.process.pid).memory_info().rss
        turns = proxy.wait_for("turn", REQUESTS, timeout=30)
        stderr_errors = [
            line for line in proxy.text if "Traceback" in line or "Addon error" in line
        ]

    warm = [rss for progress, rss in monitor.samples if progress >= REQUESTS // 10]
    start_rss = warm[0] if warm else end_rss
    internal = sum(samples(text, "tooltap_internal_errors_total").values())
    by_outcome = {
        outcome: int(sum(v for k, v in counted.items() if dict(k)["outcome"] == outcome))
        for outcome in ("inspected", "skipped", "unparseable", "upstream_error", "dropped")
    }
    models = {dict(k)["model"] for k in samples(text, "tooltap_turns_total")}
    print(
        f"\nsoak: {completed} requests in {elapsed:.1f} s at concurrency {CONCURRENCY}, "
        f"{malformed} malformed ({100 * malformed / REQUESTS:.1f}%), "
        f"{len(differences)} client-visible differences, {internal:.0f} internal errors, "
        f"{by_outcome['dropped']} dropped; outcomes {by_outcome}; "
        f"RSS {idle_rss / MB:.1f} MB idle, {start_rss / MB:.1f} MB after warm-up -> "
        f"{end_rss / MB:.1f} MB at the end "
        f"({(end_rss - start_rss) / MB:+.1f} MB); {len(models)} model label values"
    )
    assert completed == REQUESTS, "the run hit its time bound"
    assert differences == [], differences[:10]
    assert internal == 0 and stderr_errors == []
    assert by_outcome["dropped"] == 0  # the bounded queue never filled: nothing was held back
    assert {k: v for k, v in by_outcome.items() if v} == outcomes
    assert len(turns) == REQUESTS
    assert len(models) <= 50 + 1 and "other" in models
    # Flat: after warm-up, growth stays a small fraction of what the traffic moved.
    assert end_rss - start_rss < 48 * MB
