"""Seed 004's own tests, as behaviour tests against tooltap.core.schema, and the limits."""

from tooltap.core.schema import (
    OPENAI_LIMITS,
    SEED_LIMITS,
    Limits,
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


def test_each_format_state_explains_itself_word_for_word():
    unnamed = response({"type": "json_schema", "schema": TIGHT})
    assert classify(unnamed) == (
        "advisory-schema",
        "the declared schema was attached with strict absent, so it is a hint the model "
        "usually follows rather than a guarantee. Valid JSON of the wrong shape is a legal "
        "outcome here.",
    )
    assert classify(response({"type": "json_object"})) == (
        "no-schema",
        "Legacy json_object mode: the output is guaranteed to be valid JSON and nothing "
        "else. No schema was ever attached, so no shape was ever promised.",
    )
    assert classify(response({"type": "text"})) == (
        "free-text",
        "No output format was declared, so there is no contract to enforce and nothing to report.",
    )
    assert classify(response({"type": "xml"})) == (
        "unknown-format",
        "Format type 'xml' is not one tooltap knows. Read the raw record before drawing a "
        "conclusion.",
    )
    strict = {"type": "json_schema", "name": "invoice", "strict": True, "schema": TIGHT}
    loose_pair = [{"type": "function", "name": "refund"}, {"type": "function", "name": "void"}]
    assert classify(response(strict, tools=loose_pair)) == (
        "advisory-tools",
        "The text format is strict, but 2 tool definition(s) are not: refund, void. Tool "
        "arguments are constrained per tool, and an unstrict tool is unconstrained.",
    )
    assert classify(response(strict)) == (
        "enforced",
        "schema 'invoice' was attached with strict: true, and no tool beside it is loose.",
    )


def test_a_format_with_no_type_or_no_object_shape_is_free_text():
    assert declared_format({"text": {"format": {"name": "x"}}}) == ("none", None, None, None)
    assert classify({"text": {"format": {"name": "x"}}})[0] == "free-text"
    assert declared_format({"response_format": "json_object"}) == ("none", None, None, None)
    assert strict_state("text", None) == "free-text"
    assert strict_state("json_schema", True) == "enforced"
    assert strict_state("json_schema", "true") == "advisory"


def test_each_format_finding_carries_its_repair_word_for_word():
    assert repair_lines(response({"type": "json_object"}), "no-schema") == [
        "Move from json_object to a json_schema format with strict: true. JSON mode promises "
        "syntax and nothing about shape, which is why your validator is the first thing that "
        "ever sees the mismatch."
    ]
    strict = {"type": "json_schema", "name": "invoice", "strict": True, "schema": TIGHT}
    assert repair_lines(response(strict), "advisory-tools") == [
        "Set strict: true on every tool as well as on the text format, with "
        "additionalProperties: false and every parameter listed in required."
    ]
    assert repair_lines(response({"type": "json_schema", "schema": TIGHT}), "advisory-schema") == [
        "This schema already satisfies the strict subset, so setting strict: true is a "
        "one-line change. Somebody dropped the flag and the request kept succeeding."
    ]


def test_an_advisory_schema_that_strict_would_refuse_lists_each_blocker_indented():
    loose = {"type": "object", "properties": {"note": {"type": "string"}}}
    stored = response({"type": "json_schema", "schema": loose})
    assert repair_lines(stored, "advisory-schema") == [
        "strict: true would be refused for this schema until these are fixed:",
        "  $: needs additionalProperties: false",
        "  $: every property must be listed in required; missing note. Use a nullable type "
        "for the optional ones rather than leaving them out.",
    ]


def test_the_repair_applies_the_limits_it_is_given():
    stored = response({"type": "json_schema", "schema": nested(7)})
    assert repair_lines(stored, "advisory-schema", OPENAI_LIMITS) == [
        "This schema already satisfies the strict subset, so setting strict: true is a "
        "one-line change. Somebody dropped the flag and the request kept succeeding."
    ]
    names = {f"p{'x' * 20}{i}": {"type": "string"} for i in range(10)}
    wide = {
        "type": "object",
        "additionalProperties": False,
        "required": [*names],
        "properties": names,
    }
    stored = response({"type": "json_schema", "schema": wide})
    lines = repair_lines(stored, "advisory-schema", Limits(max_total_string_chars=100))
    assert (
        lines[-1] == "Property names and enum values total 220 characters, past the limit of 100."
    )


def test_the_root_rules_name_what_the_root_is():
    assert schema_blockers({"properties": {}}) == ["$: the root type must be object, not unset"]
    assert schema_blockers({"type": ["array", "string"]}) == [
        "$: the root type must be object, not array, string"
    ]
    assert schema_blockers({"anyOf": [{"type": "object"}], "oneOf": [TIGHT]}) == [
        "$: the root may not be anyOf, oneOf or allOf; it must be a plain object"
    ]
    assert schema_blockers("x", path="$.a", depth=2) == []


def test_every_keyword_of_a_kind_is_named_on_one_line():
    schema = dict(
        TIGHT,
        properties={"invoice_id": {"type": "string", "minLength": 1, "pattern": "^I"}, "total": {}},
        **{"if": {}, "not": {}},
    )
    assert schema_blockers(schema) == [
        "$: not, if are not supported in strict mode; the API refuses the schema until they "
        "are removed.",
        "$.invoice_id: minLength, pattern are silently unenforced under constrained decoding. "
        "Keep them for your own validator if you like, but do not rely on the model "
        "honouring them.",
    ]


def test_a_type_list_with_object_is_held_to_the_object_rules():
    schema = dict(TIGHT, properties={"invoice_id": {"type": ["object", "null"]}, "total": {}})
    assert schema_blockers(schema) == ["$.invoice_id: needs additionalProperties: false"]


def test_five_levels_are_within_the_seed_limit_and_six_are_not():
    assert schema_blockers(nested(3)) == []
    assert schema_blockers(nested(4)) == [
        "$.child.child.child.child.a: nested 6 levels deep, past the limit of 5"
    ]


def test_items_branches_and_defs_are_each_one_level_down():
    leaf = {"type": "string"}
    schema = {
        "type": "object",
        "additionalProperties": False,
        "required": ["list", "either"],
        "properties": {"list": {"type": "array", "items": leaf}, "either": {"anyOf": [leaf]}},
        "$defs": {"kind": {"type": "array", "items": leaf}},
    }
    assert schema_blockers(schema, limits=Limits(max_depth=2)) == [
        "$.either.anyOf[0]: nested 3 levels deep, past the limit of 2",
        "$.list[]: nested 3 levels deep, past the limit of 2",
        "$.$defs.kind[]: nested 3 levels deep, past the limit of 2",
    ]


def test_a_branch_past_the_depth_limit_does_not_end_the_walk_for_its_siblings():
    schema = dict(TIGHT, properties={"a": nested(6), "b": {"type": "object"}}, required=["a", "b"])
    found = schema_blockers(schema)
    assert "$.b: needs additionalProperties: false" in found
    assert "$.a.child.child.child.child: nested 6 levels deep, past the limit of 5" in found


def test_the_size_walk_counts_properties_at_every_level_including_items_and_defs():
    schema = {
        "type": "object",
        "properties": {"a": {"properties": {"c": {}}}, "b": "junk"},
        "items": {"properties": {"d": {}, "e": {}}},
        "$defs": {"f": {"properties": {"g": {}}}},
    }
    assert schema_size(schema) == {"properties": 6, "depth": 3, "enum": 0}


def test_the_string_budget_counts_names_at_every_level_and_only_enums_past_the_threshold():
    assert string_budget({}) == {"total": 0, "large_enum": 0}
    schema = {
        "properties": {"ab": {"properties": {"cde": {}}}, "junk": "x"},
        "$defs": {"k": {"enum": ["xy", "z", 3]}},
    }
    assert string_budget(schema, large_enum_values=1) == {"total": 2 + 3 + 4 + 3, "large_enum": 3}
    assert string_budget(schema, large_enum_values=2) == {"total": 12, "large_enum": 0}


def test_a_limit_reached_exactly_is_within_it():
    schema = {"properties": {"ab": {"enum": ["xy", "z"]}}}
    exact = Limits(
        max_properties=1,
        max_enum_values=2,
        max_total_string_chars=5,
        large_enum_values=1,
        max_large_enum_chars=3,
    )
    assert limit_problems(schema, exact) == []
    under = Limits(
        max_properties=0,
        max_enum_values=1,
        max_total_string_chars=4,
        large_enum_values=1,
        max_large_enum_chars=2,
    )
    assert limit_problems(schema, under) == [
        "The schema declares 1 properties, past the limit of 0.",
        "The largest enum holds 2 values, past the limit of 1.",
        "Property names and enum values total 5 characters, past the limit of 4.",
        "A string enum of more than 1 values totals 3 characters, past the limit of 2.",
    ]


def test_each_string_budget_applies_on_its_own():
    schema = {"properties": {"ab": {"enum": ["xy", "z"]}}}
    assert limit_problems(schema, Limits(max_total_string_chars=4)) == [
        "Property names and enum values total 5 characters, past the limit of 4."
    ]
    assert limit_problems(schema, Limits(large_enum_values=1, max_large_enum_chars=2)) == [
        "A string enum of more than 1 values totals 3 characters, past the limit of 2."
    ]


def test_only_function_tools_can_be_loose_in_either_shape():
    tools = [
        None,
        {"type": "web_search"},
        {"name": "untyped"},
        {"type": "function", "function": {"name": "nested_strict", "strict": True}},
        {"type": "function", "function": {"name": "nested_loose"}},
        {"type": "function"},
    ]
    assert loose_tools({"tools": tools}) == ["untyped", "nested_loose", "unnamed"]
