"""The Gemini recordings of the dialects corpus (corpus/dialects, see its sources.txt): all 668
generateContent and streamGenerateContent exchanges, on the Gemini API and Vertex AI, as one test.

The calls each one should yield are read by gemini_reader, which shares no code with tooltap.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support.gemini_reader import error_message, expected_calls, operation

from tooltap.addon.audit.inputs import RecordedExchange
from tooltap.addon.inspection.session import Session
from tooltap.core import Exchange, Verdict

CORPUS = Path(__file__).parents[1] / "corpus" / "dialects" / "exchanges.jsonl"
LINES = CORPUS.read_text(encoding="utf-8").splitlines()
RECORDS: list[dict[str, Any]] = [
    record for record in map(json.loads, LINES) if operation(record["url"])
]
HARD = {"unanswered-call", "orphan-result", "duplicate-result", "missing-thought-signature"}


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
    assert len(RECORDS) == 668
    streamed = Counter(operation(r["url"]) for r in RECORDS)
    assert streamed == {"generateContent": 491, "streamGenerateContent": 177}
    assert Counter(r["status"] // 100 for r in RECORDS) == {2: 649, 4: 19}


def test_every_exchange_is_read_as_gemini_and_streams_as_streams(verdicts):
    assert Counter(v.api for v in verdicts) == {"gemini": 668}
    streams = [
        where(i)
        for i, v in enumerate(verdicts)
        if accepted(i) and v.stream != (operation(RECORDS[i]["url"]) == "streamGenerateContent")
    ]
    assert streams == []


def test_every_accepted_exchange_is_inspected_whole_but_those_recorded_without_a_request(
    verdicts,
):
    failures = [
        f"{where(i)}: {v.outcome}: {v.reason}"
        for i, v in enumerate(verdicts)
        if accepted(i) and (v.outcome != "inspected" or v.reason is not None)
    ]
    # The recorder kept no request body for these three: nothing to read the turn against.
    unread = [where(i) for i, r in enumerate(RECORDS) if not r.get("request_body")]
    assert len(unread) == 3
    assert failures == [f"{w}: unparseable: request body is not a JSON object" for w in unread]


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
    assert calls == 332


def test_no_loop_error_on_a_request_the_service_accepted(verdicts):
    failures = [
        f"{where(i)}: {e.rule} {e.ids} at {e.where}"
        for i, v in enumerate(verdicts)
        if accepted(i)
        for e in v.loop_errors
        if e.rule in HARD
    ]
    assert failures == []
    results = Counter(r.outcome for v in verdicts for r in v.tool_results)
    assert sum(results.values()) > 200  # the responses the requests sent back were read


def test_a_fan_out_is_never_called_void_google_documents_no_such_conflict(verdicts):
    states = Counter(v.state for v in verdicts if v.outcome == "inspected")
    assert not {"strict-void", "strict-at-risk"} & set(states)
    assert states["fanout-no-strict"] > 0 and states["strict-serialised"] > 0


def test_every_rejection_carries_the_services_own_message(verdicts):
    rejected = [(i, v) for i, v in enumerate(verdicts) if not accepted(i)]
    assert len(rejected) == 19
    assert [
        where(i) for i, v in rejected
        if v.rejected is None
        or (v.rejected.status, v.rejected.message)
        != (RECORDS[i]["status"], error_message(RECORDS[i]))
    ] == []  # fmt: skip


def test_the_model_comes_from_the_path(verdicts):
    models = [
        v.request_model for i, v in enumerate(verdicts) if accepted(i) and v.outcome == "inspected"
    ]
    assert all(m and m.startswith("gemini") for m in models), Counter(models)


def test_audit_reads_the_jsonl_and_agrees_with_inspect(verdicts, tmp_path):
    only = tmp_path / "gemini.jsonl"
    only.write_text("".join(line + "\n" for line in LINES if operation(json.loads(line)["url"])))
    done = subprocess.run(
        [sys.executable, "-m", "tooltap.addon.commands.cli", "audit", "--jsonl", str(only),
         "--format", "json"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr  # rejections among them
    *rows, summary = [json.loads(line) for line in done.stdout.splitlines()]
    assert summary["read"] == len(rows) == len(verdicts) == 668
    keys = ("api", "outcome", "state", "request_model", "reason")
    assert [tuple(r[k] for k in keys) for r in rows] == [
        tuple(getattr(v, k) for k in keys) for v in verdicts
    ]
    assert [[c["arguments_raw"] for c in r["calls"]] for r in rows] == [
        [c.arguments_raw for c in v.calls] for v in verdicts
    ]
