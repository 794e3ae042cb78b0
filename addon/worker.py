"""Off the hot path: a bounded queue and one worker thread that runs inspect and the sinks.

The proxy thread only ever calls submit(), which never blocks: a full queue
drops the record and says so, and the caller counts it.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

_STOP = object()


class Worker:
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
            except BaseException as exc:  # noqa: BLE001 - the worker must outlive any record
                self._on_error(exc)
            finally:
                self._queue.task_done()


class RecentCalls(OrderedDict[str, list[str]]):
    """response id -> the call ids it returned, the newest `size` responses only.

    Lets a follow-up with previous_response_id be checked against calls that
    live on the server; bounded so memory does not grow with traffic.
    """

    def __init__(self, size: int = 10_000) -> None:
        super().__init__()
        self.size = size

    def remember(self, response_id: str, call_ids: list[str]) -> None:
        self[response_id] = call_ids
        self.move_to_end(response_id)
        while len(self) > self.size:
            self.popitem(last=False)
