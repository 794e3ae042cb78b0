"""Tool-loop integrity, per dialect: real round trips pass, the same round trips broken fail."""

import copy
import json
import re

import pytest
from support.captures import WIRE, pairs

from tooltap.core.loop import error_payload
from tooltap.core.turn import given_id
from tooltap.core.wire import check_loop

ANTHROPIC = pairs("pydanticai_anthropic_parallel_tool_calls.yaml")[1].request
ANTHROPIC_IDS = [b["id"] for b in ANTHROPIC["messages"][1]["content"] if b["type"] == "tool_use"]
RESPONSES = pairs("pydanticai_test_openai_responses_model_simple_response_with_tool_call.yaml")[
    1
].request


def chat_history():
    """The real parallel Chat turn (two calls) answered correctly, one tool message per id."""
    message = json.loads((WIRE / "chat_nonstream_parallel_tool_calls.json").read_text())["choices"][
        0
    ]["message"]
    return {
        "messages": [
            {"role": "user", "content": "Weather in Edinburgh, and AAPL?"},
            message,
            {
                "role": "tool",
                "tool_call_id": message["tool_calls"][0]["id"],
                "content": "12C, rain",
            },
            {"role": "tool", "tool_call_id": message["tool_calls"][1]["id"], "content": "231.40"},
        ]
    }


CHAT = chat_history()
CHAT_IDS = [c["id"] for c in CHAT["messages"][1]["tool_calls"]]


def findings(api, request, prior=None):
    return [(e.rule, e.ids, e.where) for e in check_loop(api, request, prior).errors]


def test_the_real_round_trips_are_clean():
    assert findings("messages", ANTHROPIC) == []
    assert findings("chat", CHAT) == []
    assert findings("responses", RESPONSES) == []
    for name in (
        "anthropic_roundtrip_tool_use_tool_result.json",
        "anthropic_roundtrip_streaming.json",
        "anthropic_roundtrip_tool_result_is_error.json",
    ):
        assert findings("messages", pairs(name)[1].request) == []
    for request in (
        p.request for p in pairs("pydanticai_bedrock_mantle_reused_call_ids_stream.yaml")
    ):
        assert findings("responses", request) == []
    for request in (
        p.request for p in pairs("pydanticai_test_anthropic_mixed_strict_tool_run.yaml")
    ):
        assert findings("messages", request) == []


# --- unanswered-call --------------------------------------------------------


def test_an_unanswered_call_is_found_in_each_dialect():
    chat = copy.deepcopy(CHAT)
    del chat["messages"][3]
    assert findings("chat", chat) == [("unanswered-call", [CHAT_IDS[1]], "messages.1")]

    anthropic = copy.deepcopy(ANTHROPIC)
    del anthropic["messages"][2]["content"][3]
    assert findings("messages", anthropic) == [
        ("unanswered-call", [ANTHROPIC_IDS[3]], "messages.1")
    ]

    responses = copy.deepcopy(RESPONSES)
    del responses["input"][2]
    assert findings("responses", responses) == [
        ("unanswered-call", ["call_YfwRsW8sUxDKipwyhWTzOXCA"], "input.1")
    ]


def test_every_call_of_a_parallel_responses_turn_is_owed_a_result():
    # The newest model turn is its whole run of items: a call before the last
    # one is as new as the last.
    request = {
        "input": [
            {"role": "user", "content": "weather in Paris and Rome?"},
            {"type": "function_call", "call_id": "call_a", "name": "weather", "arguments": "{}"},
            {"type": "function_call", "call_id": "call_b", "name": "weather", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_b", "output": "12C"},
        ]
    }
    assert findings("responses", request) == [("unanswered-call", ["call_a"], "input.1")]


def test_the_first_call_loop_bug_leaves_the_others_unanswered():
    # tool_calls[0] only: the loop that has only ever seen a single call.
    chat = copy.deepcopy(CHAT)
    chat["messages"] = chat["messages"][:3]
    (error,) = check_loop("chat", chat).errors
    assert (error.rule, error.ids) == ("unanswered-call", [CHAT_IDS[1]])
    assert "tool_call_id" in error.repair


def test_a_result_after_an_intervening_message_does_not_answer_a_chat_call():
    chat = copy.deepcopy(CHAT)
    chat["messages"].insert(3, {"role": "user", "content": "and?"})
    assert findings("chat", chat) == [
        ("unanswered-call", [CHAT_IDS[1]], "messages.1"),
        ("orphan-result", [CHAT_IDS[1]], "messages.4"),
    ]


def test_with_previous_response_id_the_calls_come_from_the_proxys_memory():
    follow = {
        "previous_response_id": "resp_1",
        "input": [{"type": "function_call_output", "call_id": "call_a", "output": "ok"}],
    }
    assert findings("responses", follow, {"resp_1": ["call_a"]}) == []
    assert findings("responses", follow, {"resp_1": ["call_a", "call_b"]}) == [
        ("unanswered-call", ["call_b"], "previous_response_id resp_1")
    ]
    # A previous response the proxy never saw: an output cannot be proven orphaned.
    assert findings("responses", follow, {}) == []
    assert findings("responses", follow, {"resp_1": []}) == [
        ("orphan-result", ["call_a"], "input.0")
    ]


def test_calls_re_sent_beside_previous_response_id_are_owed_once():
    # As ruby_llm-responses_api sends them (three cassettes recorded on api.openai.com, 200):
    # the previous response's calls again in `input`, each answered once.
    calls = [
        {"type": "function_call", "call_id": c, "name": "f", "arguments": "{}"}
        for c in ("call_a", "call_b")
    ]
    outputs = [
        {"type": "function_call_output", "call_id": c, "output": "ok"} for c in ("call_a", "call_b")
    ]
    prior = {"resp_1": ["call_a", "call_b"]}
    whole = {"previous_response_id": "resp_1", "input": [*calls, *outputs]}
    assert findings("responses", whole, prior) == []
    # A call really left unanswered among the re-sent ones is still found, once.
    short = {"previous_response_id": "resp_1", "input": [*calls, outputs[0]]}
    assert findings("responses", short, prior) == [("unanswered-call", ["call_b"], "input.1")]
    # Answered first and re-sent after: still the one call.
    late = {"previous_response_id": "resp_1", "input": [*outputs, *calls]}
    assert findings("responses", late, prior) == []


# --- orphan-result ----------------------------------------------------------


def test_an_orphan_result_is_found_in_each_dialect():
    real = pairs("anthropic_400_orphan_tool_result.json")[1].request
    assert findings("messages", real) == [
        ("orphan-result", ["toolu_01GHndag5wQmbzNihYmV2UBj"], "messages.1.content.0")
    ]

    chat = copy.deepcopy(CHAT)
    chat["messages"].append({"role": "tool", "tool_call_id": "call_nobody_made", "content": "x"})
    assert findings("chat", chat) == [("orphan-result", ["call_nobody_made"], "messages.4")]

    responses = copy.deepcopy(RESPONSES)
    responses["input"].append(
        {"type": "function_call_output", "call_id": "call_ghost", "output": "x"}
    )
    assert findings("responses", responses) == [("orphan-result", ["call_ghost"], "input.3")]


def test_an_output_beside_item_references_is_not_called_an_orphan():
    request = {
        "input": [
            {"id": "fc_123"},
            {"type": "function_call_output", "call_id": "call_x", "output": "ok"},
        ]
    }
    assert findings("responses", request) == []


# --- duplicate-result -------------------------------------------------------


def test_the_same_tool_called_twice_is_answered_by_id_not_by_name():
    two = {
        "role": "assistant",
        "tool_calls": [
            {
                "id": "call_lisbon",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Lisbon"}'},
            },
            {
                "id": "call_porto",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Porto"}'},
            },
        ],
    }
    by_id = {
        "messages": [
            {"role": "user", "content": "x"},
            two,
            {"role": "tool", "tool_call_id": "call_porto", "content": "18C"},
            {"role": "tool", "tool_call_id": "call_lisbon", "content": "21C"},
        ]
    }
    assert findings("chat", by_id) == []
    # A dispatcher keyed on the tool name answers the first id twice.
    by_name = copy.deepcopy(by_id)
    by_name["messages"][2]["tool_call_id"] = "call_lisbon"
    assert findings("chat", by_name) == [
        ("duplicate-result", ["call_lisbon"], "messages.3"),
        ("unanswered-call", ["call_porto"], "messages.1"),
    ]


def test_a_duplicate_result_is_found_in_each_dialect():
    anthropic = copy.deepcopy(ANTHROPIC)
    anthropic["messages"][2]["content"].append(
        copy.deepcopy(anthropic["messages"][2]["content"][0])
    )
    assert findings("messages", anthropic) == [
        ("duplicate-result", [ANTHROPIC_IDS[0]], "messages.2.content.4")
    ]

    responses = copy.deepcopy(RESPONSES)
    responses["input"].append(copy.deepcopy(responses["input"][2]))
    assert findings("responses", responses) == [
        ("duplicate-result", ["call_YfwRsW8sUxDKipwyhWTzOXCA"], "input.3")
    ]


def test_reused_call_ids_across_turns_pair_in_order():
    request = {
        "input": [
            {"type": "function_call", "call_id": "call_0", "name": "a", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_0", "output": "1"},
            {"type": "function_call", "call_id": "call_0", "name": "b", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_0", "output": "2"},
        ]
    }
    assert findings("responses", request) == []


# --- Anthropic: results-not-first (split-results: test_wire_2026.py) -----------


def test_text_before_the_tool_results_is_found():
    anthropic = copy.deepcopy(ANTHROPIC)
    anthropic["messages"][2]["content"].insert(0, {"type": "text", "text": "here you go"})
    assert findings("messages", anthropic) == [
        ("results-not-first", [ANTHROPIC_IDS[0]], "messages.2.content.1")
    ]
    after = copy.deepcopy(ANTHROPIC)
    after["messages"][2]["content"].append(
        {"type": "text", "text": "text after the results is fine"}
    )
    assert findings("messages", after) == []


# --- empty-result and tool failures -----------------------------------------


def test_an_empty_result_is_found_in_each_dialect():
    anthropic = copy.deepcopy(ANTHROPIC)
    del anthropic["messages"][2]["content"][1]["content"]
    assert findings("messages", anthropic) == [
        ("empty-result", [ANTHROPIC_IDS[1]], "messages.2.content.1")
    ]
    chat = copy.deepcopy(CHAT)
    chat["messages"][2]["content"] = ""
    assert findings("chat", chat) == [("empty-result", [CHAT_IDS[0]], "messages.2")]
    responses = copy.deepcopy(RESPONSES)
    responses["input"][2]["output"] = []
    assert findings("responses", responses) == [
        ("empty-result", ["call_YfwRsW8sUxDKipwyhWTzOXCA"], "input.2")
    ]


def test_results_flagged_as_errors_are_tool_failures_not_loop_errors():
    real = pairs("anthropic_roundtrip_tool_result_is_error.json")[1].request
    report = check_loop("messages", real)
    assert report.errors == []
    assert [(r.call_id, r.outcome) for r in report.results] == [
        ("toolu_01A9HHF5Ezy3oBrKmSgfASm9", "error")
    ]

    chat = copy.deepcopy(CHAT)
    chat["messages"][3]["content"] = json.dumps(
        {"ok": False, "error_code": "INVALID_TOOL_ARGUMENTS"}
    )
    assert [r.outcome for r in check_loop("chat", chat).results] == ["ok", "error"]


@pytest.mark.parametrize(
    ("content", "failed"),
    [
        ('{"error": "timeout"}', True),
        ('{"ok": false}', True),
        ('{"success": false}', True),
        ('{"is_error": true}', True),
        ('{"status": "failed"}', True),
        ('{"status": "error"}', True),
        ([{"type": "text", "text": '{"error":'}, {"type": "text", "text": ' "timeout"}'}], True),
        ([{"type": "text", "text": '{"error": {"code": 1}}'}], True),
        ('{"error": null, "value": 3}', False),
        ("Error: looks like prose", False),
        ('{"ok": true}', False),
        ("[1, 2]", False),
        ('{"unclosed": ', False),
        (None, False),
    ],
)
def test_what_counts_as_an_error_payload(content, failed):
    assert error_payload(content) is failed


def test_history_is_checked_but_only_the_new_part_is_reported():
    # The previous turn's results are re-sent with every request: counting
    # them again would multiply every number by the conversation's length.
    chat = copy.deepcopy(CHAT)
    chat["messages"][2]["content"] = ""  # an old empty result
    chat["messages"] += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_new", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_new", "content": '{"error": "down"}'},
    ]
    report = check_loop("chat", chat)
    assert report.errors == []
    assert [(r.call_id, r.outcome, r.where) for r in report.results] == [
        ("call_new", "error", "messages.5")
    ]


def test_junk_histories_do_not_raise():
    for request in (
        None,
        [],
        "x",
        {"messages": "x"},
        {"messages": [None, 1, {"role": "tool"}, {"role": "assistant", "tool_calls": [None]}]},
        {"input": [None, {"type": "function_call_output"}, {"type": 3}]},
    ):
        for api in ("chat", "messages", "responses"):
            check_loop(api, request)


def results(api, request, prior=None):
    return [(r.call_id, r.outcome, r.where) for r in check_loop(api, request, prior).results]


def call(call_id, **fields):
    return {"type": "function_call", "call_id": call_id, "name": "f", "arguments": "{}", **fields}


def output(call_id, text="ok"):
    return {"type": "function_call_output", "call_id": call_id, "output": text}


USER = {"role": "user", "content": "go on"}


def test_a_responses_turn_that_ends_in_calls_leaves_the_history_before_it_unreported():
    # An orphan before the newest model turn was reported when it was new.
    request = {"input": [USER, output("call_ghost"), call("call_a"), output("call_a", "{}")]}
    assert findings("responses", request) == []
    assert results("responses", request) == [("call_a", "ok", "input.3")]


def test_a_responses_turn_that_ends_in_an_assistant_message_starts_the_new_part():
    assistant = {"type": "message", "role": "assistant", "content": "done"}
    request = {"input": [USER, output("call_ghost"), assistant, USER]}
    assert findings("responses", request) == []
    untyped = {"role": "assistant", "content": "done"}
    request = {"input": [USER, output("call_ghost"), untyped, USER]}
    assert findings("responses", request) == []


def test_the_newest_model_turn_is_its_whole_run_back_to_the_first_item():
    request = {"input": [call("call_a"), call("call_b"), output("call_b")]}
    assert findings("responses", request) == [("unanswered-call", ["call_a"], "input.0")]
    calls = [call("call_a"), call("call_b")]
    request = {"input": [USER, output("call_ghost"), *calls, output("call_a"), output("call_b")]}
    assert findings("responses", request) == []


def test_with_previous_response_id_every_input_item_is_new():
    request = {
        "previous_response_id": "resp_1",
        "input": [output("call_ghost"), call("call_a"), output("call_a")],
    }
    assert findings("responses", request, {"resp_1": ["call_a"]}) == [
        ("orphan-result", ["call_ghost"], "input.0")
    ]


def test_a_call_id_reused_after_its_re_sent_copy_is_a_new_call_owed_its_own_result():
    request = {
        "previous_response_id": "resp_1",
        "input": [call("call_0"), output("call_0"), call("call_0")],
    }
    assert findings("responses", request, {"resp_1": ["call_0"]}) == [
        ("unanswered-call", ["call_0"], "input.2")
    ]


def test_a_previous_response_the_proxy_has_no_memory_of_proves_no_orphan():
    request = {"previous_response_id": "resp_1", "input": [output("call_a")]}
    assert findings("responses", request, None) == []
    assert results("responses", request, None) == [("call_a", "ok", "input.0")]


def test_a_server_side_conversation_proves_no_orphan():
    request = {"conversation": "conv_1", "input": [output("call_a")]}
    assert findings("responses", request) == []
    assert findings("responses", {"input": [output("call_a")]}) == [
        ("orphan-result", ["call_a"], "input.0")
    ]


def test_an_item_reference_of_either_shape_proves_no_orphan_and_an_item_with_an_id_is_no_reference():
    assert (
        findings(
            "responses", {"input": [{"type": "item_reference", "id": "fc_1"}, output("call_a")]}
        )
        == []
    )
    # Output items sent back as they came carry their own ids: they are in view.
    with_ids = [
        call("call_a", id="fc_1"),
        output("call_a"),
        {"id": "msg_1", "role": "assistant", "content": "done"},
        USER,
        output("call_ghost"),
    ]
    assert findings("responses", {"input": with_ids}) == [
        ("orphan-result", ["call_ghost"], "input.4")
    ]


def test_calls_the_provider_answers_itself_are_owed_nothing_and_their_results_are_no_orphans():
    hosted = {"type": "shell_call", "call_id": "sh_1", "environment": {"type": "container_auto"}}
    unknown = {"type": "future_tool_call", "call_id": "ft_1"}
    request = {
        "input": [
            USER,
            hosted,
            unknown,
            {"type": "shell_call_output", "call_id": "sh_1", "output": [{"stdout": "ok"}]},
            output("ft_1"),
        ]
    }
    assert findings("responses", request) == []


def test_an_mcp_approval_request_is_answered_by_its_approval_response():
    request = {
        "input": [
            USER,
            {"type": "mcp_approval_request", "id": "mcpr_1", "name": "deploy", "arguments": "{}"},
            {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": False},
        ]
    }
    assert findings("responses", request) == []
    assert results("responses", request) == [("mcpr_1", "ok", "input.2")]


def test_a_local_shell_output_answers_the_call_under_either_of_its_ids():
    request = {
        "input": [
            {"type": "local_shell_call", "call_id": "call_ls", "action": {}},
            {
                "type": "local_shell_call_output",
                "call_id": "lso_1",
                "id": "call_ls",
                "output": "ok",
            },
        ]
    }
    assert findings("responses", request) == []
    assert results("responses", request) == [("call_ls", "ok", "input.1")]


def test_an_output_without_a_call_id_is_passed_over_and_the_walk_goes_on():
    request = {
        "input": [call("call_a"), {"type": "function_call_output", "output": "x"}, output("call_a")]
    }
    assert findings("responses", request) == []
    assert results("responses", request) == [("call_a", "ok", "input.2")]


def test_a_responses_output_that_says_it_failed_is_a_tool_failure():
    request = {"input": [call("call_a"), output("call_a", '{"status": "error"}')]}
    assert results("responses", request) == [("call_a", "error", "input.1")]


def test_a_call_out_of_view_past_the_history_bound_does_not_judge_its_outputs(monkeypatch):
    from tooltap.core import loop

    monkeypatch.setattr(loop, "MAX_HISTORY", 3)
    # Seen, the call would make the second output a duplicate.
    report = check_loop(
        "responses", {"input": [call("call_a"), USER, output("call_a"), output("call_a")]}
    )
    assert report.errors == []
    assert report.unchecked == ["the 1 oldest of 4 input items were not checked (the last 3 were)"]


def test_a_chat_result_with_no_assistant_message_before_it_is_an_orphan():
    request = {"messages": [{"role": "tool", "tool_call_id": "call_a", "content": "x"}]}
    assert findings("chat", request) == [("orphan-result", ["call_a"], "messages.0")]


def test_a_chat_history_reports_nothing_before_its_newest_assistant_message():
    chat = copy.deepcopy(CHAT)
    chat["messages"].insert(0, {"role": "tool", "tool_call_id": "call_ghost", "content": "x"})
    chat["messages"][3]["content"] = ""  # an old empty result
    chat["messages"].append({"role": "assistant", "content": "12C and rain; AAPL at 231.40."})
    assert findings("chat", chat) == []
    assert results("chat", chat) == []
    first = [chat["messages"][0], chat["messages"][2], chat["messages"][4]]
    assert findings("chat", {"messages": first}) == [
        ("unanswered-call", [CHAT_IDS[0]], "messages.1")
    ]


def test_a_chat_result_without_an_id_is_passed_over_and_the_walk_goes_on():
    chat = copy.deepcopy(CHAT)
    chat["messages"].insert(2, {"role": "tool", "content": "no id"})
    assert findings("chat", chat) == []


def test_an_anthropic_history_reports_nothing_before_its_newest_assistant_turn():
    old = [
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": "x"}],
        },
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_a", "name": "f", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_a", "content": ""}],
        },
    ]
    assert findings("messages", {"messages": old}) == [
        ("empty-result", ["toolu_a"], "messages.2.content.0")
    ]
    request = {"messages": [*old, {"role": "assistant", "content": "done"}]}
    assert findings("messages", request) == []
    request = {
        "messages": [
            *old,
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_b", "name": "f", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_b", "content": "ok"}],
            },
        ]
    }
    assert findings("messages", request) == []
    assert results("messages", request) == [("toolu_b", "ok", "messages.4.content.0")]


def test_an_anthropic_result_with_no_assistant_turn_before_it_is_an_orphan():
    first = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": "x"}],
    }
    assert findings("messages", {"messages": [first]}) == [
        ("orphan-result", ["toolu_x"], "messages.0.content.0")
    ]


def test_a_server_tool_use_is_owed_no_result():
    request = {
        "messages": [
            USER,
            {
                "role": "assistant",
                "content": [{"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search"}],
            },
            USER,
        ]
    }
    assert findings("messages", request) == []


def test_a_user_message_without_results_after_a_role_change_does_not_split_them():
    request = copy.deepcopy(ANTHROPIC)
    request["messages"] += [
        {"role": "system", "content": "a mid-conversation system note"},
        {"role": "user", "content": [{"type": "text", "text": "and then?"}]},
    ]
    assert findings("messages", request) == []


@pytest.mark.parametrize(
    ("call_id", "given"),
    [
        ("call_Xb2", True),
        ("toolu_01A", True),
        ("", False),
        ("messages[3]", False),  # what a call with no id is named by where it sits
        ("contents[12]", False),
        ("x]", True),
        ("a[b]", True),
        ("messages[3] ", True),
        ("[3]", True),
    ],
)
def test_an_id_the_api_gave_is_told_from_a_placeholder(call_id, given):
    assert given_id(call_id) is given
    assert given_id(call_id) is (bool(call_id) and re.fullmatch(r"\w+\[\d+\]", call_id) is None)
