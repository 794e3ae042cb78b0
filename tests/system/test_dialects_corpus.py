"""The dialects corpus (corpus/dialects, see its sources*.txt): every Bedrock and Vertex AI
exchange of each file, as one test per file.

Anthropic on Bedrock and on Vertex AI, Bedrock Converse, and Bedrock InvokeModel's other model
families (Nova, Titan, Cohere, Llama, Mistral, AI21, gpt-oss), recorded from the live services
by public projects. The calls each one should yield are read by dialects_reader, which shares no
code with tooltap (botocore parses the event streams; an InvokeModel body is read by its
response's own shape). An InvokeModel family tooltap does not read is counted as not read, with
why, and yields no call. The Gemini recordings of the same files are test_gemini_corpus's; the
MCP ones are another dialect's.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
from support.corpora import Corpus, read
from support.dialects_reader import error_message, expected_calls, operation

FOLDER = Path(__file__).parents[1] / "corpus" / "dialects"
HARD = {"unanswered-call", "orphan-result", "duplicate-result"}
TITAN = "Amazon Titan Text on InvokeModel (inputText): no tool calls"
TEXT_COMPLETIONS = (
    "Anthropic Text Completions on InvokeModel (prompt and completion): no tools, and no "
    "Messages turn"
)
# What each file holds, and how each (family, operation) is read: (api or why not read,
# exchanges, calls). A model id that names no family ("invalid-model-id") is read by its body.
FIGURES: dict[str, dict[str, Any]] = {
    "exchanges.jsonl": {
        "operations": {"converse": 208, "converse-stream": 73, "invoke": 45,
                       "invoke-with-response-stream": 32, "rawPredict": 32,
                       "streamRawPredict": 14},
        "statuses": {2: 381, 4: 23},
        "families": {
            ("every family", "converse"): [("converse", 281, 111)],
            ("anthropic", "invoke"): [("messages", 75, 23)],
            ("invalid", "invoke"): [("messages", 2, 0)],
            ("anthropic", "predict"): [("messages", 46, 18)],
        },
        "calls": 152, "not whole": [], "unread": {},
    },
    "exchanges-2.jsonl": {
        "operations": {"converse": 7, "converse-stream": 8, "invoke": 24,
                       "invoke-with-response-stream": 37},
        "statuses": {2: 64, 4: 12},
        "families": {
            ("every family", "converse"): [("converse", 15, 6)],
            ("amazon.nova", "invoke"): [("converse", 27, 20)],
            ("anthropic", "invoke"): [("messages", 12, 4), (TEXT_COMPLETIONS, 2, 0)],
            ("openai/ai21.jamba", "invoke"): [("chat", 2, 0)],
            ("amazon.titan", "invoke"): [(TITAN, 10, 0)],
            ("cohere", "invoke"): [
                ("Cohere Command on InvokeModel (prompt): no tool calls", 4, 0),
                ("Cohere Command R on InvokeModel: tool calls in Cohere's own chat shape, "
                 "not read", 1, 0),
            ],
            ("meta", "invoke"): [
                ("Meta Llama on InvokeModel (prompt and generation): no tool calls outside the "
                 "prompt text", 1, 0),
            ],
            ("mistral", "invoke"): [
                ("Mistral AI text completion on InvokeModel (prompt): no tool calls", 1, 0)
            ],
            ("ai21.j2", "invoke"): [("AI21 Jurassic-2 on InvokeModel (prompt): no tool calls", 1, 0)],
        },
        "calls": 30,
        # A Nova stream that Bedrock broke off with a modelStreamErrorException.
        "not whole": [(45, "the stream ended before its final event")], "unread": {},
    },
    "exchanges-3.jsonl": {
        "operations": {"converse-stream": 1, "invoke": 1},
        "statuses": {2: 2},
        "families": {
            ("every family", "converse"): [("converse", 1, 0)],
            ("anthropic", "invoke"): [("messages", 1, 0)],
        },
        "calls": 0, "not whole": [],
        "unread": {"Gemini's token count or embeddings: it makes no tool calls, and is not read": 1},  # Gemini's embedContent
    },
}  # fmt: skip


def family(url: str) -> tuple[str, str]:
    """(the model family a Bedrock or Vertex AI path names, the kind of operation): plain
    prefixes, written here apart from tooltap's own table."""
    path = unquote(urlsplit(url).path)
    model = re.sub(r"^(us|eu|apac|global)\.", "", path.split("/")[2]) if "/model/" in path else ""
    kind = "predict" if "Predict" in path else "converse" if "converse" in path else "invoke"
    if kind == "converse":
        return "every family", kind  # one body for all
    for prefix in ("amazon.nova", "amazon.titan", "anthropic", "cohere", "meta", "mistral",
                   "ai21.j2", "invalid"):  # fmt: skip
        if model.startswith(prefix):
            return prefix, kind
    if model.startswith(("openai.", "ai21.jamba")):
        return "openai/ai21.jamba", kind
    return "anthropic" if kind == "predict" else "other", kind


@pytest.fixture(scope="module", params=sorted(FIGURES))
def corpus(request: pytest.FixtureRequest) -> Corpus:
    return read(FOLDER / request.param, lambda record: bool(operation(record["url"])))


def figures(corpus: Corpus) -> dict[str, Any]:
    return FIGURES[corpus.path.name]


def test_the_corpus_is_the_one_sources_txt_describes(corpus):
    assert Counter(operation(r["url"]) for r in corpus.records) == figures(corpus)["operations"]
    assert Counter(r["status"] // 100 for r in corpus.records) == figures(corpus)["statuses"]


def test_each_model_family_is_read_by_its_room_or_counted_not_read_with_why(corpus):
    """By family and operation: the room that read each exchange (or why none did), how many
    exchanges, and how many calls they yielded."""
    found: dict[tuple[str, str], dict[str, list[int]]] = {}
    for record, verdict in zip(corpus.records, corpus.verdicts, strict=True):
        how = verdict.api or verdict.reason or ""
        seen = found.setdefault(family(record["url"]), {}).setdefault(how, [0, 0])
        seen[0] += 1
        seen[1] += len(verdict.calls)
    assert found == {
        key: {how: [count, calls] for how, count, calls in rows}
        for key, rows in figures(corpus)["families"].items()
    }
    unread = [v for v in corpus.verdicts if v.outcome == "not_read"]
    assert all(v.api is None and v.reason for v in unread)


def test_every_accepted_exchange_read_is_inspected_whole(corpus):
    failures = [
        (i, v.reason)
        for i, v in enumerate(corpus.verdicts)
        if corpus.accepted(i) and v.outcome != "not_read"
        and (v.outcome != "inspected" or v.reason is not None)
    ]  # fmt: skip
    assert failures == figures(corpus)["not whole"]
    for i, _ in failures:
        assert corpus.verdicts[i].stream_errors  # the service's own error says why


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
    assert calls == figures(corpus)["calls"]


def test_no_loop_error_on_a_request_the_service_accepted(corpus):
    failures = [
        f"{corpus.where(i)}: {e.rule} {e.ids} at {e.where}"
        for i, v in enumerate(corpus.verdicts)
        if corpus.accepted(i)
        for e in v.loop_errors
        if e.rule in HARD
    ]
    assert failures == []


def test_every_rejection_of_a_body_read_carries_the_services_own_message(corpus):
    rejected = [
        (i, v)
        for i, v in enumerate(corpus.verdicts)
        if not corpus.accepted(i) and v.outcome != "not_read"
    ]
    assert len(rejected) == figures(corpus)["statuses"].get(4, 0) - sum(
        1 for i, v in enumerate(corpus.verdicts) if not corpus.accepted(i) and v.api is None
    )
    assert [
        corpus.where(i) for i, v in rejected
        if v.rejected is None
        or (v.rejected.status, v.rejected.message)
        != (corpus.records[i]["status"], error_message(corpus.records[i]))
    ] == []  # fmt: skip


def test_the_model_comes_from_the_path_where_the_body_names_none(corpus):
    for record, verdict in zip(corpus.records, corpus.verdicts, strict=True):
        named = unquote(urlsplit(record["url"]).path).split("/")[-1].partition(":")[0]
        if operation(record["url"]) in ("rawPredict", "streamRawPredict"):
            assert verdict.request_model and "@" in verdict.request_model  # claude-...@20250929
        elif "/model/" in record["url"]:
            model = unquote(unquote(urlsplit(record["url"]).path.split("/")[2]))
            assert verdict.request_model == model, named


def test_audit_reads_the_jsonl_binary_bodies_and_all_and_agrees_with_inspect(corpus, tmp_path):
    only = tmp_path / "bedrock-vertex.jsonl"
    only.write_text("".join(json.dumps(record) + "\n" for record in corpus.records))
    done = subprocess.run(
        [sys.executable, "-m", "tooltap.addon.commands.cli", "audit", "--jsonl", str(only),
         "--format", "json"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    rejections = figures(corpus)["statuses"].get(4, 0)
    assert done.returncode == (1 if rejections else 0), done.stderr  # a 4xx fails the audit
    *rows, summary = [json.loads(line) for line in done.stdout.splitlines()]
    unread = Counter(v.reason for v in corpus.verdicts if v.outcome == "not_read")
    assert len(rows) == len(corpus.verdicts)
    assert (summary["read"], summary["not_read"]) == (len(rows) - unread.total(), unread.total())
    assert summary["not_read_by_reason"] == dict(unread)
    keys = ("api", "outcome", "state", "request_model", "reason")
    assert [tuple(r[k] for k in keys) for r in rows] == [
        tuple(getattr(v, k) for k in keys) for v in corpus.verdicts
    ]
    assert [[c["arguments_raw"] for c in r["calls"]] for r in rows] == [
        [c.arguments_raw for c in v.calls] for v in corpus.verdicts
    ]


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_every_line_of_the_file_is_one_corpus_tests_or_one_tooltap_says_it_does_not_read(name):
    """Bedrock and Vertex AI here, Gemini in test_gemini_corpus, MCP in test_mcp_corpus; the rest
    (Gemini's embeddings) tooltap does not read, and says why."""
    from support.gemini_reader import operation as gemini

    def kind(record: dict[str, Any]) -> str:
        url = record["url"]
        if operation(url):
            return "bedrock-vertex"
        if gemini(url):
            return "gemini"
        said = (record.get("request_body") or "") + (record.get("response_body") or "")
        return "mcp" if '"jsonrpc' in said else "none"

    lines = (FOLDER / name).read_text(encoding="utf-8").splitlines()
    kinds = Counter(kind(json.loads(line)) for line in lines)
    assert kinds.total() == len(lines)
    rest = read(FOLDER / name, lambda record: kind(record) == "none")
    assert [v.outcome for v in rest.verdicts] == ["not_read"] * kinds["none"]
    assert Counter(v.reason for v in rest.verdicts) == figures(rest)["unread"]
