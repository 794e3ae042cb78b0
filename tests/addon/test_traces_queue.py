"""The span queue is bounded: past it, spans are dropped and counted, and emit never waits."""

from __future__ import annotations

import threading
import time

from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from tooltap.addon.sinks import traces
from tooltap.core import Verdict


class Stuck(SpanExporter):
    """A collector that does not answer until told to."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def export(self, spans):
        self.release.wait(10)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.release.set()


def test_past_a_full_queue_spans_are_dropped_counted_and_emit_does_not_wait(monkeypatch):
    monkeypatch.setattr(traces, "MAX_QUEUE", 4)
    counted = {"exported": 0, "dropped": 0}

    def count(outcome, n):
        counted[outcome] += n

    exporter = Stuck()
    sink = traces.TraceSink("", "raw", count, exporter=exporter)
    verdict = Verdict(api="chat", outcome="inspected", model="gpt-4o", state="strict-void")
    started = time.monotonic()
    for _ in range(20):
        sink.emit(verdict, "api.openai.com", (), 0.0, 0.0)
    assert time.monotonic() - started < 1  # the stuck collector holds nothing back
    # One batch stuck in the exporter, one full queue behind it: the rest overflowed.
    assert counted["dropped"] >= 20 - 2 * 4
    exporter.release.set()
    sink.close()
    assert counted["exported"] + counted["dropped"] == 20
