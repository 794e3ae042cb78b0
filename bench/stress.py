"""Benchmark: memory under stress, tooltap against plain mitmdump, one scenario at a time.

The scenarios a shared staging proxy meets (after the memory probe): many concurrent large
JSON bodies; many concurrent SSE streams; an inspector that stops while large bodies keep
coming; responses heavy enough to make inspection slower than forwarding. For each, the peak
RSS of the proxy and its children together, and of each apart (sampled every 50 ms), the RSS a
few seconds after the burst, and whether every body reached the client intact. Plain mitmdump
is the baseline; for streams, a mitmdump that streams large bodies too
(`stream_large_bodies=1`), as tooltap streams SSE.

The target: tooltap's peak is at most the baseline's plus tooltap_memory_budget plus a fixed
overhead (OVERHEAD_MIB: the inspector process and its work on one exchange), and a few
seconds after the burst it is back within the budget of where it started, or of where plain
mitmdump is after the same burst, whichever is higher: mitmproxy itself keeps some of a burst
of buffered bodies (about 300 MiB after 50 concurrent 6 MB bodies, malloc_trim or not), and
that part is not tooltap's to give back.

    python -m bench --only stress [--quick | --smoke]
    python -m bench.stress [--size quick] [--scenario sse-4mb ...]   # some, JSON on stdout
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import signal
import sys
import threading
import time
from typing import Any

import psutil

from . import targets
from .sizes import Size

MiB = 1 << 20
BUDGET = 256 * MiB  # tooltap_memory_budget's default
OVERHEAD_MIB = 160  # the inspector process at its peak plus the proxy's fixed cost, stated
# Seconds the inspector is left to settle before a burst, and after it before RSS is read again.
SETTLE: dict[Size, tuple[float, float]] = {"full": (1.0, 5.0), "quick": (1.0, 5.0), "smoke": (0.0, 0.0)}  # fmt: skip
BODIES: dict[Size, float] = {"full": 1.0, "quick": 1.0, "smoke": 1 / 64}  # of the sizes below
COUNTS: dict[Size, float] = {"full": 1.0, "quick": 0.25, "smoke": 0.0}  # of the flows below
CALLS: dict[Size, int] = {"full": 10_000, "quick": 10_000, "smoke": 100}  # the pathological


# --- the upstream: a child process serving bodies by the x-stress header -------------------


def json_body(size: int, calls: int = 0) -> bytes:
    tool_calls = [
        {"id": f"call_{n}", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
        for n in range(calls)
    ]  # fmt: skip
    message: dict[str, Any] = {"role": "assistant", "content": None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    body = {
        "id": "chatcmpl-stress",
        "model": "gpt-4o",
        "choices": [{"index": 0, "message": message}],
    }
    text = json.dumps(body)
    pad = max(0, size - len(text) - 16)
    body["choices"][0]["message"]["content"] = "x" * pad
    return json.dumps(body).encode()


def sse_events(count: int, size: int) -> list[bytes]:
    chunk = {"id": "chatcmpl-stress", "model": "gpt-4o", "choices": [{"index": 0, "delta": {"content": "y" * size}}]}  # fmt: skip
    event = b"data: " + json.dumps(chunk).encode() + b"\n\n"
    return [event] * count + [b"data: [DONE]\n\n"]


def replies(size: Size) -> dict[str, tuple[bytes, list[bytes], float]]:
    """x-stress name -> (content type, chunks, seconds between chunks)."""
    scale = BODIES[size]
    return {
        "json-6mb": (b"application/json", [json_body(int(6 * MiB * scale))], 0.0),
        "json-5mb": (b"application/json", [json_body(int(5 * MiB * scale))], 0.0),
        "heavy-7mb": (b"application/json", [json_body(int(7 * MiB * scale), calls=int(3000 * scale))], 0.0),
        "sse-4mb": (b"text/event-stream", sse_events(int(2000 * scale), 2048), 0.001),
    }  # fmt: skip


async def _serve(size: Size) -> None:
    table = replies(size)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                headers = dict(
                    line.split(": ", 1) for line in head.decode().split("\r\n")[1:] if ": " in line
                )
                lower = {k.lower(): v for k, v in headers.items()}
                await reader.readexactly(int(lower.get("content-length", "0")))
                kind, chunks, pause = table[lower.get("x-stress", "json-6mb")]
                if len(chunks) == 1:
                    writer.write(
                        b"HTTP/1.1 200 OK\r\ncontent-type: " + kind
                        + b"\r\ncontent-length: " + str(len(chunks[0])).encode() + b"\r\n\r\n"
                        + chunks[0]
                    )  # fmt: skip
                    await writer.drain()
                    continue
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: " + kind + b"\r\ntransfer-encoding: chunked\r\n\r\n"
                )  # fmt: skip
                for chunk in chunks:
                    writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    await writer.drain()
                    if pause:
                        await asyncio.sleep(pause)
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=512)
    print(f"port {server.sockets[0].getsockname()[1]}", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until stdin closes


@contextlib.contextmanager
def upstream(size: Size) -> Any:
    with targets.helper("bench.stress", "--serve", size) as (_process, line):
        yield f"http://127.0.0.1:{int(line.split()[1])}"


# --- measuring ------------------------------------------------------------------------------


def tree_rss(pid: int) -> tuple[int, int]:
    """The RSS of a process, and of its children together (tooltap's inspector)."""
    try:
        root = psutil.Process(pid)
        children = root.children(recursive=True)
        own = root.memory_info().rss
    except psutil.Error:
        return 0, 0
    total = 0
    for process in children:
        with contextlib.suppress(psutil.Error):
            total += process.memory_info().rss
    return own, total


class Peak:
    """Samples the RSS of a process and its children every 50 ms, in a thread: the peak of
    both together, and of each apart."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = self.proxy = self.children = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        proxy, children = tree_rss(self.pid)
        self.peak = max(self.peak, proxy + children)
        self.proxy, self.children = max(self.proxy, proxy), max(self.children, children)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self._sample()

    def __enter__(self) -> Peak:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


async def fetch(url: str, name: str, expected: str, sem: asyncio.Semaphore) -> bool:
    """One request through the proxy; True when the body arrived intact."""
    import httpx

    async with sem, httpx.AsyncClient(timeout=60) as client:
        digest = hashlib.sha256()
        async with client.stream(
            "POST", url + "/v1/chat/completions", json={"model": "m"}, headers={"x-stress": name}
        ) as reply:
            async for part in reply.aiter_raw():
                digest.update(part)
        return reply.status_code == 200 and digest.hexdigest() == expected


def inspector_of(pid: int) -> psutil.Process | None:
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(pid).children():
            if "tooltap.addon.inspection" in " ".join(child.cmdline()):
                return child
    return None


async def burst(
    proxy: Any, name: str, count: int, concurrency: int, expected: str
) -> dict[str, Any]:
    sem = asyncio.Semaphore(concurrency)
    started = time.monotonic()
    results = await asyncio.gather(
        *(fetch(proxy.url, name, expected, sem) for _ in range(count)), return_exceptions=True
    )
    return {
        "intact": sum(1 for r in results if r is True),
        "broken": sum(1 for r in results if r is not True),
        "seconds": round(time.monotonic() - started, 2),
    }


async def scenario(
    kind: str, url: str, step: dict[str, Any], expected: str, settle: tuple[float, float]
) -> dict[str, Any]:
    proxy = (
        targets.tooltap(url)
        if kind == "tooltap"
        else targets.mitmdump(url, *(["--set", "stream_large_bodies=1"] if kind == "mitmdump-streaming" else []))
    )  # fmt: skip
    name, count, concurrency = step["name"], step["count"], step["concurrency"]
    with targets.started(proxy):
        await asyncio.sleep(settle[0])  # the inspector settles
        start = sum(tree_rss(proxy.pid))
        stopped = inspector_of(proxy.pid) if step.get("stop") and kind == "tooltap" else None
        if stopped is not None:
            os.kill(stopped.pid, signal.SIGSTOP)
        elif step.get("stop") and kind == "tooltap":  # else the scenario measures nothing
            raise RuntimeError("stress: no inspector process under tooltap to stop")
        try:
            with Peak(proxy.pid) as peak:
                result = await burst(proxy, name, count, concurrency, expected)
                await asyncio.sleep(settle[1])
                after = sum(tree_rss(proxy.pid))
        finally:
            if stopped is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(stopped.pid, signal.SIGCONT)
    return result | {
        "start_mib": round(start / MiB, 1),
        "peak_mib": round(peak.peak / MiB, 1),
        "proxy_peak_mib": round(peak.proxy / MiB, 1),
        "child_peak_mib": round(peak.children / MiB, 1),
        "after_mib": round(after / MiB, 1),
    }


def plan(size: Size) -> list[dict[str, Any]]:
    scale, least = COUNTS[size], 2 if size == "smoke" else 8

    def n(full: int) -> int:
        return max(least, int(full * scale))

    return [
        {"name": "json-6mb", "what": "concurrent 6 MB JSON", "count": n(200), "concurrency": n(200)},
        {"name": "sse-4mb", "what": "concurrent 4 MB SSE streams", "count": n(64), "concurrency": n(64), "streams": True},
        {"name": "json-5mb", "what": "inspector stopped, sequential 5 MB JSON", "count": n(600), "concurrency": 1, "stop": True},
        {"name": "heavy-7mb", "what": "7 MB JSON with 3,000 calls (slow inspection)", "count": n(200), "concurrency": 8},
    ]  # fmt: skip


def handover_cost(size: int = 6 * MiB, rounds: int = 20) -> dict[str, float]:
    """What handing one record with a body of `size` to the inspector's pipe costs the proxy.

    Then: the record pickled whole, then a length prefix joined to it (two copies of the
    body). Now: a frame of the pickled metadata and the body itself (no copy).
    """
    import pickle
    import struct
    import timeit
    import tracemalloc

    from tooltap.addon.handover.record import Record, encode

    record = Record("chat", method="POST", path="/v1/chat/completions", request_body=b"{}",
                    status=200, response_body=b"x" * size)  # fmt: skip

    def then() -> int:
        data = pickle.dumps(record, protocol=5)
        return len(struct.pack(">I", len(data)) + data)

    def now() -> int:
        return sum(len(part) for part in encode(record))

    out: dict[str, float] = {}
    for name, step in (("then", then), ("now", now)):
        tracemalloc.start()
        step()
        out[f"{name}_allocated_mib"] = round(tracemalloc.get_traced_memory()[1] / MiB, 2)
        tracemalloc.stop()
        out[f"{name}_ms"] = round(min(timeit.repeat(step, number=1, repeat=rounds)) * 1000, 3)
    return out | {"body_mib": round(size / MiB, 2)}


def pathological(calls: int = 10_000) -> dict[str, dict[str, Any]]:
    """The inspector's CPU for one pathological exchange: inspect, the log and the metrics."""
    import io

    from tooltap.addon.sinks.log import LogSink
    from tooltap.addon.sinks.metrics import Metrics
    from tooltap.core import Exchange, inspect

    tools = [{"type": "function", "function": {"name": "get_weather", "strict": True, "parameters": {"type": "object"}}}]  # fmt: skip

    def call(n: int, arguments: str = '{"city":"Paris"}') -> dict[str, Any]:
        return {"id": f"call_{n}", "type": "function", "function": {"name": "get_weather", "arguments": arguments}}  # fmt: skip

    def chat(request: dict[str, Any], calls: list[dict[str, Any]]) -> Exchange:
        body = {
            "id": "c",
            "model": "m",
            "choices": [{"index": 0, "message": {"tool_calls": calls}}],
        }
        return Exchange(method="POST", url="http://h/v1/chat/completions",
                        request_body=json.dumps(request).encode(), status=200,
                        response_headers={"content-type": "application/json"},
                        response_body=json.dumps(body).encode())  # fmt: skip

    history: list[dict[str, Any]] = []
    items: list[dict[str, Any]] = []
    for n in range(calls):
        history += [{"role": "assistant", "tool_calls": [call(n)]}, {"role": "tool", "tool_call_id": f"call_{n}", "content": "ok"}]  # fmt: skip
        items += [{"type": "function_call", "call_id": f"call_{n}", "name": "get_weather", "arguments": "{}"}, {"type": "function_call_output", "call_id": f"call_{n}", "output": "ok"}]  # fmt: skip
    responses = Exchange(method="POST", url="http://h/v1/responses",
                         request_body=json.dumps({"input": items}).encode(), status=200,
                         response_headers={"content-type": "application/json"},
                         response_body=b'{"id": "resp_1", "output": [], "tools": []}')  # fmt: skip
    cases = {
        f"{calls:,} calls": chat({"tools": tools, "messages": []}, [call(n) for n in range(calls)]),
        f"{2 * calls:,}-message chat history": chat({"tools": tools, "messages": history}, [call(0)]),
        f"{2 * calls:,} Responses input items": responses,
        f"a {calls * 700 / 1e6:g} MB argument": chat({"tools": tools, "messages": []}, [call(0, json.dumps({"city": "x" * calls * 700}))]),
    }  # fmt: skip
    out = {}
    for name, exchange in cases.items():
        best = float("inf")
        for _ in range(3):
            started = time.process_time()
            verdict = inspect(exchange)
            LogSink("json", "raw", io.StringIO()).emit(verdict, "h", "/p", 0.0)
            Metrics().record(verdict, 0.0)
            best = min(best, time.process_time() - started)
        out[name] = {"cpu_ms": round(best * 1000, 1), "unchecked": verdict.unchecked}
    return out


async def run(size: Size, only: list[str] | None = None) -> dict[str, Any]:
    """The scenarios (those named in `only`, if given), each against its baseline."""
    bodies = replies(size)
    results: dict[str, Any] = {}
    handover = handover_cost(int(6 * MiB * BODIES[size]), 20 if size != "smoke" else 1)
    print(f"  stress handover of a record: {handover}", flush=True)
    costly = pathological(CALLS[size])
    print(f"  stress one pathological exchange: {costly}", flush=True)
    with upstream(size) as url:
        for step in plan(size):
            name = step["name"]
            if only and name not in only:
                continue
            _, chunks, _ = bodies[name]
            expected = hashlib.sha256(b"".join(chunks)).hexdigest()
            kinds = ["tooltap", "mitmdump"] + (
                ["mitmdump-streaming"] if step.get("streams") else []
            )
            row: dict[str, Any] = {"what": step["what"], "count": step["count"]}
            for kind in kinds:
                print(f"  stress {name} [{kind}] x{step['count']}", flush=True)
                row[kind] = await scenario(kind, url, step, expected, SETTLE[size])
            baseline = row["mitmdump-streaming" if step.get("streams") else "mitmdump"]
            tooltap = row["tooltap"]
            row["over_baseline_mib"] = round(tooltap["peak_mib"] - baseline["peak_mib"], 1)
            settled = max(tooltap["start_mib"], row["mitmdump"]["after_mib"])
            row["within_target"] = (
                row["over_baseline_mib"] <= BUDGET / MiB + OVERHEAD_MIB
                and tooltap["after_mib"] - settled <= BUDGET / MiB
            )
            results[name] = row
            print(
                f"  stress {name}: {json.dumps({k: v for k, v in row.items() if k != 'what'})}",
                flush=True,
            )
    return {
        "budget_mib": BUDGET / MiB,
        "overhead_mib": OVERHEAD_MIB,
        "handover": handover,
        "pathological": costly,
        "scenarios": results,
    }


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        asyncio.run(_serve(sys.argv[2]))  # type: ignore[arg-type]
    else:
        parser = argparse.ArgumentParser(prog="python -m bench.stress")
        parser.add_argument("--size", choices=["full", "quick", "smoke"], default="full")
        parser.add_argument(
            "--scenario",
            action="append",
            choices=[step["name"] for step in plan("full")],
            help="run only this scenario (repeatable); bench/out and the README are left alone",
        )
        options = parser.parse_args()
        print(json.dumps(asyncio.run(run(options.size, options.scenario)), indent=1))
