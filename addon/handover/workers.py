"""Off the hot path: hand records to the inspection, in a thread or in a child process.

The proxy's event loop only ever calls submit(), which never blocks: when the
backlog is full it returns False and the caller counts the drop.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import itertools
import json
import logging
import os
import queue
import select
import subprocess
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .budget import Budget, MiB
from .counts import SharedCounts
from .record import encode

logger = logging.getLogger("tooltap")

_STOP = object()
PIPE_SIZE = MiB  # Linux's default ceiling for an unprivileged process (fs.pipe-max-size)
IOV_MAX = 512  # buffers per writev; the system's limit is 1,024
TICK_EVERY = 1.0  # seconds between two looks at the clock (the calls owed past the deadline)


class ThreadWorker:
    """Items to handle(item) in a thread of this process, through a bounded queue.

    release(item) runs once an item is handled, or found unhandled at stop.
    """

    def __init__(
        self,
        handle: Callable[[Any], None],
        on_error: Callable[[BaseException], None],
        size: int,
        release: Callable[[Any], None] = lambda _item: None,
        tick: Callable[[float], None] = lambda _now: None,
    ) -> None:
        self._handle = handle
        self._tick = tick  # once a second at most: what waits on the clock
        self._on_error = on_error
        self._release = release
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=size)
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="tooltap-worker", daemon=True)
            self._thread.start()

    @property
    def waiting(self) -> int:
        """Items queued, not taken yet."""
        return self._queue.qsize()

    def submit(self, item: Any) -> bool:
        """Queue an item; False (and nothing queued) when the queue is full."""
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            return False
        return True

    def wait_idle(self, timeout: float) -> bool:
        """Wait until everything queued so far is handled; False on timeout."""
        done = threading.Event()

        def join() -> None:
            self._queue.join()
            done.set()

        threading.Thread(target=join, daemon=True).start()
        return done.wait(timeout)

    def stop(self, timeout: float = 2.0) -> Counter[str]:
        """Let the queue drain (up to timeout), then end the thread.

        Returns how many items were left unhandled, by api.
        """
        left: Counter[str] = Counter()
        if self._thread is None:
            return left
        with contextlib.suppress(queue.Full):
            self._queue.put(_STOP, timeout=timeout)
        self._thread.join(timeout)
        alive, self._thread = self._thread.is_alive(), None
        with contextlib.suppress(queue.Empty):
            while True:
                item = self._queue.get_nowait()
                if item is not _STOP:
                    self._release(item)
                    left[getattr(item, "api", None) or "none"] += 1
        if alive:  # still on an item: it ends when it gets to this
            self._queue.put_nowait(_STOP)
        return left

    def _run(self) -> None:
        ticked = time.monotonic()
        while True:
            if time.monotonic() - ticked >= TICK_EVERY:
                ticked = time.monotonic()
                self._ticked()
            try:
                item = self._queue.get(timeout=TICK_EVERY)
            except queue.Empty:
                continue
            try:
                if item is _STOP:
                    return
                self._handle(item)
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as exc:  # noqa: BLE001 - the worker must outlive any record
                self._on_error(exc)
            finally:
                if item is not _STOP:
                    self._release(item)
                self._queue.task_done()

    def _ticked(self) -> None:
        try:
            self._tick(time.time())
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # noqa: BLE001 - the worker must outlive any tick
            self._on_error(exc)


@dataclass(slots=True)
class _Frame:
    api: str
    # What is still to be written: the record's own buffers, uncopied and unwrapped (a
    # view each would cost more than a small SSE chunk); the first may be a view of its end.
    parts: deque[bytes | memoryview]
    held: int  # the record's bytes taken from the budget, given back once the child handled it


class ProcessWorker:
    """Records to `python -m tooltap.addon.inspection` through a pipe, written without blocking.

    submit() frames the record (its bodies are not copied) and writes what the
    pipe takes at once, from the event loop; the rest waits in a backlog of at
    most `size` records, drained when the pipe is writable. A record holds its
    budget until the child has handled it: reclaim() gives back what the count
    table says was handled since it last looked, without waiting. When the
    child is gone, `dead` is set and what waited is given back and counted as
    dropped; once stopped, so is what the child never handled.
    """

    def __init__(
        self, settings: dict[str, Any], size: int, counts: SharedCounts, budget: Budget
    ) -> None:
        self._settings = settings
        self._size = size
        self._counts = counts
        self._budget = budget
        self._backlog: deque[_Frame] = deque()
        self.process: subprocess.Popen[bytes] | None = None
        self._fd = -1
        self._watching = False
        self._detached = False  # no longer driven by the event loop: see detach()
        self.dead = False
        self.progress = time.monotonic()  # when the child was seen handling, or with none left
        self._handled = 0  # records the child had handled then
        self._given = 0  # of the budget the written records hold, what was given back
        self._giving = threading.Lock()  # reclaim() may run on the loop while stop() runs

    @property
    def waiting(self) -> int:
        """Records waiting for the pipe."""
        return len(self._backlog)

    @property
    def unhandled(self) -> int:
        """Records the child has not handled: waiting for the pipe, or in it."""
        return len(self._backlog) + self._counts.unhandled().total()

    def stalled(self, seconds: float) -> bool:
        """Records have waited this long with none handled. Asked on a beat: progress is what
        changed between two calls."""
        handled = self._counts.handled_records()
        if handled != self._handled or not self.unhandled:
            self._handled, self.progress = handled, time.monotonic()
        return time.monotonic() - self.progress > seconds

    def start(self, timeout: float = 30.0) -> int:
        """Start the child and wait for its metrics endpoint; returns the port. Raises RuntimeError."""
        records_read, self._fd = os.pipe()
        status_read, status_write = os.pipe()
        os.set_blocking(self._fd, False)
        with contextlib.suppress(OSError):  # a bigger pipe: fewer wake-ups under load
            fcntl.fcntl(self._fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        argv = [
            sys.executable, "-m", "tooltap.addon.inspection",
            "--records", str(records_read), "--status", str(status_write), "--counts", str(self._counts.fd),
            "--settings", json.dumps(self._settings),
        ]  # fmt: skip
        fds = (records_read, status_write, self._counts.fd)
        self.process = subprocess.Popen(argv, pass_fds=fds)  # noqa: S603 - our own argv
        os.close(records_read)
        os.close(status_write)
        with os.fdopen(status_read) as status:
            ready, _, _ = select.select([status], [], [], timeout)
            line = (
                status.readline().strip() if ready else "error the inspection process did not start"
            )
        kind, _, detail = line.partition(" ")
        if kind != "ready":
            self.stop(timeout=1.0)
            raise RuntimeError(detail or "the inspection process exited at start")
        self.progress = time.monotonic()
        return int(detail)

    def submit(self, item: Any) -> bool:
        if self.process is None or self.dead or len(self._backlog) >= self._size:
            return False
        parts: deque[bytes | memoryview] = deque(part for part in encode(item) if part)
        self._backlog.append(_Frame(item.api or "none", parts, item.held))
        if not self._watching:  # else the pipe is full: the loop flushes it once it drains
            self._flush()
        return True

    def _flush(self) -> None:
        while self._backlog:
            parts: list[bytes | memoryview] = []
            for frame in self._backlog:
                parts.extend(itertools.islice(frame.parts, IOV_MAX - len(parts)))
                if len(parts) == IOV_MAX:
                    break
            try:
                written = os.writev(self._fd, parts)
            except BlockingIOError:
                break
            except OSError:
                self._lost()
                return
            self._advance(written)
        self._watch(bool(self._backlog))

    def _advance(self, written: int) -> None:
        """Drop what the pipe took off the front of the backlog."""
        while written:
            frame = self._backlog[0]
            part = frame.parts[0]
            if written < len(part):
                frame.parts[0] = memoryview(part)[written:]
                return
            written -= len(part)
            frame.parts.popleft()
            if not frame.parts:
                self._backlog.popleft()
                self._counts.written(frame.api, frame.held)

    def reclaim(self) -> None:
        """Give back the budget of the records the child has handled since the last call."""
        with self._giving:
            if self.process is None:
                return  # stopped: stop() gave it all back, and the table may be closed
            handled = self._counts.handled_bytes()
            self._budget.give(handled - self._given)
            self._given = handled

    def _give_back_unhandled(self) -> None:
        """The child is gone: the records it never handled hold no budget any more."""
        with self._giving:
            written = self._counts.written_bytes()
            self._budget.give(written - self._given)
            self._given = written

    def detach(self) -> None:
        """Stop writing from the event loop, so that stop() can run in another thread."""
        self._watch(False)
        self._detached = True

    def _watch(self, on: bool) -> None:
        if on == self._watching or self._detached:
            return
        loop = asyncio.get_running_loop()
        if on:
            loop.add_writer(self._fd, self._flush)
        else:
            loop.remove_writer(self._fd)
        self._watching = on

    def _lost(self) -> None:
        """The pipe is broken: the child is gone. What waits is left for drop_backlog()."""
        self.dead = True
        self._watch(False)

    def drop_backlog(self) -> Counter[str]:
        """Give up on the records still waiting: their budget given back; how many, by api."""
        left: Counter[str] = Counter(frame.api for frame in self._backlog)
        for frame in self._backlog:
            self._budget.give(frame.held)
        self._backlog.clear()
        return left

    def wait_idle(self, timeout: float) -> bool:
        """Everything submitted is in the pipe (not necessarily handled by the child yet)."""
        deadline = time.monotonic() + timeout
        while self._backlog and not self.dead and time.monotonic() < deadline:
            select.select([], [self._fd], [], max(0.0, deadline - time.monotonic()))
            self._flush()
        return not self._backlog

    def stop(self, timeout: float = 2.0) -> Counter[str]:
        """Hand over the backlog and let the child handle it, both within timeout; then end it.

        Returns how many records the child never handled, by api; their budget is given back.
        """
        if self.process is None:
            return Counter()
        deadline = time.monotonic() + timeout
        with contextlib.suppress(RuntimeError):
            self._watch(False)
        with contextlib.suppress(OSError):
            self.wait_idle(timeout)
        left = self.drop_backlog()
        with contextlib.suppress(OSError):
            os.close(self._fd)  # end of file: the child handles what it has, then exits
        try:
            self.process.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.process.terminate()  # it stops after the record in hand
            try:
                self.process.wait(0.5)
            except subprocess.TimeoutExpired:
                self.process.kill()  # stopped or hung
                self.process.wait()
        self.process = None
        self._give_back_unhandled()
        return left + self._counts.unhandled()
