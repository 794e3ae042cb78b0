"""The hand-over: a record framed for the pipe and read back whole, the thread worker, and the
supervisor of the inspector process."""

import asyncio
import os
import threading
import time
from collections import Counter
from dataclasses import replace

import pytest
from support.pipes import in_the_pipe

from tooltap.addon.handover import supervisor
from tooltap.addon.handover.budget import Budget, MiB
from tooltap.addon.handover.counts import SharedCounts
from tooltap.addon.handover.record import FrameReader, Record, encode
from tooltap.addon.handover.workers import ThreadWorker
from tooltap.addon.sinks.metrics import Metrics

HEADERS = (
    (b"Host", b"api.openai.com:443"),
    (b"Authorization", b"Bearer sk-live-0123456789"),
    (b"Content-Encoding", b"gzip"),
)


def record(**changes):
    fields = {
        "method": "POST",
        "scheme": "https",
        "host": "10.0.0.1",
        "port": 443,
        "path": "/v1/chat/completions?api-version=2024-06-01&key=abc",
        "request_headers": HEADERS,
        "request_body": b"{}",
        "status": 200,
        "chunks": [b"data: {}\n\n", b"data: [DONE]\n\n"],
    }
    return Record("chat", **(fields | changes))


def test_frames_read_back_whole_however_the_pipe_cuts_them():
    streamed = record(request_body=b'{"stream": true}', arrived=[1.5, 2.5])
    buffered = record(path="/v1/responses", status=None, chunks=[], response_body=b"{}" * 5000)
    empty = record(method="GET", request_body=b"", chunks=[], response_body=b"")
    frames = [encode(r) for r in (streamed, buffered, empty)]
    assert frames[0][2:] == [streamed.request_body, *streamed.chunks]  # the bodies, uncopied
    wire = b"".join(b"".join(frame) for frame in frames)
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    reader, got = FrameReader(read_end), []
    try:
        for at in range(0, len(wire), 7):  # the reader gets the bytes seven at a time
            os.write(write_end, wire[at : at + 7])
            if (done := reader.read()) is not None:
                got.append(done)
        os.close(write_end)
        assert reader.read() is None
    finally:
        os.close(read_end)
    joined = [
        replace(streamed, response_body=b"".join(streamed.chunks), chunks=[], ends=[10, 24]),
        buffered,
        empty,
    ]
    assert got == joined
    # Joined, a stream's pieces keep their times: its first token is timed in the inspector.
    assert got[0].exchange().arrivals == streamed.exchange().arrivals == ((10, 1.5), (24, 2.5))
    assert reader.closed


def test_the_reader_takes_no_byte_past_the_record_it_returns():
    records = [record(path=f"/v1/chat/completions?n={n}") for n in range(3)]
    frames = [b"".join(encode(r)) for r in records]
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    try:
        os.write(write_end, b"".join(frames))
        first = FrameReader(read_end).read()
        assert in_the_pipe(read_end) == len(frames[1]) + len(frames[2])
        assert first == replace(records[0], response_body=b"".join(records[0].chunks), chunks=[])
    finally:
        os.close(write_end)
        os.close(read_end)


def test_the_record_builds_the_exchange_and_what_is_logged_of_it():
    rec = record()
    exchange = rec.exchange()
    assert exchange.url == "https://10.0.0.1:443" + rec.path
    assert exchange.response_body == b"data: {}\n\ndata: [DONE]\n\n"
    assert exchange.request_headers == {"content-encoding": "gzip", "mcp-session-id": ""}
    assert rec.logged_host() == "api.openai.com"
    assert rec.logged_path() == "/v1/chat/completions?api-version=2024-06-01"  # key= left out
    assert rec.credentials() == ("Bearer sk-live-0123456789", "sk-live-0123456789")


def test_the_exchange_takes_the_first_of_a_repeated_header_whatever_its_case():
    rec = record(
        request_headers=((b"MCP-Session-Id", b"first"), (b"mcp-session-id", b"second")),
        response_headers=(
            (b"Content-Type", b"text/event-stream"),
            (b"content-type", b"application/json"),
            (b"X-Amzn-ErrorType", b"ValidationException:http://internal.amazon.com/"),
        ),
    )
    exchange = rec.exchange()
    assert exchange.request_headers == {"content-encoding": "", "mcp-session-id": "first"}
    assert exchange.response_headers == {
        "content-type": "text/event-stream",
        "content-encoding": "",
        "x-amzn-errortype": "ValidationException:http://internal.amazon.com/",
        "mcp-session-id": "",
    }


def test_a_full_thread_worker_refuses_at_once_and_a_failing_item_does_not_stop_it():
    handled, errors, gate, holding = [], [], threading.Event(), threading.Event()

    def handle(item):
        holding.set()
        gate.wait(5)
        if item == "bad":
            raise ValueError(item)
        handled.append(item)

    worker = ThreadWorker(handle, errors.append, size=2)
    worker.start()
    assert worker.submit("bad")
    assert holding.wait(5)  # the thread holds "bad"; the queue is empty again
    assert worker.submit("a") and worker.submit("b")
    started = time.monotonic()
    assert not worker.submit("c")  # full: refused, never waited for
    assert time.monotonic() - started < 1
    gate.set()
    assert worker.wait_idle(5)
    worker.stop()
    assert (handled, [str(e) for e in errors]) == (["a", "b"], ["bad"])


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # expected
@pytest.mark.parametrize("signal", [KeyboardInterrupt, SystemExit])
def test_an_interrupt_in_the_thread_worker_ends_it_rather_than_being_swallowed(signal):
    errors, threads = [], []

    def handle(_item):
        threads.append(threading.current_thread())
        raise signal

    worker = ThreadWorker(handle, errors.append, size=4)
    worker.start()
    worker.submit("x")
    deadline = time.monotonic() + 5
    while not (threads and not threads[0].is_alive()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert threads and not threads[0].is_alive()
    assert errors == []


def test_a_worker_still_busy_at_stop_ends_once_its_item_is_done():
    gate, holding, handled = threading.Event(), threading.Event(), []

    def handle(item):
        holding.set()
        gate.wait(5)
        handled.append(item)

    worker = ThreadWorker(handle, lambda _e: None, size=4)
    worker.start()
    thread = worker._thread
    worker.submit("busy")
    assert holding.wait(5)  # the thread holds "busy"
    worker.submit("queued")
    assert worker.stop(timeout=0.1) == {"none": 1}  # "queued" never handled, and counted
    gate.set()
    thread.join(5)
    assert not thread.is_alive() and handled == ["busy"]


async def test_a_child_still_starting_when_tooltap_stops_is_stopped_not_left_behind(monkeypatch):
    begun, go, stopped = threading.Event(), threading.Event(), threading.Event()

    class Starting:  # a ProcessWorker whose child starts when told to
        def __init__(self, *_args):
            pass

        def start(self):
            begun.set()
            go.wait(5)
            return 9090

        def stop(self, timeout=2.0):
            stopped.set()
            return Counter()

    monkeypatch.setattr(supervisor, "ProcessWorker", Starting)
    monkeypatch.setattr(supervisor, "BACKOFF", (0.0, 0.0))
    watcher = supervisor.Supervisor({}, 1, Budget(MiB))
    # The watch replaces a dead child; the new one is starting in a thread when tooltap stops.
    watcher._watching = asyncio.create_task(watcher._replace("the child died"))
    assert await asyncio.to_thread(begun.wait, 5)
    assert watcher.stop() == Counter()
    go.set()
    assert await asyncio.to_thread(stopped.wait, 5)


def test_a_restart_the_new_child_folds_brings_the_counts_it_carries_whenever_it_folds():
    """The new child is already running, folding every second, while the proxy writes what
    the restart carries to it: whenever a fold lands, /metrics never shows the restart
    without the drops and errors that came with it."""

    class Folding(SharedCounts):  # the proxy's table; the child folds after each write
        def __init__(self) -> None:
            super().__init__()
            self.child = SharedCounts(os.dup(self.fd))
            self.metrics = Metrics()  # the child's
            self.seen: list[tuple[float, float, float]] = []

        def _add(self, slot, count=1):
            super()._add(slot, count)
            self.child.fold_into(self.metrics)
            value = self.metrics.registry.get_sample_value
            self.seen.append((
                value("tooltap_inspector_restarts_total") or 0,
                value("tooltap_flows_total", {"api": "chat", "outcome": "dropped"}) or 0,
                value("tooltap_internal_errors_total", {"where": "tap"}) or 0,
            ))  # fmt: skip

    watcher = supervisor.Supervisor({}, 1, Budget(MiB))
    watcher.restarts = 1
    watcher._missed = Counter({"chat": 2})  # dropped while no child ran
    watcher._unfolded = [(("dropped", "chat"), 1), (("error", "tap"), 1)]  # the dead child's
    counts = Folding()
    try:
        watcher._adopt(object(), counts)
        assert counts.seen[-1] == (1, 3, 1)
        assert all(seen == (1, 3, 1) for seen in counts.seen if seen[0])
    finally:
        counts.child.close()
        counts.close()


def test_a_streams_arrival_times_cross_the_pipe_with_where_each_chunk_ended():
    streamed = record(arrived=[100.25, 100.5], started=100.0, ended=100.5)
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    try:
        os.write(write_end, b"".join(encode(streamed)))
        got = FrameReader(read_end).read()
    finally:
        os.close(write_end)
        os.close(read_end)
    assert got is not None and got.chunks == []  # joined on this side of the pipe
    first = len(b"data: {}\n\n")
    whole = first + len(b"data: [DONE]\n\n")
    assert (
        got.exchange().arrivals
        == streamed.exchange().arrivals
        == (
            (first, 100.25),
            (whole, 100.5),
        )
    )
