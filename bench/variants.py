"""Variants of tooltap's addon, to find where its cost on the proxy comes from.

Loaded through bench/variant_addon.py (a mitmdump -s script) by `python -m
bench --only why`; none of this is shipped. TOOLTAP_BENCH_VARIANT picks one:

- shipped          the addon as it is (loaded with -s, like every variant)
- empty-script     a script with no addon: what loading any script costs
- empty-hooks      an addon whose request/responseheaders/response/error hooks do
                   nothing: what mitmproxy's dispatch to one more addon costs
- hooks-only       records are built and thrown away: what the hooks alone cost
- no-worker        the worker thread gets every record and does nothing with it:
                   hooks + the hand-off to a thread
- switch-interval  sys.setswitchinterval(0.0002): the event loop waits less for the GIL
- mp-queue-worker  inspect and the sinks in a child process fed by multiprocessing.Queue
- pipe-worker      the same child fed through a non-blocking pipe written by the
                   hook itself: no thread at all in the proxy process (prototype
                   of the proposed fix)
- pipe-batched     the same, written at most every 20 ms: fewer wake-ups of the child

And two used by benchmark 1 to stream JSON responses (requests stay buffered;
stream_large_bodies would stream the request too, and tooltap skips a flow
whose request body mitmproxy did not keep):

- stream-responses tooltap, with every response streamed, so it goes through the tap
- stream-only      no tooltap: an addon that only streams every response
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import pickle
import queue
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import tooltap.addon.proxy.addon as addon_module
from tooltap.addon.proxy.addon import Tooltap

NAMES = (
    "shipped",
    "empty-script",
    "empty-hooks",
    "hooks-only",
    "no-worker",
    "switch-interval",
    "mp-queue-worker",
    "pipe-worker",
    "pipe-batched",
)
ROOT = Path(__file__).resolve().parent.parent


class _Inspector:
    """The work of Tooltap._handle, in the child process."""

    def __init__(self) -> None:
        # Inspection is worth less than forwarding: on a busy machine the
        # proxy's own process must win the CPU (measured: without this the
        # sequential latency suffers when the child wakes next to the proxy).
        os.nice(10)
        from tooltap.addon.inspection.session import Session
        from tooltap.addon.sinks.log import LogSink
        from tooltap.addon.sinks.metrics import Metrics

        self.sink, self.metrics = LogSink("json", "raw", sys.stdout), Metrics()
        self.session = Session()

    def handle(self, record: Any) -> None:
        from tooltap.core import Verdict

        started = time.perf_counter()
        if record.skipped is not None:
            verdict = Verdict(api=record.api, outcome="skipped", reason=record.skipped)
        else:
            exchange = record.exchange
            if record.chunks:
                exchange = exchange.model_copy(update={"response_body": b"".join(record.chunks)})
            verdict = self.session.inspect(exchange)
        elapsed = time.perf_counter() - started
        self.sink.emit(verdict, record.host, record.path, elapsed * 1000)
        self.metrics.record(verdict, elapsed)


def _mp_child(jobs: Any) -> None:
    inspector = _Inspector()
    while (record := jobs.get()) is not None:
        inspector.handle(record)


class MpQueueWorker:
    """Worker's interface over a spawned process and a bounded multiprocessing.Queue."""

    def __init__(self, _handle: Any, _on_error: Any, size: int) -> None:
        ctx = multiprocessing.get_context("spawn")  # never fork a threaded event loop
        self._jobs = ctx.Queue(maxsize=size)
        self._process = ctx.Process(target=_mp_child, args=(self._jobs,), daemon=True)

    def start(self) -> None:
        if self._process.pid is None:
            self._process.start()

    def submit(self, item: Any) -> bool:
        try:
            self._jobs.put_nowait(item)  # pickled and written by a feeder thread
        except queue.Full:
            return False
        return True

    def wait_idle(self, timeout: float) -> bool:
        return True

    def stop(self, timeout: float = 5.0) -> None:
        if self._process.pid is not None:
            self._jobs.put(None, timeout=timeout)
            self._process.join(timeout)


class PipeWorker:
    """Worker's interface over a child process fed through a non-blocking pipe.

    submit() pickles the record and writes it from the event loop thread; what
    the pipe cannot take yet waits in a bounded buffer that the event loop
    drains when the pipe is writable. Over the bound, records are dropped
    (and counted by the caller), as the thread worker's full queue does.
    """

    LIMIT = 16 * 1024 * 1024
    DELAY = 0.0  # seconds to gather records before writing them

    def __init__(self, _handle: Any, _on_error: Any, _size: int) -> None:
        self._pending = bytearray()
        self._scheduled = False
        self._process: subprocess.Popen[bytes] | None = None
        self._write_fd = -1
        self._watching = False

    def start(self) -> None:
        if self._process is not None:
            return
        read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._write_fd, False)
        self._process = subprocess.Popen(
            [sys.executable, "-m", "bench.variants", str(read_fd)], cwd=ROOT, pass_fds=(read_fd,)
        )
        os.close(read_fd)

    def submit(self, item: Any) -> bool:
        data = pickle.dumps(item, protocol=5)
        if len(self._pending) + len(data) > self.LIMIT:
            return False
        self._pending += len(data).to_bytes(4, "big") + data
        if not self.DELAY:
            self._flush()
        elif not self._scheduled:
            asyncio.get_running_loop().call_later(self.DELAY, self._flush_later)
            self._scheduled = True
        return True

    def _flush_later(self) -> None:
        self._scheduled = False
        self._flush()

    def _flush(self) -> None:
        try:
            written = os.write(self._write_fd, self._pending)
            del self._pending[:written]
        except BlockingIOError:
            pass
        loop = asyncio.get_running_loop()
        if self._pending and not self._watching:
            loop.add_writer(self._write_fd, self._flush)
            self._watching = True
        elif not self._pending and self._watching:
            loop.remove_writer(self._write_fd)
            self._watching = False

    def wait_idle(self, timeout: float) -> bool:
        return True

    def stop(self, timeout: float = 5.0) -> None:
        if self._process is None:
            return
        os.set_blocking(self._write_fd, True)
        os.write(self._write_fd, bytes(self._pending))
        os.close(self._write_fd)  # end of file: the child finishes the queue, then exits
        try:
            self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
        self._process = None


class BatchedPipeWorker(PipeWorker):
    DELAY = 0.02


class NullWorker:
    """Takes every record and keeps none: no thread, no process."""

    def __init__(self, _handle: Any, _on_error: Any, _size: int) -> None:
        pass

    def start(self) -> None:
        pass

    def submit(self, _item: Any) -> bool:
        return True

    def wait_idle(self, timeout: float) -> bool:
        return True

    def stop(self, timeout: float = 5.0) -> None:
        pass


def _pipe_child(fd: int) -> None:
    inspector = _Inspector()
    with os.fdopen(fd, "rb") as pipe:
        while len(head := pipe.read(4)) == 4:
            inspector.handle(pickle.loads(pipe.read(int.from_bytes(head, "big"))))


class EmptyHooks:
    name = "empty-hooks"

    def request(self, flow: Any) -> None:
        pass

    def responseheaders(self, flow: Any) -> None:
        pass

    def response(self, flow: Any) -> None:
        pass

    def error(self, flow: Any) -> None:
        pass


class StreamResponses:
    """Streams every response (mitmproxy forwards the chunks as they come)."""

    name = "stream-responses"

    def responseheaders(self, flow: Any) -> None:
        if flow.response is not None and not callable(flow.response.stream):
            flow.response.stream = True


class StreamingTooltap(Tooltap):
    """tooltap with every response streamed: the addon then taps it, as it taps SSE."""

    def responseheaders(self, flow: Any) -> None:
        StreamResponses.responseheaders(self, flow)  # type: ignore[arg-type]
        super().responseheaders(flow)


class NoWorkTooltap(Tooltap):
    def _handle(self, record: Any) -> None:
        pass


def addons(variant: str) -> list[Any]:
    if variant == "switch-interval":
        sys.setswitchinterval(0.0002)
    workers = {
        "hooks-only": NullWorker,
        "mp-queue-worker": MpQueueWorker,
        "pipe-worker": PipeWorker,
        "pipe-batched": BatchedPipeWorker,
    }
    if variant in workers:
        addon_module.Worker = workers[variant]  # type: ignore[attr-defined]
    if variant == "empty-script":
        return []
    if variant == "stream-only":
        return [StreamResponses()]
    if variant == "stream-responses":
        return [StreamingTooltap()]
    if variant == "empty-hooks":
        return [EmptyHooks()]
    return [NoWorkTooltap() if variant == "no-worker" else Tooltap()]


if __name__ == "__main__":
    _pipe_child(int(sys.argv[1]))
