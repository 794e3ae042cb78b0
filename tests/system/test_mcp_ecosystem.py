"""MCP as the ecosystem runs it: public servers and public clients, pinned, through one real
`tooltap run` (every server an --upstream mcp:URL of it), each session run direct and proxied.

Servers: @modelcontextprotocol/server-everything (npm, streamableHttp and sse modes: priming
events, the GET stream, roots/list, a task); the official `mcp` SDK 1.30's FastMCP and 2.3's
MCPServer; fastmcp 2.14 (a background task) and 4.2; each in both transports where it has them.
Clients: the TypeScript SDK 1.32 (tests/support/mcp_node), `mcp` 1.30 and 2.3 (ClientSession,
and 2.3's Client on protocol 2026-07-28 with its input_required round), fastmcp 2.14 and 4.2.
The SDK 1.x and 2.x, and fastmcp 2 and 4, live in pinned side venvs (tests/support/sidevenv.py).

Each session runs once (shared by the two tests), direct and proxied side by side, the proxied
one as client -> front relay -> tooltap -> back relay -> server (tests/support/relay.py).

Read whole and true: the client gets the same outcomes through the proxy as direct (the session
works at all: a held GET stream stalls roots/list and the whole legacy transport); every
tools/call the client made is logged once, by name, in order, and its result once, with the
outcome the client had; the one call made off its schema is the one argument finding; nothing
else is a finding (no priming event, task, input_required answer or 202 becomes one); every
exchange is MCP, inspected, unreasoned. A call over several requests (a task: the everything
server's with the TypeScript client and `mcp` 1.x's helpers, on both transports, and fastmcp's;
the 2.x Client's retry after input_required) is one call: its tool_call where it was made, its
tool_result under the same id where its result came (tasks/result, the retry's answer), and
nothing of it on the requests between.

Passed on unchanged and never held: every exchange the server had is the one the client had,
byte for byte both ways (the request's Host aside, which reverse mode rewrites; bodies without
their chunked framing); every event of every stream, POST answers and GET streams alike, reached
the client before the server's next byte on that stream was let through (the back relay's lock
step); and the everything server's log message on the GET stream reached the client while the
session was open. Each session's bytes, events, largest added delay per event and wall time,
direct and proxied, are printed (`-s`).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from support import sidevenv
from support.mcp_server import running
from support.relay import Recording, Relays

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
    # A call that spans several requests: its tool, and the method whose answer ends it (a
    # task's tasks/result; the retry after input_required, a tools/call).
    spans: tuple[str, str] | None = None

    @property
    def id(self) -> str:
        return f"{self.server}{self.path}-{self.client}@{self.venv}"


RESEARCH = ("simulate-research-query", "tasks/result")  # the everything server's task tool
CASES = [
    Case("everything-http", "/mcp", "node", "node", "everything", "get-sum", RESEARCH),
    Case("everything-sse", "/sse", "node", "node", "everything", "get-sum", RESEARCH),
    Case("everything-http", "/mcp", "mcp", "mcp1", "everything", "get-sum", RESEARCH),
    Case("everything-sse", "/sse", "mcp", "main", "everything", "get-sum"),  # 2.x: no tasks
    Case("mcp2", "/sse/mcp", "mcp", "mcp1", "tools", "add"),
    # Protocol 2026-07-28: `where` is answered input_required, and the client calls again.
    Case("mcp2", "/roots/mcp", "modern", "main", "roots", "add", ("where", "tools/call")),
    Case("mcp2", "/legacy/sse", "mcp", "mcp1", "tools", "add"),
    Case("mcp1", "/mcp", "mcp", "main", "tools", "add"),
    # A background task (fastmcp's `_meta` handle), its result fetched with tasks/result.
    Case("fastmcp2", "/mcp", "fastmcp", "mcp1", "task", "add", ("slow_add", "tasks/result")),
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
def relays(servers):
    """For each server, a front and a back relay around the proxy: name -> its Relays."""
    made = {name: Relays(int(urlsplit(url).port or 80)) for name, url in servers.items()}
    yield made
    for pair in made.values():
        pair.close()


@pytest.fixture(scope="module")
def proxy(servers, relays):
    """One `tooltap run`, each server an upstream of it through its back relay, each of its
    listening ports the target of that server's front relay."""
    names = list(servers)
    first = free_ports(len(names))
    upstreams = [f"mcp:{relays[name].back.url}" for name in names]
    with Proxy.tooltap(
        upstreams, "--log-format", "json", listen=f"127.0.0.1:{first}"
    ) as running_proxy:
        for i, name in enumerate(names):
            relays[name].to(first + i)
        yield running_proxy


def drive(case: Case, envs: dict[str, Any], *bases: str) -> list[tuple[dict[str, Any], float]]:
    """One session of the case's client against each base, side by side: what each printed
    (its calls' outcomes, the log messages it got; or `failed`, its error), and its wall time."""
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
        printed = json.loads(out.strip().splitlines()[-1]) if code == 0 else {"failed": err[-2000:]}
        outcomes.append((printed, took))
    return outcomes


@dataclass
class Ran:
    """One case's session, direct and proxied side by side, the proxied one through the relays."""

    direct: dict[str, Any]  # what the client printed
    proxied: dict[str, Any]
    direct_took: float  # wall time, seconds
    proxied_took: float
    recording: Recording
    mark: int  # where the proxy's log was when it began
    end: int  # ... and once the last of its calls' results was logged


@pytest.fixture(scope="module")
def runs() -> dict[str, Ran]:
    return {}


@pytest.fixture
def ran(case, envs, servers, relays, proxy, runs) -> Ran:
    """The case's session, run once for this module's tests."""
    if case.id not in runs:
        mark = proxy.mark()
        with relays[case.server].session() as recording:
            (direct, direct_took), (proxied, proxied_took) = drive(
                case, envs, servers[case.server], relays[case.server].front.url
            )
        # Its lines: up to the last call's result, and what was logged just after it.
        proxy.wait_for("tool_result", len(proxied.get("calls", [])), since=mark, timeout=20)
        time.sleep(0.3)
        end = proxy.mark()
        runs[case.id] = Ran(direct, proxied, direct_took, proxied_took, recording, mark, end)
    return runs[case.id]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_a_public_client_and_server_session_is_read_whole_and_true(case, ran, proxy):
    for printed in (ran.direct, ran.proxied):
        assert "failed" not in printed, printed["failed"]
    assert ran.proxied["calls"] == ran.direct["calls"]  # the same session, through the proxy
    names = [name for name, _ in ran.proxied["calls"]]
    mark = ran.mark
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
    # Each call's result checked once (a task's too), naming its tool, with the outcome the
    # client had: no status read as a failed result.
    assert [(r["name"], r["outcome"]) for r in results] == [tuple(c) for c in ran.proxied["calls"]]
    print(f"{case.id}: {len(turns)} exchanges, {len(names)} calls, 1 finding")


def exchanges(events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The log lines of each exchange, its `turn` last: an exchange's lines are written at once."""
    grouped: list[list[dict[str, Any]]] = [[]]
    for event in events:
        grouped[-1].append(event)
        if event.get("event") == "turn":
            grouped.append([])
    return grouped[:-1]


@pytest.mark.parametrize("case", [c for c in CASES if c.spans], ids=lambda c: c.id)
def test_a_call_over_several_requests_is_one_call_whose_result_is_checked_once_when_it_comes(
    case, ran, proxy
):
    assert case.spans is not None
    tool, ending = case.spans
    assert "failed" not in ran.proxied, ran.proxied["failed"]
    assert [tool, "ok"] in ran.proxied["calls"]
    events = proxy.events[ran.mark : ran.end]
    lines = [e for e in events if e.get("name") == tool]
    # One tool_call (the request that made the call) and one tool_result, under its id.
    assert [(e["event"], e["call_id"]) for e in lines] == [
        ("tool_call", lines[0]["call_id"]),
        ("tool_result", lines[0]["call_id"]),
    ]
    assert (lines[1]["outcome"], lines[1]["schema_errors"], lines[1]["level"]) == ("ok", [], "info")
    spanned = [x for x in exchanges(events) if lines[0] in x or lines[1] in x]
    made, ended = spanned
    # The call is said where it was made, its answer there no result; its result where it came.
    assert (made[-1]["rpc"], made[-1]["calls"], made[-1]["unchecked"]) == (
        ["tools/call"], 1, [made[-1]["unchecked"][0]],
    )  # fmt: skip
    assert made[-1]["unchecked"][0].startswith(f"call {lines[0]['call_id']}: answered ")
    assert (ended[-1]["rpc"], ended[-1]["calls"], ended[-1]["unchecked"]) == ([ending], 0, [])
    # Every request between them (a task's tasks/get, a retry asked again) said nothing of it.
    turns = [e for e in events if e.get("event") == "turn"]
    between = turns[turns.index(made[-1]) + 1 : turns.index(ended[-1])]
    assert all(t["unchecked"] in ([], made[-1]["unchecked"]) for t in between), between
    if ending == "tasks/result" and case.client != "fastmcp":  # fastmcp fetches without polling
        assert "tasks/get" in {method for t in between for method in t["rpc"]}


# What the proxy may change in a request it passes on, by design: mitmproxy in reverse mode
# rewrites Host to the upstream's (its documented keep_host_header option, off by default,
# keeps it). Nothing else may differ, in either direction. (mitmproxy's HTTP/1 layer would also
# drop an `Expect: 100-continue` it answers itself; no client here sends one.) A chunked body is
# compared without its framing: mitmproxy re-frames a streamed body in the pieces it reads.
REWRITTEN = {b"host"}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_every_exchange_reaches_the_server_and_the_client_byte_for_byte_and_no_event_is_held(
    case, ran
):
    recording = ran.recording
    # Every event of every stream (POST answers and GET streams) went on in lock step: the
    # client had it before the server's next byte on that stream was let through.
    assert recording.held() == []
    assert "failed" not in ran.proxied, ran.proxied["failed"]
    # Every exchange the server had is one the client sent, and every one the client sent
    # reached the server (none answered by the proxy itself).
    pairs = recording.pairs()
    assert len(pairs) == len(recording.back) == len(recording.front) > 0
    delays = []
    for client, server in pairs:
        # The request line and body paired them; the headers are the same but for REWRITTEN.
        assert kept(client.request.headers) == kept(server.request.headers)
        got, sent = client.response, server.response
        assert sent is not None
        if got is None:  # the client hung up before any answer came: its own doing
            assert client.connection.hung_up is not None
            continue
        assert (got.start, got.headers) == (sent.start, sent.headers)
        # The client's body is the server's: whole, or up to where the client hung up.
        assert bytes(got.body) == bytes(sent.body if got.ended else sent.body[: len(got.body)])
        assert [e.data for e in got.events] == [e.data for e in sent.events[: len(got.events)]]
        missed = sent.events[len(got.events) :]
        assert all(e.sent >= (client.connection.hung_up or float("inf")) for e in missed)
        delays += [g.came - s.sent for g, s in zip(got.events, sent.events, strict=False)]
    if case.scenario == "everything":
        # The everything server logs on the session's GET stream once it has the client's
        # roots: the client had that message while the session was open (it waits for it,
        # 10 s at most, before it closes), and it came on a GET stream.
        for printed in (ran.direct, ran.proxied):
            assert any(str(d).startswith("Roots updated") for d in printed["logged"])
        assert any(
            b"Roots updated" in e.data
            for c in recording.front
            if c.request.start.startswith(b"GET ") and c.response is not None
            for e in c.response.events
        )
    up = sum(c.sizes["up"] for c in recording.front_connections)
    down = sum(c.sizes["down"] for c in recording.front_connections)
    print(
        f"{case.id}: {len(pairs)} exchanges, {up} bytes up, {down} down, {len(delays)} events, "
        f"added delay per event {statistics.median(delays or [0]) * 1000:.1f} ms median, "
        f"{max(delays, default=0) * 1000:.1f} ms largest; "
        f"session {ran.direct_took:.2f} s direct, {ran.proxied_took:.2f} s proxied"
    )


def kept(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The headers the proxy passes on as they are, in order."""
    return [(k, v) for k, v in headers if k.lower() not in REWRITTEN]
