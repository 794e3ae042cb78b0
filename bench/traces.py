"""Benchmark: the inspector's CPU per exchange with trace export on, against off.

The inspector (Inspector.handle: inspect, log, metrics, and with export on the span) runs in
this process on the chat JSON turn, as the proxy hands it over, a request with a W3C
traceparent. With export on, spans go over OTLP/HTTP to a collector stand-in in a child
process (it answers 200 to every export), so the exporter's own thread is counted here and
the collector's work is not. CPU is this process's (all threads), over a batch and the flush
that sends what the batch queued; off and on take turns, round by round.
"""

from __future__ import annotations

import io
import subprocess
import sys
import time
from typing import Any

from tooltap.addon.handover.record import Record
from tooltap.addon.inspection.inspector import Inspector
from tooltap.addon.sinks.log import LogSink
from tooltap.addon.sinks.metrics import Metrics
from tooltap.addon.sinks.traces import TraceSink

from . import bodies
from .sizes import Size
from .stats import median

COLLECTOR = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200); self.send_header("content-length", "0"); self.end_headers()
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(server.server_address[1], flush=True)
server.serve_forever()
"""
TRACEPARENT = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


SETTINGS: dict[Size, dict[str, int]] = {
    "full": {"rounds": 7, "exchanges": 3_000},
    "quick": {"rounds": 3, "exchanges": 500},
    "smoke": {"rounds": 1, "exchanges": 10},
}


def record() -> Record:
    return bodies.record(
        "chat",
        bodies.CHAT_PATH,
        bodies.chat_request(),
        bodies.chat_response(),
        request_headers=(bodies.JSON_TYPE, (b"traceparent", TRACEPARENT)),
    )


def cpu_per_exchange(inspector: Inspector, count: int) -> float:
    """CPU ms per exchange, this process's threads, the export's flush included."""
    item = record()
    started = time.process_time()
    for _ in range(count):
        inspector.handle(item)
    if inspector.traces is not None:
        inspector.traces.provider.force_flush(30_000)
    return (time.process_time() - started) / count * 1e3


def run(size: Size) -> dict[str, Any]:
    plan = SETTINGS[size]
    collector = subprocess.Popen(
        [sys.executable, "-c", COLLECTOR], stdout=subprocess.PIPE, text=True
    )
    try:
        assert collector.stdout is not None
        url = f"http://127.0.0.1:{int(collector.stdout.readline())}/v1/traces"
        exported: dict[str, int] = {"exported": 0, "dropped": 0}

        def count(outcome: str, n: int) -> None:
            exported[outcome] += n

        off = Inspector(LogSink("json", "raw", io.StringIO()), Metrics())
        on = Inspector(
            LogSink("json", "raw", io.StringIO()),
            Metrics(),
            traces=TraceSink(url, "raw", count),
        )
        cpu_per_exchange(off, plan["exchanges"] // 5)  # warm: validators, imports
        cpu_per_exchange(on, plan["exchanges"] // 5)
        rounds: dict[str, list[float]] = {"off": [], "on": []}
        for _ in range(plan["rounds"]):
            rounds["off"].append(cpu_per_exchange(off, plan["exchanges"]))
            rounds["on"].append(cpu_per_exchange(on, plan["exchanges"]))
        on.close()
    finally:
        collector.kill()
        collector.wait(10)
    off_ms, on_ms = median(rounds["off"]), median(rounds["on"])
    return {
        "settings": plan,
        "off_ms": off_ms,
        "on_ms": on_ms,
        "added_ms": on_ms - off_ms,
        "ratio": on_ms / off_ms if off_ms else None,
        "spans": exported,
    }


if __name__ == "__main__":
    import json

    print(json.dumps(run("quick"), indent=1))
