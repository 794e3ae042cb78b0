"""Tool-loop integrity, per dialect: real round trips pass, the same round trips broken fail."""

import copy
import json

import pytest
from support.captures import WIRE, pairs

from tooltap.core.loop import check_loop, error_payload

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
