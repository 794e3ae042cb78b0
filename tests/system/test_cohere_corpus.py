"""Cohere's v2 chat as recorded (the 40 /v2/chat lines of corpus/realworld/exchanges-4.jsonl,
langchain-cohere's cassettes; see sources-4.txt), as one test: what each is read as, and every
finding tooltap gives on them, each one named and why it is true.

The calls each should yield are read by realworld_reader, which shares no code with tooltap
(test_realworld.py runs them too, with the file's other exchanges).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support.corpora import inspected
from support.realworld_reader import expected_calls, is_stream, sse_events

from tooltap.addon.inspection.session import Session
from tooltap.core import StreamReader, Verdict
from tooltap.core.findings import occurrences

CORPUS = Path(__file__).parents[1] / "corpus" / "realworld" / "exchanges-4.jsonl"
LINES = [json.loads(line) for line in CORPUS.read_text().splitlines()]
INDEX = [i for i, record in enumerate(LINES) if record["url"].endswith("/v2/chat")]
RECORDS = [LINES[i] for i in INDEX]


@pytest.fixture(scope="module")
def verdicts() -> list[Verdict]:
    # In file order, as the proxy and audit keep their memory; tools pinned per recording, as
    # the audit pins them (each test of the suite declares its own).
    session = Session()
    return [inspected(session, record, CORPUS) for record in RECORDS]


def where(index: int) -> str:
    return f"exchanges-4.jsonl #{INDEX[index]} {RECORDS[index]['source']}"


def request(index: int) -> dict[str, Any]:
    return json.loads(RECORDS[index]["request_body"])


def answer(index: int) -> dict[str, Any]:
    """The response, or for a stream what an independent reader joins of its events."""
    record = RECORDS[index]
    if not is_stream(record):
        return json.loads(record["response_body"])
    text, plan, end = "", "", {}
    for event in sse_events(record["response_body"]):
        message = (event.get("delta") or {}).get("message") or {}
        if event["type"] == "content-delta":
            text += message["content"].get("text", "")
        elif event["type"] == "tool-plan-delta":
            plan += message["tool_plan"]
        elif event["type"] == "message-end":
            end = event["delta"]
    return {"message": {"content": [{"type": "text", "text": text}] if text else [],
                        "tool_plan": plan}, **end}  # fmt: skip


def test_the_forty_are_the_ones_the_issue_counts():
    assert len(RECORDS) == 40
    assert {r["status"] for r in RECORDS} == {200}
    assert sum(1 for i in range(40) if request(i).get("tools")) == 20
    assert sum(1 for r in RECORDS if expected_calls(r)) == 13
    assert sum(map(is_stream, RECORDS)) == 8


def test_every_one_is_read_as_cohere_and_its_calls_are_the_independent_readers(verdicts):
    assert Counter(v.api for v in verdicts) == {"cohere": 40}
    assert [where(i) for i, v in enumerate(verdicts) if v.stream != is_stream(RECORDS[i])] == []
    found = [[(c.call_id, c.name, c.arguments_raw) for c in v.calls] for v in verdicts]
    assert found == [expected_calls(r) for r in RECORDS]
    assert sum(map(len, found)) == 13


def test_every_stream_cut_anywhere_reassembles_to_what_an_independent_reader_joins():
    for index, record in enumerate(RECORDS):
        if not is_stream(record):
            continue
        reader = StreamReader("cohere")
        body = record["response_body"].encode()
        for start in range(0, len(body), 97):
            reader.feed(body[start : start + 97])
        result = reader.close()
        joined = answer(index)
        message = result.response["message"]
        assert (result.complete, result.bad_events) == (True, 0), where(index)
        texts = [b["text"] for b in message.get("content", []) if b["type"] == "text"]
        assert texts == [b["text"] for b in joined["message"]["content"]], where(index)
        assert message.get("tool_plan", "") == joined["message"]["tool_plan"], where(index)
        assert result.response["finish_reason"] == joined["finish_reason"], where(index)


def test_the_only_findings_are_json_mode_without_a_schema_and_both_are_true(verdicts):
    """langchain-cohere's `json_mode` tests ask for a Person with response_format json_object and
    no schema: Cohere holds that output to JSON and to no shape, the `no-schema` finding. Its
    `json_schema` tests send the schema (under `schema`) and are `enforced`: no finding."""
    found = {
        where(i): [f.name for f in occurrences(v)] for i, v in enumerate(verdicts) if occurrences(v)
    }
    assert found == {where(i): ["no-schema"] for i in (4, 6)}
    for i in (4, 6):
        assert request(i)["response_format"] == {"type": "json_object"}
        assert re.search(r"json_mode", RECORDS[i]["source"])
    assert [where(i) for i, v in enumerate(verdicts) if v.format_state == "enforced"] == [
        where(5), where(7)
    ]  # fmt: skip
    assert all(v.loop_errors == [] for v in verdicts)


def test_the_two_streams_that_end_in_error_say_so_in_coheres_words_and_nothing_else_does(
    verdicts,
):
    """langchain-cohere's SQL agent: Cohere's model planned, then gave up with
    INVALID_TOOL_GENERATION under a 200; the client reads a stream that finished."""
    failed = {where(i): v.stream_errors for i, v in enumerate(verdicts) if v.stream_errors}
    assert list(failed) == [where(32), where(33)]
    for errors in failed.values():
        assert [(e.type, e.message) for e in errors] == [(
            "INVALID_TOOL_GENERATION",
            "your request resulted in an invalid tool generation. Try updating the messages or "
            "tool definitions",
        )]  # fmt: skip
    assert [where(i) for i, v in enumerate(verdicts) if v.reason or v.outcome != "inspected"] == []


def test_the_states_are_the_ones_cohere_documents(verdicts):
    assert Counter(v.state for v in verdicts) == {"no-tools": 20, "no-strict-declared": 20}
    assert Counter(v.format_state for v in verdicts) == {
        "free-text": 36,
        "no-schema": 2,
        "enforced": 2,
    }
    assert Counter(tuple(v.finish_reasons) for v in verdicts) == {
        ("COMPLETE",): 25,
        ("TOOL_CALL",): 13,
        ("ERROR",): 2,
    }


def test_the_tokens_are_usage_tokens_with_the_cache_where_said_and_nothing_where_not(verdicts):
    for index, verdict in enumerate(verdicts):
        usage = answer(index).get("usage") or {}
        tokens = usage.get("tokens") or {}
        expected = {key: tokens[key] for key in ("input_tokens", "output_tokens") if key in tokens}
        if "cached_tokens" in usage:
            expected["cached_input_tokens"] = usage["cached_tokens"]
        assert verdict.usage == expected, where(index)
    assert [where(i) for i, v in enumerate(verdicts) if not v.usage] == [where(32), where(33)]


def test_every_result_in_the_histories_is_an_ok_result_of_its_call(verdicts):
    results = [(r.call_id, r.outcome) for v in verdicts for r in v.tool_results]
    assert len(results) == 8
    assert {outcome for _, outcome in results} == {"ok"}


def test_a_schema_that_is_not_json_schema_is_said_and_is_no_finding(verdicts):
    """langchain-cohere's older tests declare `"type": "str"` and `"int"` (Cohere v1's type
    names): Cohere took them; tooltap says the schema cannot be applied, on each call."""
    said = [
        (where(i), c.schema_problem)
        for i, v in enumerate(verdicts)
        for c in v.calls
        if c.schema_problem
    ]
    assert [w for w, _ in said] == [where(2), where(12), where(36)]
    assert all(p and p.startswith("the declared schema is invalid: ") for _, p in said)
