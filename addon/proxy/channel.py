"""An MCP server's GET stream, tapped and handed over piece by piece while it stays open.

The stream is the session's response channel on the legacy HTTP+SSE transport (and the
server's own messages on Streamable HTTP): it may stay open for the whole session, so it is
never held, and never kept whole. Each piece goes to the inspection side as it passes (a
record of its own, in order with the session's POSTs); what the budget or the queue to the inspector
refuses is said to the next piece as lost, and the reader starts again at the next event.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from mitmproxy import http

from ..handover.budget import Budget
from ..handover.record import Record, StreamPart


class ChannelTap:
    """The callable set on flow.response.stream: returns every piece as it is, hands a copy on."""

    def __init__(
        self,
        flow: http.HTTPFlow,
        hand_over: Callable[[Record], bool],
        budget: Budget,
        on_error: Callable[[BaseException], None],
        keep: int = 0,
    ) -> None:
        self.flow = flow
        self._hand_over = hand_over
        self._budget = budget
        self._on_error = on_error
        self.lost = False  # a piece went by unread since the last one handed over
        # The bytes that passed, up to `keep`, for the recording (store_streamed_bodies): a
        # client that hangs up leaves mitmproxy's own copy out of the flow.
        self.keep = keep
        self.copy = bytearray()

    def __call__(self, data: bytes) -> bytes:
        try:
            if data:
                if len(self.copy) + len(data) <= self.keep:
                    self.copy += data
                if self._budget.take(len(data)):
                    self.lost = not self._hand_over(self._record([data], len(data)))
                else:
                    self.lost = True
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # noqa: BLE001 - nothing may escape into mitmproxy here
            with contextlib.suppress(BaseException):
                self._on_error(exc)
        return data

    def end(self) -> None:
        """The stream closed: what its session still waits for is said."""
        self._hand_over(self._record([], 0, ended=True))

    def _record(self, chunks: list[bytes], held: int, ended: bool = False) -> Record:
        part = StreamPart(self.flow.id, ended=ended, lost=self.lost)
        request = self.flow.request
        return Record.of("mcp", request, flow=self.flow.id, chunks=chunks, held=held, part=part)
