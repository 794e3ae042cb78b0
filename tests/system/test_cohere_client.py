"""Cohere's v2 chat through a real `tooltap run` with the official `cohere` client (ClientV2),
against a loopback upstream that replays the 40 recordings of api.cohere.com in
tests/corpus/realworld/exchanges-4.jsonl, streamed (each SSE event in its own chunk) and not: the
client gets what was recorded, every call reaches the log byte for byte as an independent reader
reads the recording, the log says exactly what `inspect` says of the recording, and the proxy's
own flow file and HAR audit to the same findings. Beside them, a refusal in Cohere's words.

One upstream and one proxy serve the module; each test marks the log and reads what follows.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import cohere
import httpx
import pytest
from support.prom import sample, scrape_until
from support.realworld_reader import expected_calls, is_stream

from tooltap.addon.audit.inputs import RecordedExchange
from tooltap.addon.harness.launch import Proxy
from tooltap.addon.harness.replay import ReplayServer, Reply, Seen
from tooltap.core import inspect

CORPUS = Path(__file__).parents[1] / "corpus" / "realworld" / "exchanges-4.jsonl"
RECORDS = [
    record
    for record in map(json.loads, CORPUS.read_text().splitlines())
    if record["url"].endswith("/v2/chat")
]
REFUSED = "invalid request: tool_choice REQUIRED needs the tools parameter"
INVALID = "your request resulted in an invalid tool generation"


def events(body: str) -> list[bytes]:
    """A recorded stream as Cohere sends it: one chunk per event, the blank line with it."""
    return [part.encode() + b"\n\n" for part in body.split("\n\n") if part]


def route(seen: Seen) -> Reply:
    if seen.headers.get("x-recording") == "refused":
        body = json.dumps({"id": "6f3d1b1e-0a8e-4b33-9a4f-1c2d3e4f5a6b", "message": REFUSED})
        return Reply(400, [("content-type", "application/json")], [body.encode()])
    record = RECORDS[int(seen.headers["x-recording"])]
    headers = [("content-type", record["response_headers"]["content-type"])]
    if is_stream(record):  # paced, for the test that watches the cadence
        delay = 0.03 if "x-paced" in seen.headers else 0.002
        return Reply(headers=headers, chunks=events(record["response_body"]), delay=delay)
    return Reply(headers=headers, chunks=[record["response_body"].encode()])


@pytest.fixture(scope="module")
def upstream():
    with ReplayServer(route) as server:
        yield server


@pytest.fixture(scope="module")
def proxy(upstream):
    with Proxy.tooltap([upstream.url], "--log-format", "json") as running:
        yield running


def ask(client: cohere.ClientV2, index: int) -> Any:
    """The recorded request, sent by the client: chat, or chat_stream read to its end."""
    fields = json.loads(RECORDS[index]["request_body"])
    streamed = fields.pop("stream", False)
    options = {"additional_headers": {"x-recording": str(index)}}
    if streamed:
        return list(client.chat_stream(**fields, request_options=options))
    return client.chat(**fields, request_options=options)


def offline(index: int) -> Any:
    return inspect(RecordedExchange.model_validate(RECORDS[index]).exchange())


def test_the_recordings_are_coheres_forty():
    assert len(RECORDS) == 40
    assert sum(map(is_stream, RECORDS)) == 8


@pytest.mark.parametrize("index", range(len(RECORDS)))
def test_each_recording_through_the_client_logs_what_inspect_says_of_it(proxy, upstream, index):
    client = cohere.ClientV2(api_key="test", base_url=proxy.url)
    mark = proxy.mark()
    got = ask(client, index)
    (turn,) = proxy.wait_for("turn", 1, since=mark)
    calls = [e for e in proxy.events[mark:] if e["event"] == "tool_call"]
    record, verdict = RECORDS[index], offline(index)
    # The client got the recording: its parsed calls are the recorded ones.
    if isinstance(got, list):
        assert len(got) == len(events(record["response_body"])) - 1  # all but `data: [DONE]`
    else:
        assert [(c.id, c.function.name, c.function.arguments) for c in got.message.tool_calls or []] == expected_calls(record)  # fmt: skip
    # Every call in the log, byte for byte as an independent reader reads the recording.
    assert [(c["call_id"], c["name"], c["arguments_raw"]) for c in calls] == expected_calls(record)
    assert (turn["api"], turn["outcome"], turn["status"], turn["stream"]) == (
        "cohere", "inspected", 200, is_stream(record),
    )  # fmt: skip
    found = ("model", "response_id", "state", "format_state", "calls", "reason", "repairs")
    assert {k: turn[k] for k in found} == {
        "model": verdict.model, "response_id": verdict.response_id, "state": verdict.state,
        "format_state": verdict.format_state, "calls": verdict.call_count,
        "reason": verdict.reason, "repairs": verdict.repairs,
    }  # fmt: skip
    said = [(e["type"], e["message"]) for e in proxy.events[mark:] if e["event"] == "stream_error"]
    assert said == [(e.type, e.message) for e in verdict.stream_errors]
    loop = [e for e in proxy.events[mark:] if e["event"] == "loop_error"]
    assert loop == []  # Cohere accepted every one of these requests
    # What the client sent is the request the recording holds, re-serialised by the SDK.
    sent = json.loads(upstream.seen[-1].body)
    assert sent["messages"] == json.loads(record["request_body"])["messages"]


def test_the_streams_that_end_in_error_under_a_200_are_logged_in_coheres_words(proxy):
    client = cohere.ClientV2(api_key="test", base_url=proxy.url)
    failing = [i for i, r in enumerate(RECORDS) if '"finish_reason":"ERROR"' in r["response_body"]]
    assert len(failing) == 2
    for index in failing:
        mark = proxy.mark()
        got = ask(client, index)
        assert got[-1].delta.finish_reason == "ERROR"  # the client saw a stream that finished
        (turn,) = proxy.wait_for("turn", 1, since=mark)
        (error,) = proxy.wait_for("stream_error", 1, since=mark)
        assert (error["api"], error["type"], error["level"]) == (
            "cohere", "INVALID_TOOL_GENERATION", "warning",
        )  # fmt: skip
        assert error["message"].startswith(INVALID)
        assert (turn["level"], turn["calls"], turn["reason"]) == ("warning", 0, None)


def test_a_stream_reaches_the_client_byte_for_byte_and_event_by_event(proxy, upstream):
    index = next(i for i, r in enumerate(RECORDS) if is_stream(r) and "tool-call-start" in r["response_body"])  # fmt: skip
    body = json.loads(RECORDS[index]["request_body"])
    arrived: list[tuple[float, bytes]] = []
    with httpx.stream("POST", f"{proxy.url}/v2/chat", json=body, timeout=10,
                      headers={"x-recording": str(index), "x-paced": "1"}) as got:  # fmt: skip
        assert got.headers["content-type"] == "text/event-stream"
        for piece in got.iter_raw():
            arrived.append((time.perf_counter(), piece))
    chunks = events(RECORDS[index]["response_body"])
    assert b"".join(p for _, p in arrived) == RECORDS[index]["response_body"].encode()
    assert len(arrived) == len(chunks)  # an event at a time, not gathered
    assert arrived[0][0] < upstream.seen[-1].sent_at[-1]  # the first was in before the last left


def test_a_refusal_is_logged_in_coheres_own_words(proxy):
    client = cohere.ClientV2(api_key="test", base_url=proxy.url)
    mark = proxy.mark()
    with pytest.raises(cohere.BadRequestError) as refused:
        client.chat(model="command-a-03-2025", tool_choice="REQUIRED",
                    messages=[{"role": "user", "content": "Paris?"}],
                    request_options={"additional_headers": {"x-recording": "refused"}})  # fmt: skip
    assert refused.value.status_code == 400
    (rejected,) = proxy.wait_for("request_rejected", 1, since=mark)
    assert (rejected["api"], rejected["status"], rejected["message"]) == ("cohere", 400, REFUSED)


def test_the_metrics_count_coheres_turns_calls_and_findings(proxy):
    done = scrape_until(
        proxy, lambda v: sample(v, "tooltap_rejected_requests_total", api="cohere", status="400")
    )
    turns: dict[str, float] = {}
    calls = 0.0
    for (name, labels), value in done.items():
        if ("api", "cohere") not in labels:
            continue
        if name == "tooltap_turns_total" and value:
            turns[dict(labels)["state"]] = turns.get(dict(labels)["state"], 0) + value
        calls += value if name == "tooltap_tool_calls_total" else 0
    # The forty recordings (20 declare tools), the two that end in ERROR again, the raw stream.
    assert turns == {"no-tools": 20, "no-strict-declared": 20 + 2 + 1}
    assert calls == 13 + 1
    assert sample(done, "tooltap_formats_total", api="cohere", model="command-r",
                  state="no-schema") == 2  # fmt: skip
    assert sample(done, "tooltap_tool_results_total", api="cohere", outcome="ok") == 8
    assert sample(done, "tooltap_rejected_requests_total", api="cohere", status="400") == 1


def test_flows_saved_by_the_proxy_audit_to_the_findings_it_logged_live(tmp_path, upstream):
    """The same traffic saved by the proxy as flows (-w) and as HAR, then audited."""
    flows, har = tmp_path / "flows.mitm", tmp_path / "flows.har"
    saving = ("-w", str(flows), "--set", f"hardump={har}", "--set", "store_streamed_bodies=true")
    chosen = [2, 4, 21, 32]  # a streamed call, JSON mode, a history, a stream ending in ERROR
    with Proxy.tooltap([upstream.url], "--log-format", "json", extra=saving) as saved:
        client = cohere.ClientV2(api_key="test", base_url=saved.url)
        for index in chosen:
            ask(client, index)
        live = saved.wait_for("turn", len(chosen))
    found = [(t["api"], t["stream"], t["state"], t["format_state"], t["calls"]) for t in live]
    assert found == [
        ("cohere", True, "no-strict-declared", "free-text", 1),
        ("cohere", False, "no-tools", "no-schema", 0),
        ("cohere", False, "no-strict-declared", "free-text", 1),
        ("cohere", True, "no-strict-declared", "free-text", 0),
    ]
    for source in (["-r", str(flows)], ["--har", str(har)]):
        done = subprocess.run(
            [sys.executable, "-m", "tooltap.addon.commands.cli", "audit", *source,
             "--format", "json"],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        *rows, summary = [json.loads(row) for row in done.stdout.splitlines()]
        offline_found = [
            (r["api"], r["stream"], r["state"], r["format_state"], len(r["calls"])) for r in rows
        ]
        assert offline_found == found, source
        assert [[(e["type"], e["message"][:len(INVALID)]) for e in r["stream_errors"]] for r in rows] == [
            [], [], [], [("INVALID_TOOL_GENERATION", INVALID)],
        ]  # fmt: skip
        assert (done.returncode, summary["findings"]) == (1, 1)  # JSON mode's no-schema
