"""Seed 000's own tests, as behaviour tests against tooltap.core.parallel."""

from tooltap.core.parallel import (
    classify,
    declared_names,
    duplicate_line,
    duplicate_names,
    exposure,
    function_calls,
    parallel_allowed,
    parse_ids,
    repair_lines,
    strict_tools,
    tool_name,
    unvalidated_calls,
)

STRICT_TOOLS = [
    {"type": "function", "name": "lookup_order", "strict": True},
    {"type": "function", "name": "create_ticket", "strict": True},
]


def turn(calls, tools=None, parallel=None):
    body = {
        "tools": tools if tools is not None else STRICT_TOOLS,
        "output": [
            {"type": "function_call", "name": n, "call_id": f"call_{i}"}
            for i, n in enumerate(calls)
        ],
    }
    if parallel is not None:
        body["parallel_tool_calls"] = parallel
    return body


def test_a_turn_that_fans_out_under_strict_schemas_has_no_guarantee():
    body = turn(["lookup_order", "create_ticket", "create_ticket"])
    assert parallel_allowed(body) is True
    assert strict_tools(body) == ["create_ticket", "lookup_order"]
    assert len(function_calls(body)) == 3

    state, detail = classify(body)
    assert state == "strict-void"
    assert "3 function_call item(s) in one turn" in detail
    assert "carry no schema guarantee" in detail
    assert "parallel_tool_calls false" in repair_lines(state)[0]


def test_the_same_configuration_returning_one_call_is_at_risk_not_clean():
    state, detail = classify(turn(["lookup_order"]))
    assert state == "strict-at-risk"
    assert "The configuration is loaded; it did not fire here." in detail

    states = ["strict-void"] * 12 + ["strict-at-risk"] * 988 + ["no-strict-declared"] * 400
    shape = exposure(states)
    assert shape["at_risk"] == 1000
    assert shape["void"] == 12
    assert round(shape["rate"], 4) == 0.012

    rows = [{"state": "strict-void", "calls": 3} for _ in range(9)]
    rows += [{"state": "strict-at-risk", "calls": 1} for _ in range(988)]
    assert unvalidated_calls(rows) == 27


def test_turning_parallel_calls_off_restores_the_guarantee():
    state, detail = classify(turn(["lookup_order"], parallel=False))
    assert state == "strict-serialised"
    assert "The guarantee holds." in detail
    assert parallel_allowed({"parallel_tool_calls": False}) is False
    assert parallel_allowed({"parallel_tool_calls": True}) is True
    assert parallel_allowed({}) is True
    assert exposure(["strict-serialised"] * 40)["rate"] is None


def test_the_same_tool_called_twice_keeps_both_call_ids():
    calls = function_calls(turn(["create_ticket", "create_ticket"]))
    assert duplicate_names(calls) == {"create_ticket": 2}
    assert [c["call_id"] for c in calls] == ["call_0", "call_1"]
    assert duplicate_names([{"name": "a"}, {"name": "b"}]) == {}
    assert duplicate_names(None) == {}
    line = duplicate_line({"create_ticket": 2})
    assert "create_ticket called 2 time(s) in one turn" in line
    assert "rather than call_id will double apply" in line
    assert duplicate_line({}) is None


def test_a_fan_out_with_no_strict_tools_is_a_different_fault():
    loose = [
        {"type": "function", "name": "lookup_order"},
        {"type": "function", "name": "create_ticket", "strict": False},
    ]
    state, detail = classify(turn(["lookup_order", "create_ticket"], tools=loose))
    assert state == "fanout-no-strict"
    assert "no tool declares strict" in detail
    assert "different fault" in detail
    assert "Validate tool arguments" in repair_lines(state)[0]
    assert classify(turn([], tools=loose))[0] == "no-strict-declared"
    assert strict_tools({"tools": loose}) == []


def test_strict_is_read_in_both_tool_shapes():
    nested = [{"type": "function", "function": {"name": "run_refund", "strict": True}}]
    assert strict_tools({"tools": nested}) == ["run_refund"]
    state, _ = classify(
        {
            "tools": nested,
            "output": [
                {"type": "function_call", "name": "run_refund", "call_id": "c1"},
                {"type": "function_call", "name": "run_refund", "call_id": "c2"},
            ],
        }
    )
    assert state == "strict-void"


def test_turns_without_tools_and_junk_do_not_become_findings():
    assert classify({})[0] == "no-tools"
    assert classify(None)[0] == "no-tools"
    assert classify({"tools": [], "output": []})[0] == "no-tools"
    body = turn([])
    body["output"] = [{"type": "message", "content": []}, None, "nonsense"]
    assert function_calls(body) == []
    assert classify(body)[0] == "strict-at-risk"
    assert unvalidated_calls(None) == 0


def test_response_ids_are_validated_before_they_reach_a_url():
    text = "resp_abc123\n# note\n\nresp_abc123\nresp_def456\n../../etc\n"
    assert parse_ids(text) == ["resp_abc123", "resp_def456"]
    assert parse_ids("resp_bad/../x") == []
    assert parse_ids(None) == []
    assert parse_ids("resp_ünïcode") == []


def test_a_provider_that_documents_no_conflict_never_gets_strict_void():
    state, detail = classify(turn(["lookup_order", "create_ticket"]), parallel_voids_strict=False)
    assert state == "strict-serialised"
    assert "documents no conflict" in detail


def test_only_at_risk_and_fanout_and_void_have_repairs():
    for quiet in ("no-tools", "no-strict-declared", "strict-serialised", None, 7):
        assert repair_lines(quiet) == []
    assert len(repair_lines("strict-void")) == 3
    assert "call_id" in repair_lines("strict-void")[2]


LOOSE_TOOLS = [
    {"type": "function", "name": "lookup_order"},
    {"type": "function", "name": "create_ticket", "strict": False},
]


def test_each_state_states_its_counts_and_calls_word_for_word():
    assert classify({}) == ("no-tools", "no named tools declared in this turn")
    assert classify(turn(["lookup_order", "create_ticket"], tools=LOOSE_TOOLS)) == (
        "fanout-no-strict",
        "2 function_call item(s) in one turn (lookup_order, create_ticket) and no tool "
        "declares strict. There was no guarantee to void here: the arguments were never "
        "validated by the API at all, which is a different fault with a different repair.",
    )
    assert classify(turn(["lookup_order"], tools=LOOSE_TOOLS)) == (
        "no-strict-declared",
        "2 tool(s) declared, none of them strict. Nothing in this turn was schema-guaranteed.",
    )
    assert classify(turn(["lookup_order", "create_ticket"], parallel=False)) == (
        "strict-serialised",
        "strict declared on 2 tool(s) and parallel_tool_calls is false. The guarantee holds.",
    )
    assert classify(turn(["lookup_order", "create_ticket"]), parallel_voids_strict=False) == (
        "strict-serialised",
        "strict declared on 2 tool(s); this provider documents no conflict between strict "
        "tools and parallel calls. The guarantee holds.",
    )
    assert classify(turn(["lookup_order", "create_ticket", "create_ticket"])) == (
        "strict-void",
        "3 function_call item(s) in one turn with strict declared and parallel_tool_calls "
        "left on (lookup_order, create_ticket, create_ticket). Structured Outputs is not "
        "supported alongside parallel calls, so these argument objects carry no schema "
        "guarantee.",
    )
    assert classify(turn([])) == (
        "strict-at-risk",
        "strict declared on 2 tool(s) with parallel_tool_calls left on, and this turn "
        "happened to return 0 call(s). The configuration is loaded; it did not fire here.",
    )


def test_each_finding_carries_its_repair_word_for_word():
    assert repair_lines("strict-void") == [
        "set parallel_tool_calls false whenever strict schemas matter. It defaults to true, "
        "which is why this was never a decision anyone made.",
        "if you need the fan-out for latency, drop strict and validate the arguments "
        "yourself. Do not keep a guarantee you know is not held.",
        "key every tool handler on call_id and make it idempotent, so a duplicate parallel "
        "call cannot double-apply.",
    ]
    assert repair_lines("strict-at-risk") == [
        "this turn was fine and the configuration is not. The same request shape returns "
        "several calls whenever the model decides to, so set parallel_tool_calls false "
        "before it does."
    ]
    assert repair_lines("fanout-no-strict") == [
        "no schema guarantee was in place to lose. Validate tool arguments in your own "
        "handler, or declare strict and serialise the calls."
    ]


def test_the_duplicate_warning_lists_every_name_in_order_word_for_word():
    assert duplicate_line({"lookup_order": 2, "create_ticket": 3}) == (
        "duplicate: create_ticket called 3 time(s) in one turn; lookup_order called 2 time(s) "
        "in one turn. Handlers keyed on the tool name rather than call_id will double apply."
    )


def test_one_void_turn_alone_is_an_exposure_of_one_and_none_at_risk_is_no_rate():
    assert exposure(["strict-void"]) == {"at_risk": 1, "void": 1, "rate": 1.0}
    assert exposure(["strict-at-risk"]) == {"at_risk": 1, "void": 0, "rate": 0.0}
    assert exposure(["no-tools", "strict-serialised"]) == {"at_risk": 0, "void": 0, "rate": None}
    assert exposure(None) == {"at_risk": 0, "void": 0, "rate": None}


def test_unreadable_or_missing_call_counts_add_nothing_to_the_unvalidated_total():
    rows = [
        {"state": "strict-void", "calls": 0},
        {"state": "strict-void", "calls": None},
        {"state": "strict-void", "calls": "many"},
        {"state": "strict-void", "calls": "2"},
        {"state": "strict-void"},
    ]
    assert unvalidated_calls(rows) == 2


def test_an_id_keeps_its_line_up_to_the_first_comment_and_bad_lines_do_not_end_the_file():
    text = "resp_a # from Monday\nresp_b#x#y\nresp_../../etc/passwd\nresp_c\n"
    assert parse_ids(text) == ["resp_a", "resp_b", "resp_c"]


def test_tools_without_a_name_are_not_declared_and_a_top_level_name_wins():
    assert tool_name({"name": "top", "function": {"name": "nested"}}) == "top"
    assert tool_name({"type": "function", "name": "  "}) is None
    assert tool_name({"type": "web_search"}) is None
    assert declared_names({"tools": [{"type": "web_search"}, None, {"name": "lookup_order"}]}) == [
        "lookup_order"
    ]


def test_junk_before_a_strict_tool_or_a_call_hides_neither():
    tools = [None, "x", {"type": "function", "name": "lookup_order", "strict": True}]
    assert strict_tools({"tools": tools}) == ["lookup_order"]
    output = [
        {"type": "message", "content": []},
        {"type": "function_call", "call_id": "call_x", "arguments": "{}"},
        {"type": "function_call", "name": "lookup_order"},
    ]
    assert function_calls({"output": output}) == [{"name": "lookup_order", "call_id": ""}]


def test_calls_without_a_name_are_never_counted_as_duplicates():
    assert duplicate_names([{"name": ""}, {"name": None}, {}, {"name": ""}, {}]) == {}
