"""MCP through a real `tooltap run --upstream mcp:URL`: the official SDK's client
(streamable_http_client and ClientSession) against the SDK's own server on loopback
(tests/support/mcp_server.py), in both of its answer modes, SSE and JSON. Every finding is
checked in the log and the metrics, live and offline, and the bytes the client gets are the
server's.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import psutil
import pytest
from mcp.client import Client
from mcp.client.session import ClientSession
from support.mcp_client import attempt, in_session
from support.mcp_server import CHATTY_PAUSE, running
from support.prom import Samples, sample, scrape

from tooltap.addon.harness.launch import Proxy
from tooltap.addon.options import BY_NAME
from tooltap.core.findings import findings

SERVER = Path(__file__).parent.parent / "support" / "mcp_server.py"
WEATHER = "weather-tools 1.4.0"
PAGED = "paged-tools 9.9.9"
ADD_ERRORS = [
    {"path": "$", "message": '"b" is a required property'},
    {"path": "$.a", "message": '"x" is not of type "integer"'},
]
TAG = re.compile(r"[0-9a-f]{16}")


@pytest.fixture(scope="module")
def server():
    with running() as url:
        yield url


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    return tmp_path_factory.mktemp("mcp") / "flows.mitm"


@pytest.fixture(scope="module")
def proxy(server, recorded):
    # mitmproxy keeps a streamed (SSE) body in the flow only when told to.
    extra = ("--set", f"save_stream_file={recorded}", "--set", "store_streamed_bodies=true")
    with Proxy.tooltap([f"mcp:{server}"], "--log-format", "json", extra=extra) as running:
        yield running


def picked(events: list[dict[str, Any]], *keys: str) -> list[dict[str, Any]]:
    return [{k: e[k] for k in keys} for e in events]


def result_repair(call_id: str) -> str:
    return (
        f"result of {call_id}: the server must return structuredContent that conforms to the "
        "tool's outputSchema (MCP specification); fix the tool, or the schema it declares. "
        "Clients that validate (the SDKs do) refuse the result."
    )


def growth(before: Samples, after: Samples) -> Callable[..., float]:
    """How much a sample grew between two scrapes."""
    return lambda name, **labels: sample(after, name, **labels) - sample(before, name, **labels)


@pytest.mark.parametrize(("mode", "streamed"), [("sse", True), ("json", False)])
def test_a_session_logs_each_call_and_its_result_against_the_listed_schemas(proxy, mode, streamed):
    mark = proxy.mark()

    async def work(session: ClientSession) -> list[bool | str]:
        await session.list_tools()
        return [
            await attempt(session.call_tool("add", {"a": 2, "b": 3})),
            await attempt(session.call_tool("add", {"a": "x"})),
            await attempt(session.call_tool("flagged", {})),
            await attempt(session.call_tool("weather", {"city": "Oslo"})),
        ]

    outcomes = in_session(f"{proxy.url}/{mode}/mcp", work)
    assert outcomes == [False, True, True, False]  # the server refused "x" itself

    turns = proxy.wait_for("turn", 7, since=mark)
    calls = proxy.wait_for("tool_call", 4, since=mark)
    results = proxy.wait_for("tool_result", 4, since=mark)
    assert [t["rpc"] for t in turns] == [
        ["initialize"],
        ["notifications/initialized"],
        ["tools/list"],
        *[["tools/call"]] * 4,
    ]
    assert [(t["status"], t["stream"]) for t in turns] == [
        (200, streamed),
        (202, False),
        *[(200, streamed)] * 5,
    ]
    assert turns[2]["listed_tools"] == ["add", "weather", "flagged", "chatty"]
    assert {t["server"] for t in turns} == {WEATHER}
    (session,) = {e["session"] for e in [*turns, *calls, *results]}
    assert TAG.fullmatch(session)
    assert picked(calls, "api", "call_id", "name", "arguments_raw", "schema_errors", "level") == [
        {
            "api": "mcp",
            "call_id": "3",
            "name": "add",
            "arguments_raw": '{"a":2,"b":3}',
            "schema_errors": [],
            "level": "info",
        },
        {
            "api": "mcp",
            "call_id": "4",
            "name": "add",
            "arguments_raw": '{"a":"x"}',
            "schema_errors": ADD_ERRORS,
            "level": "warning",
        },
        {
            "api": "mcp",
            "call_id": "5",
            "name": "flagged",
            "arguments_raw": "{}",
            "schema_errors": [],
            "level": "info",
        },
        {
            "api": "mcp",
            "call_id": "6",
            "name": "weather",
            "arguments_raw": '{"city":"Oslo"}',
            "schema_errors": [],
            "level": "info",
        },
    ]
    assert picked(results, "call_id", "name", "outcome", "schema_errors", "level") == [
        {"call_id": "3", "name": "add", "outcome": "ok", "schema_errors": [], "level": "info"},
        {
            "call_id": "4",
            "name": "add",
            "outcome": "error",
            "schema_errors": [],
            "level": "warning",
        },
        {
            "call_id": "5",
            "name": "flagged",
            "outcome": "error",
            "schema_errors": [],
            "level": "warning",
        },
        {"call_id": "6", "name": "weather", "outcome": "ok", "schema_errors": [], "level": "info"},
    ]
    assert [t["level"] for t in turns] == ["info"] * 4 + ["warning"] + ["info"] * 2


def test_a_paged_list_a_result_off_its_schema_and_an_unlisted_tool_are_found(proxy, server):
    mark = proxy.mark()
    before = scrape(proxy)

    async def work(session: ClientSession) -> list[bool | str]:
        first = await session.list_tools()
        await session.list_tools(params=types.PaginatedRequestParams(cursor=first.next_cursor))
        return [await attempt(session.call_tool(name, {"q": "a"})) for name in TOOLS]

    TOOLS = ("t0", "t1", "t2", "zzz")
    # The client validates structured results too, and refuses the first two.
    outcomes = in_session(f"{proxy.url}/lo/mcp", work)
    assert outcomes == ["RuntimeError", "RuntimeError", False, "MCPError"]

    turns = proxy.wait_for("turn", 8, since=mark)
    results = proxy.wait_for("tool_result", 3, since=mark)
    (loop_error,) = proxy.wait_for("loop_error", since=mark)
    (rejected,) = proxy.wait_for("request_rejected", since=mark)
    assert [t["listed_tools"] for t in turns[2:4]] == [["t0", "t1"], ["t2"]]
    assert picked(results, "call_id", "name", "outcome", "schema_errors") == [
        {
            "call_id": "4",
            "name": "t0",
            "outcome": "ok",
            "schema_errors": [{"path": "$.n", "message": '"three" is not of type "integer"'}],
        },
        {
            "call_id": "5",
            "name": "t1",
            "outcome": "ok",
            "schema_errors": [
                {
                    "path": "$",
                    "message": "the tool declares an outputSchema and its result has no "
                    "structuredContent",
                }
            ],
        },
        {"call_id": "6", "name": "t2", "outcome": "ok", "schema_errors": []},
    ]
    assert picked([loop_error], "rule", "ids", "where", "server") == [
        {"rule": "unlisted-tool", "ids": ["7"], "where": "params.name", "server": PAGED}
    ]
    assert picked([rejected], "status", "type", "message", "server") == [
        {
            "status": -32602,
            "type": "invalid_params",
            "message": "Unknown tool: zzz",
            "server": PAGED,
        }
    ]
    assert turns[-1]["repairs"] == []
    assert turns[4]["repairs"] == [result_repair("4")]

    grew = growth(before, scrape(proxy))
    assert grew("tooltap_tool_calls_total", api="mcp", model=PAGED) == 4
    assert grew("tooltap_argument_errors_total", api="mcp", model=PAGED, kind="result_schema") == 2
    assert grew("tooltap_argument_errors_total", api="mcp", model=PAGED, kind="schema") == 0
    assert grew("tooltap_tool_results_total", api="mcp", outcome="ok") == 3
    assert grew("tooltap_rejected_requests_total", api="mcp", status="-32602") == 1
    assert grew("tooltap_loop_errors_total", api="mcp", rule="unlisted-tool") == 1
    assert grew("tooltap_flows_total", api="mcp", outcome="inspected") == 8
    assert grew("tooltap_turns_total", api="mcp", model=PAGED, state="no-tools") == 0


def test_a_list_seen_only_in_part_validates_what_it_listed_and_calls_nothing_unlisted(proxy):
    mark = proxy.mark()

    async def work(session: ClientSession) -> list[bool | str]:
        await session.list_tools()  # the first page only: t2 and anything else are unknown
        return [await attempt(session.call_tool(name, {"q": 1})) for name in ("t0", "t2", "zzz")]

    assert in_session(f"{proxy.url}/lo/mcp", work)[2] == "MCPError"
    calls = proxy.wait_for("tool_call", 3, since=mark)
    # The client lists the first page again when a result names a tool it has not seen (t2).
    turns = proxy.wait_for("turn", 7, since=mark)
    assert [t["rpc"][0] for t in turns] == [
        "initialize",
        "notifications/initialized",
        "tools/list",
        "tools/call",
        "tools/call",
        "tools/list",
        "tools/call",
    ]
    assert [c["schema_errors"] for c in calls] == [
        [{"path": "$.q", "message": '1 is not of type "string"'}],
        [],
        [],
    ]
    assert [t["unchecked"] for t in turns if t["rpc"] == ["tools/call"]] == [
        [],
        *[
            [f"call {n}: arguments not validated, this session's tools/list was not seen whole"]
            for n in (4, 6)
        ],
    ]
    assert proxy.wait_for("loop_error", since=mark, timeout=0) == []


ASKING = "asking-tools 1.0.0"
PICK_ERRORS = [{"path": "$.n", "message": '"three" is not of type "integer"'}]


async def _roots(_context: object) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root(uri="file:///work", name="work")])


def test_a_call_asked_for_input_is_one_call_and_the_retry_brings_its_result_checked_once(proxy):
    # Protocol 2026-07-28, the `mcp` 2.x Client: `pick` is answered input_required twice (a new
    # requestState each time); the client calls again each time, with the roots and the state,
    # and the third answer is the result, off its outputSchema.
    mark = proxy.mark()
    before = scrape(proxy)

    async def work() -> list[bool | str]:
        with anyio.fail_after(60):
            async with Client(f"{proxy.url}/asks/mcp", list_roots_callback=_roots) as client:
                await client.list_tools()
                return [await attempt(client.call_tool("pick", {"q": "a"}))]

    assert anyio.run(work) == ["RuntimeError"]  # the client checks the result too
    turns = proxy.wait_for("turn", 5, since=mark)
    time.sleep(0.3)  # a stray line would land by now
    lines = [e for e in proxy.events[mark:] if e.get("event") != "turn"]
    assert [(t["rpc"], t["calls"]) for t in turns] == [
        (["server/discover"], 0),
        (["tools/list"], 0),
        (["tools/call"], 1),  # the call
        (["tools/call"], 0),  # its retry, asked again
        (["tools/call"], 0),  # its retry, answered
    ]
    call_id = lines[0]["call_id"]
    assert picked(lines, "event", "call_id", "name", "schema_errors", "server") == [
        {"event": "tool_call", "call_id": call_id, "name": "pick", "schema_errors": [],
         "server": ASKING},
        {"event": "tool_result", "call_id": call_id, "name": "pick", "schema_errors": PICK_ERRORS,
         "server": ASKING},
    ]  # fmt: skip
    assert lines[1]["outcome"] == "ok"
    asked = (
        f"call {call_id}: answered resultType input_required, not a result (protocol "
        "2026-07-28): the client calls again with what the server asked for"
    )
    assert [t["unchecked"] for t in turns[2:]] == [[asked], [asked], []]
    assert turns[-1]["repairs"] == [result_repair(call_id)]

    grew = growth(before, scrape(proxy))
    assert grew("tooltap_tool_calls_total", api="mcp", model=ASKING) == 1
    assert grew("tooltap_tool_results_total", api="mcp", outcome="ok") == 1
    assert grew("tooltap_argument_errors_total", api="mcp", model=ASKING, kind="result_schema") == 1


def test_the_bytes_and_the_cadence_of_a_streamed_answer_are_the_servers(proxy, server):
    headers = {"accept": "application/json, text/event-stream"}
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "chatty", "arguments": {"n": 7}, "_meta": {"progressToken": 2}},
    }

    def chatty(base: str) -> tuple[bytes, float]:
        with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
            opened = client.post("/sse/mcp", json=init)
            session = {"mcp-session-id": opened.headers["mcp-session-id"]}
            client.post("/sse/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                        headers=session)  # fmt: skip
            pieces: list[tuple[float, bytes]] = []
            with client.stream("POST", "/sse/mcp", json=call, headers=session) as reply:
                for piece in reply.iter_raw():
                    pieces.append((time.monotonic(), piece))
            body = b"".join(p for _, p in pieces)
            first_result = next(t for t, p in pieces if b'"result"' in p)
            return body, first_result - pieces[0][0]

    direct, direct_gap = chatty(server)
    proxied, proxied_gap = chatty(proxy.url)
    assert proxied == direct
    assert direct.count(b"event: message") == 3
    # The notifications reach the client when the server sends them, not with the result.
    assert direct_gap >= CHATTY_PAUSE * 0.8
    assert proxied_gap >= CHATTY_PAUSE * 0.8


def test_the_recorded_flows_audit_to_the_live_findings(proxy, recorded):
    audit = subprocess.run(
        [sys.executable, "-m", "tooltap.addon.commands.cli", "audit", "-r", str(recorded),
         "--format", "json", "--show-all"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    rows = [json.loads(line) for line in audit.stdout.splitlines()]
    mcp_rows = [r for r in rows if r.get("api") == "mcp"]
    assert audit.returncode == 1, audit.stderr
    # A flow is in the file when it ends; its log line follows once it is inspected.
    live = proxy.wait_for("turn", len(mcp_rows), where=lambda e: e.get("api") == "mcp")
    live_findings = sorted(
        name for e in proxy.events if e.get("api") == "mcp" for name in _names(e)
    )
    offline = sorted(name for r in mcp_rows for name in _verdict_findings(r))
    assert offline == live_findings
    assert len(mcp_rows) == len(live)


def test_a_har_of_a_session_audits_to_its_live_findings(server, tmp_path):
    har = tmp_path / "session.har"
    extra = ("--set", f"hardump={har}", "--set", "store_streamed_bodies=true")
    with Proxy.tooltap([f"mcp:{server}"], "--log-format", "json", extra=extra) as proxy:

        async def work(session: ClientSession) -> list[bool | str]:
            first = await session.list_tools()
            await session.list_tools(params=types.PaginatedRequestParams(cursor=first.next_cursor))
            return [await attempt(session.call_tool(name, {"q": 2})) for name in ("t0", "zzz")]

        assert in_session(f"{proxy.url}/lo/mcp", work) == ["RuntimeError", "MCPError"]
        proxy.wait_for("turn", 6, where=lambda e: e.get("api") == "mcp")
    # mitmproxy writes the HAR when it stops.
    live = sorted(name for e in proxy.events if e.get("api") == "mcp" for name in _names(e))
    assert live == ["argument-schema", "rejected", "result-schema", "unlisted-tool"]
    audit = subprocess.run(
        [sys.executable, "-m", "tooltap.addon.commands.cli", "audit", "--har", str(har),
         "--format", "json"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    rows = [json.loads(line) for line in audit.stdout.splitlines()]
    assert sorted(n for r in rows if r.get("api") == "mcp" for n in _verdict_findings(r)) == live
    assert {r["server"] for r in rows if r.get("api") == "mcp"} == {PAGED}


def _names(event: dict[str, Any]) -> list[str]:
    """The findings one live log line stands for."""
    kind = event.get("event")
    if kind == "tool_call":
        return ["argument-schema"] * bool(event["schema_errors"]) + ["argument-parse"] * bool(
            event["parse_error"]
        )
    if kind == "tool_result":
        return ["result-schema"] * bool(event["schema_errors"])
    if kind == "loop_error":
        return [event["rule"]]
    if kind == "request_rejected":
        return ["rejected"]
    return []


def _verdict_findings(row: dict[str, Any]) -> list[str]:
    from tooltap.core import Verdict

    return findings(
        Verdict.model_validate({k: v for k, v in row.items() if k in Verdict.model_fields})
    )


def test_a_session_of_a_thousand_calls_is_counted_whole_and_memory_stays_flat(proxy):
    calls = 1_000
    before = scrape(proxy)
    processes = [psutil.Process(proxy.process.pid), *psutil.Process(proxy.process.pid).children()]

    async def work(session: ClientSession) -> int:
        await session.list_tools()
        rss_start = sum(p.memory_info().rss for p in processes)
        for n in range(calls):
            await session.call_tool("add", {"a": n, "b": 1})
        return rss_start

    rss_start = in_session(f"{proxy.url}/json/mcp", work)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        after = scrape(proxy)
        counted = sample(after, "tooltap_tool_calls_total", api="mcp", model=WEATHER) - sample(
            before, "tooltap_tool_calls_total", api="mcp", model=WEATHER
        )
        if counted >= calls:
            break
        time.sleep(0.1)
    assert counted == calls
    assert sample(after, "tooltap_held_peak_bytes") <= BY_NAME["tooltap_memory_budget"].default
    grown = sum(p.memory_info().rss for p in processes) - rss_start
    assert grown < SESSION_ALLOWANCE, grown


# What a thousand calls in one session may add to the proxy's and the inspector's RSS: the
# session's memory is its server's name and one list, whatever the number of calls.
SESSION_ALLOWANCE = 16 * (1 << 20)
