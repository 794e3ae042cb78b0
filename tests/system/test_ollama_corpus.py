"""The Ollama recordings (corpus/ollama, see its sources.txt): all 59 /api/chat and /api/generate
exchanges langchaingo recorded from a local Ollama and from ollama.com, as one test.

What each should yield is read by ollama_reader, which shares no code with tooltap.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support.ollama_reader import error_message, expected_calls, streamed, text

from tooltap.addon.audit.inputs import RecordedExchange
from tooltap.addon.inspection.session import Session
from tooltap.core import StreamReader, Verdict

CORPUS = Path(__file__).parents[1] / "corpus" / "ollama" / "exchanges.jsonl"
RECORDS: list[dict[str, Any]] = [json.loads(line) for line in CORPUS.read_text().splitlines()]


@pytest.fixture(scope="module")
def verdicts() -> list[Verdict]:
    session = Session()  # in file order, as the proxy and audit keep their memory
    return [session.inspect(RecordedExchange.model_validate(r).exchange()) for r in RECORDS]


def where(index: int) -> str:
    return f"#{index} {RECORDS[index]['source']}"


def accepted(index: int) -> bool:
    return RECORDS[index]["status"] == 200


def test_the_corpus_is_the_one_sources_txt_describes():
    assert len(RECORDS) == 59
    hosts = Counter(r["url"].split("/")[2] for r in RECORDS)
    assert hosts == {"localhost:11434": 49, "ollama.com": 10}
    assert Counter(r["url"].rsplit("/", 1)[1] for r in RECORDS) == {"chat": 51, "generate": 8}
    assert Counter(r["status"] for r in RECORDS) == {200: 57, 400: 2}


def test_every_exchange_is_read_as_ollama_and_streams_as_streams(verdicts):
    assert Counter(v.api for v in verdicts) == {"ollama": 59}
    # ollama.com sends its stream typed application/json: it is read as lines all the same.
    assert [where(i) for i, v in enumerate(verdicts)
            if accepted(i) and v.stream != streamed(RECORDS[i])] == []  # fmt: skip
    assert sum(v.stream for v in verdicts) == 44


def test_every_accepted_exchange_is_inspected_whole(verdicts):
    failures = [
        f"{where(i)}: {v.outcome}: {v.reason} {v.stream_errors}"
        for i, v in enumerate(verdicts)
        if accepted(i) and (v.outcome != "inspected" or v.reason or v.stream_errors)
    ]
    assert failures == []


def test_every_stream_reassembles_to_the_text_an_independent_reader_joins():
    for index, record in enumerate(RECORDS):
        if not (accepted(index) and streamed(record)):
            continue
        reader = StreamReader("ollama", framing="ndjson")
        body = record["response_body"].encode()
        for start in range(0, len(body), 97):  # cut anywhere, mid-line and mid-character
            reader.feed(body[start : start + 97])
        result = reader.close()
        assert result.complete, where(index)
        for key in ("message.content", "message.thinking", "response", "thinking"):
            holder = result.response.get("message", {}) if "." in key else result.response
            got = holder.get(key.rpartition(".")[2], "")
            assert got == text(record, key), (where(index), key)


def test_every_call_is_the_one_an_independent_reader_finds(verdicts):
    found = {
        where(i): [(c.call_id, c.name, c.arguments_raw) for c in v.calls]
        for i, v in enumerate(verdicts)
        if accepted(i)
    }
    expected = {where(i): expected_calls(r) for i, r in enumerate(RECORDS) if accepted(i)}
    assert found == expected
    assert sum(map(len, found.values())) == 1
    (call,) = [c for calls in found.values() for c in calls]
    assert call == ("call_mo1wm122", "getWeather", '{"location":"San Francisco, CA"}')


def test_the_states_are_the_ones_ollama_documents(verdicts):
    inspected = [(RECORDS[i], v) for i, v in enumerate(verdicts) if accepted(i)]
    assert Counter(v.state for _, v in inspected) == {"no-tools": 55, "no-strict-declared": 2}
    assert Counter(v.format_state for _, v in inspected) == {
        "free-text": 48,
        "no-schema": 6,
        "enforced": 3,
    }
    assert all(v.usage.get("output_tokens") for _, v in inspected)


def test_a_result_with_no_name_answers_the_call_before_it_by_its_place(verdicts):
    (index,) = [i for i, r in enumerate(RECORDS) if '"role":"tool"' in r["request_body"]]
    verdict = verdicts[index]
    assert (verdict.loop_errors, [(r.call_id, r.outcome) for r in verdict.tool_results]) == (
        [],
        [("getWeather", "ok")],
    )


def test_every_refusal_carries_ollamas_own_message(verdicts):
    refused = [(i, v) for i, v in enumerate(verdicts) if not accepted(i)]
    assert [(v.rejected.status, v.rejected.message) for _, v in refused] == [
        (RECORDS[i]["status"], error_message(RECORDS[i])) for i, _ in refused
    ]
    assert "registry.ollama.ai/library/gemma3:1b does not support tools" in {
        v.rejected.message for _, v in refused
    }
