"""Seed 004's own tests, as behaviour tests against tooltap.core.schema, and the limits."""

from tooltap.core.schema import (
    OPENAI_LIMITS,
    SEED_LIMITS,
    classify,
    declared_format,
    limit_problems,
    loose_tools,
    repair_lines,
    schema_blockers,
    schema_size,
    strict_state,
    string_budget,
)

TIGHT = {
    "type": "object",
    "additionalProperties": False,
    "required": ["invoice_id", "total"],
    "properties": {"invoice_id": {"type": "string"}, "total": {"type": "number"}},
}


def response(fmt, tools=None):
    body = {
        "id": "resp_s",
        "status": "completed",
        "model": "gpt-5.1",
        "text": {"format": fmt},
        "output": [
            {
                "type": "message",
                "content": [{"type": "output_text", "text": '{"invoice_id": "INV-1", "total": 1}'}],
            }
        ],
    }
    if tools is not None:
        body["tools"] = tools
    return body


def nested(levels):
    schema = {
        "type": "object",
        "additionalProperties": False,
        "required": ["a"],
        "properties": {"a": {"type": "string"}},
    }
    for _ in range(levels):
        schema = {
            "type": "object",
            "additionalProperties": False,
            "required": ["child"],
            "properties": {"child": schema},
        }
    return schema


def test_a_schema_without_strict_is_advice_and_the_json_still_parsed():
    stored = response({"type": "json_schema", "name": "invoice", "schema": TIGHT})
    assert declared_format(stored)[:3] == ("json_schema", "invoice", None)
    assert strict_state("json_schema", None) == "advisory"

    state, detail = classify(stored)
    assert state == "advisory-schema"
    assert "strict absent" in detail
    assert "wrong shape is a legal outcome" in detail
    assert "one-line change" in " ".join(repair_lines(stored, state))


def test_strict_false_reads_the_same_as_strict_missing():
    stored = response({"type": "json_schema", "name": "invoice", "strict": False, "schema": TIGHT})
    state, detail = classify(stored)
    assert state == "advisory-schema"
    assert "strict false" in detail


def test_legacy_json_object_mode_is_named_as_its_own_thing():
    stored = response({"type": "json_object"})
    state, detail = classify(stored)
    assert state == "no-schema"
    assert "valid JSON and nothing else" in detail
    assert "json_object to a json_schema" in repair_lines(stored, state)[0]


def test_schema_blockers_names_every_rule_the_subset_requires():
    loose = {
        "type": "object",
        "required": ["invoice_id"],
        "properties": {
            "invoice_id": {"type": "string", "minLength": 3},
            "note": {"type": "string"},
            "lines": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"sku": {"type": "string"}},
                    "required": ["sku"],
                },
            },
        },
    }
    found = " | ".join(schema_blockers(loose))
    assert "$: needs additionalProperties: false" in found
    assert "missing lines, note" in found
    assert "minLength are silently unenforced" in found
    assert "$.lines[]" not in found
    assert schema_blockers(TIGHT) == []


def test_a_root_that_is_not_a_plain_object_cannot_be_strict_at_all():
    assert "root may not be anyOf" in schema_blockers({"anyOf": [TIGHT, {"type": "object"}]})[0]
    assert (
        "root type must be object, not array"
        in schema_blockers({"type": "array", "items": TIGHT})[0]
    )
    assert "not a schema object" in schema_blockers(None)[0]


def test_depth_beyond_five_levels_is_reported_and_the_walk_stops():
    schema = nested(6)
    found = schema_blockers(schema)
    assert any("past the limit of 5" in f for f in found)
    assert schema_size(schema)["depth"] > 5


def test_a_strict_format_beside_a_loose_tool_is_still_a_gap():
    tools = [
        {"type": "function", "name": "charge", "parameters": TIGHT, "strict": True},
        {"type": "function", "name": "refund", "parameters": TIGHT},
    ]
    stored = response(
        {"type": "json_schema", "name": "invoice", "strict": True, "schema": TIGHT}, tools=tools
    )
    assert loose_tools(stored) == ["refund"]
    state, detail = classify(stored)
    assert state == "advisory-tools"
    assert "refund" in detail
    assert "every tool as well as on the text format" in repair_lines(stored, state)[0]


def test_the_chat_completions_shape_and_the_clean_cases():
    legacy = {
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "invoice", "strict": True, "schema": TIGHT},
        }
    }
    assert declared_format(legacy)[:3] == ("json_schema", "invoice", True)
    assert classify(legacy)[0] == "enforced"
    assert classify({})[0] == "free-text"
    assert classify(None)[0] == "free-text"
    assert repair_lines({}, "free-text") == []
    assert loose_tools({}) == []
    assert schema_size({}) == {"properties": 0, "depth": 1, "enum": 0}


def test_an_unknown_format_type_is_reported_not_guessed():
    state, detail = classify(response({"type": "xml"}))
    assert state == "unknown-format"
    assert "'xml'" in detail
    assert repair_lines(response({"type": "xml"}), state) == []


def test_the_current_openai_limits_allow_ten_levels_where_the_seed_allows_five():
    schema = nested(7)
    assert any("past the limit of 5" in f for f in schema_blockers(schema, limits=SEED_LIMITS))
    assert not any("past the limit" in f for f in schema_blockers(schema, limits=OPENAI_LIMITS))
    assert any(
        "past the limit of 10" in f for f in schema_blockers(nested(11), limits=OPENAI_LIMITS)
    )


def test_property_and_enum_ceilings_are_reported_in_the_repair():
    wide = {
        "type": "object",
        "additionalProperties": False,
        "properties": {f"p{i}": {"type": "string"} for i in range(5001)},
        "required": [f"p{i}" for i in range(5001)],
    }
    assert limit_problems(wide) == ["The schema declares 5001 properties, past the limit of 5000."]
    enum = dict(
        TIGHT,
        properties={"kind": {"type": "string", "enum": [str(i) for i in range(1001)]}},
        required=["kind"],
    )
    stored = response({"type": "json_schema", "name": "e", "schema": enum})
    assert "The largest enum holds 1001 values, past the limit of 1000." in repair_lines(
        stored, "advisory-schema"
    )


def test_the_openai_string_budgets_count_names_and_large_enums():
    values = ["x" * 70 for _ in range(251)]
    schema = {
        "type": "object",
        "additionalProperties": False,
        "required": ["k"],
        "properties": {"k": {"type": "string", "enum": values}},
    }
    assert string_budget(schema) == {"total": 1 + 251 * 70, "large_enum": 251 * 70}
    assert limit_problems(schema) == []  # the seed has no string budgets
    problems = limit_problems(schema, OPENAI_LIMITS)
    assert problems == [
        "A string enum of more than 250 values totals 17570 characters, past the limit of 15000."
    ]


def test_keywords_strict_mode_refuses_are_blockers_and_nested_branches_are_walked():
    schema = {
        "type": "object",
        "additionalProperties": False,
        "required": ["a", "b"],
        "properties": {
            "a": {"type": "object", "patternProperties": {"^x": {"type": "string"}}},
            "b": {
                "anyOf": [
                    {"type": "object", "properties": {"c": {"type": "string"}}},
                    {"type": "null"},
                ]
            },
        },
        "$defs": {"loose": {"type": "object"}},
    }
    found = schema_blockers(schema)
    assert (
        "$.a: patternProperties are not supported in strict mode; the API refuses the schema until they are removed."
        in found
    )
    assert "$.a: needs additionalProperties: false" in found
    assert "$.b.anyOf[0]: needs additionalProperties: false" in found
    assert (
        "$.b.anyOf[0]: every property must be listed in required; missing c. Use a nullable type for the optional ones rather than leaving them out."
        in found
    )
    assert "$.$defs.loose: needs additionalProperties: false" in found


def test_a_hundred_thousand_levels_of_nesting_is_measured_without_recursion():
    schema = {"type": "string"}
    for _ in range(100_000):
        schema = {"type": "object", "properties": {"x": schema}}
    assert schema_size(schema)["depth"] == 100_001
    found = schema_blockers(schema)
    assert any("nested 6 levels deep, past the limit of 5" in f for f in found)
    assert len(found) < 30  # the walk stopped below the limit
