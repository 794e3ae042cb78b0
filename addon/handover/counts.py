"""The counts only the proxy can make: flows it dropped, errors in its hooks and tap."""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
import tempfile
from collections import Counter

from tooltap.core import APIS

from ..sinks.metrics import Metrics

SLOTS = (
    # First: the child folds the slots in order, and the proxy writes a restart after the
    # counts it carries (Supervisor._adopt), so a restart folded brings its counts along.
    ("restarted", "inspector"),
    *(("dropped", api) for api in (*APIS, "none")),
    # Records the proxy wrote to the pipe; in the second row, those the child handled.
    *(("written", api) for api in (*APIS, "none")),
    *(("error", where) for where in ("hook", "tap", "worker")),
    ("held", "now"),  # a gauge, set by the proxy: bytes it holds for inspection
    ("held", "peak"),
    # The budget the records written to the pipe hold; in the second row, that of those
    # the child handled, which the proxy gives back.
    ("bytes", "written"),
)
_BYTES = SLOTS.index(("bytes", "written"))
_SLOT = struct.Struct("<Q")


class DirectCounts:
    """Thread mode: the proxy counts into the metrics it serves itself."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def dropped(self, api: str, count: int = 1) -> None:
        self.metrics.flow(api, "dropped", count)

    def error(self, where: str) -> None:
        self.metrics.internal_error(where)

    def close(self) -> None:
        pass


class SharedCounts:
    """Process mode: a table of counters in a shared, unlinked temporary file.

    Two rows: what the proxy counted (only its event-loop thread writes it), and
    how much of it the child has folded into its metrics. What a dead child never
    folded is carried to the next one (unfolded()), so no count is lost to a restart.
    """

    def __init__(self, fd: int | None = None) -> None:
        if fd is None:
            with tempfile.TemporaryFile() as handle:
                handle.truncate(_SLOT.size * len(SLOTS) * 2)
                fd = os.dup(handle.fileno())
        self.fd = fd
        self._map = mmap.mmap(fd, _SLOT.size * len(SLOTS) * 2)

    def _get(self, row: int, index: int) -> int:
        return int(_SLOT.unpack_from(self._map, _SLOT.size * (row * len(SLOTS) + index))[0])

    def _set(self, row: int, index: int, value: int) -> None:
        _SLOT.pack_into(self._map, _SLOT.size * (row * len(SLOTS) + index), value)

    def _add(self, slot: tuple[str, str], count: int = 1) -> None:
        index = SLOTS.index(slot)
        self._set(0, index, self._get(0, index) + count)

    def dropped(self, api: str, count: int = 1) -> None:
        self._add(("dropped", api if api in APIS else "none"), count)

    def error(self, where: str, count: int = 1) -> None:
        self._add(("error", where), count)

    def held(self, used: int, peak: int) -> None:
        """Proxy side: what the memory budget holds now, and the most it held."""
        for slot, value in ((("held", "now"), used), (("held", "peak"), peak)):
            self._set(0, SLOTS.index(slot), max(0, value))

    def written(self, api: str, held: int) -> None:
        """Proxy side: one more record is in the pipe, holding `held` bytes of the budget."""
        self._add(("written", api if api in APIS else "none"))
        self._set(0, _BYTES, self._get(0, _BYTES) + held)

    def handled(self, api: str | None, held: int) -> None:
        """Child side: one more record read off the pipe is handled (and its bodies freed)."""
        index = SLOTS.index(("written", api if api in APIS else "none"))
        self._set(1, index, self._get(1, index) + 1)
        self._set(1, _BYTES, self._get(1, _BYTES) + held)

    def handled_records(self) -> int:
        """Proxy side: how many records the child has handled so far."""
        return sum(self._get(1, i) for i, (kind, _) in enumerate(SLOTS) if kind == "written")

    def written_bytes(self) -> int:
        """Proxy side: the budget held by all the records written to the pipe so far."""
        return self._get(0, _BYTES)

    def handled_bytes(self) -> int:
        """Proxy side: the budget held by those of them the child has handled."""
        return self._get(1, _BYTES)

    def restarted(self, times: int) -> None:
        """Set as the child is adopted, after the counts carried to it: it is the proxy's
        inspector restarted this many times."""
        self._add(("restarted", "inspector"), times)

    def unhandled(self) -> Counter[str]:
        """Proxy side: records in the pipe that the child has not handled, by api."""
        return Counter(
            {
                label: self._get(0, index) - self._get(1, index)
                for index, (kind, label) in enumerate(SLOTS)
                if kind == "written" and self._get(0, index) > self._get(1, index)
            }
        )

    def unfolded(self) -> list[tuple[tuple[str, str], int]]:
        """Proxy side, for a child that is gone: the counts it never folded into its metrics,
        and the records it never handled (dropped)."""
        found = []
        for index, (kind, label) in enumerate(SLOTS):
            left = self._get(0, index) - self._get(1, index)
            if kind in ("dropped", "error", "written") and left > 0:
                found.append((("dropped", label) if kind == "written" else (kind, label), left))
        return found

    def carry(self, counts: list[tuple[tuple[str, str], int]]) -> None:
        """Proxy side: add counts a dead child never folded."""
        for slot, count in counts:
            self._add(slot, count)

    def fold_into(self, metrics: Metrics) -> None:
        """Child side: carry what the proxy counted since the last call into the metrics."""
        for index, (kind, label) in enumerate(SLOTS):
            value, seen = self._get(0, index), self._get(1, index)
            if kind == "held":
                (metrics.held if label == "now" else metrics.held_peak).set(value)
            elif kind not in ("written", "bytes") and value > seen:
                if kind == "dropped":
                    metrics.flows.labels(label, "dropped").inc(value - seen)
                elif kind == "error":
                    metrics.internal_errors.labels(label).inc(value - seen)
                else:
                    metrics.inspector_restarts.inc(value - seen)
                self._set(1, index, value)

    def close(self) -> None:
        self._map.close()
        with contextlib.suppress(OSError):
            os.close(self.fd)
