"""audit's report: every finding of a verdict is said once, in every format, with one message.

A finding's name, its key and its message come from one definition (core.findings.occurrences),
so over any verdict the JSON row, the text, the JUnit failure and the GitHub annotations count
the same findings as the log does.
"""

from __future__ import annotations

import io
import json
from xml.etree import ElementTree

from hypothesis import given, settings
from hypothesis import strategies as st

from tooltap.addon.audit.inputs import Item
from tooltap.addon.audit.report import Report
from tooltap.core.findings import NAMES, findings, occurrences
from tooltap.core.inspection import Rejected, Verdict
from tooltap.core.loop import RULES

EVERY = frozenset(NAMES)
words = st.text("abcdefghij_", min_size=1, max_size=8)
schema_errors = st.lists(
    st.builds(dict, path=st.sampled_from(["$", "$.a", "$.b[0]"]), message=words), max_size=3
)
calls = st.lists(
    st.builds(
        dict,
        call_id=st.one_of(st.just(""), words.map("call_{}".format)),
        name=words,
        type=st.just("function_call"),
        arguments_raw=st.just("{}"),
        hosted=st.booleans(),
        parse_error=st.one_of(st.none(), st.builds(dict, type=words, message=words)),
        schema_errors=schema_errors,
    ),
    max_size=4,
)
results = st.lists(
    st.builds(
        dict,
        call_id=words.map("call_{}".format),
        where=words,
        outcome=st.sampled_from(["ok", "error"]),
        schema_errors=schema_errors,
    ),
    max_size=3,
)
loop_errors = st.lists(
    st.builds(
        dict,
        rule=st.sampled_from(RULES),
        ids=st.lists(words.map("toolu_{}".format), min_size=1, max_size=2),
        where=words,
        repair=words,
    ),
    max_size=3,
)
verdicts = st.builds(
    Verdict,
    api=st.sampled_from(["responses", "chat", "messages", "realtime", "mcp"]),
    outcome=st.just("inspected"),
    state=st.sampled_from(
        [None, "no-tools", "strict-serialised", "strict-void", "strict-at-risk", "fanout-no-strict"]
    ),
    detail=words,
    format_state=st.sampled_from([None, "free-text", "enforced", "advisory-schema", "no-schema"]),
    format_detail=words,
    calls=calls,
    tool_results=results,
    loop_errors=loop_errors,
    rejected=st.one_of(
        st.none(),
        st.builds(Rejected, status=st.just(400), type=words, message=words, blockers=st.lists(words, max_size=2)),
    ),
    session_errors=st.lists(st.builds(dict, type=words, message=words), max_size=2),
)  # fmt: skip


def report(verdict: Verdict, form: str) -> str:
    out = io.StringIO()
    audit = Report(format=form, out=out, fail_on=EVERY)
    audit.verdict(Item("recorded.jsonl#1", source="recorded.jsonl", line=1), verdict)
    if form == "junit":
        audit.summary()
    assert audit.findings == len(occurrences(verdict))
    return out.getvalue()


@settings(max_examples=300, deadline=None)
@given(verdicts)
def test_every_format_counts_the_findings_the_log_counts(verdict):
    names = findings(verdict)
    assert [f.name for f in occurrences(verdict)] == names
    row = json.loads(report(verdict, "json"))
    assert row["failing"] == names
    text = report(verdict, "text").splitlines()
    assert sorted(line.split()[0] for line in text if line.split()[0] in NAMES) == sorted(names)
    annotations = report(verdict, "github").splitlines()
    assert len(annotations) == len(names)
    root = ElementTree.fromstring(report(verdict, "junit"))
    failure = root.find("testsuite/testcase/failure")
    assert (failure.get("message").split(", ") if failure is not None else []) == names


def test_a_session_error_is_a_finding_with_its_message_in_every_format():
    verdict = Verdict(
        api="realtime",
        outcome="inspected",
        scope="session",
        session_errors=[{"type": "input_audio_buffer_commit_empty", "message": "buffer too small"}],
    )
    said = "the session said input_audio_buffer_commit_empty: buffer too small"
    assert [f.message for f in occurrences(verdict)] == [said]
    assert json.loads(report(verdict, "json"))["failing"] == ["session-error"]
    assert f"session-error       recorded.jsonl#1  {said}" in report(verdict, "text")
    assert report(verdict, "github").endswith(f"::recorded.jsonl#1: {said}\n")


def test_an_error_the_api_sent_inside_a_200_stream_is_said_and_is_no_finding():
    """Cohere's stream that ends in ERROR: the client read a finished stream; the audit says it."""
    said = "your request resulted in an invalid tool generation"
    verdict = Verdict(api="cohere", outcome="inspected", status=200, stream=True,
                      state="no-strict-declared",
                      stream_errors=[{"type": "INVALID_TOOL_GENERATION", "message": said}])  # fmt: skip
    assert occurrences(verdict) == []
    assert (
        f"stream-error        recorded.jsonl#1  INVALID_TOOL_GENERATION: {said}"
        in report(verdict, "text").splitlines()
    )
    assert json.loads(report(verdict, "json"))["stream_errors"] == [
        {"type": "INVALID_TOOL_GENERATION", "message": said}
    ]


def test_an_exchange_not_read_is_counted_by_why_in_every_format_and_is_never_a_finding():
    titan = "Amazon Titan Text on InvokeModel (inputText): no tool calls"
    unread = [
        Verdict(api=None, outcome="not_read", reason=why, status=200)
        for why in (titan, "not an endpoint tooltap reads", titan)
    ]
    read = Verdict(api="chat", outcome="inspected", state="no-tools")

    def audit(form: str, show_all: bool = False) -> str:
        out = io.StringIO()
        report = Report(format=form, out=out, fail_on=EVERY, show_all=show_all)
        for number, verdict in enumerate([*unread, read], 1):
            report.verdict(Item(f"recorded.jsonl#{number}", source="recorded.jsonl"), verdict)
        report.summary()
        return out.getvalue()

    *rows, summary = map(json.loads, audit("json").splitlines())
    assert [(r["outcome"], r["reason"], r["failing"]) for r in rows[:3]] == [
        ("not_read", titan, []), ("not_read", "not an endpoint tooltap reads", []),
        ("not_read", titan, []),
    ]  # fmt: skip
    assert (summary["read"], summary["not_read"], summary["findings"]) == (1, 3, 0)
    assert summary["not_read_by_reason"] == {titan: 2, "not an endpoint tooltap reads": 1}
    text = audit("text")
    assert "1 response(s) read, 3 not read, 0 finding(s)" in text
    assert f"  not read: 2 {titan}" in text and "recorded.jsonl#1" not in text
    assert f"not read            recorded.jsonl#1  {titan}" in audit("text", show_all=True)
    root = ElementTree.fromstring(audit("junit"))
    skipped = root.findall("testsuite/testcase/skipped")
    assert [s.get("message") for s in skipped] == [f"not read: {v.reason}" for v in unread]
    assert (root.get("skipped"), root.get("failures")) == ("3", "0")
    assert "3 not read" in audit("github")
