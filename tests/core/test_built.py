"""Models built without validation (core/built.py) are the models validation would build: every
recorded exchange's verdict, its calls and every other model inside it, validated again from
their own values, come out equal, field for field and type for type."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.corpora import read
from support.revalidated import revalidated

from tooltap.core.arguments import build_call
from tooltap.core.records import Call
from tooltap.core.verdict import Verdict, build_verdict

CORPUS = Path(__file__).parents[1] / "corpus"
FILES = sorted(CORPUS.glob("realworld/exchanges*.jsonl")) + sorted(CORPUS.glob("dialects/*.jsonl"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_recorded_verdict_is_the_one_validation_would_build(path: Path) -> None:
    corpus = read(path)
    assert corpus.verdicts
    wrong = {
        corpus.where(i): problems
        for i, verdict in enumerate(corpus.verdicts)
        if (problems := revalidated(verdict))
    }
    assert wrong == {}


def test_fields_not_given_take_their_defaults_and_a_fresh_list_each_time() -> None:
    first = build_verdict(api="chat", outcome="inspected")
    second = build_verdict(api="chat", outcome="inspected")
    assert first == Verdict(api="chat", outcome="inspected")
    assert first.model_fields_set == {"api", "outcome"}
    first.calls.append(build_call(call_id="c", name="n", type="function_call", arguments_raw="{}"))
    assert second.calls == []
    assert first.to_dict()["calls"][0] == Call(
        call_id="c", name="n", type="function_call", arguments_raw="{}"
    ).model_dump(mode="json")


def test_a_built_model_copies_and_dumps_as_a_validated_one() -> None:
    built = build_verdict(
        api="messages", outcome="inspected", status=200, usage={"input_tokens": 3}
    )
    validated = Verdict(api="messages", outcome="inspected", status=200, usage={"input_tokens": 3})
    copied = built.model_copy(update={"reason": "r"})
    assert copied.reason == "r" and built.reason is None
    assert built.to_dict() == validated.to_dict()
    assert built.model_dump_json() == validated.model_dump_json()


def test_a_required_field_left_out_is_refused() -> None:
    with pytest.raises(TypeError, match="Verdict needs outcome"):
        build_verdict(api="chat")
