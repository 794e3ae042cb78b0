"""Ollama's own API through a real `tooltap run` with the official `ollama` client, against a
loopback upstream that answers as a local Ollama does (NDJSON streams, one JSON object when
`stream` is false, errors as `{"error": ...}`): the bytes and their cadence reach the client
untouched, the log lines and metrics are exact, and the proxy's own flow file and HAR audit to
the findings it logged live.

One upstream and one proxy serve the module; each test marks the log and reads what follows.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import httpx
import ollama
import pytest
from support.prom import sample, scrape

from tooltap.addon.harness.launch import Proxy
from tooltap.addon.harness.replay import ReplayServer, Reply, Seen

MODEL = "qwen3:8b"
WEATHER = {
    "type": "object",
    "required": ["city"],
    "properties": {"city": {"type": "string"}, "units": {"type": "string", "enum": ["c", "f"]}},
}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
                                           "parameters": WEATHER}}]  # fmt: skip
ASK = [{"role": "user", "content": "Weather in Paris and Rome?"}]
CALLS = [
    {"id": "call_ab12cd34", "function": {"index": 0, "name": "get_weather",
                                         "arguments": {"city": "Paris", "units": "c"}}},
    {"id": "call_q2m7x0ta", "function": {"index": 1, "name": "get_weather",
                                         "arguments": {"city": "Rome", "units": "kelvin"}}},
]  # fmt: skip
DONE = {"done_reason": "stop", "total_duration": 812453291, "load_duration": 21871208,
        "prompt_eval_count": 169, "prompt_eval_duration": 97213000, "eval_count": 31,
        "eval_duration": 688115000}  # fmt: skip
REFUSED = "registry.ollama.ai/library/gemma3:1b does not support tools"
MID_STREAM = "an error was encountered while running the model"


def line(message: dict[str, Any], done: bool = False) -> bytes:
    body = {"model": MODEL, "created_at": "2026-12-01T09:14:07.218431Z",
            "message": {"role": "assistant", "content": ""} | message, "done": done}  # fmt: skip
    return json.dumps(body | (DONE if done else {})).encode() + b"\n"


STREAM = [
    line({"thinking": "Two cities"}),
    line({"thinking": ": two calls."}),
    line({"tool_calls": [CALLS[0]]}),
    line({"tool_calls": [CALLS[1]]}),
    line({}, done=True),
]
NDJSON = [("content-type", "application/x-ndjson")]
JSON = [("content-type", "application/json; charset=utf-8")]
REPLIES = {
    "stream": Reply(headers=NDJSON, chunks=STREAM, delay=0.05),
    "whole": Reply(headers=JSON, chunks=[line({"tool_calls": CALLS}, done=True)[:-1]]),
    "answered": Reply(
        headers=NDJSON,
        chunks=[line({"content": "Paris 21C; Rome unknown."}), line({}, done=True)],
        delay=0.01,
    ),
    # Cut inside a line: the upstream's body ends before the `done` line.
    "cut": Reply(headers=NDJSON, chunks=[*STREAM[:3], STREAM[3][:40]], delay=0.01),
    "error-line": Reply(
        headers=NDJSON,
        delay=0.01,
        chunks=[*STREAM[:3], json.dumps({"error": MID_STREAM}).encode() + b"\n"],
    ),
    "refused": Reply(400, JSON, [json.dumps({"error": REFUSED}).encode()]),
}


def route(seen: Seen) -> Reply:
    return REPLIES[seen.headers["x-scenario"]]


@pytest.fixture(scope="module")
def upstream():
    with ReplayServer(route) as server:
        yield server


@pytest.fixture(scope="module")
def proxy(upstream):
    with Proxy.tooltap([upstream.url], "--log-format", "json") as running:
        yield running


def client(proxy: Proxy, scenario: str) -> ollama.Client:
    return ollama.Client(host=proxy.url, headers={"x-scenario": scenario})


PER_RUN = ("timestamp", "inspect_ms", "exchange", "duration_ms", "first_token_ms")


def without_clock(event: dict[str, Any]) -> dict[str, Any]:
    """The line without what differs from run to run (times, the exchange's random id)."""
    return {k: v for k, v in event.items() if k not in PER_RUN}


def test_a_streamed_turn_passes_line_by_line_and_logs_both_calls_and_the_bad_argument(
    proxy, upstream
):
    mark = proxy.mark()
    parts = list(client(proxy, "stream").chat(model=MODEL, messages=ASK, tools=TOOLS, stream=True))
    assert [c.function.name for p in parts for c in p.message.tool_calls or []] == [
        "get_weather",
        "get_weather",
    ]
    (turn,) = proxy.wait_for("turn", 1, since=mark)
    calls = proxy.wait_for("tool_call", 2, since=mark)
    assert without_clock(turn) == {
        "event": "turn", "level": "warning", "api": "ollama", "transport": "http",
        "host": "127.0.0.1", "path": "/api/chat", "status": 200, "stream": True,
        "model": MODEL, "response_id": None, "outcome": "inspected", "reason": None,
        "state": "fanout-no-strict", "format_state": "free-text", "calls": 2,
        "duplicates": {"get_weather": 2}, "unchecked": [],
        "findings": ["fanout-no-strict", "argument-schema"],
        "input_tokens": 169, "output_tokens": 31,
        "repairs": [
            "no schema guarantee was in place to lose. Validate tool arguments in your own "
            "handler, or where one answer is wanted, ask for it with format (a JSON schema "
            "Ollama holds the output to) rather than with tools.",
            "duplicate: get_weather called 2 time(s) in one turn. Handlers keyed on the tool "
            "name rather than call_id will double apply.",
            "answer call_q2m7x0ta with a tool message (tool_name set) saying what was wrong "
            "rather than dropping the call, and keep the raw arguments for the post-mortem: "
            "Ollama takes a history with a call left unanswered, and the model reads it as "
            "never run.",
        ],
    }  # fmt: skip
    assert [without_clock(c) for c in calls] == [
        {"event": "tool_call", "level": "info", "api": "ollama", "transport": "http",
         "response_id": None, "model": MODEL, "path": "/api/chat", "call_id": "call_ab12cd34", "name": "get_weather",
         "arguments_raw": '{"city":"Paris","units":"c"}', "parse_error": None,
         "schema_errors": [], "schema_problem": None},
        {"event": "tool_call", "level": "warning", "api": "ollama", "transport": "http",
         "response_id": None, "model": MODEL, "path": "/api/chat", "call_id": "call_q2m7x0ta", "name": "get_weather",
         "arguments_raw": '{"city":"Rome","units":"kelvin"}', "parse_error": None,
         "schema_errors": [{"path": "$.units", "message": '"kelvin" is not one of "c" or "f"'}],
         "schema_problem": None},
    ]  # fmt: skip
    # What the client sent is what ollama-python makes of a tool: `type`, `items`,
    # `description` and `enum` of each property, nothing more.
    sent = json.loads(upstream.seen[-1].body)
    assert sent["tools"][0]["function"]["parameters"] == WEATHER
    assert sent["stream"] is True


def test_the_stream_reaches_the_client_byte_for_byte_and_as_it_is_sent(proxy, upstream):
    mark = proxy.mark()
    body = {"model": MODEL, "messages": ASK, "tools": TOOLS}
    arrived: list[tuple[float, bytes]] = []
    with httpx.stream("POST", f"{proxy.url}/api/chat", json=body,
                      headers={"x-scenario": "stream"}, timeout=10) as got:  # fmt: skip
        assert got.headers["content-type"] == "application/x-ndjson"
        for piece in got.iter_raw():
            arrived.append((time.perf_counter(), piece))
    assert b"".join(p for _, p in arrived) == b"".join(STREAM)  # every byte as sent
    assert len(arrived) == len(STREAM)  # a line at a time, not gathered
    sent = upstream.seen[-1].sent_at
    assert arrived[0][0] < sent[-1]  # the first line was with the client before the last left
    (turn,) = proxy.wait_for("turn", 1, since=mark)
    assert (turn["stream"], turn["state"], turn["calls"]) == (True, "fanout-no-strict", 2)


def test_an_unstreamed_turn_gives_the_streamed_turns_verdict(proxy):
    mark = proxy.mark()
    answer = client(proxy, "whole").chat(model=MODEL, messages=ASK, tools=TOOLS, stream=False)
    assert len(answer.message.tool_calls) == 2
    (turn,) = proxy.wait_for("turn", 1, since=mark)
    calls = proxy.wait_for("tool_call", 2, since=mark)
    assert (turn["stream"], turn["state"], turn["calls"], turn["reason"]) == (
        False,
        "fanout-no-strict",
        2,
        None,
    )
    assert [c["schema_errors"] for c in calls] == [
        [],
        [{"path": "$.units", "message": '"kelvin" is not one of "c" or "f"'}],
    ]


def test_tool_results_answered_by_name_one_an_error_and_nothing_left_unanswered(proxy, upstream):
    mark = proxy.mark()
    history = [
        *ASK,
        {"role": "assistant", "content": "", "tool_calls": CALLS},
        {"role": "tool", "tool_name": "get_weather", "content": "21C"},
        {"role": "tool", "tool_name": "get_weather", "content": '{"error": "no such units"}'},
    ]
    list(client(proxy, "answered").chat(model=MODEL, messages=history, tools=TOOLS, stream=True))
    (turn,) = proxy.wait_for("turn", 1, since=mark)
    (failed,) = proxy.wait_for("tool_result_error", 1, since=mark)
    assert (turn["state"], turn["calls"]) == ("no-strict-declared", 0)
    assert (failed["call_id"], failed["where"]) == ("get_weather", "messages.3")
    # ollama-python sent the calls back without their ids, and the results by name only.
    sent = json.loads(upstream.seen[-1].body)["messages"]
    assert [c.get("id") for c in sent[1]["tool_calls"]] == [None, None]
    assert [m.get("tool_name") for m in sent[2:]] == ["get_weather", "get_weather"]
    # A flow's turn line comes after its other events: none of them is a loop error.
    assert [e for e in proxy.events[mark:] if e["event"] == "loop_error"] == []


def test_a_result_missing_for_one_of_two_calls_is_named_by_its_tool(proxy):
    mark = proxy.mark()
    history = [
        *ASK,
        {"role": "assistant", "content": "", "tool_calls": CALLS},
        {"role": "tool", "tool_name": "get_weather", "content": "21C"},
    ]
    list(client(proxy, "answered").chat(model=MODEL, messages=history, tools=TOOLS, stream=True))
    (loop,) = proxy.wait_for("loop_error", 1, since=mark)
    assert (loop["api"], loop["rule"], loop["ids"], loop["where"]) == (
        "ollama",
        "unanswered-call",
        ["get_weather"],
        "messages.1",
    )


def test_a_cut_stream_says_it_ended_early_and_keeps_what_came_whole(proxy):
    mark = proxy.mark()
    with pytest.raises(json.JSONDecodeError):  # ollama-python reads the half line as JSON
        list(client(proxy, "cut").chat(model=MODEL, messages=ASK, tools=TOOLS, stream=True))
    (turn,) = proxy.wait_for("turn", 1, since=mark)
    assert (turn["outcome"], turn["reason"], turn["calls"]) == (
        "inspected",
        "the stream ended before its final event",
        1,
    )
    # The half line was cut off, not malformed: no stream_error says so.
    assert [e["event"] for e in proxy.events[mark:]] == ["tool_call", "turn"]


def test_an_error_line_inside_the_stream_is_logged_with_the_servers_words(proxy):
    mark = proxy.mark()
    with pytest.raises(ollama.ResponseError, match=MID_STREAM):
        list(client(proxy, "error-line").chat(model=MODEL, messages=ASK, tools=TOOLS, stream=True))
    (turn,) = proxy.wait_for("turn", 1, since=mark)
    (error,) = proxy.wait_for("stream_error", 1, since=mark)
    assert without_clock(error) == {
        "event": "stream_error", "level": "warning", "api": "ollama", "response_id": None,
        "model": MODEL, "path": "/api/chat", "type": "", "message": MID_STREAM,
    }  # fmt: skip
    assert (turn["status"], turn["calls"]) == (200, 1)
    # The client raises at the error line and hangs up; whether the proxy saw that before the
    # upstream's end is a race between two sockets, and the reason says which when it was.
    cut = "the stream ended before its final event"
    assert turn["reason"] in (cut, f"{cut} (Client disconnected.)")


def test_a_refusal_is_logged_in_ollamas_words(proxy):
    mark = proxy.mark()
    with pytest.raises(ollama.ResponseError) as refused:
        client(proxy, "refused").chat(model="gemma3:1b", messages=ASK, tools=TOOLS)
    assert refused.value.status_code == 400
    (rejected,) = proxy.wait_for("request_rejected", 1, since=mark)
    assert (rejected["api"], rejected["status"], rejected["message"]) == ("ollama", 400, REFUSED)


def test_the_metrics_count_ollama_turns_calls_and_findings(proxy):
    values = scrape(proxy)
    turns = {
        dict(labels)["state"]: v
        for (name, labels), v in values.items()
        if name == "tooltap_turns_total" and ("api", "ollama") in labels and v
    }
    assert turns == {"fanout-no-strict": 3, "no-strict-declared": 4}  # stream x2, whole
    assert sample(values, "tooltap_tool_calls_total", api="ollama", model=MODEL) == 8
    assert sample(values, "tooltap_argument_errors_total", api="ollama", model=MODEL,
                  kind="schema") == 3  # fmt: skip
    assert sample(values, "tooltap_loop_errors_total", api="ollama", rule="unanswered-call") == 1
    assert sample(values, "tooltap_tool_results_total", api="ollama", outcome="error") == 1
    assert sample(values, "tooltap_rejected_requests_total", api="ollama", status="400") == 1


def test_ollama_read_offline_from_a_flow_file_and_a_har_gives_the_live_findings(tmp_path, upstream):
    """The same traffic saved by the proxy as flows (-w) and as HAR, then audited."""
    flows, har = tmp_path / "flows.mitm", tmp_path / "flows.har"
    saving = ("-w", str(flows), "--set", f"hardump={har}", "--set", "store_streamed_bodies=true")
    with Proxy.tooltap([upstream.url], "--log-format", "json", extra=saving) as saved:
        list(client(saved, "stream").chat(model=MODEL, messages=ASK, tools=TOOLS, stream=True))
        client(saved, "whole").chat(model=MODEL, messages=ASK, tools=TOOLS)
        history = [*ASK, {"role": "assistant", "content": "", "tool_calls": CALLS},
                   {"role": "tool", "tool_name": "get_weather", "content": "21C"}]  # fmt: skip
        list(client(saved, "answered").chat(model=MODEL, messages=history, stream=True))
        with pytest.raises(ollama.ResponseError):
            client(saved, "refused").chat(model="gemma3:1b", messages=ASK, tools=TOOLS)
        live = saved.wait_for("turn", 4)
    found = [(t["api"], t["stream"], t.get("state"), t["calls"], t["status"]) for t in live]
    assert found == [
        ("ollama", True, "fanout-no-strict", 2, 200),
        ("ollama", False, "fanout-no-strict", 2, 200),
        ("ollama", True, "no-tools", 0, 200),
        ("ollama", False, None, 0, 400),
    ]
    for source in (["-r", str(flows)], ["--har", str(har)]):
        done = subprocess.run(
            [sys.executable, "-m", "tooltap.addon.commands.cli", "audit", *source,
             "--format", "json"],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        *rows, _summary = [json.loads(row) for row in done.stdout.splitlines()]
        offline = [(r["api"], r["stream"], r["state"], len(r["calls"]), r["status"]) for r in rows]
        assert offline == found, source
        assert [[e["rule"] for e in r["loop_errors"]] for r in rows] == [
            [],
            [],
            ["unanswered-call"],
            [],
        ]
