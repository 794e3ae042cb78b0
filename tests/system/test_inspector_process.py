"""The default inspector: a child process beside the proxy. Drops are counted, never a wait; a
dead child is said once; traffic is never touched."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator
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

from tooltap.addon.handover import supervisor
from tooltap.addon.proxy.addon import Tooltap

# Read before any test patches them: the figures the README gives.
DOCUMENTED_STALL = supervisor.STALLED
SHUTDOWN_WAIT = 2.0  # "about two seconds" for the inspector to take what is waiting


@dataclass
class InProcessMode:
    """The addon as tooltap run has it: a child inspects, serves /metrics and writes the log."""

    addon: Tooltap
    tctx: Any
    child: psutil.Process
    url: str  # the child's /metrics

    async def cycle(self, flow: http.HTTPFlow) -> None:
        await self.tctx.cycle(self.addon, flow)


def the_child() -> psutil.Process | None:
    """The inspector process, or None while there is none (it is being restarted)."""
    children = [
        c
        for c in psutil.Process().children()
        if c.is_running()
        and c.status() != psutil.STATUS_ZOMBIE
        and "tooltap.addon.inspection" in " ".join(c.cmdline())
    ]
    return children[0] if len(children) == 1 else None


@pytest.fixture
async def in_process_mode(tmp_path, free_port, monkeypatch) -> AsyncIterator[InProcessMode]:
    # A quicker watch than in production: checked every 0.2 s, stalled after 2 s.
    monkeypatch.setattr(supervisor, "CHECK_EVERY", 0.2)
    monkeypatch.setattr(supervisor, "STALLED", 2.0)
    monkeypatch.setattr(supervisor, "BACKOFF", (0.2, 1.0))
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
        child = the_child()
        assert child is not None
        yield InProcessMode(addon, tctx, child, f"http://127.0.0.1:{free_port}/metrics")
        addon.done()


async def samples(url):
    text = (await asyncio.to_thread(httpx.get, url, timeout=5)).text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def flows_by_outcome(url):
    return {
        dict(labels)["outcome"]: value
        for (name, labels), value in (await samples(url)).items()
        if name == "tooltap_flows_total" and dict(labels)["api"] == "chat"
    }


async def until(predicate, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if await predicate():
                return True
        await asyncio.sleep(0.1)
    return False


async def test_a_child_that_cannot_keep_up_costs_drops_that_are_counted_never_a_wait(
    in_process_mode,
):
    tap = in_process_mode
    padded = json.loads((WIRE / "chat_nonstream_parallel_tool_calls.json").read_text())
    padded["choices"][0]["message"]["content"] = "x" * 20_000
    body = json.dumps(padded).encode()  # 200 of them overflow the 1 MiB pipe
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


async def test_a_killed_inspector_is_said_once_restarted_and_inspection_resumes(
    in_process_mode, caplog
):
    tap = in_process_mode
    body = (WIRE / "chat_nonstream_parallel_tool_calls.json").read_bytes()
    with caplog.at_level(logging.WARNING, logger="tooltap"):
        tap.child.kill()
        for _ in range(3):  # traffic goes on, untouched, while the child is gone
            flow = make_flow("/v1/chat/completions", CHAT_REQUEST, body)
            before = (flow.request.get_state(), flow.response.get_state())
            await tap.cycle(flow)
            assert (flow.request.get_state(), flow.response.get_state()) == before
        watcher = tap.addon.inspection.worker
        # The count goes up before the new child starts (in a thread): wait for it to be taken on.
        assert await until(lambda: asyncio.sleep(0, watcher.restarts == 1 and watcher.worker))
        child = the_child()
        assert child is not None and child.pid != tap.child.pid

        async def restart_counted():
            return (await samples(tap.url)).get(("tooltap_inspector_restarts_total", ())) == 1

        assert await until(restart_counted)  # /metrics is back, on the same port
        await tap.cycle(make_flow("/v1/chat/completions", CHAT_REQUEST, body))

        async def inspected():
            return (await flows_by_outcome(tap.url)).get("inspected") == 1

        assert await until(inspected)
    gone = [r.getMessage() for r in caplog.records if "is gone" in r.getMessage()]
    assert len(gone) == 1 and "exit code -9" in gone[0]

    # The three sent meanwhile are counted, as dropped: carried to the new child, which folds
    # them (with its restart) within a second, possibly after it inspected its first flow.
    async def all_counted():
        seen = await flows_by_outcome(tap.url)
        return seen.get("inspected", 0) + seen.get("dropped", 0) == 1 + 3

    assert await until(all_counted)


async def test_a_records_bytes_stay_in_the_budget_until_the_inspector_has_handled_it(
    in_process_mode,
):
    tap = in_process_mode
    body = (WIRE / "chat_nonstream_parallel_tool_calls.json").read_bytes()
    flows = [make_flow("/v1/chat/completions", CHAT_REQUEST, body) for _ in range(3)]
    held = sum(len(f.request.raw_content) + len(body) for f in flows)
    budget = tap.addon.budget
    tap.child.suspend()
    try:
        for flow in flows:
            await tap.cycle(flow)
        assert tap.addon.inspection.worker.worker.waiting == 0  # all of them in the pipe
        assert budget.used == held
    finally:
        tap.child.resume()
    assert await until(lambda: asyncio.sleep(0, budget.used == 0))

    async def inspected():
        return (await flows_by_outcome(tap.url)).get("inspected") == 3

    assert await until(inspected)


async def test_the_budget_of_records_a_killed_inspector_never_handled_comes_back(
    in_process_mode,
):
    tap = in_process_mode
    body = (WIRE / "chat_nonstream_parallel_tool_calls.json").read_bytes()
    budget = tap.addon.budget
    tap.child.suspend()
    for _ in range(3):
        await tap.cycle(make_flow("/v1/chat/completions", CHAT_REQUEST, body))
    assert budget.used > 0
    tap.child.kill()  # with three records in its pipe, none handled
    assert await until(lambda: asyncio.sleep(0, tap.addon.inspection.worker.restarts == 1))
    assert budget.used == 0

    async def dropped():
        return (await flows_by_outcome(tap.url)).get("dropped") == 3

    assert await until(dropped)


async def test_a_stopped_inspector_is_restarted_and_the_backlog_stays_within_the_budget(
    in_process_mode, caplog
):
    tap = in_process_mode
    tap.tctx.configure(tap.addon, tooltap_memory_budget=1 << 20, tooltap_queue_size=1000)
    await tap.addon.restarting  # the queue size is the inspector's: it restarts with it
    stopped = the_child()
    assert stopped is not None
    big = json.loads((WIRE / "chat_nonstream_parallel_tool_calls.json").read_text())
    big["choices"][0]["message"]["content"] = "x" * 200_000
    body = json.dumps(big).encode()
    budget = tap.addon.budget
    with caplog.at_level(logging.WARNING, logger="tooltap"):
        stopped.suspend()
        try:
            for _ in range(40):  # 8 MB in all, against a 1 MiB budget
                await tap.cycle(make_flow("/v1/chat/completions", CHAT_REQUEST, body))
                assert budget.used <= budget.limit
            assert await until(lambda: asyncio.sleep(0, the_child() not in (None, stopped)))
        finally:
            with contextlib.suppress(psutil.Error):
                stopped.resume()
    assert budget.peak <= budget.limit and budget.used == 0
    assert any("took nothing for" in r.getMessage() for r in caplog.records)

    async def all_counted():
        seen = await flows_by_outcome(tap.url)
        return sum(seen.get(o, 0) for o in ("inspected", "skipped", "dropped")) == 40

    assert await until(all_counted)  # by the new child: nothing is lost from the counts
    assert (await samples(tap.url))[("tooltap_held_peak_bytes", ())] <= 1 << 20


async def test_shutdown_is_bounded_and_says_how_many_exchanges_were_not_inspected(
    in_process_mode, caplog, monkeypatch
):
    monkeypatch.setattr(supervisor, "STALLED", 600.0)  # no restart: the child stays stopped
    tap = in_process_mode
    padded = json.loads((WIRE / "chat_nonstream_parallel_tool_calls.json").read_text())
    padded["choices"][0]["message"]["content"] = "x" * 20_000
    body = json.dumps(padded).encode()
    tap.child.suspend()
    sent = 100  # ~2 MB: the 1 MiB pipe fills, one record waits, the rest are dropped
    for _ in range(sent):
        await tap.cycle(make_flow("/v1/chat/completions", CHAT_REQUEST, body))
    table = tap.addon.inspection.counts.counts
    # Refused by the full hand-over: the dropped counts, less the records still in the pipe.
    refused = sum(n for _slot, n in table.unfolded()) - sum(table.unhandled().values())
    with caplog.at_level(logging.WARNING, logger="tooltap"):
        started = time.monotonic()
        await asyncio.to_thread(tap.addon.done)
        took = time.monotonic() - started
    # The stopped inspector gets its two seconds, and not much more.
    assert SHUTDOWN_WAIT <= took < SHUTDOWN_WAIT + 1.5, took
    assert not tap.child.is_running() or tap.child.status() == psutil.STATUS_ZOMBIE
    (said,) = [r.getMessage() for r in caplog.records if "not inspected" in r.getMessage()]
    never = int(said.split()[1])  # in the pipe or waiting for it
    assert refused > 0 and never + refused == sent  # every flow: said or counted as dropped


async def test_an_inspector_that_handles_nothing_for_10_s_is_restarted_after_10_s(
    in_process_mode, caplog, monkeypatch
):
    assert DOCUMENTED_STALL == 10.0
    monkeypatch.setattr(supervisor, "STALLED", DOCUMENTED_STALL)
    tap = in_process_mode
    stopped = tap.child
    stopped.suspend()
    try:
        with caplog.at_level(logging.WARNING, logger="tooltap"):
            started = time.monotonic()
            await tap.cycle(make_flow("/v1/chat/completions", CHAT_REQUEST, b"{}"))

            async def said():
                return any("took nothing for 10 s" in r.getMessage() for r in caplog.records)

            assert await until(said, timeout=20)
            took = time.monotonic() - started
    finally:
        with contextlib.suppress(psutil.Error):
            stopped.resume()
    # Checked every 0.2 s here (CHECK_EVERY is patched; 1 s in production).
    assert DOCUMENTED_STALL - 0.3 <= took < DOCUMENTED_STALL + 1.5, took
