"""The span queue is bounded: past it, spans are dropped and counted, and emit never waits.

Every span made is counted once, exported or dropped, whatever the export thread does.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter

from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from tooltap.addon.sinks import traces
from tooltap.core import Verdict

VERDICT = Verdict(api="chat", outcome="inspected", model="gpt-4o", state="strict-void")


class Tally:
    """tooltap_spans_total as the sink counts it, from the emitting and the export threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: Counter[str] = Counter()

    def __call__(self, outcome: str, n: int) -> None:
        with self.lock:
            self.counts[outcome] += n


class Stuck(SpanExporter):
    """A collector that does not answer until told to (or shut down)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def export(self, spans):
        self.entered.set()
        self.release.wait(10)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.release.set()


def emit(sink: traces.TraceSink, n: int) -> None:
    for _ in range(n):
        sink.emit(VERDICT, "api.openai.com", (), 0.0, 0.0)


def test_past_a_full_queue_spans_are_dropped_counted_and_emit_does_not_wait(monkeypatch):
    monkeypatch.setattr(traces, "MAX_QUEUE", 4)
    monkeypatch.setattr(traces, "DELAY", 60.0)  # only a full batch starts an export
    counted, exporter = Tally(), Stuck()
    sink = traces.TraceSink("", "raw", counted, exporter=exporter)
    emit(sink, 4)  # a full batch: the export thread takes it to the collector, and is stuck
    assert exporter.entered.wait(5)
    started = time.monotonic()
    emit(sink, 16)
    assert time.monotonic() - started < 1  # the stuck collector holds nothing back
    # The queue holds the newest 4; the 12 before them were pushed out, each counted as it went.
    assert counted.counts == {"dropped": 12}
    exporter.release.set()
    sink.close()
    assert counted.counts == {"exported": 8, "dropped": 12}


def test_the_sdks_batch_variables_set_the_queue_the_batch_and_the_wait(monkeypatch):
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "4")
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "2")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "60000")  # milliseconds
    counted, exporter = Tally(), Stuck()
    sink = traces.TraceSink("", "raw", counted, exporter=exporter)
    assert sink.spans.delay == 60.0
    emit(sink, 2)  # a full batch of two goes out at once, and is stuck with the collector
    assert exporter.entered.wait(5)
    emit(sink, 16)  # a queue of four: twelve are pushed out
    assert counted.counts == {"dropped": 12}
    exporter.release.set()
    sink.close()
    assert counted.counts == {"exported": 6, "dropped": 12}


def test_batch_variables_that_are_not_positive_numbers_leave_the_defaults(monkeypatch):
    for value in ("", "soon", "0", "-5"):
        for name in ("OTEL_BSP_MAX_QUEUE_SIZE", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
                     "OTEL_BSP_SCHEDULE_DELAY"):  # fmt: skip
            monkeypatch.setenv(name, value)
        sink = traces.TraceSink("", "raw", Tally(), exporter=Stuck())
        assert (sink.spans.size, sink.spans.batch, sink.spans.delay) == (2048, 512, 1.0), value
        sink.close()


def test_spans_still_queued_when_close_gives_up_are_dropped_and_the_batch_out_counts_on_return(
    monkeypatch,
):
    monkeypatch.setattr(traces, "MAX_QUEUE", 4)
    monkeypatch.setattr(traces, "DELAY", 60.0)
    counted, exporter = Tally(), Stuck()
    sink = traces.TraceSink("", "raw", counted, exporter=exporter)
    emit(sink, 4)
    assert exporter.entered.wait(5)
    emit(sink, 3)
    sink.close(timeout=0.05)  # the collector is stuck: close waits no longer than this
    sink.spans.thread.join(5)  # shutting the exporter down let its batch go
    assert not sink.spans.thread.is_alive()
    emit(sink, 2)  # after close, a span is dropped at once
    assert counted.counts == {"exported": 4, "dropped": 5}


def test_a_flush_waits_for_the_batch_with_the_collector_and_gives_up_at_its_timeout(monkeypatch):
    monkeypatch.setattr(traces, "DELAY", 60.0)
    counted, exporter = Tally(), Stuck()
    sink = traces.TraceSink("", "raw", counted, exporter=exporter)
    emit(sink, 3)
    flushed: list[bool] = []
    flushing = threading.Thread(target=lambda: flushed.append(sink.provider.force_flush(5_000)))
    flushing.start()
    assert exporter.entered.wait(5)  # the flush sent the part batch, not the 60 s timer
    assert not sink.provider.force_flush(50)  # the batch is still with the collector
    exporter.release.set()
    flushing.join(5)
    assert flushed == [True] and counted.counts == {"exported": 3}
    sink.close()


class Unsteady(SpanExporter):
    """A collector that takes its time, and now and then refuses a batch or breaks."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng  # the export thread's alone
        self.received: list[int] = []

    def export(self, spans):
        time.sleep(self.rng.choice((0.0, 0.0, self.rng.uniform(0, 0.003))))
        roll = self.rng.random()
        if roll < 0.1:
            raise ConnectionError("the collector went away")
        if roll < 0.2:
            return SpanExportResult.FAILURE
        self.received.extend(span.context.span_id for span in spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def make(sink: traces.TraceSink, pace: random.Random, n: int) -> None:
    """n spans, with a short pause now and then (the export thread's chance to cut in)."""
    for _ in range(n):
        emit(sink, 1)
        if pace.random() < 0.1:
            time.sleep(pace.uniform(0, 0.001))


def test_every_span_made_is_counted_once_exported_or_dropped_whatever_the_threads_do(
    monkeypatch,
):
    for seed in range(300):
        rng = random.Random(seed)
        monkeypatch.setattr(traces, "MAX_QUEUE", rng.randint(1, 24))
        monkeypatch.setattr(traces, "BATCH", rng.randint(1, 24))
        monkeypatch.setattr(traces, "DELAY", rng.choice((0.0005, 0.005, 60.0)))
        counted, exporter = Tally(), Unsteady(random.Random(-seed))
        sink = traces.TraceSink("", "raw", counted, exporter=exporter)
        plans = [
            (random.Random(rng.random()), rng.randint(0, 120)) for _ in range(rng.randint(1, 3))
        ]
        emitters = [threading.Thread(target=make, args=(sink, *plan)) for plan in plans]
        for emitter in emitters:
            emitter.start()
        if rng.random() < 0.3:
            sink.provider.force_flush(rng.choice((0, 1, 5_000)))
        if rng.random() < 0.3:  # close while spans are still being made
            sink.close(timeout=rng.choice((0.0, 0.002, 5.0)))
        for emitter in emitters:
            emitter.join(10)
        sink.close(timeout=rng.choice((0.0, 0.002, 5.0)))
        sink.spans.thread.join(10)  # a batch still out when close gave up comes back
        made = sum(n for _, n in plans)
        exported = counted.counts["exported"]
        assert exported + counted.counts["dropped"] == made, (seed, counted.counts, made)
        assert len(exporter.received) == len(set(exporter.received)) == exported, seed
