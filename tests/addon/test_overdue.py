"""Overdue calls: an MCP tools/call the proxy still waits on, and a call an open socket owes,
said once each as the deadline passes, never for a call that ended or was answered."""

from __future__ import annotations

import io
import json

from mitmproxy.test import tflow, tutils
from structlog.testing import LogCapture

from tooltap.addon.handover.record import Record
from tooltap.addon.inspection.inspector import Inspector
from tooltap.addon.proxy.calls import CallWatch
from tooltap.addon.sinks.log import LogSink
from tooltap.addon.sinks.metrics import Metrics

T0 = 1_764_480_000.0


def tools_call(started: float, rpc: int = 7) -> object:
    body = {"jsonrpc": "2.0", "id": rpc, "method": "tools/call",
            "params": {"name": "slow_report", "arguments": {"days": 30}}}  # fmt: skip
    request = tutils.treq(
        method=b"POST", path=b"/mcp", content=json.dumps(body).encode(),
        headers=((b"mcp-session-id", b"sess-1"), (b"content-type", b"application/json")),
    )  # fmt: skip
    request.timestamp_start = started
    flow = tflow.tflow(req=request, resp=False)
    return flow


def test_the_proxy_hands_over_a_tools_call_running_past_the_deadline_once():
    watch, handed = CallWatch(), []
    slow, answered, quick = tools_call(T0), tools_call(T0, rpc=9), tools_call(T0 + 30, rpc=8)
    for flow in (slow, answered, quick):
        watch.started(flow)
    watch.ended(answered)  # its answer came before the deadline
    watch.overdue(T0 + 59, 60, handed.append)
    assert handed == []
    watch.overdue(T0 + 61, 60, handed.append)
    assert [(r.overdue, r.ended, r.api) for r in handed] == [(True, T0 + 61, "mcp")]
    watch.overdue(T0 + 200, 60, handed.append)  # once each: the quick one now, not the slow
    assert len(handed) == 2 and len(watch) == 0


def test_a_listing_or_a_get_is_not_watched():
    watch = CallWatch()
    listing = tools_call(T0)
    listing.request.content = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}'
    watch.started(listing)
    assert len(watch) == 0


def inspector() -> tuple[Inspector, LogCapture, Metrics]:
    capture, metrics = LogCapture(), Metrics()
    sink = LogSink(stream=io.StringIO(), processors=[capture])
    return Inspector(sink, metrics, deadline=60), capture, metrics


def test_the_inspector_says_an_overdue_tools_call_with_its_tool_and_wait():
    worker, capture, metrics = inspector()
    flow = tools_call(T0)
    worker.handle(Record.of("mcp", flow.request, request_body=flow.request.content,
                            overdue=True, ended=T0 + 61.5))  # fmt: skip
    (said,) = capture.entries
    assert (said["event"], said["log_level"], said["api"]) == ("tool_overdue", "warning", "mcp")
    assert (said["call_id"], said["name"], said["waited_ms"]) == ("7", "slow_report", 61500.0)
    assert said["deadline_s"] == 60 and said["session"] is not None  # a tag, never the id
    assert metrics.registry.get_sample_value("tooltap_overdue_calls_total", {"api": "mcp"}) == 1
