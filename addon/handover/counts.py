"""The counts only the proxy can make: flows it dropped, errors in its hooks and tap."""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
import tempfile

from tooltap.core import APIS

from ..sinks.metrics import Metrics

SLOTS = (
    *(("dropped", api) for api in (*APIS, "none")),
    *(("error", where) for where in ("hook", "tap", "worker")),
)
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

    Only the proxy's event-loop thread writes it; the child reads it and folds
    the increases into its metrics.
    """

    def __init__(self, fd: int | None = None) -> None:
        if fd is None:
            with tempfile.TemporaryFile() as handle:
                handle.truncate(_SLOT.size * len(SLOTS))
                fd = os.dup(handle.fileno())
        self.fd = fd
        self._map = mmap.mmap(fd, _SLOT.size * len(SLOTS))
        self._seen = [0] * len(SLOTS)

    def _add(self, slot: tuple[str, str], count: int = 1) -> None:
        offset = _SLOT.size * SLOTS.index(slot)
        _SLOT.pack_into(self._map, offset, _SLOT.unpack_from(self._map, offset)[0] + count)

    def dropped(self, api: str, count: int = 1) -> None:
        self._add(("dropped", api if api in APIS else "none"), count)

    def error(self, where: str) -> None:
        self._add(("error", where))

    def fold_into(self, metrics: Metrics) -> None:
        """Child side: carry what the proxy counted since the last call into the metrics."""
        for index, (kind, label) in enumerate(SLOTS):
            value = _SLOT.unpack_from(self._map, _SLOT.size * index)[0]
            if value > self._seen[index]:
                counter = (
                    metrics.flows.labels(label, "dropped")
                    if kind == "dropped"
                    else metrics.internal_errors.labels(label)
                )
                counter.inc(value - self._seen[index])
                self._seen[index] = value

    def close(self) -> None:
        self._map.close()
        with contextlib.suppress(OSError):
            os.close(self.fd)
