"""The inspector process, supervised: restarted with backoff when it dies or stops taking work.

The proxy's event loop never waits for it. A child that exits, or that leaves
records waiting (for the pipe or in it) without handling one for STALLED
seconds (stopped, hung), is said once in the log, killed and replaced. What
waited for it, and what it never handled, is given back to the budget and
counted as dropped by the next child, which also counts the restart
(tooltap_inspector_restarts_total) and serves /metrics again. While a child
lives, the budget its handled records held comes back on each check, and
whenever the budget would otherwise refuse a take.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import Counter
from typing import Any

from .budget import Budget
from .counts import SharedCounts
from .workers import ProcessWorker

logger = logging.getLogger("tooltap")

STALLED = 10.0  # seconds with records waiting and none handled
CHECK_EVERY = 1.0
BACKOFF = (1.0, 60.0)  # the first wait before a restart, and the longest
STEADY = 60.0  # a child that lived this long starts the backoff over


class Supervisor:
    """A ProcessWorker and its shared counts, kept alive; it offers both their interfaces."""

    def __init__(self, settings: dict[str, Any], size: int, budget: Budget) -> None:
        self._settings = settings
        self._size = size
        self._budget = budget
        self.worker: ProcessWorker | None = None
        self.counts: SharedCounts | None = None
        self.restarts = 0
        self._missed: Counter[str] = Counter()  # dropped while no child could count them
        self._unfolded: list[tuple[tuple[str, str], int]] = []  # counts a dead child never took
        self._backoff = BACKOFF[0]
        self._started_at = 0.0
        self._watching: asyncio.Task[None] | None = None
        # A restart starts its child in a thread, which goes on if stop() cancels the restart:
        # that child is stopped by whichever of the two comes second.
        self._lock = threading.Lock()
        self._stopped = False
        self._starting: tuple[ProcessWorker, SharedCounts] | None = None  # started, not adopted

    def start(self) -> int:
        """Start the first child; returns its metrics port. Blocks; raises RuntimeError."""
        worker, counts, port = self._spawn()
        self._adopt(worker, counts)
        # A restarted child serves /metrics where this one does, also when it was given port 0.
        self._settings = {**self._settings, "tooltap_metrics_port": port}
        return port

    def _spawn(self) -> tuple[ProcessWorker, SharedCounts, int]:
        """A new child, started. Touches nothing the event loop uses: it may run in a thread."""
        counts = SharedCounts()
        worker = ProcessWorker(self._settings, self._size, counts, self._budget)
        try:
            port = worker.start()
        except RuntimeError:
            counts.close()
            raise
        with self._lock:
            stopped = self._stopped
            if not stopped:
                self._starting = (worker, counts)
        if stopped:
            worker.stop(0.0)
            counts.close()
            raise RuntimeError("tooltap stopped while the inspection process started")
        return worker, counts, port

    def _adopt(self, worker: ProcessWorker, counts: SharedCounts) -> None:
        with self._lock:
            self._starting = None
        # The counts a restart carries first, the restart after them: the child, already
        # running, folds the restart first, so /metrics never shows it without them.
        counts.carry(self._unfolded)
        for api, missed in self._missed.items():
            counts.dropped(api, missed)
        self._missed.clear()
        self._unfolded = []
        if self.restarts:
            counts.restarted(self.restarts)
        counts.held(self._budget.used, self._budget.peak)
        self.worker, self.counts = worker, counts
        self._budget.reclaim = self.reclaim
        self._started_at = time.monotonic()

    # --- watching ---------------------------------------------------------------

    def watch(self) -> None:
        """Check on the child from now on (from the running event loop)."""
        self._watching = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(CHECK_EVERY)
            self.reclaim()
            if self.counts is not None:
                self.counts.held(self._budget.used, self._budget.peak)
            trouble = self.trouble()
            if trouble is not None:
                await self._replace(trouble)

    def trouble(self) -> str | None:
        """What is wrong with the child, if anything."""
        worker = self.worker
        if worker is None or worker.process is None:
            return None
        code = worker.process.poll()
        if code is not None or worker.dead:
            return f"the inspection process is gone (exit code {code})"
        if worker.stalled(STALLED):
            return (
                f"the inspection process took nothing for {STALLED:.0f} s with "
                f"{worker.unhandled} exchange(s) waiting (stopped or hung)"
            )
        return None

    async def _replace(self, trouble: str) -> None:
        old, old_counts = self.worker, self.counts
        self.worker = self.counts = None
        logger.error(f"tooltap: {trouble}; traffic still flows; it is restarted")
        if old is not None:
            if old.process is not None and old.process.poll() is None:
                old.process.kill()  # a stopped process dies too
            self._missed.update(old.drop_backlog())
            old.detach()
            await asyncio.to_thread(old.stop, 0.0)
        if old_counts is not None:
            self._unfolded += old_counts.unfolded()
            old_counts.close()
        if time.monotonic() - self._started_at > STEADY:
            self._backoff = BACKOFF[0]
        while self.worker is None:
            await asyncio.sleep(self._backoff)
            self._backoff = min(self._backoff * 2, BACKOFF[1])
            self.restarts += 1
            try:
                worker, counts, port = await asyncio.to_thread(self._spawn)
            except RuntimeError as exc:
                logger.error(f"tooltap: the inspection process did not restart: {exc}")
                continue
            self._adopt(worker, counts)
            logger.warning(f"tooltap: the inspection process is back; metrics on port {port}")

    # --- the worker's interface ---------------------------------------------------

    @property
    def waiting(self) -> int:
        return self.worker.waiting if self.worker is not None else 0

    def submit(self, item: Any) -> bool:
        return self.worker is not None and self.worker.submit(item)

    def reclaim(self) -> None:
        if self.worker is not None:
            self.worker.reclaim()

    def wait_idle(self, timeout: float) -> bool:
        return self.worker is not None and self.worker.wait_idle(timeout)

    def detach(self) -> None:
        if self._watching is not None:
            self._watching.cancel()
        if self.worker is not None:
            self.worker.detach()

    def stop(self, timeout: float = 2.0) -> Counter[str]:
        """Stop watching, stop the child (bounded); returns the records it never handled, by api."""
        if self._watching is not None:
            self._watching.cancel()
        if self._budget.reclaim == self.reclaim:
            self._budget.reclaim = None
        with self._lock:
            self._stopped = True
            starting, self._starting = self._starting, None
        if starting is not None:  # started for a restart that this stop cut short
            starting[0].stop(0.0)
            starting[1].close()
        left = self._missed + (self.worker.stop(timeout) if self.worker is not None else Counter())
        self._missed.clear()
        self.worker = None
        return left

    # --- the counts' interface ------------------------------------------------------

    def dropped(self, api: str, count: int = 1) -> None:
        if self.counts is not None:
            self.counts.dropped(api, count)
        else:
            self._missed[api] += count

    def error(self, where: str) -> None:
        if self.counts is not None:
            self.counts.error(where)

    def close(self) -> None:
        if self.counts is not None:
            self.counts.close()
            self.counts = None
