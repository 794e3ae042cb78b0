"""The recorded corpora (tests/corpus: every JSONL file of exchanges, the wire cassettes) read
for tool definitions as one audit reads them: every definition fingerprinted, the changes that
are there said (a public MCP server that rewrote its tools; three recordings whose application
changed a schema between calls), and no hidden text, which real recordings do not hold."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from tooltap.addon.audit.cassettes import cassette_items
from tooltap.addon.audit.inputs import jsonl_file
from tooltap.addon.inspection.pins import Pins
from tooltap.addon.inspection.session import Session

CORPUS = Path(__file__).parents[1] / "corpus"


def test_the_corpus_holds_these_definitions_and_changes_and_no_hidden_text():
    pins = Pins()  # one audit: pins span its inputs
    items = [
        *(i for path in sorted(CORPUS.glob("*/exchanges*.jsonl")) for i in jsonl_file(str(path))),
        *(i for path in sorted((CORPUS / "wire").glob("*.yaml")) for i in cassette_items(path)),
    ]
    session = Session(pins=pins)
    verdicts = [v for item in items if item.exchange is not None for _, v in item.inspect(session)]
    verdicts += [v for _, v in session.finish()]
    declared = [d for v in verdicts if v.definitions for d in v.definitions.declared]
    changes = [c for v in verdicts for c in v.tool_changes]
    assert len(verdicts) == 4213
    assert (len(declared), len({d.fingerprint for d in declared})) == (4358, 686)
    assert Counter(d.origin.kind for d in declared) == {"app": 4325, "mcp": 33}
    assert sorted((c.server or "app", c.tool) for c in changes) == [
        ("DeepWiki", "ask_question"),
        ("DeepWiki", "read_wiki_contents"),
        ("DeepWiki", "read_wiki_structure"),
        ("app", "Output"),  # Adala's two skills, each its own Output tool, in one recording
        ("app", "_structured_tool_call"),
        ("app", "get_current_weather"),
    ]
    assert [h for v in verdicts for h in v.hidden_text] == []
