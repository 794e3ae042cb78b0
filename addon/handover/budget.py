"""The byte budget for what tooltap holds for inspection, and giving memory back (freed, and at
exit).

Everything tooltap keeps alive only so that it can be inspected is taken from
one budget: the tap's copy of a stream, and the bodies of a record until the
inspector has handled it (in the proxy's backlog, the pipe, or the inspector
process). Taking never waits: what does not fit is not inspected (and is
counted), and the traffic goes by as it would without tooltap.
"""

from __future__ import annotations

import atexit
import ctypes
import ctypes.util
import os
import sys
import threading
from collections.abc import Callable
from functools import cache
from typing import NoReturn

MiB = 1 << 20
# glibc: allocations at least this large are mmapped and unmapped on free, so a burst of
# large bodies is returned to the system at once. (Its default threshold rises with
# every large free, up to 32 MiB, and then such bodies stay on the heap.) It lies above
# asyncio's 256 KiB receive buffer, which every socket read allocates: at or below it, each
# read cost an mmap, an mremap and a munmap (about 4% of the proxy's throughput).
MMAP_THRESHOLD = 512 * 1024
M_MMAP_THRESHOLD = -3  # mallopt's parameter number, from glibc's malloc.h


class Budget:
    """Bytes held for inspection, against a limit. Thread-safe; never blocks for long."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.peak = 0
        # Gives back what was freed out of this process's sight (records the inspector
        # process has handled); asked before a take is refused.
        self.reclaim: Callable[[], None] | None = None
        self._lock = threading.Lock()

    def take(self, size: int) -> bool:
        """Hold size more bytes if they fit; False (and nothing held) if they do not."""
        if self._take(size):
            return True
        reclaim = self.reclaim
        if reclaim is None:
            return False
        reclaim()
        return self._take(size)

    def _take(self, size: int) -> bool:
        with self._lock:
            if self.used + size > self.limit:
                return False
            self.used += size
            self.peak = max(self.peak, self.used)
            return True

    def give(self, size: int) -> None:
        """Let go of bytes taken before."""
        with self._lock:
            self.used -= size


@cache
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "malloc_trim") else None


def return_freed_memory() -> bool:
    """Give the heap's free pages back to the system (glibc's malloc_trim). False elsewhere."""
    libc = _libc()
    return libc is not None and bool(libc.malloc_trim(0))


def map_large_allocations() -> bool:
    """Fix glibc's mmap threshold, for a process tooltap owns (`tooltap run`, the inspector).

    Bodies of a burst are then unmapped as soon as they are freed, instead of
    keeping the process at its peak. False where the C library is not glibc.
    """
    libc = _libc()
    return libc is not None and bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))


def exit_at_once(code: int) -> NoReturn:
    """End a process tooltap owns (`tooltap run`, `tooltap web`, the inspector) once its work is
    done: the exit handlers run and the output is flushed, then the process exits without the
    interpreter tearing down its modules one object at a time, which takes a third of a second
    of CPU for memory the system takes back whole."""
    try:
        atexit._run_exitfuncs()  # what a normal exit runs first
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)
