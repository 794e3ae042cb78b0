"""Anthropic Messages, read field by field: the strict subset, the turn, the stream, the repairs."""

import json

import pytest
from support.captures import text

from tooltap.core import parallel
from tooltap.core.dialects import messages
from tooltap.core.dialects.messages import anthropic_blockers
from tooltap.core.schema import SEED_LIMITS

CLOSED = {"type": "object", "properties": {}, "additionalProperties": False}

# --- the strict subset (anthropic-sdk-python transform_schema) ---------------------


def node(**schema):
    """The problems of one node alone, at $.x, under the subset."""
    return messages._anthropic_node(schema, "$.x")


def test_a_schema_inside_the_subset_has_no_problem():
    schema = {
        "type": "object",
        "title": "Booking",
        "description": "a booking",
        "additionalProperties": False,
        "required": ["when", "tags"],
        "properties": {
            "when": {"type": "string", "format": "date-time"},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "kind": {"enum": ["a", 1, 2.5, True, None]},
            "fixed": {"const": "x"},
            "either": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "both": {"allOf": [{"$ref": "#/$defs/thing"}]},
            "none": {"type": "array", "minItems": 0},
        },
        "$defs": {"thing": CLOSED},
        "definitions": {"old": {"type": "number"}},
    }
    assert anthropic_blockers(schema) == []


@pytest.mark.parametrize("typed", ["type", "anyOf", "oneOf", "allOf", "enum", "const", "$ref"])
def test_any_typing_keyword_is_enough_for_a_type(typed):
    assert not [p for p in node(**{typed: []}) if "needs a type" in p]


def test_a_node_with_no_type_at_all_needs_one():
    assert node(description="anything") == [
        "$.x: needs a type (or anyOf, allOf, enum, const or $ref)"
    ]


@pytest.mark.parametrize(
    "schema, closed",
    [
        ({"type": "object"}, False),
        ({"type": "object", "additionalProperties": True}, False),
        ({"type": "object", "additionalProperties": {}}, False),
        ({"type": "object", "additionalProperties": 0}, False),  # only false itself closes it
        ({"type": "object", "additionalProperties": False}, True),
        # A nullable object is an object.
        ({"type": ["object", "null"]}, False),
        ({"type": ["null", "object"], "additionalProperties": False}, True),
        ({"type": "string"}, True),
    ],
)
def test_every_object_needs_additional_properties_false(schema, closed):
    assert node(**schema) == ([] if closed else ["$.x: needs additionalProperties: false"])


def test_keywords_outside_the_subset_are_named_in_order():
    assert node(type="integer", minimum=1, maximum=9, multipleOf=2) == [
        "$.x: maximum, minimum, multipleOf are not in the subset; the SDK moves them into the "
        "description, where nothing enforces them"
    ]


def test_one_of_has_its_own_advice():
    assert node(oneOf=[{"type": "string"}]) == ["$.x: oneOf is not in the subset; use anyOf"]
    assert node(oneOf=[], pattern="^a") == [
        "$.x: oneOf is not in the subset; use anyOf",
        "$.x: pattern are not in the subset; the SDK moves them into the description, where "
        "nothing enforces them",
    ]


@pytest.mark.parametrize(
    "fmt, supported",
    [
        *((f, True) for f in sorted(messages.ANTHROPIC_FORMATS)),
        ("phone", False),
        ("DATE", False),
        (5, False),
        (None, False),
    ],
)
def test_only_the_sdks_string_formats_are_supported(fmt, supported):
    expected = [f"$.x: format {fmt!r} is not one of the supported string formats"]
    assert node(type="string", format=fmt) == ([] if supported else expected)
    # A nullable string is a string.
    assert node(type=["string", "null"], format=fmt) == ([] if supported else expected)


@pytest.mark.parametrize("value, allowed", [(0, True), (1, True), (2, False), (None, False)])
def test_min_items_can_only_be_0_or_1(value, allowed):
    found = node(type="array", minItems=value)
    assert found == ([] if allowed else ["$.x: minItems can only be 0 or 1"])


@pytest.mark.parametrize(
    "values, allowed",
    [
        (["a", 1, 1.5, False, None], True),
        ([], True),
        (["a", {"b": 1}], False),
        ([["a"]], False),
    ],
)
def test_enum_values_must_be_primitive(values, allowed):
    expected = ["$.x: enum values must be strings, numbers, booleans or null"]
    assert node(enum=values) == ([] if allowed else expected)


def test_every_node_is_walked_and_named_by_its_path_in_order():
    loose = {"type": "object"}  # one problem, easy to spot at each path
    schema = {
        "type": "object",
        "additionalProperties": False,
        "properties": {"b": loose, "a": {"type": "array", "items": loose}, "c": "junk"},
        "anyOf": [loose],
        "oneOf": [True, loose],
        "allOf": [loose],
        "$defs": {"d": loose},
        "definitions": {"e": loose},
    }
    assert anthropic_blockers(schema) == [
        "$: oneOf is not in the subset; use anyOf",
        "$.a[]: needs additionalProperties: false",
        "$.b: needs additionalProperties: false",
        "$.anyOf[0]: needs additionalProperties: false",
        "$.oneOf[1]: needs additionalProperties: false",
        "$.allOf[0]: needs additionalProperties: false",
        "$.$defs.d: needs additionalProperties: false",
        "$.definitions.e: needs additionalProperties: false",
    ]


def test_the_walk_goes_deep_without_recursion():
    schema = CLOSED
    for _ in range(5000):
        schema = {"type": "array", "items": schema}
    assert anthropic_blockers(schema, tool=False) == []


def test_a_tools_input_schema_must_be_an_object_at_its_root():
    assert anthropic_blockers({"type": "string"}) == [
        "$: a tool's input_schema must have type object at its root"
    ]
    # An output format may be any type.
    assert anthropic_blockers({"type": "string"}, tool=False) == []
    assert messages.blockers({"type": "string"}, tool=False) == []
    assert messages.blockers({"type": "string"}) == [
        "$: a tool's input_schema must have type object at its root"
    ]


@pytest.mark.parametrize("root", [None, [], "object", True])
def test_a_schema_that_is_not_an_object_is_refused(root):
    assert anthropic_blockers(root) == ["$: not a schema object"]
    assert anthropic_blockers(root, tool=False) == ["$: not a schema object"]


def test_anthropic_blockers_are_never_openais():
    # A property left out of required is fine on Anthropic, not on OpenAI.
    schema = CLOSED | {"properties": {"a": {"type": "string"}}}
    assert messages.blockers(schema) == []


# --- read_turn ---------------------------------------------------------------------


def test_a_turn_reads_its_calls_and_block_types_from_the_content():
    response = {
        "id": "msg_1",
        "model": "claude-sonnet-4-5",
        "content": [
            {"type": "thinking", "thinking": "..."},
            {"type": "text", "text": "Let me look."},
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": " get_weather ",
                "input": {"city": "Paris"},
            },
            {"type": "tool_use", "id": "toolu_2", "name": "noop"},
            # Runs on Anthropic's side: a block, not a call the client answers.
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
            {"type": "tool_use", "id": "toolu_3", "name": ""},
            "junk",
        ],
    }
    turn = messages.read_turn({"model": "claude"}, response)
    assert (turn.api, turn.model, turn.response_id) == ("messages", "claude-sonnet-4-5", "msg_1")
    assert [
        (c.call_id, c.name, c.type, c.arguments_raw, c.arguments_missing) for c in turn.calls
    ] == [
        ("toolu_1", "get_weather", "tool_use", '{"city":"Paris"}', False),
        ("toolu_2", "noop", "tool_use", "", True),
    ]
    assert turn.awaiting == ["toolu_1", "toolu_2"]
    assert turn.output_types == [
        "thinking", "text", "tool_use", "tool_use", "server_tool_use", "tool_use", "",
    ]  # fmt: skip


def test_the_model_falls_back_to_the_requests_and_ids_may_be_absent():
    assert messages.read_turn({"model": "claude"}, {}).model == "claude"
    assert messages.read_turn({}, {}).model is None
    assert messages.read_turn({}, {}).response_id is None
    nameless = messages.read_turn({}, {"content": [{"type": "tool_use", "name": "f"}]})
    assert [c.call_id for c in nameless.calls] == [""]
    assert nameless.awaiting == []


@pytest.mark.parametrize(
    "choice, parallel, names",
    [
        (None, None, None),
        ({"type": "auto"}, None, None),
        # disable_parallel_tool_use is Anthropic's parallel_tool_calls: false; absent or
        # false, parallel calls are allowed and nothing is said.
        ({"type": "auto", "disable_parallel_tool_use": True}, False, None),
        ({"type": "any", "disable_parallel_tool_use": False}, None, None),
        ({"type": "auto", "disable_parallel_tool_use": "true"}, None, None),
        ({"type": "tool", "name": "f"}, None, ["f"]),
        ({"type": "none"}, None, []),
    ],
)
def test_tool_choice(choice, parallel, names):
    turn = messages.read_turn({} if choice is None else {"tool_choice": choice}, {})
    assert turn.parallel_tool_calls is parallel
    assert turn.callable_names == names


def test_tools_custom_and_versioned():
    request = {
        "tools": [
            {"name": " f ", "input_schema": {"type": "object"}, "strict": True},
            {"type": "custom", "name": "g", "input_schema": {"type": "string"}, "strict": "yes"},
            # A versioned tool the client runs (bash) accepts strict too, and has no schema.
            {"type": "bash_20250124", "name": "bash", "strict": False},
            {"type": "web_search_20250305", "name": "web_search"},
            # A typed tool with an input_schema is a client tool with a schema.
            {"type": "odd", "name": "h", "input_schema": CLOSED},
            # Nameless tools cannot be called: skipped, and the ones after them still read.
            {"type": "custom", "name": " "},
            "junk",
            # A custom tool, typed or not, missing its (required) input_schema: no schema.
            {"name": "untyped"},
            {"type": "custom", "name": "typed"},
        ]
    }
    tools = messages.read_turn(request, {}).tools
    assert [(t.name, t.type, t.strict, t.parameters) for t in tools] == [
        ("f", "function", True, {"type": "object"}),
        ("g", "function", None, {"type": "string"}),
        ("bash", "bash_20250124", False, None),
        ("web_search", "web_search_20250305", None, None),
        ("h", "function", None, CLOSED),
        ("untyped", "function", None, None),
        ("typed", "function", None, None),
    ]


SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}}


@pytest.mark.parametrize(
    "request_, output_format",
    [
        ({}, {}),
        # Structured outputs are constrained decoding: always strict.
        (
            {"output_config": {"format": {"type": "json_schema", "schema": SCHEMA}}},
            {"type": "json_schema", "schema": SCHEMA, "strict": True},
        ),
        # The beta spelling.
        (
            {"output_format": {"type": "json_schema", "schema": SCHEMA}},
            {"type": "json_schema", "schema": SCHEMA, "strict": True},
        ),
        # output_config first.
        (
            {
                "output_config": {"format": {"type": "json_schema", "schema": CLOSED}},
                "output_format": {"type": "json_schema", "schema": SCHEMA},
            },
            {"type": "json_schema", "schema": CLOSED, "strict": True},
        ),
        (
            {"output_config": {"effort": "high"}, "output_format": {"type": "text"}},
            {"type": "text"},
        ),
    ],
)
def test_the_output_format(request_, output_format):
    assert messages.read_turn(request_, {}).output_format == output_format


# --- Assembler -------------------------------------------------------------------------


def events_of(name):
    """The events of an Anthropic capture: SSE data lines, or one JSON event a line."""
    lines = text(name).splitlines()
    if name.endswith(".sse"):
        lines = [line[len("data: ") :] for line in lines if line.startswith("data: ")]
    return [json.loads(line) for line in lines if line.strip()]


def assemble(*events):
    assembler = messages.Assembler()
    for event in events:
        assembler.event(event)
    return assembler


def start(index, **block):
    return {"type": "content_block_start", "index": index, "content_block": block}


def piece(index, **delta):
    return {"type": "content_block_delta", "index": index, "delta": delta}


def test_a_real_stream_assembles_into_the_unstreamed_message():
    assembler = assemble(*events_of("anthropic_stream_text_then_tool_use.sse"))
    assert assembler.complete
    assert assembler.result() == {
        "id": "msg_019Q1hrJbZG26Fb9BQhrkHEr",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-20250514",
        "content": [
            {"type": "text", "text": "I'll check the current weather in Paris for you."},
            {
                "type": "tool_use",
                "id": "toolu_01NRLabsLyVHZPKxbKvkfSMn",
                "name": "get_weather",
                "caller": {"type": "direct"},
                "input": {"location": "Paris"},
            },
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        # message_delta's usage is cumulative: its keys replace message_start's.
        "usage": {
            "input_tokens": 377,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 65,
            "service_tier": "standard",
        },
    }


def test_a_block_may_arrive_whole_in_message_start():
    assembler = assemble(
        *events_of("anthropic_stream_programmatic_tool_call_in_message_start.jsonl")
    )
    (block,) = assembler.result()["content"]
    assert (block["id"], block["input"]) == (
        "toolu_015dGLMbwBKv1ZRQr6KdJzeH",
        {"player": "player2"},
    )


@pytest.mark.parametrize("kind", ["tool_use", "server_tool_use", "mcp_tool_use"])
@pytest.mark.parametrize(
    "started, pieces, input_",
    [
        ({}, ['{"a"', ": 1}"], {"a": 1}),
        # No argument: only "" streams, and the input is {}.
        ({}, [""], {}),
        ({}, [" ", "\n"], {}),
        # A call from code execution: its whole input in content_block_start, no delta.
        ({"player": "p1"}, [], {"player": "p1"}),
        ("junk", [], {}),
        # Cut by max_tokens: the raw partial text stays, for the argument check to report.
        ({}, ['{"a": "tru'], '{"a": "tru'),
    ],
)
def test_tool_input(kind, started, pieces, input_):
    assembler = assemble(
        start(0, type=kind, id="t", name="f", input=started),
        *(piece(0, type="input_json_delta", partial_json=p) for p in pieces),
    )
    assert assembler.result()["content"][0]["input"] == input_


def test_text_and_thinking_pieces_are_joined_onto_what_the_block_started_with():
    assembler = assemble(
        start(0, type="thinking", thinking="", signature=""),
        piece(0, type="thinking_delta", thinking="Hmm, "),
        piece(0, type="thinking_delta", thinking="Paris."),
        piece(0, type="signature_delta", signature="sig"),  # not text: left alone
        start(1, type="text", text="Sure"),
        piece(1, type="text_delta", text=", "),
        piece(1, type="text_delta", text="done."),
        start(2, type="text"),
        piece(7, type="text_delta", text="to a block never started"),
        piece(2, type="citations_delta", citation={"cited_text": "x"}),
        start(3, type="redacted_thinking", data="abc"),
    )
    assert assembler.result()["content"] == [
        {"type": "thinking", "thinking": "Hmm, Paris.", "signature": ""},
        {"type": "text", "text": "Sure, done."},
        {"type": "text", "text": ""},
        {"type": "redacted_thinking", "data": "abc"},
    ]


def test_blocks_are_placed_by_index_and_a_start_without_one_goes_last():
    assembler = assemble(
        start(1, type="text", text="b"),
        start(0, type="text", text="a"),
        {"type": "content_block_start", "content_block": {"type": "text", "text": "c"}},
        {"type": "content_block_start", "index": 5, "content_block": "junk"},
    )
    assert [b["text"] for b in assembler.result()["content"]] == ["a", "b", "c"]


def test_message_delta_sets_only_what_it_carries():
    assembler = assemble(
        {
            "type": "message_start",
            "message": {"id": "msg_1", "stop_sequence": "END", "usage": {"input_tokens": 5}},
        },
        {
            "type": "message_delta",
            "delta": {"stop_reason": "max_tokens"},
            "usage": {"output_tokens": 9},
        },
        {"type": "message_delta", "delta": {}, "usage": "junk"},
    )
    assert assembler.result() == {
        "id": "msg_1",
        "stop_sequence": "END",
        "stop_reason": "max_tokens",
        "usage": {"input_tokens": 5, "output_tokens": 9},
        "content": [],
    }
    # A stop sequence that ended the message comes in message_delta beside its reason.
    stopped = assemble(
        {
            "type": "message_start",
            "message": {"id": "msg_2", "stop_reason": None, "stop_sequence": None},
        },
        {
            "type": "message_delta",
            "delta": {"stop_reason": "stop_sequence", "stop_sequence": "###"},
        },
    )
    assert stopped.result()["stop_sequence"] == "###"


def test_only_message_stop_completes_a_stream():
    assembler = assemble(*events_of("anthropic_stream_text_then_tool_use.sse")[:-1])
    assembler.done_marker()  # an OpenAI [DONE] means nothing here
    assert not assembler.complete
    assembler.event({"type": "message_stop"})
    assert assembler.complete


def test_an_error_event_is_kept():
    assembler = assemble(
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    )
    assert [(e.type, e.message) for e in assembler.errors] == [("overloaded_error", "Overloaded")]
    assert not assembler.complete


# --- where Messages is served --------------------------------------------------------

BEDROCK = "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0"
VERTEX = "/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-sonnet-4@20250514"


@pytest.mark.parametrize(
    "path, model",
    [
        # Bedrock's InvokeModel is its own room's (test_invoke): it serves every family.
        (f"{BEDROCK}/invoke", None),
        (f"{BEDROCK}/converse", None),
        (f"{BEDROCK}/invoke/extra", None),
        (f"{VERTEX}:rawPredict", "claude-sonnet-4@20250514"),
        (f"{VERTEX}:streamRawPredict", "claude-sonnet-4@20250514"),
        (
            "/v1/projects/p/locations/l/publishers/anthropic/models/claude%40x:rawPredict",
            "claude@x",
        ),
        ("/v1/projects/p/locations/l/publishers/anthropic/models/count-tokens:rawPredict", None),
        (f"{VERTEX}:predict", None),
        ("/v1/projects/p/locations/l/publishers/google/models/gemini:rawPredict", None),
        ("/v1/messages", None),
    ],
)
def test_the_model_a_path_names(path, model):
    assert messages.model_in_path(path) == model
    assert messages.recognise("POST", path) is (model is not None or path == "/v1/messages")
    assert messages.recognise("GET", path) is False


@pytest.mark.parametrize(
    "method, path, spoken",
    [
        ("POST", "/v1/messages", True),
        ("post", "/anthropic/v1/messages", True),
        ("GET", "/v1/messages", False),
        ("POST", "/v1/messages/count_tokens", False),
        # OpenAI's Assistants API has messages too.
        ("POST", "/v1/threads/thread_1/messages", False),
    ],
)
def test_recognise(method, path, spoken):
    assert messages.recognise(method, path) is spoken


# --- finish reasons and repairs ------------------------------------------------------


@pytest.mark.parametrize(
    "response, reasons",
    [
        ({"stop_reason": "tool_use"}, ["tool_use"]),
        ({"stop_reason": "max_tokens"}, ["max_tokens"]),
        ({"stop_reason": None}, []),
        ({}, []),
    ],
)
def test_finish_reasons_are_the_stop_reason(response, reasons):
    assert messages.finish_reasons(response) == reasons


def test_a_fan_out_without_strict_is_repaired_in_anthropics_terms():
    assert messages.DIALECT.state_repairs("fanout-no-strict") == [
        "no schema guarantee was in place to lose. Validate tool arguments in your own "
        "handler, or declare strict: true on the tools (Anthropic documents no conflict "
        "between strict tools and parallel calls)."
    ]


@pytest.mark.parametrize(
    "state", ["strict-void", "strict-at-risk", "no-strict-declared", "no-tools"]
)
def test_other_states_are_repaired_as_everywhere(state):
    assert messages.DIALECT.state_repairs(state) == parallel.repair_lines(state)


def test_the_format_repair_lists_only_the_loose_tools_that_need_fixing():
    loose = [
        ("open", {"type": "object", "properties": {"a": {"type": "string", "pattern": "^a"}}}),
        ("fine", CLOSED),
        ("scalar", {"type": "string"}),
    ]
    assert messages.DIALECT.format_repairs({}, "advisory-tools", loose, SEED_LIMITS) == [
        "Set strict: true on every tool beside the strict output format. Anthropic's strict "
        "subset keeps optional properties, and needs additionalProperties: false on every object.",
        "strict: true on tool open needs these fixed first:",
        "  $: needs additionalProperties: false",
        "  $.a: pattern are not in the subset; the SDK moves them into the description, where "
        "nothing enforces them",
        "strict: true on tool scalar needs these fixed first:",
        "  $: a tool's input_schema must have type object at its root",
    ]


@pytest.mark.parametrize(
    "state", ["enforced", "advisory-schema", "no-schema", "free-text", "unknown-format"]
)
def test_no_format_repair_for_any_other_state(state):
    assert (
        messages.DIALECT.format_repairs({}, state, [("open", {"type": "object"})], SEED_LIMITS)
        == []
    )


# --- check_loop --------------------------------------------------------------------------


def test_the_loops_repairs_name_anthropics_id_field():
    request = {
        "messages": [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}],
            },
            {"role": "user", "content": "and?"},
        ]
    }
    (error,) = messages.check_loop(request).errors
    assert (error.rule, error.ids, error.where) == ("unanswered-call", ["toolu_1"], "messages.0")
    assert error.repair == (
        "answer every call with exactly one result carrying its tool_use_id, in the next request; "
        "a tool that failed still gets a result describing the failure, or the API rejects the "
        "request."
    )
