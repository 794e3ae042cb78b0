"""The Gemini recordings of the dialects corpus (corpus/dialects, see its sources*.txt): every
generateContent and streamGenerateContent exchange of each file, on the Gemini API and Vertex AI,
as one test per file (668 in exchanges.jsonl, 266 in exchanges-2.jsonl, Vertex AI's streamed
arguments among them, 63 in exchanges-3.jsonl).

The calls each one should yield are read by gemini_reader, which shares no code with tooltap.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from support.corpora import Corpus, read
from support.gemini_reader import error_message, expected_calls, operation

FOLDER = Path(__file__).parents[1] / "corpus" / "dialects"
HARD = {"unanswered-call", "orphan-result", "duplicate-result", "missing-thought-signature"}
# What each file holds: by operation, by status class, the calls, the recordings kept
# without their request body (nothing to read the turn against), and the tool results the
# requests sent back.
FIGURES = {
    "exchanges.jsonl": {
        "operations": {"generateContent": 491, "streamGenerateContent": 177},
        "statuses": {2: 649, 4: 19}, "calls": 332, "without a request": 3, "results": 241,
    },
    "exchanges-2.jsonl": {
        "operations": {"generateContent": 197, "streamGenerateContent": 69},
        "statuses": {2: 264, 4: 2}, "calls": 160, "without a request": 0, "results": 86,
    },
    "exchanges-3.jsonl": {
        "operations": {"generateContent": 54, "streamGenerateContent": 9},
        "statuses": {2: 60, 4: 3}, "calls": 8, "without a request": 0, "results": 6,
    },
}  # fmt: skip


@pytest.fixture(scope="module", params=sorted(FIGURES))
def corpus(request: pytest.FixtureRequest) -> Corpus:
    return read(FOLDER / request.param, lambda record: bool(operation(record["url"])))


def test_the_corpus_is_the_one_sources_txt_describes(corpus):
    figures = FIGURES[corpus.path.name]
    assert Counter(operation(r["url"]) for r in corpus.records) == figures["operations"]
    assert Counter(r["status"] // 100 for r in corpus.records) == figures["statuses"]


def test_every_exchange_is_read_as_gemini_and_streams_as_streams(corpus):
    assert Counter(v.api for v in corpus.verdicts) == {"gemini": len(corpus.records)}
    streams = [
        corpus.where(i)
        for i, v in enumerate(corpus.verdicts)
        if corpus.accepted(i)
        and v.stream != (operation(corpus.records[i]["url"]) == "streamGenerateContent")
    ]
    assert streams == []


def test_every_accepted_exchange_is_inspected_whole_but_those_recorded_without_a_request(
    corpus,
):
    failures = [
        f"{corpus.where(i)}: {v.outcome}: {v.reason}"
        for i, v in enumerate(corpus.verdicts)
        if corpus.accepted(i) and (v.outcome != "inspected" or v.reason is not None)
    ]
    # The recorder kept no request body for these: nothing to read the turn against.
    unread = [corpus.where(i) for i, r in enumerate(corpus.records) if not r.get("request_body")]
    assert len(unread) == FIGURES[corpus.path.name]["without a request"]
    assert failures == [f"{w}: unparseable: request body is not a JSON object" for w in unread]


def test_every_accepted_exchange_yields_the_calls_an_independent_reader_finds(corpus):
    failures, calls = [], 0
    for i, v in enumerate(corpus.verdicts):
        if not corpus.accepted(i):
            continue
        expected = expected_calls(corpus.records[i])
        calls += len(expected)
        got = [(c.call_id, c.name, c.arguments_raw) for c in v.calls]
        if got != expected:
            failures.append(f"{corpus.where(i)}:\n  expected {expected}\n  tooltap  {got}")
    assert failures == []
    assert calls == FIGURES[corpus.path.name]["calls"]
    parse = [corpus.where(i) for i, v in enumerate(corpus.verdicts) for c in v.calls
             if c.parse_error is not None]  # fmt: skip
    assert parse == []  # a Gemini call's args is an object, streamed or not


def test_no_loop_error_on_a_request_the_service_accepted(corpus):
    failures = [
        f"{corpus.where(i)}: {e.rule} {e.ids} at {e.where}"
        for i, v in enumerate(corpus.verdicts)
        if corpus.accepted(i)
        for e in v.loop_errors
        if e.rule in HARD
    ]
    assert failures == []
    results = [r for v in corpus.verdicts for r in v.tool_results]
    assert len(results) == FIGURES[corpus.path.name]["results"]  # the responses sent back, read


def test_a_fan_out_is_never_called_void_google_documents_no_such_conflict(corpus):
    states = Counter(v.state for v in corpus.verdicts if v.outcome == "inspected")
    assert not {"strict-void", "strict-at-risk"} & set(states)
    assert states["fanout-no-strict"] > 0 and states["strict-serialised"] > 0


def test_every_rejection_carries_the_services_own_message(corpus):
    rejected = [(i, v) for i, v in enumerate(corpus.verdicts) if not corpus.accepted(i)]
    assert len(rejected) == FIGURES[corpus.path.name]["statuses"][4]
    assert [
        corpus.where(i) for i, v in rejected
        if v.rejected is None
        or (v.rejected.status, v.rejected.message)
        != (corpus.records[i]["status"], error_message(corpus.records[i]))
    ] == []  # fmt: skip


def test_the_model_comes_from_the_path(corpus):
    models = [
        v.request_model
        for i, v in enumerate(corpus.verdicts)
        if corpus.accepted(i) and v.outcome == "inspected"
    ]
    assert all(m and m.startswith("gemini") for m in models), Counter(models)


def test_audit_reads_the_jsonl_and_agrees_with_inspect(corpus, tmp_path):
    only = tmp_path / "gemini.jsonl"
    only.write_text("".join(json.dumps(record) + "\n" for record in corpus.records))
    done = subprocess.run(
        [sys.executable, "-m", "tooltap.addon.commands.cli", "audit", "--jsonl", str(only),
         "--format", "json"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr  # rejections among them
    *rows, summary = [json.loads(line) for line in done.stdout.splitlines()]
    assert summary["read"] == len(rows) == len(corpus.verdicts)
    keys = ("api", "outcome", "state", "request_model", "reason")
    assert [tuple(r[k] for k in keys) for r in rows] == [
        tuple(getattr(v, k) for k in keys) for v in corpus.verdicts
    ]
    assert [[c["arguments_raw"] for c in r["calls"]] for r in rows] == [
        [c.arguments_raw for c in v.calls] for v in corpus.verdicts
    ]
