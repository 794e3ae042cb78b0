"""Off the hot path: hand records to the inspection, in a thread or in a child process.

The proxy's event loop only ever calls submit(), which never blocks: when the
backlog is full it returns False and the caller counts the drop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import queue
import select
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from .counts import SharedCounts
from .record import encode

logger = logging.getLogger("tooltap")

_STOP = object()


class ThreadWorker:
    def __init__(
        self, handle: Callable[[Any], None], on_error: Callable[[BaseException], None], size: int
    ) -> None:
        self._handle = handle
        self._on_error = on_error
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=size)
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="tooltap-worker", daemon=True)
            self._thread.start()

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

    def stop(self, timeout: float = 5.0) -> None:
        """Let the queue drain (up to timeout), then end the thread."""
        if self._thread is None:
            return
        with contextlib.suppress(queue.Full):
            self._queue.put(_STOP, timeout=timeout)
        self._thread.join(timeout)
        self._thread = None

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is _STOP:
                    return
                self._handle(item)
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as exc:  # noqa: BLE001 - the worker must outlive any record
                self._on_error(exc)
            finally:
                self._queue.task_done()


class ProcessWorker:
    """Records to `python -m tooltap.addon.inspection` through a pipe, written without blocking.

    submit() pickles the record and writes it from the event loop; what the pipe
    cannot take yet waits in a backlog of at most `size` records, drained when
    the pipe is writable.
    """

    def __init__(self, settings: dict[str, Any], size: int, counts: SharedCounts) -> None:
        self._settings = settings
        self._size = size
        self._counts = counts
        self._backlog: deque[tuple[str, memoryview]] = deque()  # (api, the frame still to write)
        self._process: subprocess.Popen[bytes] | None = None
        self._fd = -1
        self._watching = False
        self._detached = False  # no longer driven by the event loop: see detach()

    def start(self, timeout: float = 30.0) -> int:
        """Start the child and wait for its metrics endpoint; returns the port. Raises RuntimeError."""
        records_read, self._fd = os.pipe()
        status_read, status_write = os.pipe()
        os.set_blocking(self._fd, False)
        argv = [
            sys.executable, "-m", "tooltap.addon.inspection",
            "--records", str(records_read), "--status", str(status_write), "--counts", str(self._counts.fd),
            "--settings", json.dumps(self._settings),
        ]  # fmt: skip
        fds = (records_read, status_write, self._counts.fd)
        self._process = subprocess.Popen(argv, pass_fds=fds)  # noqa: S603 - our own argv
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
        return int(detail)

    def submit(self, item: Any) -> bool:
        if self._process is None or len(self._backlog) >= self._size:
            return False
        self._backlog.append((item.api or "none", memoryview(encode(item))))
        self._flush()
        return True

    def _flush(self) -> None:
        while self._backlog:
            api, frame = self._backlog[0]
            try:
                written = os.write(self._fd, frame)
            except BlockingIOError:
                break
            except OSError:
                self._lost()
                return
            if written < len(frame):
                self._backlog[0] = (api, frame[written:])
                break
            self._backlog.popleft()
        self._watch(bool(self._backlog))

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
        """The child is gone: count what it will never see, and stop handing it more."""
        code = self._process.poll() if self._process is not None else None
        logger.error(
            f"tooltap: the inspection process is gone (exit code {code}); traffic still flows, "
            "but is no longer inspected, logged or counted: restart tooltap"
        )
        for api, _ in self._backlog:
            self._counts.dropped(api)
        self._backlog.clear()
        self._counts.error("worker")
        self._watch(False)
        self.stop(timeout=0.0)

    def wait_idle(self, timeout: float) -> bool:
        """Everything submitted is in the pipe (the child's progress is not visible from here)."""
        deadline = time.monotonic() + timeout
        while self._backlog and time.monotonic() < deadline:
            select.select([], [self._fd], [], max(0.0, deadline - time.monotonic()))
            self._flush()
        return not self._backlog

    def stop(self, timeout: float = 5.0) -> None:
        """Hand over the backlog (up to timeout), close the pipe, and let the child finish."""
        if self._process is None:
            return
        with contextlib.suppress(RuntimeError):
            self._watch(False)
        with contextlib.suppress(OSError):
            self.wait_idle(timeout)
            os.close(self._fd)  # end of file: the child handles what it has, then exits
        try:
            self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process = None
