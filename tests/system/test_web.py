"""tooltap web: each verdict beside its flow in a real mitmweb, read over its REST API and in
Debian's chromium; the demo's traffic driven through it by the official SDKs."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import psutil
import pytest
from mitmproxy import io as flow_io
from rich.console import Console

from tooltap.addon.commands.demo import demo_stack, drive
from tooltap.addon.commands.demo_mcp import HEADLINES_PATH, PATH
from tooltap.addon.commands.demo_steps import STEPS, Clients, route, socket_route
from tooltap.addon.harness.launch import Proxy
from tooltap.addon.harness.replay import ReplayServer
from tooltap.addon.web.view import KEY

RED, YELLOW = "\N{LARGE RED CIRCLE}", "\N{LARGE YELLOW CIRCLE}"
LIVE_PATH = "/ws/google.ai.generativelanguage.v1.GenerativeService.BidiGenerateContent"
# What each demo step's flow says in mitmweb's list, in the demo's order.
DEMO_FLOWS = [
    ("/v1/chat/completions", RED, "tooltap: strict-void"),
    ("/v1/chat/completions", YELLOW, "tooltap: strict-at-risk"),
    ("/v1/chat/completions", "", "tooltap: no finding (strict-serialised)"),
    ("/v1/responses", RED, "tooltap: fanout-no-strict, argument-schema"),
    ("/v1/responses", "", "tooltap: no finding (no-strict-declared), 1 tool failure(s)"),
    ("/v1/responses", RED, "tooltap: advisory-schema"),
    ("/v1/responses", RED, "tooltap: strict-void; strict-at-risk, unanswered-call"),
    ("/v1/chat/completions", RED, "tooltap: rejected"),
    ("/v1/chat/completions", RED, "tooltap: unanswered-call, rejected"),
    ("/v1/responses", RED, "tooltap: strict-at-risk, argument-schema"),
    ("/v1/messages", YELLOW, "tooltap: fanout-no-strict"),
    ("/v1/messages", RED, "tooltap: argument-parse"),
    ("/v1/messages", RED, "tooltap: orphan-result, rejected"),
    (
        "/model/global.anthropic.claude-haiku-4-5-20251001-v1:0/invoke-with-response-stream",
        RED,
        "tooltap: fanout-no-strict, argument-schema",
    ),
    (
        "/model/us.amazon.nova-2-lite-v1%3A0/converse",
        RED,
        "tooltap: unanswered-call, rejected, 1 tool failure(s)",
    ),
    (
        "/v1beta/models/gemini-3-flash-preview:generateContent",
        RED,
        "tooltap: missing-thought-signature, rejected",
    ),
    (
        LIVE_PATH,
        RED,
        "tooltap: fanout-no-strict, argument-schema; no finding (no-strict-declared), 1 tool"
        " failure(s); no finding (no-strict-declared); no finding (no-strict-declared)",
    ),
    ("/api/chat", RED, "tooltap: fanout-no-strict, argument-schema, unanswered-call"),
    ("/v2/chat", RED, "tooltap: empty-result, 1 stream error(s)"),
]
# The MCP steps' flows, after the others, each but the GETs that open a session's own event
# stream: no exchange tooltap reads, left unannotated (a client may open one or more, before or
# after the notification).
MCP_FLOWS = [
    ("/mcp", "", "tooltap: no finding (initialize)"),
    ("/mcp", "", "tooltap: no finding (notifications/initialized)"),
    ("/mcp", "", "tooltap: no finding (tools/list)"),
    ("/mcp", "", "tooltap: no finding (tools/call)"),
    ("/mcp", RED, "tooltap: argument-schema, 1 tool failure(s)"),
    ("/mcp", RED, "tooltap: result-schema"),
    ("/mcp", RED, "tooltap: unlisted-tool, rejected"),
    # The headlines server: a description that hides text, a result that does, then the tool
    # it rewrote once called, listed again after list_changed.
    (HEADLINES_PATH, "", "tooltap: no finding (initialize)"),
    (HEADLINES_PATH, "", "tooltap: no finding (notifications/initialized)"),
    (HEADLINES_PATH, RED, "tooltap: hidden-text"),
    (HEADLINES_PATH, RED, "tooltap: hidden-text"),
    (HEADLINES_PATH, RED, "tooltap: tool-changed"),
    (HEADLINES_PATH, "", "tooltap: no finding (tools/call)"),
    # Two agent loops over MCP, one session each: the model's three forecasts run one after
    # another (its first turn a fan-out, its follow-up's batch serial), then a tool that hangs
    # past the deadline (the model's turns are plain: being late is no finding).
    *[("/mcp", "", "tooltap: no finding (initialize)")] * 2,
    *[("/mcp", "", "tooltap: no finding (notifications/initialized)")] * 2,
    *[("/mcp", "", "tooltap: no finding (tools/list)")] * 2,
    *[("/mcp", "", "tooltap: no finding (tools/call)")] * 4,
    ("/v1/chat/completions", YELLOW, "tooltap: fanout-no-strict"),
    ("/v1/chat/completions", YELLOW, "tooltap: serial-execution"),
    *[("/v1/chat/completions", "", "tooltap: no finding (no-strict-declared)")] * 2,
]
# Their requests went to a live tool server, and the model's turns of a loop are linked to its
# runs: a replay repeats neither.
LIVE_STEPS = ("mcp-serial", "mcp-overdue")
TIME = "tooltap time: "


def annotated(flows: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """The flows tooltap commented on, sorted (the MCP steps' come in no fixed order)."""
    return sorted(flow for flow in flows if flow[2])


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# As root, in a closed network: no sandbox, and none of chromium's own connections.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


class Web:
    """mitmweb's REST API, with the login token `tooltap web` printed."""

    def __init__(self, url: str) -> None:
        base, _, token = url.partition("?token=")
        self.client = httpx.Client(base_url=base.rstrip("/"), params={"token": token}, timeout=10)

    def flows(self) -> list[dict[str, Any]]:
        return self.client.get("/flows").json()

    def view(self, flow_id: str, message: str = "response", name: str = "auto") -> Any:
        return self.client.get(f"/flows/{flow_id}/{message}/content/{name}.json").json()

    def annotated(self, count: int, timeout: float = 20.0) -> list[dict[str, Any]]:
        """The flows, once `count` of them carry tooltap's comment (the worker is asynchronous)."""
        deadline = time.monotonic() + timeout
        while True:
            flows = self.flows()
            done = [f for f in flows if "tooltap: " in (f.get("comment") or "")]
            if len(done) >= count or time.monotonic() > deadline:
                return flows
            time.sleep(0.1)


def listed(flows: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """Each flow's path, mark and findings (its comment without the line of times)."""
    return [(f["request"]["path"], f["marked"], findings(f["comment"])) for f in flows]


def findings(comment: str) -> str:
    return "\n".join(line for line in comment.splitlines() if not line.startswith(TIME))


@contextlib.contextmanager
def demo_through_web() -> Iterator[tuple[Proxy, ReplayServer, Web]]:
    """The demo's traffic through a real `tooltap web`, every flow annotated."""
    with demo_stack(web=True) as (_, upstream, proxy):
        drive(Console(file=io.StringIO()), proxy)
        web = Web(proxy.web_url or "")
        web.annotated(len(DEMO_FLOWS) + len(MCP_FLOWS))
        yield proxy, upstream, web


@pytest.fixture(scope="module")
def demo_web():
    with demo_through_web() as stack:
        yield stack


def test_flows_with_findings_are_marked_per_severity_and_commented(demo_web):
    _, _, web = demo_web
    flows = listed(web.flows())
    assert flows[: len(DEMO_FLOWS)] == DEMO_FLOWS
    assert annotated(flows[len(DEMO_FLOWS) :]) == sorted(MCP_FLOWS)
    # mitmweb's login stays on: without the token it shows nothing.
    assert httpx.get(f"{web.client.base_url}/flows", timeout=10).status_code == 403


def test_the_times_are_on_the_flow_a_serial_batch_and_a_late_answer_with_them(demo_web):
    _, _, web = demo_web
    chats = [f for f in web.flows() if f["request"]["path"] == "/v1/chat/completions"]
    first, serial, _, late = chats[-4:]
    said = {f["id"]: f["comment"].splitlines() for f in (first, serial, late)}
    assert said[first["id"]][1].startswith(TIME + "model ")
    assert "80 in / 20 out tokens" in said[first["id"]][1]
    assert (
        said[serial["id"]]
        == [
            "tooltap: serial-execution",
            said[serial["id"]][1],
        ]
        and "(3 call(s) answered)" in said[serial["id"]][1]
    )
    assert said[late["id"]][1].endswith("(1 call(s) answered, 1 late)")
    view = web.view(serial["id"])["text"]
    block = " ".join(view[view.index("TIME") :].split("\n\n")[0].split())  # unwrapped
    assert block.count("on forecast-tools 0.3.1") == 3  # each call's run, linked
    assert "the calls ran one after another: see LOOP ERRORS (serial-execution)" in block
    assert "LOOP ERRORS\n  serial-execution  call_Rq8fX2mWbN4kLt" in view


def test_the_tooltap_view_is_chosen_for_the_model_apis_and_says_the_finding_first(demo_web):
    _, _, web = demo_web
    flows = web.flows()[: len(DEMO_FLOWS)]
    views = [web.view(f["id"]) for f in flows]
    assert {v["view_name"] for v in views} == {"tooltap"}
    for view, (_, _, comment) in zip(views, DEMO_FLOWS, strict=True):
        first_turn = comment.removeprefix("tooltap: ").split("; ")[0]
        assert view["text"].splitlines()[0].endswith(first_turn)
    # The request side shows the same verdict.
    assert web.view(flows[0]["id"], "request")["text"] == views[0]["text"]

    strict_void = views[0]["text"]
    assert "state      strict-void: 3 function_call item(s) in one turn" in strict_void
    assert "  call_fdNz3vOBKYgOIpMdWotB9MjY  get_weather  [function_call]" in strict_void
    assert '    arguments: {"city": "Edinburgh", "country": "GB", "units": "c"}' in strict_void
    assert "REPAIRS\n  - set parallel_tool_calls false" in strict_void
    assert "call_tsc_5Qm2rR0xDq9LkTn3Wz" not in strict_void

    schema = views[9]["text"]  # Responses: a required property missing
    assert '    schema error at $: "to_currency" is a required property' in schema
    failure = views[4]["text"]
    assert "(a tool failure)" in failure and "TOOL RESULTS" in failure
    parse = views[11]["text"]  # Messages: arguments cut off by max_tokens
    assert "    parse error: JSONDecodeError: unexpected end of data" in parse
    loop = views[8]["text"]  # Chat: the API's own 400 and the loop error that explains it
    assert "LOOP ERRORS\n  unanswered-call  call_h1DWI1POMJLb0KwIyQHWXD4p  at messages.1" in loop
    assert "REJECTED  400 invalid_request_error: An assistant message with 'tool_calls'" in loop
    orphan = views[12]["text"]
    assert "  orphan-result  toolu_01GHndag5wQmbzNihYmV2UBj  at messages.1.content.0" in orphan
    advisory = views[5]["text"]
    assert "format     advisory-schema:" in advisory
    bedrock = views[13]["text"]  # Claude on Bedrock: read from AWS's event stream
    assert "  toolu_bdrk_01Pz3mYvB5dGkR2aLw9nXe4s  get_weather  [tool_use]" in bedrock
    assert '    schema error at $.units: "kelvin" is not one of "c" or "f"' in bedrock
    converse = views[14]["text"]  # Converse: Bedrock's refusal, the type from its header
    assert "  unanswered-call  tooluse_kq7Xw2nRzT4vB9mLp3cYhE  at messages.1" in converse
    assert "REJECTED  400 ValidationException: Expected toolResult blocks" in converse
    assert (
        "TOOL RESULTS\n  tooluse_Vb5sN8dQe1jF6uHa0gWxKr  error at messages.2.content.0" in converse
    )
    # Never a header: the demo's keys are in the requests, not in the view.
    assert not any("sk-demo" in v["text"] or "sk-ant-demo" in v["text"] for v in views)


def test_a_sockets_turns_show_on_the_messages_that_ended_them(demo_web):
    _, _, web = demo_web
    (socket,) = [
        f for f in web.flows() if f.get("websocket") and f["request"]["path"] == "/v1/responses"
    ]
    messages = web.view(socket["id"], "messages")
    shown = [(i, m["text"].splitlines()[0]) for i, m in enumerate(messages)
             if m["view_name"] == "tooltap"]  # fmt: skip
    raw = web.view(socket["id"], "messages", "raw")
    finals = [i for i, m in enumerate(raw) if '"type":"response.completed"' in m["text"]]
    assert [i for i, _ in shown] == finals
    assert [line for _, line in shown] == [
        "tooltap strict-void",
        "tooltap strict-at-risk, unanswered-call",
    ]
    upgrade = web.view(socket["id"], "response")["text"]
    assert upgrade.startswith("tooltap turn 1 of 2: strict-void")
    assert "\n\ntooltap turn 2 of 2: strict-at-risk, unanswered-call" in upgrade


def test_a_gemini_live_sockets_turns_show_on_the_binary_frames_that_ended_them(demo_web):
    _, _, web = demo_web
    (socket,) = [f for f in web.flows() if f["request"]["path"] == LIVE_PATH]
    messages = web.view(socket["id"], "messages")
    shown = [(i, m["text"].splitlines()[0]) for i, m in enumerate(messages)
             if m["view_name"] == "tooltap"]  # fmt: skip
    raw = web.view(socket["id"], "messages", "raw")
    # Each turn ends at a toolCall or a turnComplete (the bare one after a toolCall ends none).
    ends = [i for i, m in enumerate(raw) if not m["from_client"]
            and ('"toolCall"' in m["text"] or '"turnComplete"' in m["text"])]  # fmt: skip
    assert [i for i, _ in shown] == [ends[0], ends[1], ends[3], ends[4]]
    assert [line for _, line in shown] == [
        "tooltap fanout-no-strict, argument-schema",
        "tooltap no finding (no-strict-declared), 1 tool failure(s)",
        "tooltap no finding (no-strict-declared)",
        "tooltap no finding (no-strict-declared)",
    ]
    upgrade = web.view(socket["id"], "response")["text"]
    assert upgrade.startswith("tooltap turn 1 of 4: fanout-no-strict, argument-schema")


def test_marks_and_comments_leave_the_bytes_on_the_wire_unchanged():
    with demo_through_web() as (proxy, upstream, web):
        before = len(web.flows())
        connections = replay_every_step(proxy, upstream)
        flows = web.annotated(before + len(DEMO_FLOWS))
        relayed(web, connections)
    # The same requests and socket, marked and commented as the first time.
    originals = listed(flows[: len(DEMO_FLOWS)])
    replayed = listed(flows[before:])
    assert sorted(replayed) == sorted(originals)


# Headers a reverse proxy may set itself (mitmproxy rewrites Host; the framing is redone).
HOP = {"host", "content-length", "transfer-encoding", "connection", "date", "server"}


def replay_every_step(proxy: Proxy, upstream: ReplayServer) -> Any:
    """Each HTTP request the upstream saw, sent again through the proxy as raw bytes: the
    upstream gets the same request, headers included, and the client the same response, its
    headers included, byte for byte. Then the WebSocket steps again (the Responses socket and
    the Gemini Live one), through the SDKs: every frame arrives unchanged, both ways."""
    # The MCP step reached a live tool server (its sessions are new each time): its bytes are
    # checked against that server in tests/system/test_mcp_clients.py.
    recorded = [
        seen
        for seen in upstream.seen
        if not seen.path.startswith((PATH, HEADLINES_PATH))
        and seen.headers.get("x-demo-step") not in LIVE_STEPS
    ]
    with httpx.Client(base_url=proxy.url, timeout=10) as client:
        client.headers.clear()  # only what the SDK sent (botocore sends no Accept)
        for seen in recorded:
            headers = {k: v for k, v in seen.headers.items() if k not in HOP}
            request = client.build_request(
                seen.method, seen.path, headers=headers, content=seen.body
            )
            response = client.send(request, stream=True)
            got = b"".join(response.iter_raw())
            response.close()
            assert seen.reply is not None
            assert (response.status_code, got) == (seen.reply.status, seen.reply.body)
            assert [
                (k.lower(), v) for k, v in response.headers.multi_items() if k.lower() not in HOP
            ] == [(k.lower(), v) for k, v in seen.reply.headers]
            again = upstream.seen[-1]
            assert (again.method, again.path, again.body) == (seen.method, seen.path, seen.body)
            assert {k: v for k, v in again.headers.items() if k not in HOP} == headers
    trust = os.path.join(proxy.confdir, "mitmproxy-ca-cert.pem")
    connections = []
    for name in ("responses-websocket", "gemini-live"):
        step = next(step for step in STEPS if step.name == name)
        before = len(upstream.connections)
        step.call(Clients(proxy.url, {"x-demo-step": name}, ca=trust))
        (connection,) = upstream.connections[before:]
        assert connection.closed.wait(5)
        connections.append(connection)
    return connections


def relayed(web: Web, connections: list[Any]) -> None:
    """mitmweb's record of each replayed socket holds exactly the frames both ends exchanged."""
    for connection in connections:
        socket = [
            f for f in web.flows() if f.get("websocket") and f["request"]["path"] == connection.path
        ][-1]
        messages = web.view(socket["id"], "messages", "raw")
        client_side = [m["text"] for m in messages if m["from_client"]]
        server_side = [m["text"] for m in messages if not m["from_client"]]
        assert client_side == [_text(m) for m in connection.received]
        assert server_side == [_text(m) for m in connection.sent]


def _text(message: str | bytes) -> str:
    return message if isinstance(message, str) else message.decode()


def test_a_flow_file_loaded_by_tooltap_web_is_marked_as_live_and_tooltap_run_marks_nothing(
    tmp_path: Path,
):
    saved = tmp_path / "demo.mitm"
    # tooltap streams SSE through: a flow file keeps those bodies only when asked to.
    extra = ("--set", f"save_stream_file={saved}", "--set", "store_streamed_bodies=true")
    with demo_stack(extra=extra) as (_, upstream, proxy):
        drive(Console(file=io.StringIO()), proxy)
    with saved.open("rb") as handle:
        recorded = list(flow_io.FlowReader(handle).stream())
    assert len(recorded) > len(DEMO_FLOWS) + len(MCP_FLOWS)  # and the sessions' GETs
    # `tooltap run` (mitmdump) leaves flows as they were: no mark, no comment, no verdict.
    assert {(f.marked, f.comment, KEY in f.metadata) for f in recorded} == {("", "", False)}
    # Loaded from the file, the MCP flows are read where tooltap_mcp_hosts says, as live. (A
    # reverse proxy points what it loads at its own upstream: the host is named, not the port.)
    mcp_host = ("--set", f"tooltap_mcp_hosts={urlsplit(upstream.url).hostname}")
    with Proxy.tooltap(
        ["http://127.0.0.1:9"], "--read", str(saved), web=True, extra=mcp_host
    ) as loaded:
        web = Web(loaded.web_url or "")
        flows = listed(web.annotated(len(DEMO_FLOWS) + len(MCP_FLOWS)))
        assert flows[: len(DEMO_FLOWS)] == DEMO_FLOWS
        assert annotated(flows[len(DEMO_FLOWS) :]) == sorted(MCP_FLOWS)


def test_in_a_browser_the_strict_void_flow_is_marked_its_view_readable_and_the_filter_finds_it(
    demo_web, tmp_path: Path
):
    from playwright.sync_api import expect, sync_playwright

    proxy, _, _ = demo_web
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.set_default_timeout(10_000)
            page.goto(proxy.web_url or "")
            rows = page.locator(".flow-table tbody tr.has-request")
            rows.first.wait_for()
            row = rows.filter(has_text="tooltap: strict-void").first
            expect(row.locator(".marker")).to_have_text(RED)
            row.click()
            page.get_by_text("Response", exact=True).click()
            view = page.locator(".contentview")
            expect(view.locator("h5")).to_have_text("tooltap")  # once it has loaded
            expect(view.locator("pre")).to_contain_text("CALLS (3)")
            text = view.locator("pre").inner_text()
            assert text.startswith("tooltap strict-void")
            assert "call_h1DWI1POMJLb0KwIyQHWXD4p  get_stock_price  [function_call]" in text
            page.screenshot(path=str(tmp_path / "mitmweb.png"))
            if os.environ.get("TOOLTAP_SCREENSHOT"):  # how docs/mitmweb.png is made
                page.screenshot(path=os.environ["TOOLTAP_SCREENSHOT"])

            page.get_by_text("Flow List", exact=True).click()  # where the search box is
            page.get_by_placeholder("Search").fill("~comment strict-void")
            page.keyboard.press("Enter")
            expect(rows).to_have_count(2)
            comments = rows.locator(".col-comment").all_inner_texts()
            # The column shows the comment's lines run together: the findings, then the times.
            assert [c.split(TIME)[0].rstrip() for c in comments] == [
                "tooltap: strict-void",
                "tooltap: strict-void; strict-at-risk, unanswered-call",
            ]
            page.get_by_placeholder("Search").fill("~marked")
            page.keyboard.press("Enter")
            marked = sum(1 for _, mark, _ in DEMO_FLOWS + MCP_FLOWS if mark)
            expect(rows).to_have_count(marked)
        finally:
            browser.close()
    assert (tmp_path / "mitmweb.png").stat().st_size > 10_000


def test_demo_web_keeps_the_demo_flows_up_in_mitmweb_until_ctrl_c():
    import re
    import signal
    import subprocess
    import sys

    demo = subprocess.Popen(
        [sys.executable, "-m", "tooltap.addon.commands.cli", "demo", "--web"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "COLUMNS": "400"},  # one line per printed URL
    )
    try:
        assert demo.stdout is not None
        url = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and demo.poll() is None:
            line = demo.stdout.readline()
            if match := re.search(r"mitmweb: (http://\S+\?token=\w+)", line):
                url = match.group(1)
            if "Ctrl-C stops everything" in line:
                break
        assert url is not None, "the demo printed no mitmweb address"
        flows = listed(Web(url).annotated(len(DEMO_FLOWS) + len(MCP_FLOWS)))
        assert flows[: len(DEMO_FLOWS)] == DEMO_FLOWS
        assert annotated(flows[len(DEMO_FLOWS) :]) == sorted(MCP_FLOWS)
        demo.send_signal(signal.SIGINT)
        code = demo.wait(30)
        rest = demo.stdout.read()
        assert code == 0, rest[-2000:]
        assert "every process and port is closed" in rest
    finally:
        if demo.poll() is None:  # ours, by PID: the demo and the proxy it started
            for process in [*psutil.Process(demo.pid).children(True), psutil.Process(demo.pid)]:
                with contextlib.suppress(psutil.NoSuchProcess):
                    process.kill()


def test_plain_mitmweb_with_the_script_marks_and_comments_too():
    import subprocess

    from tooltap.addon.harness.launch import free_port

    script = subprocess.run(
        [sys.executable, "-m", "tooltap.addon.commands.cli", "script-path"],
        capture_output=True, text=True, check=True, timeout=30,
    ).stdout.strip()  # fmt: skip
    mitmweb = str(Path(sys.executable).with_name("mitmweb"))
    with ReplayServer(route, sockets=socket_route) as upstream:
        argv = [mitmweb, "--listen-host", "127.0.0.1", "-p", "0", "--mode",
                f"reverse:{upstream.url}", "-s", script, "--set", f"web_port={free_port()}",
                "--set", "web_open_browser=false", "--set", "tooltap_metrics_port=0",
                "--set", "tooltap_log_format=json"]  # fmt: skip
        with Proxy(argv, modes=1, has_web=True) as proxy:
            step = next(s for s in STEPS if s.name == "chat-fanout")
            step.call(Clients(proxy.url, {"x-demo-step": step.name}))
            (flow,) = Web(proxy.web_url or "").annotated(1)
    assert (flow["marked"], findings(flow["comment"])) == (RED, "tooltap: strict-void")
    assert flow["comment"].splitlines()[1].startswith(f"{TIME}model ")
