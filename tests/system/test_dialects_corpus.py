"""The dialects corpus (corpus/dialects, see its sources.txt): every Bedrock and Vertex AI
exchange, as one test.

Anthropic on Bedrock (InvokeModel, its stream in AWS's event stream) and on Vertex AI
(rawPredict), and Bedrock Converse, recorded from the live services by public projects. The
calls each one should yield are read by dialects_reader, which shares no code with tooltap
(botocore parses the event streams). The Gemini recordings of the same file are
test_gemini_corpus's; the MCP ones are another dialect's.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support.dialects_reader import error_message, expected_calls, operation

from tooltap.addon.audit.inputs import RecordedExchange
from tooltap.addon.inspection.session import Session
from tooltap.core import Exchange, Verdict

CORPUS = Path(__file__).parents[1] / "corpus" / "dialects" / "exchanges.jsonl"
RECORDS: list[dict[str, Any]] = [
    record
    for record in map(json.loads, CORPUS.read_text(encoding="utf-8").splitlines())
    if operation(record["url"])
]
HARD = {"unanswered-call", "orphan-result", "duplicate-result"}


def exchange(record: dict[str, Any]) -> Exchange:
    """A recording as the audit reads a JSONL line (binary bodies from their base64)."""
    return RecordedExchange.model_validate(record).exchange()


@pytest.fixture(scope="module")
def verdicts() -> list[Verdict]:
    session = Session()  # in file order, as the proxy and audit keep their memory
    return [
        session.inspect(exchange(record), application=record["source"].partition("#")[0])
        for record in RECORDS
    ]


def where(index: int) -> str:
    return f"#{index} {RECORDS[index]['source']}"


def accepted(index: int) -> bool:
    return 200 <= RECORDS[index]["status"] < 300


def test_the_corpus_is_the_one_sources_txt_describes():
    by_operation = Counter(operation(r["url"]) for r in RECORDS)
    assert by_operation == {
        "converse": 208,
        "converse-stream": 73,
        "invoke": 45,
        "invoke-with-response-stream": 32,
        "rawPredict": 32,
        "streamRawPredict": 14,
    }
    assert Counter(r["status"] // 100 for r in RECORDS) == {2: 381, 4: 23}


def test_every_exchange_is_read_by_its_dialect(verdicts):
    apis = Counter((operation(r["url"]), v.api) for r, v in zip(RECORDS, verdicts, strict=True))
    assert apis == {
        ("converse", "converse"): 208,
        ("converse-stream", "converse"): 73,
        ("invoke", "messages"): 44,
        ("invoke-with-response-stream", "messages"): 31,
        ("rawPredict", "messages"): 32,
        ("streamRawPredict", "messages"): 14,
        # a model id that names no Anthropic model ("invalid-model-id"): not read as Messages
        ("invoke", None): 1,
        ("invoke-with-response-stream", None): 1,
    }


def test_every_accepted_exchange_is_inspected_whole(verdicts):
    failures = [
        f"{where(i)}: {v.outcome}: {v.reason}"
        for i, v in enumerate(verdicts)
        if accepted(i) and (v.outcome != "inspected" or v.reason is not None)
    ]
    assert failures == []


def test_every_accepted_exchange_yields_the_calls_an_independent_reader_finds(verdicts):
    failures, calls = [], 0
    for i, v in enumerate(verdicts):
        if not accepted(i):
            continue
        expected = expected_calls(RECORDS[i])
        calls += len(expected)
        got = [(c.call_id, c.name, c.arguments_raw) for c in v.calls]
        if got != expected:
            failures.append(f"{where(i)}:\n  expected {expected}\n  tooltap  {got}")
    assert failures == []
    assert calls == 152


def test_no_loop_error_on_a_request_the_service_accepted(verdicts):
    failures = [
        f"{where(i)}: {e.rule} {e.ids} at {e.where}"
        for i, v in enumerate(verdicts)
        if accepted(i)
        for e in v.loop_errors
        if e.rule in HARD
    ]
    assert failures == []


def test_every_rejection_carries_the_services_own_message(verdicts):
    rejected = [(i, v) for i, v in enumerate(verdicts) if not accepted(i) and v.api is not None]
    assert len(rejected) == 21
    assert [
        where(i) for i, v in rejected
        if v.rejected is None
        or (v.rejected.status, v.rejected.message)
        != (RECORDS[i]["status"], error_message(RECORDS[i]))
    ] == []  # fmt: skip


def test_the_model_comes_from_the_path_where_the_body_names_none(verdicts):
    models = Counter(
        v.request_model
        for r, v in zip(RECORDS, verdicts, strict=True)
        if operation(r["url"]) in ("rawPredict", "streamRawPredict") and v.api
    )
    assert all(model and "@" in model for model in models), models  # claude-...@20250929


def test_audit_reads_the_jsonl_binary_bodies_and_all_and_agrees_with_inspect(verdicts, tmp_path):
    import subprocess
    import sys

    only = tmp_path / "bedrock-vertex.jsonl"
    only.write_text("".join(json.dumps(record) + "\n" for record in RECORDS))
    done = subprocess.run(
        [sys.executable, "-m", "tooltap.addon.commands.cli", "audit", "--jsonl", str(only),
         "--format", "json"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr  # rejections among them
    *rows, summary = [json.loads(line) for line in done.stdout.splitlines()]
    mine = [v for v in verdicts if v.outcome != "skipped"]
    assert summary["read"] == len(rows) == len(mine) == 402
    keys = ("api", "outcome", "state", "request_model", "reason")
    assert [tuple(r[k] for k in keys) for r in rows] == [
        tuple(getattr(v, k) for k in keys) for v in mine
    ]
    assert [[c["arguments_raw"] for c in r["calls"]] for r in rows] == [
        [c.arguments_raw for c in v.calls] for v in mine
    ]
