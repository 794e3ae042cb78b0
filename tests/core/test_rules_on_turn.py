"""The rules read a Turn directly (parallel.classify_turn, schema.judge on Turn.applied_format)
and judge it as they judge the same turn in the Responses-API shape, the one stored responses
and `tooltap audit` give them: `responses_shape` below is that turn as a stored response."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tooltap.core import parallel, schema
from tooltap.core.turn import Tool, ToolCall, Turn

NAMES = st.sampled_from(["lookup", "lookup ", " search", "", "  ", "write", "unnamed"])
SCHEMA = st.sampled_from([None, {"type": "object"}, {"type": "object", "properties": {}}])


def responses_shape(turn: Turn) -> dict[str, Any]:
    """The turn as the Responses API stores one: its callable tools (strict where the provider
    holds every call), its calls as output items, parallel_tool_calls and text.format."""
    response: dict[str, Any] = {
        "tools": [
            {
                "type": t.type,
                "name": t.name,
                "strict": True if turn.calls_held else t.strict,
                "parameters": t.parameters,
            }
            for t in turn.callable_tools()
        ],
        "output": [
            {
                "type": "custom_tool_call" if c.type == "custom_tool_call" else "function_call",
                "name": c.name,
                "call_id": c.call_id,
            }
            for c in turn.calls
        ],
    }
    if turn.parallel_tool_calls is not None:
        response["parallel_tool_calls"] = turn.parallel_tool_calls
    if turn.output_format:
        response["text"] = {"format": turn.applied_format()}
    return response


tools = st.builds(
    Tool,
    name=NAMES,
    type=st.sampled_from(["function", "custom", "", "web_search"]),
    strict=st.sampled_from([True, False, None]),
    parameters=SCHEMA,
)
calls = st.builds(
    ToolCall,
    call_id=st.sampled_from(["", "call_1", "call_2"]),
    name=NAMES,
    type=st.sampled_from(["function_call", "custom_tool_call", "mcp_call"]),
    arguments_raw=st.just("{}"),
)
formats = st.one_of(
    st.just({}),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["json_schema", "json_object", "text", "grammar", ""])},
        optional={
            "name": st.sampled_from(["invoice", ""]),
            "strict": st.sampled_from([True, False, None, "true"]),
            "schema": SCHEMA,
            "json_schema": st.fixed_dictionaries(
                {}, optional={"name": st.just("nested"), "strict": st.booleans(), "schema": SCHEMA}
            ),
        },
    ),
)
turns = st.builds(
    Turn,
    api=st.sampled_from(["chat", "responses", "messages"]),
    tools=st.lists(tools, max_size=4),
    calls=st.lists(calls, max_size=3),
    parallel_tool_calls=st.sampled_from([True, False, None]),
    output_format=formats,
    callable_names=st.one_of(st.none(), st.lists(NAMES, max_size=2)),
    calls_held=st.booleans(),
    format_held=st.booleans(),
)


@settings(max_examples=600, deadline=None)
@given(turns, st.booleans())
def test_a_turn_is_classified_as_its_stored_response_would_be(turn: Turn, voids: bool) -> None:
    stored = responses_shape(turn)
    assert parallel.classify_turn(turn, parallel_voids_strict=voids) == parallel.classify(
        stored, parallel_voids_strict=voids
    )
    on_turn = schema.judge(schema.format_declared(turn.applied_format()), turn.loose_tools)
    assert on_turn == schema.classify(stored)


def test_the_loose_tools_are_asked_for_only_beside_a_strict_format() -> None:
    asked: list[int] = []

    def loose() -> list[str]:
        asked.append(1)
        return ["lookup"]

    assert schema.judge(("text", None, None, None), loose)[0] == "free-text"
    assert asked == []
    assert schema.judge(("json_schema", "x", True, {}), loose)[0] == "advisory-tools"
    assert asked == [1]


def test_a_provider_that_holds_every_call_leaves_no_tool_loose() -> None:
    turn = Turn(api="chat", tools=[Tool(name="lookup", strict=None)], calls_held=True)
    assert turn.loose_tools() == []
    assert parallel.classify_turn(turn)[0] == "strict-at-risk"
