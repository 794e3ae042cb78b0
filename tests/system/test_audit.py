"""tooltap audit: stored responses from a loopback fake API, and recorded traffic (flow, HAR, JSONL)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from xml.etree import ElementTree

import httpx
import pytest
from support.scenarios import route

from tooltap.addon.commands.cli import main
from tooltap.addon.harness.launch import Proxy
from tooltap.addon.harness.replay import ReplayServer, Reply, Seen

STRICT = [
    {"type": "function", "name": "lookup_order", "strict": True, "parameters": {"type": "object"}},
    {"type": "function", "name": "create_ticket", "strict": True, "parameters": {"type": "object"}},
]
LOOSE = [
    {"type": "function", "name": "lookup_order", "strict": False},
    {"type": "function", "name": "create_ticket"},
]
TIGHT = {
    "type": "object",
    "additionalProperties": False,
    "required": ["invoice_id"],
    "properties": {"invoice_id": {"type": "string"}},
}


def stored(response_id, names, tools, parallel=None, fmt=None):
    body = {
        "id": response_id,
        "object": "response",
        "status": "completed",
        "model": "gpt-5.1",
        "tools": tools,
        "output": [
            {"type": "function_call", "name": n, "call_id": f"call_{i}", "arguments": "{}"}
            for i, n in enumerate(names)
        ],
        "text": {"format": fmt or {"type": "text"}},
    }
    if parallel is not None:
        body["parallel_tool_calls"] = parallel
    return body


# The seeds' own scenarios, as stored responses.
STORED = {
    "resp_void": stored("resp_void", ["lookup_order", "create_ticket", "create_ticket"], STRICT),
    "resp_atrisk": stored("resp_atrisk", ["lookup_order"], STRICT),
    "resp_serial": stored("resp_serial", ["lookup_order"], STRICT, parallel=False),
    "resp_fanout": stored("resp_fanout", ["lookup_order", "create_ticket"], LOOSE),
    "resp_advisory": stored(
        "resp_advisory", [], [], fmt={"type": "json_schema", "name": "invoice", "schema": TIGHT}
    ),
    "resp_noschema": stored("resp_noschema", [], [], fmt={"type": "json_object"}),
    "resp_advtools": stored(
        "resp_advtools",
        [],
        [{"type": "function", "name": "refund", "parameters": TIGHT}],
        fmt={"type": "json_schema", "name": "invoice", "strict": True, "schema": TIGHT},
    ),
    "resp_enforced": stored(
        "resp_enforced",
        [],
        [],
        fmt={"type": "json_schema", "name": "invoice", "strict": True, "schema": TIGHT},
    ),
}


class FakeAPI:
    """GET /v1/responses/{id}: stored objects, plus 404, 401, 429-then-200 and malformed JSON."""

    def __init__(self):
        self.hits: dict[str, int] = {}

    def __call__(self, seen: Seen) -> Reply:
        response_id = seen.path.rsplit("/", 1)[-1]
        self.hits[response_id] = self.hits.get(response_id, 0) + 1
        if seen.headers.get("authorization") != "Bearer sk-test-audit":
            return Reply(401, chunks=[b'{"error": {"message": "bad key"}}'])
        if response_id in STORED:
            return Reply(chunks=[json.dumps(STORED[response_id]).encode()])
        if response_id == "resp_busy" and self.hits[response_id] == 1:
            return Reply(429, headers=[("retry-after", "0")], chunks=[b"{}"])
        if response_id == "resp_busy":
            return Reply(
                chunks=[json.dumps(stored("resp_busy", ["lookup_order"], STRICT)).encode()]
            )
        if response_id == "resp_garbled":
            return Reply(chunks=[b'{"id": "resp_garbled", "output": [tru'])
        if response_id == "resp_down":
            return Reply(503, headers=[("retry-after", "0")], chunks=[b"{}"])
        return Reply(404, chunks=[b'{"error": {"message": "not found"}}'])


@pytest.fixture
def api(monkeypatch):
    fake = FakeAPI()
    with ReplayServer(fake) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-audit")
        server.fake = fake
        yield server


def audit(capsys, *argv):
    code = main(["audit", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize(
    ("response_id", "state", "code", "phrase"),
    [
        ("resp_void", "strict-void", 1, "carry no schema guarantee"),
        ("resp_atrisk", "strict-at-risk", 0, "The configuration is loaded; it did not fire here."),
        ("resp_serial", "strict-serialised", 0, "The guarantee holds."),
        ("resp_fanout", "fanout-no-strict", 0, "no tool declares strict"),
        ("resp_advisory", "advisory-schema", 1, "strict absent"),
        ("resp_noschema", "no-schema", 1, "valid JSON and nothing else"),
        ("resp_advtools", "advisory-tools", 1, "refund"),
        ("resp_enforced", "enforced", 0, "no tool beside it is loose"),
    ],
)
def test_the_seeds_scenarios_end_to_end_with_their_exit_codes(
    api, capsys, response_id, state, code, phrase
):
    exit_code, out, _ = audit(capsys, "--response-id", response_id, "--show-all")
    assert exit_code == code
    line = next(line for line in out.splitlines() if line.startswith(state))
    assert response_id in line and phrase in line
    assert out.splitlines()[-1] == f"1 response(s) read, {code} finding(s)"


def test_a_file_of_ids_gives_the_exposure_line_and_the_repairs(api, capsys, tmp_path):
    ids = tmp_path / "ids.txt"
    ids.write_text(
        "resp_void  # the fan-out\nresp_atrisk\nresp_atrisk\n\n# a comment\nresp_serial\n"
    )
    code, out, _ = audit(capsys, "--responses", str(ids))
    assert code == 1
    assert "  calls: lookup_order, create_ticket, create_ticket" in out
    assert (
        "  duplicate: create_ticket called 2 time(s) in one turn. Handlers keyed on the tool name rather than call_id will double apply."
        in out
    )
    assert "  repair: set parallel_tool_calls false whenever strict schemas matter." in out
    assert (
        "exposure: 1 of 2 at-risk turn(s) fanned out (50.0%), covering 3 argument object(s) with no guarantee"
        in out
    )
    assert out.splitlines()[-1] == "3 response(s) read, 1 finding(s)"
    assert api.fake.hits == {
        "resp_void": 1,
        "resp_atrisk": 1,
        "resp_serial": 1,
    }  # duplicates dropped


def test_404_is_unreadable_429_is_retried_and_malformed_json_is_reported(api, capsys):
    code, out, _ = audit(
        capsys,
        "--response-id",
        "resp_gone",
        "--response-id",
        "resp_busy",
        "--response-id",
        "resp_garbled",
        "--response-id",
        "resp_down",
    )
    assert code == 0
    assert (
        "unreadable          resp_gone  not found. Stored responses expire, and a response created with store: false was never readable."
        in out
    )
    assert "strict-at-risk      resp_busy" in out
    assert api.fake.hits["resp_busy"] == 2
    assert "unparseable         resp_garbled  response body is not JSON" in out
    assert "unreadable          resp_down  HTTP 503 after 4 attempt(s)" in out
    assert api.fake.hits["resp_down"] == 4


def test_401_stops_the_audit_with_exit_2(api, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong")
    code, _, err = audit(capsys, "--response-id", "resp_void", "--response-id", "resp_atrisk")
    assert code == 2
    assert "401" in err and "needs read access to stored responses" in err
    assert api.fake.hits == {"resp_void": 1}


def test_ids_that_could_walk_the_url_never_produce_a_request(api, capsys, tmp_path):
    ids = tmp_path / "ids.txt"
    ids.write_text("../../etc\nresp_bad/../x\nresp_ok%2F..\n")
    code, _, err = audit(
        capsys,
        "--responses",
        str(ids),
        "--response-id",
        "resp_bad/../x",
        "--response-id",
        "../../etc",
    )
    assert code == 2
    assert "no usable response ids" in err
    assert api.seen == []


def test_usage_errors_exit_2(capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert audit(capsys, "--response-id", "resp_x")[0] == 2
    assert audit(capsys)[0] == 2
    assert audit(capsys, "--responses", "/nonexistent/ids.txt")[0] == 2
    assert audit(capsys, "-r", "/nonexistent/flows")[0] == 2


def test_json_output_carries_the_live_log_fields(api, capsys):
    code, out, _ = audit(capsys, "--response-id", "resp_void", "--format", "json")
    first, summary = (json.loads(line) for line in out.splitlines())
    assert code == 1
    assert (first["state"], first["response_id"], first["finding"]) == (
        "strict-void",
        "resp_void",
        True,
    )
    assert [c["call_id"] for c in first["calls"]] == ["call_0", "call_1", "call_2"]
    assert first["failing"] == ["strict-void"]
    assert summary == {
        "summary": True,
        "read": 1,
        "not_read": 0,
        "not_read_by_reason": {},
        "findings": 1,
        "baselined": 0,
        "exposure_over_budget": False,
        "at_risk": 1,
        "void": 1,
        "rate": 1.0,
        "unguaranteed_arguments": 3,
        # A stored response is read now: no time of its own, and this one counts no tokens.
        "time": {
            "timed": 0,
            "models": {
                "gpt-5.1": {
                    "exchanges_timed": 0,
                    "duration_ms": None,
                    "first_token_ms": None,
                    "input_tokens": None,
                    "output_tokens": None,
                    "output_tokens_per_second": None,
                }
            },
            "tool_waits": {"calls": 0, "p95_ms": None, "max_ms": None, "late": 0},
            "serial_batches": 0,
            "untimed": 0,
            "untimed_sources": {},
        },
    }


def test_a_jsonl_file_of_exchanges_gets_loop_checks_too(capsys, tmp_path):
    lines = [
        {
            "url": "https://api.anthropic.com/v1/messages",
            "status": 200,
            "response_headers": {"content-type": "application/json"},
            "request_body": {
                "messages": [
                    {"role": "user", "content": "x"},
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "r"}
                        ],
                    },
                ]
            },
            "response_body": {"id": "msg_1", "content": [{"type": "text", "text": "ok"}]},
        },
        {"not": "an exchange"},
    ]
    path = tmp_path / "x.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines))
    code, out, _ = audit(capsys, "--jsonl", str(path))
    assert code == 1
    assert "orphan-result       msg_1  toolu_1 at messages.1.content.0" in out
    assert f"unreadable          {path}:2  not an exchange" in out


def test_flow_and_har_files_from_a_real_mitmdump_give_the_live_findings(tmp_path, capsys):
    flows, har = tmp_path / "flows.mitm", tmp_path / "flows.har"
    extra = ("-w", str(flows), "--set", f"hardump={har}", "--set", "store_streamed_bodies=true")
    names = [
        "chat-json",
        "chat-sse",
        "responses-json",
        "responses-sse",
        "messages-json",
        "messages-sse",
        "chat-gzip",
        "messages-400",
    ]
    with (
        ReplayServer(route) as upstream,
        Proxy.tooltap([upstream.url], "--log-format", "json", extra=extra) as proxy,
    ):
        with httpx.Client(base_url=proxy.url, timeout=10) as client:
            for name in names:
                path = {"c": "/v1/chat/completions", "r": "/v1/responses", "m": "/v1/messages"}[
                    name[0]
                ]
                client.post(
                    path,
                    json={
                        "model": "m",
                        "messages": [],
                        "tools": [
                            {
                                "type": "function",
                                "function": {"name": "GetWeatherArgs", "strict": True},
                            }
                        ],
                    },
                    headers={"x-scenario": name},
                )
        live = proxy.wait_for("turn", len(names))
    # Read off the captures: two calls under a strict tool with parallel calls on (Chat); the
    # Responses capture echoes its own strict tool and makes one call; the request's tool is in
    # Chat's shape, which names no Anthropic tool; the 400 is a rejection, no turn.
    expected = [
        ("chat", "strict-void", 2),
        ("chat", "strict-void", 2),
        ("responses", "strict-at-risk", 1),
        ("responses", "strict-at-risk", 1),
        ("messages", "no-tools", 1),
        ("messages", "no-tools", 1),
        ("chat", "strict-void", 2),
        ("messages", None, 0),
    ]
    assert [(t["api"], t["state"], t["calls"]) for t in live] == expected
    for source in (["-r", str(flows)], ["--har", str(har)]):
        code, out, _ = audit(capsys, *source, "--format", "json")
        verdicts = [json.loads(line) for line in out.splitlines()][:-1]
        assert [(v["api"], v["state"], len(v["calls"])) for v in verdicts] == expected, source
        assert code == 1


def test_the_cli_runs_as_a_process(api):
    done = subprocess.run(
        [sys.executable, "-m", "tooltap.addon.commands.cli", "audit", "--response-id", "resp_void"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stdout.startswith("strict-void         resp_void")


def test_a_socket_saved_while_open_skips_its_turn_in_flight_rather_than_call_it_cut(
    tmp_path, capsys
):
    from mitmproxy import io
    from mitmproxy.websocket import WebSocketMessage
    from support.flows import socket_flow
    from support.sockets import RESPONSES_CASSETTE, frame, recording
    from wsproto.frame_protocol import Opcode

    flow = socket_flow("/v1/responses")
    flow.websocket.timestamp_end = None  # mitmdump -w wrote it before the socket closed
    events = recording(RESPONSES_CASSETTE)
    for direction, event in events[: len(events) - 2]:  # the last turn not finished
        content = frame(event).encode()
        flow.websocket.messages.append(WebSocketMessage(Opcode.TEXT, direction == "sent", content))
    path = tmp_path / "open.mitm"
    with path.open("wb") as handle:
        io.FlowWriter(handle).add(flow)
    assert main(["audit", "-r", str(path), "--format", "json"]) == 0  # the turn read is clean
    *turns, summary = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(t["label"], t["outcome"]) for t in turns] == [
        ("WS /v1/responses #1", "inspected"),
        ("WS /v1/responses #2", "skipped"),
    ]
    assert turns[1]["reason"] == "the socket was still open when the flow was saved"
    assert summary["read"] == 1


def test_a_realtime_session_error_that_refused_nothing_is_audited_from_a_flow_file(
    tmp_path, capsys
):
    """An empty audio buffer committed: the session's own error, said as a session-error in
    every format (it once stopped the audit: "zip() argument 2 is shorter")."""
    from mitmproxy import io
    from mitmproxy.websocket import WebSocketMessage
    from support.flows import socket_flow
    from support.sockets import frame, realtime_session
    from wsproto.frame_protocol import Opcode

    flow = socket_flow("/v1/realtime?model=gpt-realtime")
    said = "Error committing input audio buffer: buffer too small. Expected at least 100ms."
    error = {"type": "invalid_request_error", "code": "input_audio_buffer_commit_empty",
             "message": said, "param": None, "event_id": None}  # fmt: skip
    messages = [
        (False, realtime_session([])[0]),
        (True, frame({"type": "input_audio_buffer.commit", "event_id": "event_c1"})),
        (False, frame({"type": "error", "event_id": "event_e1", "error": error})),
    ]
    for from_client, content in messages:
        flow.websocket.messages.append(WebSocketMessage(Opcode.TEXT, from_client, content.encode()))
    flow.websocket.closed_by_client, flow.websocket.close_code = True, 1000
    flow.websocket.timestamp_end = flow.request.timestamp_start + 1
    path = tmp_path / "realtime.mitm"
    with path.open("wb") as handle:
        io.FlowWriter(handle).add(flow)
    assert main(["audit", "-r", str(path), "--format", "json"]) == 0  # routine: fails nothing
    *rows, summary = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["label"], r["scope"], r["session_errors"]) for r in rows] == [
        ("WS /v1/realtime (session)", "session",
         [{"type": "input_audio_buffer_commit_empty", "message": said}])
    ]  # fmt: skip
    assert (summary["read"], summary["findings"]) == (1, 0)
    assert main(["audit", "-r", str(path), "--fail-on", "session-error"]) == 1
    text = capsys.readouterr().out
    assert f"the session said input_audio_buffer_commit_empty: {said}" in text


# --- time: recordings that keep it (flow files, HAR) and those that do not -------------------


@pytest.fixture(scope="module")
def agent_loop_recorded(tmp_path_factory):
    """The demo's agent loop over MCP (a streamed turn, its three calls run one after another
    on the tool server, the follow-up), through a real `tooltap run` that writes a flow file
    and a HAR of it; and the turns and tool_time lines it logged live."""
    from tooltap.addon.commands.demo import demo_stack
    from tooltap.addon.commands.demo_steps import BY_NAME, Clients

    folder = tmp_path_factory.mktemp("recorded")
    flows, har = folder / "loop.mitm", folder / "loop.har"
    extra = ("-w", str(flows), "--set", f"hardump={har}", "--set", "store_streamed_bodies=true")
    step = BY_NAME["mcp-serial"]
    with demo_stack(extra=extra) as (_, _, proxy):
        step.call(Clients(proxy.url).with_headers({"x-demo-step": step.name}))
        live = proxy.wait_for("turn", step.turns)
        timed = proxy.wait_for("tool_time", 3)
    return {"flows": flows, "har": har, "live": live, "timed": timed}


def json_audit(capsys, *argv):
    code, out, _ = audit(capsys, *argv, "--format", "json")
    *rows, summary = [json.loads(line) for line in out.splitlines()]
    return code, rows, summary


@pytest.mark.parametrize("source", ["-r", "--har"])
def test_a_recorded_agent_loop_gives_its_times_and_its_serial_batch(
    agent_loop_recorded, capsys, source
):
    recorded = agent_loop_recorded
    path = str(recorded["flows"] if source == "-r" else recorded["har"])
    live_turns = [t for t in recorded["live"] if t["api"] == "chat"]
    code, rows, summary = json_audit(capsys, source, path)
    assert code == 0  # serial-execution is reported, and fails nothing unless named
    turns = [r for r in rows if r["api"] == "chat"]
    assert [t["response_id"] for t in turns] == [t["response_id"] for t in live_turns]
    # The recording's own stamps: the model time the proxy measured live, to the microsecond
    # (a HAR keeps milliseconds as floats); no streamed piece's time, so no first token.
    for row, live in zip(turns, live_turns, strict=True):
        if source == "--har" and row["duration_ms"] is None and row["stream"]:
            continue  # the client hung up at the stream's end: mitmproxy's HAR keeps no end
        assert row["duration_ms"] == pytest.approx(live["duration_ms"], abs=0.01)
        assert row["first_token_ms"] is None
        assert (row["usage"]["input_tokens"], row["usage"]["output_tokens"]) == (
            live["input_tokens"],
            live["output_tokens"],
        )
    assert live_turns[0]["first_token_ms"] is not None  # live, the stream was timed
    follow_up = turns[1]
    if turns[0]["duration_ms"] is None:
        # The client hung up right after the stream's last event (it does, now and then), and
        # mitmproxy's HAR keeps no end for it: when its calls were issued is unknown, so their
        # waits, runs and batch are said of nothing, never guessed.
        assert (follow_up["tool_times"], follow_up["loop_errors"]) == ([], [])
        return
    waits = {t["call_id"]: t for t in follow_up["tool_times"]}
    for line in recorded["timed"]:
        said = waits[line["call_id"]]
        assert said["waited_ms"] == pytest.approx(line["waited_ms"], abs=0.01)
        assert said["ran_ms"] == pytest.approx(line["ran_ms"], abs=0.01)
        assert said["server"] == "forecast-tools 0.3.1" and not said["late"]
    assert [e["rule"] for e in follow_up["loop_errors"]] == ["serial-execution"]
    time = summary["time"]
    timed = sum(r["duration_ms"] is not None for r in turns)
    assert (time["timed"], time["serial_batches"], time["untimed"]) == (timed, 1, 0)
    (model,) = time["models"].values()
    assert model["exchanges_timed"] == timed and model["first_token_ms"] is None
    assert (model["input_tokens"], model["output_tokens"]) == (80 + 149, 20 + 60)
    assert time["tool_waits"]["calls"] == 3 and time["tool_waits"]["late"] == 0

    code, text, _ = audit(capsys, source, path)
    assert code == 0
    first, then = live_turns
    if turns[0]["duration_ms"] is not None:
        assert re.search(rf"^time +{first['response_id']}  model [\d.]+ s, 80 in / 20 out tokens$",
                         text, re.M)  # fmt: skip
    assert re.search(
        rf"^time +{then['response_id']}  model [\d.]+ s, 149 in / 60 out tokens, "
        r"tool wait [\d.]+ s \(3 call\(s\) answered\)$",
        text,
        re.M,
    )
    assert re.search(rf"^serial-execution +{then['response_id']}  .*the batch took \d+ ms", text,
                     re.M)  # fmt: skip
    assert f"time: {timed} model exchange(s) timed" in text
    assert re.search(rf"gpt-4o-2024-08-06 \({timed}\): model p50 [\d.]+ s, p95 [\d.]+ s, 229 in / 80 out "
                     r"tokens, [\d.]+ output tokens/s", text)  # fmt: skip
    assert "batches run one call after another (serial-execution): 1" in text
    assert "no times" not in text and "times: none" not in text
    assert audit(capsys, source, path, "--fail-on", "serial-execution")[0] == 1

    code, xml, _ = audit(capsys, source, path, "--format", "junit")
    cases = ElementTree.fromstring(xml).iter("testcase")
    timed_cases = [c for c in cases if c.get("time") is not None]
    assert len(timed_cases) >= 2 + 3  # the two turns and the three runs, at least
    chat = [c for c in timed_cases if c.get("name") == "POST /v1/chat/completions"]
    assert [float(c.get("time")) for c in chat] == pytest.approx(
        [t["duration_ms"] / 1000 for t in live_turns], abs=0.001
    )
    properties = {p.get("name"): p.get("value") for p in chat[1].iter("property")}
    assert properties["tooltap.output_tokens"] == "60"
    assert float(properties["tooltap.tool_wait_ms"]) == pytest.approx(then["tool_wait_ms"], abs=0.1)


def test_jsonl_and_cassettes_are_said_to_keep_no_times_and_none_is_given_as_zero(tmp_path, capsys):
    from tooltap.addon.commands.demo_openai import chat_completion

    reply = chat_completion("chatcmpl-untimed", [("call_1", "get_weather", "{}")])
    line = {"url": "https://api.openai.com/v1/chat/completions", "status": 200,
            "request_body": {"model": "gpt-4o", "messages": []}, "response_body": reply,
            "response_headers": {"content-type": "application/json"}}  # fmt: skip
    path = tmp_path / "untimed.jsonl"
    path.write_text(json.dumps(line) + "\n")
    _, rows, summary = json_audit(capsys, "--jsonl", str(path))
    (row,) = rows
    assert (row["duration_ms"], row["first_token_ms"], row["tool_wait_ms"]) == (None, None, None)
    time = summary["time"]
    assert (time["timed"], time["untimed"], time["untimed_sources"]) == (0, 1, {str(path): 1})
    assert time["models"]["gpt-4o-2024-08-06"] == {
        "exchanges_timed": 0, "duration_ms": None, "first_token_ms": None,
        "input_tokens": 149, "output_tokens": 60, "output_tokens_per_second": None,
    }  # fmt: skip
    assert time["tool_waits"] == {"calls": 0, "p95_ms": None, "max_ms": None, "late": 0}
    _, text, _ = audit(capsys, "--jsonl", str(path))
    assert not re.search(r"^time ", text, re.M) and "0.000 s" not in text
    assert (
        "times: none: JSONL exchanges and VCR cassettes record no times, so they have no "
        "model time, first token or tool wait; their tokens are counted. 1 "
        f"exchange(s) came from such recordings: {path}"
    ) in text
    _, xml, _ = audit(capsys, "--jsonl", str(path), "--format", "junit")
    suite = next(s for s in ElementTree.fromstring(xml) if s.get("name") == str(path))
    assert suite[0].tag == "properties" and suite[0][0].get("name") == "tooltap.times"
    assert all(case.get("time") is None for case in suite.iter("testcase"))


def test_a_har_entry_is_timed_as_har_lays_it_out_and_without_timings_only_as_a_whole():
    from datetime import datetime

    from tooltap.addon.audit.inputs import har_times

    at = datetime.fromisoformat("2026-01-05T09:30:00+00:00").timestamp()
    # A browser's entry: set-up (blocked, dns, connect with its ssl inside) before the request.
    entry = {"startedDateTime": "2026-01-05T09:30:00.000Z", "time": 350,
             "timings": {"blocked": 5, "dns": -1, "connect": 20, "ssl": 12, "send": 1,
                         "wait": 300, "receive": 24}}  # fmt: skip
    assert har_times(entry) == pytest.approx(
        {"request_start": at + 0.025, "request_end": at + 0.026, "response_end": at + 0.350}
    )
    # mitmproxy's own export dates the entry at the request's first byte.
    assert har_times(entry, written_by_mitmproxy=True) == pytest.approx(
        {"request_start": at, "request_end": at + 0.001, "response_end": at + 0.325}
    )
    whole = {"startedDateTime": "2026-01-05T09:30:00Z", "time": 350}
    assert har_times(whole) == {"request_start": at, "request_end": None,
                                "response_end": pytest.approx(at + 0.35)}  # fmt: skip
