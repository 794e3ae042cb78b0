"""MCP as the ecosystem runs it: public servers and public clients, pinned, through one real
`tooltap run` (every server an --upstream mcp:URL of it), each session run direct and proxied.

Servers: @modelcontextprotocol/server-everything (npm, streamableHttp and sse modes: priming
events, the GET stream, roots/list, a task); the official `mcp` SDK 1.30's FastMCP and 2.3's
MCPServer; fastmcp 2.14 (a background task) and 4.2; each in both transports where it has them.
Clients: the TypeScript SDK 1.32 (tests/support/mcp_node), `mcp` 1.30 and 2.3 (ClientSession,
and 2.3's Client on protocol 2026-07-28 with its input_required round), fastmcp 2.14 and 4.2.
The SDK 1.x and 2.x, and fastmcp 2 and 4, live in pinned side venvs (tests/support/sidevenv.py).

For each session: the client gets the same outcomes through the proxy as direct (the session
works at all: a held GET stream stalls roots/list and the whole legacy transport); every
tools/call the client made is logged once, by name, in order; the one call made off its schema
is the one argument finding; nothing else is a finding (no priming event, task, input_required
answer or 202 becomes one); every exchange is MCP, inspected, unreasoned. Each session's wall
time, direct and proxied (run side by side), is printed (`-s`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import sidevenv
from support.mcp_server import running

from tooltap.addon.harness.launch import Proxy, free_port, free_ports

SUPPORT = Path(__file__).parents[1] / "support"
MCP1 = ("mcp==1.30.0", "fastmcp==2.14.7")  # fastmcp 2.14 runs on the SDK 1.x
FASTMCP4 = ("fastmcp==4.2.3",)  # on the SDK 2.3, as tooltap's own venv


@dataclass(frozen=True)
class Case:
    server: str  # a key of SERVERS
    path: str  # /mcp: Streamable HTTP; /sse: the legacy transport
    client: str  # node, or a mcp_drive.py CLIENT
    venv: str  # which interpreter runs the client: mcp1, fastmcp4, main (or node)
    scenario: str
    bad: str  # the tool of the one call made off its schema

    @property
    def id(self) -> str:
        return f"{self.server}{self.path}-{self.client}@{self.venv}"


CASES = [
    Case("everything-http", "/mcp", "node", "node", "everything", "get-sum"),
    Case("everything-sse", "/sse", "node", "node", "everything", "get-sum"),
    Case("everything-http", "/mcp", "mcp", "mcp1", "everything", "get-sum"),
    Case("everything-sse", "/sse", "mcp", "main", "everything", "get-sum"),
    Case("mcp2", "/sse/mcp", "mcp", "mcp1", "tools", "add"),
    Case("mcp2", "/roots/mcp", "modern", "main", "roots", "add"),  # protocol 2026-07-28
    Case("mcp2", "/legacy/sse", "mcp", "mcp1", "tools", "add"),
    Case("mcp1", "/mcp", "mcp", "main", "tools", "add"),
    Case("fastmcp2", "/mcp", "fastmcp", "mcp1", "task", "add"),  # a background task
    Case("fastmcp2", "/sse", "fastmcp", "fastmcp4", "tools", "add"),
    Case("fastmcp4", "/mcp", "fastmcp", "fastmcp4", "tools", "add"),
    Case("fastmcp4", "/sse", "fastmcp", "mcp1", "tools", "add"),
]


def wait_up(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{url} did not start") from None
            time.sleep(0.1)


@pytest.fixture(scope="module")
def envs() -> dict[str, Any]:
    # Made side by side the first time (pip and npm wait on the network and the disk).
    with ThreadPoolExecutor(3) as pool:
        mcp1 = pool.submit(sidevenv.python, *MCP1)
        fastmcp4 = pool.submit(sidevenv.python, *FASTMCP4)
        node = pool.submit(sidevenv.node_modules)
        return {
            "mcp1": mcp1.result(),
            "fastmcp4": fastmcp4.result(),
            "main": Path(sys.executable),
            "node": node.result(),
        }


@pytest.fixture(scope="module")
def servers(envs):
    """Every server, started once: name -> its URL."""
    everything = envs["node"] / "node_modules/@modelcontextprotocol/server-everything/dist/index.js"
    commands = {
        "everything-http": ["node", str(everything), "streamableHttp"],
        "everything-sse": ["node", str(everything), "sse"],
        "mcp1": [str(envs["mcp1"]), str(SUPPORT / "mcp_eco_server.py"), "mcp1"],
        "fastmcp2": [str(envs["mcp1"]), str(SUPPORT / "mcp_eco_server.py"), "fastmcp2"],
        "fastmcp4": [str(envs["fastmcp4"]), str(SUPPORT / "mcp_eco_server.py"), "fastmcp4"],
    }
    started: dict[str, tuple[str, subprocess.Popen[bytes]]] = {}
    try:
        for name, command in commands.items():
            port = free_port()
            node = command[0] == "node"
            process = subprocess.Popen(
                command if node else [*command, str(port)],
                env={**os.environ, "PORT": str(port)},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            started[name] = (f"http://127.0.0.1:{port}", process)
        for url, process in started.values():
            wait_up(url, process)
        with running() as mcp2:
            yield {"mcp2": mcp2, **{name: url for name, (url, _) in started.items()}}
    finally:
        for _, process in started.values():
            process.terminate()
            process.wait(10)


@pytest.fixture(scope="module")
def proxy(servers):
    names = list(servers)
    first = free_ports(len(names))
    upstreams = [f"mcp:{servers[name]}" for name in names]
    with Proxy.tooltap(
        upstreams, "--log-format", "json", listen=f"127.0.0.1:{first}"
    ) as running_proxy:
        running_proxy.bases = {
            name: f"http://127.0.0.1:{first + i}" for i, name in enumerate(names)
        }
        yield running_proxy


def drive(case: Case, envs: dict[str, Any], *bases: str) -> list[tuple[list[list[str]], float]]:
    """One session of the case's client against each base, side by side: each session's calls'
    outcomes, and its wall time."""
    ran: dict[str, tuple[int, str, str, float]] = {}

    def session(base: str) -> None:
        url = f"{base}{case.path}"
        if case.client == "node":
            command = ["node", str(envs["node"] / "drive.mjs"), url, case.scenario]
        else:
            command = [str(envs[case.venv]), str(SUPPORT / "mcp_drive.py"), case.client, url,
                       case.scenario]  # fmt: skip
        started = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True, timeout=90, check=False)
        ran[base] = (done.returncode, done.stdout, done.stderr, time.monotonic() - started)

    threads = [threading.Thread(target=session, args=(base,)) for base in bases]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    outcomes = []
    for base in bases:
        code, out, err, took = ran[base]
        assert code == 0, err[-2000:]
        outcomes.append((json.loads(out.strip().splitlines()[-1])["calls"], took))
    return outcomes


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_a_public_client_and_server_session_is_read_whole_and_true(case, envs, servers, proxy):
    mark = proxy.mark()
    (direct, direct_took), (proxied, proxied_took) = drive(
        case, envs, servers[case.server], proxy.bases[case.server]
    )
    assert proxied == direct  # the same session, through the proxy
    names = [name for name, _ in proxied]
    calls = proxy.wait_for("tool_call", len(names), since=mark, timeout=20)
    proxy.wait_for("turn", where=lambda e: e.get("rpc") == ["tools/call"], count=len(names),
                   since=mark, timeout=20)  # fmt: skip
    time.sleep(0.3)  # anything logged late (a stray finding) would land by now
    events = proxy.events[mark:]
    turns = [e for e in events if e.get("event") == "turn"]
    # Every call logged once, by name, in order; a task's polling and an input_required
    # retry are no further call.
    assert [c["name"] for c in calls] == names
    assert len([e for e in events if e.get("event") == "tool_call"]) == len(names)
    # The one call off its schema is the one finding.
    assert [c["name"] for c in calls if c["schema_errors"]] == [case.bad]
    assert [e["event"] for e in events if e.get("event") in ("loop_error", "request_rejected",
                                                             "stream_error")] == []  # fmt: skip
    assert [r for e in events if e.get("event") == "tool_result" for r in e["schema_errors"]] == []
    assert {(t["api"], t["outcome"]) for t in turns} == {("mcp", "inspected")}
    assert [t["reason"] for t in turns if t["reason"]] == []
    assert {t["server"] for t in turns if t["rpc"] == ["tools/call"]} != {None}
    results = [e for e in events if e.get("event") == "tool_result"]
    assert len(results) == len(names)  # each call's result checked once (a task's too)
    print(
        f"{case.id}: {len(turns)} exchanges, {len(names)} calls, 1 finding; "
        f"session {direct_took:.2f} s direct, {proxied_took:.2f} s proxied"
    )
