"""MCP tools/calls in flight, watched for tooltap_tool_deadline on the proxy's event loop.

The proxy alone knows that a call is still running: its answer has not come. Each tools/call
is noted as its request passes (a look for its method's name in the body, no parsing); once a
second the oldest are looked at, and one past the deadline is handed over once, its request
alone, for the inspection side to say it overdue while it still runs.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from mitmproxy import http

from ..handover.record import Record

MAX_CALLS = 100_000  # calls watched at once; past it, the oldest go unwatched


class CallWatch:
    def __init__(self) -> None:
        self._calls: OrderedDict[str, http.HTTPFlow] = OrderedDict()  # by flow id, oldest first

    def __len__(self) -> int:
        return len(self._calls)

    def started(self, flow: http.HTTPFlow) -> None:
        """An MCP POST went by: watched if it holds a tools/call."""
        body = flow.request.raw_content
        if flow.request.method == "POST" and body and b'"tools/call"' in body:
            self._calls[flow.id] = flow
            if len(self._calls) > MAX_CALLS:
                self._calls.popitem(last=False)

    def ended(self, flow: http.HTTPFlow) -> None:
        """Answered, or broken off: no longer running."""
        self._calls.pop(flow.id, None)

    def overdue(self, now: float, deadline: float, hand_over: Callable[[Record], None]) -> None:
        """Hand over, once each, the calls running longer than the deadline at `now`."""
        for flow_id, flow in list(self._calls.items()):
            if now - flow.request.timestamp_start <= deadline:
                break  # the oldest first: the rest are younger
            del self._calls[flow_id]
            body = flow.request.raw_content or b""
            record = Record.of(
                "mcp", flow.request, flow=flow.id, request_body=body, overdue=True, ended=now
            )
            hand_over(record)  # under the flow's id: its own exchange's lines come later
