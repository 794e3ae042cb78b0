"""The default inspector: a child process beside the proxy. Drops are counted, never a wait; a
dead child is said once; traffic is never touched."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import psutil
import pytest
from mitmproxy import http
from mitmproxy.test import taddons
from prometheus_client.parser import text_string_to_metric_families
from support.captures import WIRE
from support.flows import CHAT_REQUEST, make_flow

from tooltap.addon.proxy.addon import Tooltap


@dataclass
class InProcessMode:
    """The addon as tooltap run has it: a child inspects, serves /metrics and writes the log."""

    addon: Tooltap
    tctx: Any
    child: psutil.Process
    url: str  # the child's /metrics

    async def cycle(self, flow: http.HTTPFlow) -> None:
        await self.tctx.cycle(self.addon, flow)


def the_child() -> psutil.Process:
    (child,) = [
        c
        for c in psutil.Process().children()
        if "tooltap.addon.inspection" in " ".join(c.cmdline())
    ]
    return child


@pytest.fixture
def in_process_mode(tmp_path, free_port) -> Iterator[InProcessMode]:
    addon = Tooltap()
    with taddons.context(addon) as tctx:
        tctx.configure(
            addon,
            tooltap_metrics_port=free_port,
            tooltap_log_format="json",
            tooltap_log_file=str(tmp_path / "log.jsonl"),
            tooltap_queue_size=1,
        )
        addon.running()
        yield InProcessMode(addon, tctx, the_child(), f"http://127.0.0.1:{free_port}/metrics")
        addon.done()


async def flows_by_outcome(url):
    text = (await asyncio.to_thread(httpx.get, url, timeout=5)).text
    return {
        sample.labels["outcome"]: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "tooltap_flows_total" and sample.labels["api"] == "chat"
    }


async def test_a_child_that_cannot_keep_up_costs_drops_that_are_counted_never_a_wait(
    in_process_mode,
):
    tap = in_process_mode
    body = (WIRE / "chat_nonstream_parallel_tool_calls.json").read_bytes()
    tap.child.suspend()  # the pipe fills, then the one-record backlog
    sent = 200
    try:
        for _ in range(sent):
            flow = make_flow("/v1/chat/completions", CHAT_REQUEST, body)
            before = flow.response.get_state()
            await tap.cycle(flow)  # returns although nothing reads the pipe
            assert flow.response.get_state() == before
    finally:
        tap.child.resume()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        seen = await flows_by_outcome(tap.url)
        if seen.get("inspected", 0) + seen.get("dropped", 0) >= sent:
            break
        await asyncio.sleep(0.1)  # the event loop drains the backlog meanwhile
    assert seen["dropped"] > 0 and seen["inspected"] > 0
    assert seen["inspected"] + seen["dropped"] == sent


async def test_a_dead_child_is_said_once_and_traffic_goes_on_untouched(in_process_mode, caplog):
    tap = in_process_mode
    tap.child.kill()
    # Dead, not yet reaped (the addon reaps it and reads its code). waitid reports the exit
    # only once every thread is gone, and with them the pipe's read end; a zombie status
    # can show while the metrics thread still holds it.
    deadline = time.monotonic() + 5
    flags = os.WEXITED | os.WNOWAIT | os.WNOHANG
    while os.waitid(os.P_PID, tap.child.pid, flags) is None and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    body = (WIRE / "chat_nonstream_parallel_tool_calls.json").read_bytes()
    with caplog.at_level(logging.ERROR, logger="tooltap"):
        for _ in range(3):
            flow = make_flow("/v1/chat/completions", CHAT_REQUEST, body)
            before = (flow.request.get_state(), flow.response.get_state())
            await tap.cycle(flow)
            await asyncio.sleep(0)  # the hand-over's write
            assert (flow.request.get_state(), flow.response.get_state()) == before
    gone = [
        r.getMessage() for r in caplog.records if "inspection process is gone" in r.getMessage()
    ]
    assert len(gone) == 1 and "exit code -9" in gone[0]
