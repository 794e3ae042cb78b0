"""tooltap audit: stored responses from a loopback fake API, and recorded traffic (flow, HAR, JSONL)."""

from __future__ import annotations

import json
import subprocess
import sys

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
