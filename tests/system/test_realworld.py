"""The real-world corpus (corpus/realworld, see its sources*.txt), every exchange of every
file, as one test per file.

exchanges.jsonl: 1,182 exchanges recorded live by 23 public projects; exchanges-2.jsonl: 484 more
from 18 others; exchanges-3.jsonl: 913 from 19 more (xAI, DeepSeek, Mistral, Z.ai, Groq, Ollama,
llama.cpp and Hugging Face beside OpenAI, Anthropic and Azure); exchanges-4.jsonl: 40 of Cohere's
v2 chat and 15 of Groq and the Responses API, from 4 more. The calls and the tokens each one
should yield are read by realworld_reader, which shares no code with tooltap; every message
names the exchange by its file, its line index (from 0) and its source.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from support.corpora import Corpus, read
from support.realworld_reader import (
    dialect,
    error_message,
    expected_calls,
    expected_usage,
    is_stream,
)

FOLDER = Path(__file__).parents[1] / "corpus" / "realworld"
# The APIs that refuse a request whose tool loop is broken (a call without its result, a
# result without its call, one twice): a 2xx there proves the loop whole.
FIRST_PARTY = ("api.openai.com", "api.anthropic.com", "api.cohere.com")
LOOP_RULES = {"unanswered-call", "orphan-result", "duplicate-result"}
# Fields of a printed verdict that may differ from one run to the next.
PER_RUN = {"inspect_ms"}
# What each file holds (its sources file says where every exchange comes from), as the
# independent reader reads it; "other" is what it reads no calls in (embeddings, Cohere's v1
# chat, a deleted response). Then what tooltap says of it: the exchanges it does not read, by
# its reason, and the calls the reader finds in them; the 2xx recorded without their request
# body (nothing to read the turn against); and every hard loop error on a 2xx, each read in
# its recording and true; then every finding on a 2xx, by the name --fail-on gives it.
FIGURES = {
    "exchanges.jsonl": {
        "exchanges": 1182, "2xx": 1139, "4xx": 42, "5xx": 1,
        "chat": 552, "chat SSE": 216, "responses": 320, "responses SSE": 85,
        "messages": 310, "messages SSE": 125, "cohere": 0, "cohere SSE": 0, "ollama": 0,
        "other": 0,
        "exchanges with calls": 539, "calls": 659, "exchanges with 2+ calls": 105,
        "exchanges with hosted calls": 3, "hosted calls": 6,
        "not read": {}, "calls not read": 0, "without a request": 0,
        # Ollama's compatible API: both results sent in one tool message, under the first id.
        "loop errors": [(484, "unanswered-call", ["call_vialglfv"])],
        "findings": {"advisory-tools": 7, "argument-parse": 4, "argument-schema": 1,
                     "empty-result": 1, "no-schema": 1, "strict-void": 28, "tool-changed": 1,
                     "unanswered-call": 1},
    },
    "exchanges-2.jsonl": {
        "exchanges": 484, "2xx": 458, "4xx": 26, "5xx": 0,
        "chat": 280, "chat SSE": 38, "responses": 137, "responses SSE": 32,
        "messages": 67, "messages SSE": 16, "cohere": 0, "cohere SSE": 0, "ollama": 0,
        "other": 0,
        "exchanges with calls": 223, "calls": 248, "exchanges with 2+ calls": 19,
        "exchanges with hosted calls": 14, "hosted calls": 15,
        "not read": {}, "calls not read": 0, "without a request": 0, "loop errors": [],
        "findings": {"argument-schema": 1, "strict-void": 7},
    },
    "exchanges-3.jsonl": {
        "exchanges": 913, "2xx": 902, "4xx": 9, "5xx": 2,
        "chat": 749, "chat SSE": 66, "responses": 25, "responses SSE": 6,
        "messages": 86, "messages SSE": 5, "cohere": 0, "cohere SSE": 0, "ollama": 25,
        "other": 28,
        "exchanges with calls": 184, "calls": 198, "exchanges with 2+ calls": 9,
        "exchanges with hosted calls": 0, "hosted calls": 0,
        # 22 embeddings, a DELETE of a stored response, 5 of Cohere's v1 chat (no call in them).
        "not read": {
            "embeddings (OpenAI's API and those compatible with it): it makes no tool calls, and"
            " is not read": 22,
            "not an endpoint tooltap reads": 1,
            "Cohere's v1 chat (/v1/chat): it calls tools, and tooltap does not read it (its v2"
            " chat, /v2/chat, is read)": 5,
        },
        "calls not read": 0,
        # Hugging Face's client recorded with an empty request body.
        "without a request": 2,
        # llmrb/llm on Ollama: the assistant message sent back without its tool_calls, then a
        # tool message answering nothing; Ollama accepts it.
        "loop errors": [(295, "orphan-result", []), (297, "orphan-result", [])],
        "findings": {
            # json_schema without strict on OpenAI (llmrb/llm, sh0n0/aiba): a hint there.
            "advisory-schema": 10,
            # GLM answered `system` with {} for a tool that requires `command`.
            "argument-schema": 1,
            # json_object on OpenAI (eidolon-ai/typedai), format "json" on Ollama.
            "no-schema": 13,
            "orphan-result": 2,
            # Two calls under tools the Responses API echoed strict, parallel calls left on.
            "strict-void": 2,
            # Adala's two skills each declare their own tool named Output, in one recording.
            "tool-changed": 1,
        },
    },
    "exchanges-4.jsonl": {
        "exchanges": 55, "2xx": 55, "4xx": 0, "5xx": 0,
        "chat": 7, "chat SSE": 3, "responses": 8, "responses SSE": 4,
        "messages": 0, "messages SSE": 0, "cohere": 40, "cohere SSE": 8, "ollama": 0,
        "other": 0,
        "exchanges with calls": 20, "calls": 21, "exchanges with 2+ calls": 1,
        "exchanges with hosted calls": 0, "hosted calls": 0,
        "not read": {}, "calls not read": 0,
        "without a request": 0,
        # groq-ruby answers the call with a legacy `function` message under another id
        # (call_b790): Groq took its text by name, Chat Completions refuses it.
        "loop errors": [(41, "unanswered-call", ["call_6dh1"])],
        # Two math_operation calls, the tool echoed strict, parallel calls left on; Cohere's
        # JSON mode without a schema twice (langchain-cohere's json_object tests).
        "findings": {"no-schema": 2, "strict-void": 1, "unanswered-call": 1},
    },
}  # fmt: skip


@pytest.fixture(scope="module", params=sorted(FIGURES))
def corpus(request: pytest.FixtureRequest) -> Corpus:
    return read(FOLDER / request.param)


@pytest.fixture(scope="module")
def audit(corpus: Corpus) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable,
        "-m",
        "tooltap.addon.commands.cli",
        "audit",
        "--jsonl",
        str(corpus.path),
    ]
    return subprocess.run(
        [*command, "--format", "json"], capture_output=True, text=True, timeout=120, check=False
    )


def listing(failures: list[str], what: str) -> str:
    return f"{len(failures)} exchange(s) {what}:\n" + "\n".join(failures)


def calls_text(calls: list[tuple[str, str, str]]) -> str:
    return "[" + ", ".join(f"{i or '-'} {n}({a[:80]})" for i, n, a in calls) + "]"


def unread(corpus: Corpus) -> list[int]:
    """The exchanges tooltap does not read, by index."""
    return [i for i, v in enumerate(corpus.verdicts) if v.outcome == "not_read"]


def test_the_corpus_is_the_one_sources_txt_describes(corpus):
    records = corpus.records
    statuses = Counter(r["status"] // 100 for r in records)
    by_api = Counter((dialect(r["url"], r["method"]), is_stream(r)) for r in records)
    found = [expected_calls(r) for r in records if 200 <= r["status"] < 300]
    hosted = [expected_calls(r, hosted=True) for r in records if 200 <= r["status"] < 300]
    figures = {
        "exchanges": len(records),
        "2xx": statuses[2],
        "4xx": statuses[4],
        "5xx": statuses[5],
        **{
            f"{api}{kind}": by_api[api, True] + (0 if kind else by_api[api, False])
            for api in ("chat", "responses", "messages", "cohere")
            for kind in ("", " SSE")
        },
        "ollama": by_api["ollama", False],
        "other": by_api[None, False] + by_api[None, True],
        "exchanges with calls": sum(1 for c in found if c),
        "calls": sum(len(c) for c in found),
        "exchanges with 2+ calls": sum(1 for c in found if len(c) >= 2),
        "exchanges with hosted calls": sum(1 for c in hosted if c),
        "hosted calls": sum(len(c) for c in hosted),
    }
    assert figures == {k: v for k, v in FIGURES[corpus.path.name].items() if k in figures}


def test_audit_prints_the_verdict_inspect_gives_for_every_exchange(audit, corpus):
    assert audit.returncode == 1, audit.stderr  # the corpus holds findings (strict-void, 4xx)
    verdicts, where = corpus.verdicts, corpus.where
    lines = [json.loads(line) for line in audit.stdout.splitlines()]
    *printed, summary = lines
    assert summary.get("summary") is True, summary
    shown = [i for i, v in enumerate(verdicts) if v.outcome != "skipped"]
    assert len(printed) == len(shown), (
        f"audit printed {len(printed)} verdicts, inspect gave {len(shown)} not skipped"
    )
    not_read = FIGURES[corpus.path.name]["not read"]
    assert (summary["read"], summary["not_read"]) == (
        len(shown) - sum(not_read.values()),
        sum(not_read.values()),
    )
    assert summary.get("not_read_by_reason", {}) == not_read
    failures = []
    for index, line in zip(shown, printed, strict=True):
        record = corpus.records[index]
        label, finding, failing = line.pop("label"), line.pop("finding"), line.pop("failing")
        mine = {k: v for k, v in verdicts[index].to_dict().items() if k not in PER_RUN}
        theirs = {k: v for k, v in line.items() if k not in PER_RUN}
        if label != f"{record['method']} {record['url']}" or finding != bool(failing):
            failures.append(f"{where(index)}: label {label!r}, finding {finding!r} {failing!r}")
        elif theirs != mine:
            keys = sorted(k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k))
            failures.append(f"{where(index)}: differs in {', '.join(keys)}")
    assert not failures, listing(failures, "where audit and inspect disagree")


def test_every_finding_on_an_accepted_exchange_is_one_read_true(audit, corpus):
    *printed, _ = [json.loads(line) for line in audit.stdout.splitlines()]
    found = Counter(
        name
        for line in printed
        if line["status"] is not None and 200 <= line["status"] < 300
        for name in line["failing"]
    )
    assert found == FIGURES[corpus.path.name]["findings"]


def test_every_accepted_exchange_is_inspected_but_those_not_read_or_recorded_without_a_request(
    corpus,
):
    failures, blank = [], 0
    for i, v in enumerate(corpus.verdicts):
        if not corpus.accepted(i) or v.outcome == "inspected" or i in unread(corpus):
            continue
        if corpus.records[i]["request_body"] == "" and v.outcome == "unparseable":
            blank += 1  # the recorder kept no request: nothing to read the turn against
            assert v.reason == "request body is not a JSON object", corpus.where(i)
        else:
            failures.append(f"{corpus.where(i)}: {v.api} {v.outcome}: {v.reason}")
    assert not failures, listing(failures, "accepted by the API but not inspected")
    assert blank == FIGURES[corpus.path.name]["without a request"]
    not_read = Counter(corpus.verdicts[i].reason for i in unread(corpus))
    assert not_read == FIGURES[corpus.path.name]["not read"]
    assert all(corpus.verdicts[i].api is None for i in unread(corpus))


def test_every_accepted_exchange_yields_the_calls_an_independent_reader_finds(corpus):
    failures, where, records = [], corpus.where, corpus.records
    calls_not_read = 0
    for i, v in enumerate(corpus.verdicts):
        if not corpus.accepted(i):
            continue
        notes: list[str] = []
        expected = expected_calls(records[i], notes)
        got = [(c.call_id, c.name, c.arguments_raw) for c in v.calls if not c.hosted]
        hosted = [(c.call_id, c.name, c.arguments_raw) for c in v.calls if c.hosted]
        if i in unread(corpus):
            calls_not_read += len(expected)  # tooltap does not read them: it says none
            expected = []
        if hosted != expected_calls(records[i], hosted=True):
            failures.append(f"{where(i)}: hosted calls {calls_text(hosted)}")
        elif got != expected:
            kind = f"{dialect(records[i]['url'])}{' SSE' if is_stream(records[i]) else ''}"
            failures.append(
                f"{where(i)} ({kind}{'; ' if notes else ''}{'; '.join(notes)}):\n"
                f"  expected {calls_text(expected)}\n  tooltap  {calls_text(got)}"
            )
    assert not failures, listing(failures, "whose calls differ from the independent reader's")
    assert calls_not_read == FIGURES[corpus.path.name]["calls not read"]


def test_every_accepted_exchange_counts_the_tokens_its_response_states(corpus):
    failures, counted_ids, said = [], set(), []
    for i, (r, v) in enumerate(zip(corpus.records, corpus.verdicts, strict=True)):
        if not corpus.accepted(i) or v.outcome != "inspected":
            continue
        expected = expected_usage(r)
        said.append(bool(expected))
        if r["method"] == "GET":  # a stored response read back: its tokens were counted once
            if json.loads(r["response_body"])["id"] in counted_ids:
                expected = {}
        elif dialect(r["url"]) == "responses" and not is_stream(r):
            counted_ids.add(json.loads(r["response_body"])["id"])
        if v.usage != expected:
            failures.append(f"{corpus.where(i)}: the response says {expected}, tooltap {v.usage}")
    assert not failures, listing(failures, "whose tokens differ from the response's")
    assert sum(said) > len(said) * 3 // 4  # most responses say what they used


def test_no_loop_error_on_a_first_party_exchange_the_api_accepted(corpus):
    failures = []
    for i, v in enumerate(corpus.verdicts):
        host = urlsplit(corpus.records[i]["url"]).hostname or ""
        first_party = host in FIRST_PARTY or host.endswith(".openai.azure.com")
        if not (first_party and corpus.accepted(i)):
            continue
        failures += [
            f"{corpus.where(i)}: {e.rule} {', '.join(e.ids)} at {e.where}"
            for e in v.loop_errors
            if e.rule in LOOP_RULES
        ]
    assert not failures, listing(failures, "of loop errors on requests the API accepted")


def test_every_loop_error_on_an_accepted_exchange_is_one_read_true(corpus):
    """Servers that do not check the loop accept broken ones: each such finding was read in its
    recording and is true (FIGURES says why)."""
    found = [
        (i, e.rule, e.ids)
        for i, v in enumerate(corpus.verdicts)
        if corpus.accepted(i)
        for e in v.loop_errors
        if e.rule in LOOP_RULES
    ]
    assert found == FIGURES[corpus.path.name]["loop errors"]


def test_every_rejection_carries_the_apis_own_message(corpus):
    failures, where = [], corpus.where
    rejections = 0
    for i, v in enumerate(corpus.verdicts):
        status = corpus.records[i]["status"]
        if not 400 <= status < 500:
            continue
        rejections += 1
        message = error_message(corpus.records[i])
        if v.rejected is None:
            failures.append(f"{where(i)}: {status} not rejected ({v.outcome}: {v.reason})")
        elif (v.rejected.status, v.rejected.message) != (status, message):
            failures.append(
                f"{where(i)}: {v.rejected.status} {v.rejected.message!r}, the API said {status} {message!r}"
            )
    assert rejections == FIGURES[corpus.path.name]["4xx"]
    assert not failures, listing(failures, "whose rejection is not the API's own")
