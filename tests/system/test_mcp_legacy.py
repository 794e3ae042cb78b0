"""MCP's legacy HTTP+SSE transport (2024-11-05) through a real `tooltap run --upstream mcp:URL`:
the official SDK's sse_client against the SDK's own sse_app (tests/support/mcp_server.py).

The session starts and runs through the proxy (its GET stream is never held); each POST,
answered 202, is paired by id with the response the GET stream carries and logged as one
exchange with its calls and results, under the POST's path and the session's tag; POST
/legacy/messages/ is MCP on an MCP host, never Anthropic's Messages; the recorded flow file
audits to the live findings.
"""

from __future__ import annotations

import json
import subprocess
import sys

import anyio
import pytest
from mcp.client.session import ClientSession
from support.mcp_client import attempt, in_session
from support.mcp_server import CHATTY_PAUSE, running

from tooltap.addon.harness.launch import Proxy

WEATHER = "weather-tools 1.4.0"


@pytest.fixture(scope="module")
def server():
    with running() as url:
        yield url


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("legacy")
    return folder / "flows.mitm", folder / "flows.har"


@pytest.fixture(scope="module")
def proxy(server, recorded):
    flows, har = recorded
    extra = ("--set", f"save_stream_file={flows}", "--set", f"hardump={har}",
             "--set", "store_streamed_bodies=true")  # fmt: skip
    with Proxy.tooltap([f"mcp:{server}"], "--log-format", "json", extra=extra) as running_proxy:
        yield running_proxy


def test_a_legacy_session_runs_through_and_each_post_is_read_with_its_answer(proxy):
    mark = proxy.mark()

    async def work(session: ClientSession) -> list[bool | str]:
        await session.list_tools()
        return [
            await attempt(session.call_tool("add", {"a": 2, "b": 3})),
            await attempt(session.call_tool("add", {"a": "x"})),
            await attempt(session.call_tool("flagged", {})),
            await attempt(session.call_tool("chatty", {"n": 1})),  # notifications first
        ]

    assert in_session(f"{proxy.url}/legacy/sse", work) == [False, True, True, False]
    turns = proxy.wait_for("turn", 7, since=mark)
    calls = proxy.wait_for("tool_call", 4, since=mark)
    results = proxy.wait_for("tool_result", 4, since=mark)
    assert sorted(tuple(t["rpc"]) for t in turns) == sorted(
        [("initialize",), ("notifications/initialized",), ("tools/list",)] + [("tools/call",)] * 4
    )
    assert {(t["api"], t["outcome"], t["path"]) for t in turns} == {
        ("mcp", "inspected", "/legacy/messages/")
    }
    assert {t["status"] for t in turns} == {202}
    # Each answer came on the session's stream; the notification's 202 was its whole answer.
    assert {t["stream"] for t in turns if t["rpc"] != ["notifications/initialized"]} == {True}
    assert {t["server"] for t in turns if t["rpc"] != ["notifications/initialized"]} == {WEATHER}
    assert len({e["session"] for e in [*turns, *calls, *results]}) == 1
    assert [(c["name"], bool(c["schema_errors"])) for c in calls] == [
        ("add", False),
        ("add", True),
        ("flagged", False),
        ("chatty", False),
    ]
    assert [(r["name"], r["outcome"]) for r in results] == [
        ("add", "ok"),
        ("add", "error"),
        ("flagged", "error"),
        ("chatty", "ok"),
    ]
    assert [t["reason"] for t in turns] == [None] * 7
    assert proxy.wait_for("turn", since=mark, where=lambda e: e.get("api") == "messages",
                          timeout=0) == []  # fmt: skip


def test_a_slow_answer_on_the_stream_reaches_the_client_when_sent(proxy):
    async def work(session: ClientSession) -> tuple[float, list[str]]:
        seen: list[str] = []
        started = anyio.current_time()
        await session.call_tool(
            "chatty", {"n": 2}, progress_callback=lambda *a: seen.append("progress")
        )
        return anyio.current_time() - started, seen

    took, seen = in_session(f"{proxy.url}/legacy/sse", work)
    assert seen == ["progress"]  # the progress notification came before the result
    assert took >= CHATTY_PAUSE * 0.8


@pytest.mark.parametrize("kind", ["flows", "har"])
def test_the_recording_audits_to_the_live_findings(proxy, recorded, kind):
    proxy.wait_for("turn", 10, where=lambda e: e.get("api") == "mcp")
    proxy.stop()  # the GET streams end, and are written, when their sessions close; the HAR too
    path = recorded[0] if kind == "flows" else recorded[1]
    option = "-r" if kind == "flows" else "--har"
    audit = subprocess.run(
        [sys.executable, "-m", "tooltap.addon.commands.cli", "audit", option, str(path),
         "--format", "json", "--show-all"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    rows = [json.loads(line) for line in audit.stdout.splitlines()]
    mcp_rows = [r for r in rows if r.get("api") == "mcp"]
    live = [e for e in proxy.events if e.get("event") == "turn" and e.get("api") == "mcp"]
    assert audit.returncode == 1, audit.stderr
    assert sorted(tuple(r["rpc"]) for r in mcp_rows) == sorted(tuple(t["rpc"]) for t in live)
    assert {(r["outcome"], r["server"]) for r in mcp_rows if r["rpc"] == ["tools/call"]} == {
        ("inspected", WEATHER)
    }
    offline_calls = sorted(
        (c["name"], len(c["schema_errors"])) for r in mcp_rows for c in r["calls"]
    )
    live_calls = sorted(
        (e["name"], len(e["schema_errors"])) for e in proxy.events if e.get("event") == "tool_call"
    )
    assert offline_calls == live_calls
    assert not [r for r in rows if r.get("api") == "messages"]
