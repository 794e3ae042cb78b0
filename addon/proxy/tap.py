"""The stream tap: the callable set on flow.response.stream.

mitmproxy forwards whatever it returns, and an exception raised here leaves
the client with headers and no body, hanging. So the tap returns its input,
always, and only keeps a copy (up to a byte limit) for the worker to parse.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

from ..handover.budget import Budget


class StreamTap:
    """Returns every chunk as it is; keeps a copy for inspection while the caps allow.

    Past `limit` bytes, or when the memory budget has no room, it stops copying
    and lets go of what it held (overflow / over_budget).
    """

    def __init__(
        self,
        limit: int,
        on_error: Callable[[BaseException], None],
        fault: Callable[[str], None] | None = None,
        budget: Budget | None = None,
    ) -> None:
        self.limit = limit
        self.chunks: list[bytes] = []
        self.times: list[float] = []  # when each chunk arrived (epoch s): its stream's timing
        self.size = 0
        self.held = 0  # bytes of chunks taken from the budget
        self.overflow = False
        self.over_budget = False
        self.failed = False
        self._on_error = on_error
        self._fault = fault
        self._budget = budget

    def __call__(self, data: bytes) -> bytes:
        try:
            if self._fault is not None:
                self._fault("tap")
            if data and not self.overflow:
                self.size += len(data)
                if self.size > self.limit:
                    # Past the body cap: stop copying and let it all go by.
                    self.overflow = True
                    self.release()
                elif self._budget is not None and not self._budget.take(len(data)):
                    self.overflow = self.over_budget = True
                    self.release()
                else:
                    self.held += len(data)
                    self.chunks.append(data)
                    self.times.append(time.time())  # mitmproxy's own clock for its stamps
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # noqa: BLE001 - nothing else may escape into mitmproxy here
            self.failed = True
            # Counting must not break the stream either.
            with contextlib.suppress(BaseException):
                self._on_error(exc)
        return data

    def release(self) -> None:
        """Let go of the copy, and of its bytes in the budget; copy no more of this stream."""
        self.overflow = True
        if self._budget is not None:
            self._budget.give(self.held)
        self.chunks, self.times, self.held = [], [], 0

    def hand_over(self) -> tuple[list[bytes], list[float], int]:
        """The copy, when each piece came, and its held bytes, now the record's: the tap keeps
        none of them."""
        chunks, times, held = self.chunks, self.times, self.held
        self.chunks, self.times, self.held = [], [], 0
        return chunks, times, held
