"""Every MCP exchange in the dialects corpus (recorded from real MCP SDK servers and the public
DeepWiki server by chatlas and pydantic-ai), read in order as one audit reads them: each is MCP,
inspected whole, and a working server raises no finding but the tool definitions it changed."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from tooltap.addon.audit.inputs import RecordedExchange
from tooltap.addon.inspection.session import Session
from tooltap.core.findings import findings

CORPUS = Path(__file__).parents[1] / "corpus" / "dialects" / "exchanges.jsonl"


def test_every_recorded_mcp_exchange_is_read_whole_and_raises_no_finding_but_the_changes_it_holds():
    lines = CORPUS.read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines if '"jsonrpc' in line]
    session = Session()
    verdicts = [session.inspect(RecordedExchange.model_validate(r).exchange()) for r in records]
    assert len(verdicts) == 26
    assert {(v.api, v.outcome, v.scope) for v in verdicts} == {("mcp", "inspected", "tool")}
    assert Counter(m for v in verdicts for m in v.rpc) == {
        "tools/call": 12,
        "initialize": 6,
        "tools/list": 6,
        "notifications/initialized": 2,
    }
    calls = [c for v in verdicts for c in v.calls]
    assert len(calls) == 12
    assert sum(len(v.tool_results) for v in verdicts) == 12
    # DeepWiki's server, recorded at one endpoint by two projects months apart (0.0.1, then
    # 2.14.3), rewrote its three tools' descriptions and schemas: each is said once, on the
    # list that first shows it; nothing else is a finding.
    changes = [c for v in verdicts for c in v.tool_changes]
    assert [f for v in verdicts for f in findings(v)] == ["tool-changed"] * 3
    assert [(c.server, c.tool, c.change, c.announced) for c in changes] == [
        ("DeepWiki", "read_wiki_structure", "changed", False),
        ("DeepWiki", "read_wiki_contents", "changed", False),
        ("DeepWiki", "ask_question", "changed", False),
    ]
    assert all(c.details[0].startswith("$.description: ") for c in changes)
    # None: a cassette that starts after initialize. Calls whose session's list the recording
    # does not hold are parsed, not validated, and said so.
    assert {v.server for v in verdicts} == {
        None,
        "test 1.27.0",
        "DeepWiki 2.14.3",
        "DeepWiki 0.0.1",
    }
    unchecked = [u for v in verdicts for u in v.unchecked]
    assert len(unchecked) == 8
    # Each says its own reason: a cassette that starts mid-session, or one whose session
    # called tools it never listed.
    assert Counter(u.partition("arguments not validated, ")[2] for u in unchecked) == {
        "nothing of this session was seen before (or it was forgotten)": 3,
        "no tools/list answer was seen in this session": 5,
    }
