"""The APIs as they are used now (WIRE.md section H): each shape that once gave a false finding.

Every case is a request the real API accepts (or a body it really sends), in
each dialect it applies to, streamed and not. Tool search, hosted tools,
compaction, background mode, tool_choice, Anthropic's own strict subset,
unreadable stream events and missing arguments.
"""

from __future__ import annotations

import copy
import json

import pytest
from support.captures import JSON, SSE, URLS, exchange_of, sse

from tooltap.addon.inspection.session import Session
from tooltap.core import Exchange, inspect
from tooltap.core.wire import check_loop

STREAMED = pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])

STRICT = {
    "type": "object",
    "properties": {"currency": {"type": "string"}},
    "required": ["currency"],
    "additionalProperties": False,
}


def rules(verdict):
    return [(e.rule, e.ids) for e in verdict.loop_errors]


def findings(api, request, prior=None):
    return [(e.rule, e.ids, e.where) for e in check_loop(api, request, prior).errors]


def fn(name, parameters=STRICT, strict=True, **extra):
    return {"type": "function", "name": name, "parameters": parameters, "strict": strict} | extra


def call(call_id, name, arguments='{"currency": "EUR"}', **extra):
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": "completed",
    } | extra


def response(output, tools=(), response_id="resp_1", **extra):
    return {
        "id": response_id,
        "object": "response",
        "status": "completed",
        "model": "gpt-5.4",
        "output": list(output),
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": list(tools),
        "text": {"format": {"type": "text"}},
    } | extra


def chat_reply(calls, content=None):
    message = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return {"id": "chatcmpl-1", "model": "gpt-4o", "choices": [{"index": 0, "message": message}]}


def chat_call(call_id, name, arguments='{"currency": "EUR"}'):
    function = {"name": name} | ({} if arguments is None else {"arguments": arguments})
    return {"id": call_id, "type": "function", "function": function}


def chat_tool(name, strict=True):
    return {"type": "function", "function": {"name": name, "strict": strict, "parameters": STRICT}}


def anthropic_reply(blocks):
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": blocks,
        "stop_reason": "tool_use",
    }


def tool_use(call_id, name="lookup", value="EUR"):
    return {"type": "tool_use", "id": call_id, "name": name, "input": {"currency": value}}


def anthropic_tool(name="lookup", **extra):
    return {"name": name, "input_schema": STRICT} | extra


# --- 1. Anthropic combines consecutive messages of the same role -------------


ONE_TURN_IN_TWO_ASSISTANT_MESSAGES = {
    "model": "claude-sonnet-4-5",
    "tools": [anthropic_tool()],
    "messages": [
        {"role": "user", "content": "Rates for EUR and GBP?"},
        {"role": "assistant", "content": [tool_use("toolu_A")]},
        {"role": "assistant", "content": [tool_use("toolu_B", value="GBP")]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_A", "content": "1.08"},
                {"type": "tool_result", "tool_use_id": "toolu_B", "content": "0.85"},
            ],
        },
    ],
}


@STREAMED
def test_calls_in_consecutive_assistant_messages_are_answered_by_the_next_user_turn(stream):
    reply = anthropic_reply([{"type": "text", "text": "EUR 1.08, GBP 0.85."}])
    verdict = inspect(exchange_of("messages", ONE_TURN_IN_TWO_ASSISTANT_MESSAGES, reply, stream))
    assert verdict.loop_errors == []
    assert [r.call_id for r in verdict.tool_results] == ["toolu_A", "toolu_B"]


def test_results_in_consecutive_user_messages_are_one_message_not_split():
    request = copy.deepcopy(ONE_TURN_IN_TWO_ASSISTANT_MESSAGES)
    results = request["messages"].pop()["content"]
    request["messages"] += [{"role": "user", "content": [block]} for block in results]
    assert findings("messages", request) == []


def test_results_split_by_a_message_of_another_role_are_still_found():
    request = copy.deepcopy(ONE_TURN_IN_TWO_ASSISTANT_MESSAGES)
    first, second = request["messages"].pop()["content"]
    request["messages"] += [
        {"role": "user", "content": [first]},
        {"role": "system", "content": "a mid-conversation system note"},
        {"role": "user", "content": [second]},
    ]
    assert findings("messages", request) == [
        ("split-results", ["toolu_A", "toolu_B"], "messages.3, messages.5")
    ]


def test_a_call_left_unanswered_across_merged_messages_is_still_found():
    request = copy.deepcopy(ONE_TURN_IN_TWO_ASSISTANT_MESSAGES)
    del request["messages"][-1]["content"][1]
    assert findings("messages", request) == [("unanswered-call", ["toolu_B"], "messages.2")]


# --- 2. Responses: client-executed tool search --------------------------------

SEARCH_TOOL = {"type": "tool_search", "execution": "client"}
SEARCH_CALL = {
    "type": "tool_search_call",
    "id": "tsc_1",
    "call_id": "search_1",
    "execution": "client",
    "arguments": {"queries": ["exchange rate"]},
    "status": "completed",
}
FOUND = {
    "type": "tool_search_output",
    "call_id": "search_1",
    "execution": "client",
    "tools": [fn("lookup_rate", defer_loading=True)],
}


@STREAMED
def test_a_client_tool_search_is_awaited(stream):
    reply = response([SEARCH_CALL], tools=[SEARCH_TOOL])
    verdict = inspect(exchange_of("responses", {"input": "rates?"}, reply, stream))
    assert verdict.awaiting == ["search_1"]


def test_a_server_tool_search_is_answered_by_the_server():
    server_call = SEARCH_CALL | {"execution": "server", "call_id": None}
    server_out = FOUND | {"execution": "server", "call_id": None}
    reply = response([server_call, server_out], tools=[{"type": "tool_search"}])
    assert inspect(exchange_of("responses", {"input": "rates?"}, reply)).awaiting == []


@pytest.mark.parametrize(
    "answer",
    [FOUND, {"type": "function_call_output", "call_id": "search_1", "output": "found one"}],
    ids=["tool_search_output", "function_call_output"],
)
def test_a_client_tool_search_answered_either_way_is_no_finding(answer):
    request = {
        "tools": [SEARCH_TOOL],
        "input": [{"role": "user", "content": "hi"}, SEARCH_CALL, answer],
    }
    assert findings("responses", request) == []


def test_a_client_tool_search_left_unanswered_is_an_unanswered_call():
    request = {"tools": [SEARCH_TOOL], "input": [{"role": "user", "content": "hi"}, SEARCH_CALL]}
    assert findings("responses", request) == [("unanswered-call", ["search_1"], "input.1")]


def test_a_tool_search_on_the_server_side_of_previous_response_id_is_checked_there():
    session = Session()
    session.inspect(exchange_of("responses", {"input": "rates?"}, response([SEARCH_CALL])))
    answered = {"previous_response_id": "resp_1", "input": [FOUND]}
    forgotten = {"previous_response_id": "resp_1", "input": [{"role": "user", "content": "?"}]}
    reply = response([], response_id="resp_2")
    assert session.inspect(exchange_of("responses", answered, reply)).loop_errors == []
    reply = response([], response_id="resp_3")
    assert rules(session.inspect(exchange_of("responses", forgotten, reply))) == [
        ("unanswered-call", ["search_1"])
    ]


@STREAMED
@pytest.mark.parametrize("delivery", ["tool_search_output", "additional_tools"])
def test_tools_delivered_in_the_input_are_declared_tools(delivery, stream):
    item = (
        FOUND
        if delivery == "tool_search_output"
        else {
            "type": "additional_tools",
            "role": "developer",
            "tools": [fn("lookup_rate")],
        }
    )
    history = [SEARCH_CALL, item] if delivery == "tool_search_output" else [item]
    request = {"tools": [SEARCH_TOOL], "input": [{"role": "user", "content": "rates?"}, *history]}
    calls = [call("call_1", "lookup_rate"), call("call_2", "lookup_rate", '{"currency": 7}')]
    # The echo lists only the tool_search tool: the loaded tool is known from the input.
    reply = response(calls, tools=[{"type": "tool_search", "execution": "client"}])
    verdict = inspect(exchange_of("responses", request, reply, stream))
    assert verdict.state == "strict-void"
    assert [[e.path for e in c.schema_errors] for c in verdict.calls] == [[], ["$.currency"]]


def test_items_the_client_appends_never_hide_an_unanswered_call_before_them():
    for appended in (
        {"type": "additional_tools", "role": "developer", "tools": [fn("other")]},
        FOUND,
        {"type": "configuration_update", "text": {"format": {"type": "text"}}},
    ):
        request = {
            "input": [
                {"role": "user", "content": "rates?"},
                call("call_1", "lookup_rate"),
                appended,
                {"role": "user", "content": "and now?"},
            ]
        }
        assert ("unanswered-call", ["call_1"], "input.1") in findings("responses", request)


# --- 3. Calls to tools loaded by search carry a namespace ---------------------


@STREAMED
def test_a_call_namespaced_with_its_own_name_is_validated_against_the_flat_tool(stream):
    bad = call("call_1", "lookup_rate", '{"currency": 7}', namespace="lookup_rate")
    reply = response([bad], tools=[fn("lookup_rate")])
    verdict = inspect(exchange_of("responses", {"input": "rate?"}, reply, stream))
    assert [e.path for e in verdict.calls[0].schema_errors] == ["$.currency"]


def test_a_namespace_that_matches_picks_that_namespaces_tool():
    as_integer = {"type": "object", "properties": {"currency": {"type": "integer"}}}
    crm = {"type": "namespace", "name": "crm", "tools": [fn("lookup_rate", as_integer)]}
    reply = response(
        [
            call("call_1", "lookup_rate", '{"currency": 7}', namespace="crm"),
            call("call_2", "lookup_rate", '{"currency": 7}', namespace="billing"),
        ],
        tools=[fn("lookup_rate"), crm],
    )
    verdict = inspect(exchange_of("responses", {"input": "rate?"}, reply))
    # crm's own schema for the first; no billing namespace, so the flat tool by name.
    assert [[e.path for e in c.schema_errors] for c in verdict.calls] == [[], ["$.currency"]]


# --- 4. Hosted tools answered in the same output -------------------------------

SHELL = {
    "type": "shell_call",
    "id": "sh_1",
    "call_id": "call_sh1",
    "action": {"commands": ["ls"]},
    "status": "completed",
}
SHELL_OUT = {
    "type": "shell_call_output",
    "id": "sho_1",
    "call_id": "call_sh1",
    "output": [{"stdout": "a.txt\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}],
    "status": "completed",
}


@STREAMED
def test_a_hosted_shell_call_answered_in_the_same_output_is_not_awaited(stream):
    reply = response(
        [SHELL, SHELL_OUT], tools=[{"type": "shell", "environment": {"type": "container_auto"}}]
    )
    session = Session()
    assert session.inspect(exchange_of("responses", {"input": "ls"}, reply, stream)).awaiting == []
    follow_up = {"previous_response_id": "resp_1", "input": [{"role": "user", "content": "thanks"}]}
    later = session.inspect(exchange_of("responses", follow_up, response([], response_id="resp_2")))
    assert later.loop_errors == []


def test_a_shell_call_in_a_container_is_never_awaited_and_a_local_one_is():
    hosted = SHELL | {"environment": {"type": "container_reference", "container_id": "cntr_1"}}
    local = SHELL | {"environment": {"type": "local"}}
    assert inspect(exchange_of("responses", {"input": "ls"}, response([hosted]))).awaiting == []
    assert inspect(exchange_of("responses", {"input": "ls"}, response([local]))).awaiting == [
        "call_sh1"
    ]


# --- 5. local_shell_call_output carries the call id in `id` -------------------


def test_a_local_shell_output_keyed_by_id_answers_its_call():
    request = {
        "input": [
            {"role": "user", "content": "ls"},
            {"type": "local_shell_call", "id": "lsh_1", "call_id": "call_L", "status": "completed",
             "action": {"type": "exec", "command": ["ls"], "env": {}}},
            {"type": "local_shell_call_output", "id": "call_L", "output": '{"stdout": "a"}'},
        ]
    }  # fmt: skip
    assert findings("responses", request) == []
    request["input"][2] = {
        "type": "local_shell_call_output",
        "call_id": "call_L",
        "id": "x",
        "output": "{}",
    }
    assert findings("responses", request) == []


# --- 6. Compaction folds earlier history into an opaque item -----------------


def test_an_output_after_a_compaction_item_is_not_an_orphan():
    compacted = {
        "input": [
            {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAA..."},
            {"type": "function_call_output", "call_id": "call_hidden", "output": "42"},
        ]
    }
    assert findings("responses", compacted) == []
    del compacted["input"][0]
    assert findings("responses", compacted) == [("orphan-result", ["call_hidden"], "input.0")]


# --- 7. Background mode ---------------------------------------------------------


def retrieval(body, status=200, stream=False, query=""):
    return Exchange(
        method="GET",
        url=f"{URLS['responses']}/resp_1{query}",
        request_body=b"",
        status=status,
        response_headers=SSE if stream else JSON,
        response_body=sse("responses", body) if stream else json.dumps(body).encode(),
    )


STRICT_FANOUT = [call("call_1", "lookup_rate"), call("call_2", "lookup_rate")]


def test_a_queued_background_response_is_not_a_turn_but_its_request_is_checked():
    request = {
        "background": True,
        "tools": [fn("lookup_rate")],
        "input": [call("call_0", "lookup_rate")],
    }
    verdict = inspect(exchange_of("responses", request, response([], status="queued")))
    assert (verdict.outcome, verdict.state, verdict.calls) == ("inspected", None, [])
    assert verdict.reason.startswith("the response is queued")
    assert rules(verdict) == [("unanswered-call", ["call_0"])]


@pytest.mark.parametrize(
    ("url", "api"),
    [
        ("https://api.openai.com/v1/responses/resp_1", "responses"),
        ("https://api.openai.com/v1/responses/resp_1?stream=true&starting_after=12", "responses"),
        ("https://res.openai.azure.com/openai/v1/responses/resp_1", "responses"),
        ("https://api.openai.com/v1/responses", None),  # the WebSocket upgrade
        ("https://api.openai.com/v1/responses/resp_1/input_items", None),
    ],
)
def test_reading_a_response_back_is_a_responses_exchange(url, api):
    from tooltap.core import detect_api

    assert detect_api("GET", url) == api


@STREAMED
def test_polling_counts_a_background_response_once_at_its_final_status(stream):
    session = Session()
    tools = [fn("lookup_rate")]
    polls = [
        retrieval(response([], tools, status="queued")),
        retrieval(response([], tools, status="in_progress")),
        retrieval(
            response(STRICT_FANOUT, tools), stream=stream, query="?stream=true" if stream else ""
        ),
        retrieval(response(STRICT_FANOUT, tools)),
    ]
    verdicts = [session.inspect(poll) for poll in polls]
    assert [v.state for v in verdicts] == [None, None, "strict-void", None]
    assert [len(v.calls) for v in verdicts] == [0, 0, 2, 0]
    assert "already counted" in verdicts[3].reason
    assert session.state.open_calls("resp_1") == ["call_1", "call_2"]


def test_a_background_stream_cut_before_its_final_status_is_resumable_not_a_turn():
    tools = [fn("lookup_rate")]
    wire = sse("responses", response(STRICT_FANOUT, tools))
    cut = wire[: wire.index(b"event: response.completed")]
    request = {"background": True, "stream": True, "tools": tools, "input": "rates?"}
    posted = inspect(
        Exchange(
            method="POST",
            url=URLS["responses"],
            request_body=json.dumps(request).encode(),
            status=200,
            response_headers=SSE,
            response_body=cut,
        )
    )
    assert (posted.state, posted.calls) == (None, [])
    resumed = inspect(
        Exchange(
            method="GET",
            url=f"{URLS['responses']}/resp_1?stream=true&starting_after=3",
            request_body=b"",
            status=200,
            response_headers=SSE,
            response_body=cut,
        )
    )
    assert resumed.state is None
    # Without background the cut stream is the turn, as before.
    request.pop("background")
    plain = inspect(
        Exchange(
            method="POST",
            url=URLS["responses"],
            request_body=json.dumps(request).encode(),
            status=200,
            response_headers=SSE,
            response_body=cut,
        )
    )
    assert (plain.state, plain.reason) == ("strict-void", "the stream ended before its final event")


def test_a_response_the_proxy_saw_created_is_not_counted_again_when_read_back():
    session = Session()
    tools = [fn("lookup_rate")]
    created = session.inspect(
        exchange_of("responses", {"input": "x"}, response(STRICT_FANOUT, tools))
    )
    read_back = session.inspect(retrieval(response(STRICT_FANOUT, tools)))
    assert (created.state, read_back.state) == ("strict-void", None)


# --- 8. tool_choice ----------------------------------------------------------


@STREAMED
def test_tool_choice_none_leaves_nothing_at_risk_in_each_dialect(stream):
    strict_pair = [call("call_1", "lookup_rate"), call("call_2", "lookup_rate")]
    cases = [
        (
            "responses",
            {"input": "x"},
            response(strict_pair, [fn("lookup_rate")], tool_choice="none"),
        ),
        (
            "chat",
            {"tool_choice": "none", "tools": [chat_tool("lookup_rate")], "messages": []},
            chat_reply([chat_call("call_1", "lookup_rate"), chat_call("call_2", "lookup_rate")]),
        ),
        (
            "messages",
            {
                "tool_choice": {"type": "none"},
                "tools": [anthropic_tool(strict=True)],
                "messages": [],
            },
            anthropic_reply([{"type": "text", "text": "no tools"}]),
        ),
    ]
    for api, request, reply in cases:
        verdict = inspect(exchange_of(api, request, reply, stream))
        assert verdict.state == "no-tools", api
        assert verdict.detail.startswith("tool_choice leaves none of the 1 declared tool(s)"), api


@STREAMED
def test_allowed_tools_narrow_a_fan_out_to_the_tools_that_could_be_called(stream):
    loose_pair = [call("call_1", "loose"), call("call_2", "loose")]
    responses_choice = {
        "type": "allowed_tools",
        "mode": "auto",
        "tools": [{"type": "function", "name": "loose"}],
    }
    tools = [fn("strict_one"), fn("loose", strict=False)]
    reply = response(loose_pair, tools, tool_choice=responses_choice)
    assert (
        inspect(exchange_of("responses", {"input": "x"}, reply, stream)).state == "fanout-no-strict"
    )
    chat_choice = {
        "type": "allowed_tools",
        "allowed_tools": {
            "mode": "auto",
            "tools": [{"type": "function", "function": {"name": "loose"}}],
        },
    }
    request = {
        "tool_choice": chat_choice,
        "tools": [chat_tool("strict_one"), chat_tool("loose", strict=False)],
        "messages": [],
    }
    reply = chat_reply([chat_call("call_1", "loose"), chat_call("call_2", "loose")])
    assert inspect(exchange_of("chat", request, reply, stream)).state == "fanout-no-strict"
    # Without the narrowing the same fan-out is strict-void.
    request.pop("tool_choice")
    assert inspect(exchange_of("chat", request, reply, stream)).state == "strict-void"


def test_the_legacy_function_call_none_leaves_no_function_callable():
    functions = [{"name": "lookup_rate", "strict": True, "parameters": STRICT}]
    reply = chat_reply([chat_call("call_1", "lookup_rate"), chat_call("call_2", "lookup_rate")])
    for function_call, state in (("none", "no-tools"), ({"name": "lookup_rate"}, "strict-void")):
        request = {"functions": functions, "function_call": function_call, "messages": []}
        assert inspect(exchange_of("chat", request, reply)).state == state


def test_a_forced_loose_tool_is_not_at_risk_for_a_strict_one_beside_it():
    tools = [fn("strict_one"), fn("loose", strict=False)]
    reply = response(
        [call("call_1", "loose")], tools, tool_choice={"type": "function", "name": "loose"}
    )
    assert inspect(exchange_of("responses", {"input": "x"}, reply)).state == "no-strict-declared"


# --- 9. Anthropic's strict subset is its own ---------------------------------

OPTIONAL_AND_ALLOF = {
    "type": "object",
    "properties": {
        "email": {"type": "string", "format": "email"},
        "note": {"allOf": [{"type": "string"}]},
        "count": {"type": "integer", "minimum": 1},
    },
    "required": ["email"],
}


def rejected_with(api, request):
    error = {"type": "error", "error": {"type": "invalid_request_error", "message": "bad schema"}}
    body = json.dumps(error).encode()
    return inspect(
        Exchange(
            method="POST",
            url=URLS[api],
            request_body=json.dumps(request).encode(),
            status=400,
            response_headers=JSON,
            response_body=body,
        )
    ).rejected


def test_an_anthropic_400_is_explained_by_anthropics_rules_not_openais():
    tool = {"name": "contact", "strict": True, "input_schema": OPTIONAL_AND_ALLOF}
    blockers = rejected_with("messages", {"tools": [tool], "messages": []}).blockers
    assert blockers == [
        "tool contact: $: needs additionalProperties: false",
        "tool contact: $.count: minimum are not in the subset; the SDK moves them into the description, where nothing enforces them",
    ]


def test_the_same_schema_under_openai_keeps_openais_rules():
    tool = {
        "type": "function",
        "function": {"name": "contact", "strict": True, "parameters": OPTIONAL_AND_ALLOF},
    }
    blockers = rejected_with("chat", {"tools": [tool], "messages": []}).blockers
    assert any("every property must be listed in required" in b for b in blockers)
    assert any("allOf are not supported in strict mode" in b for b in blockers)


@STREAMED
def test_anthropic_repair_lines_speak_anthropics_subset(stream):
    request = {
        "tools": [anthropic_tool(), {"name": "loose", "input_schema": OPTIONAL_AND_ALLOF}],
        "output_config": {"format": {"type": "json_schema", "schema": STRICT}},
        "messages": [],
    }
    reply = anthropic_reply([tool_use("toolu_1"), tool_use("toolu_2", "loose")])
    verdict = inspect(exchange_of("messages", request, reply, stream))
    assert verdict.format_state == "advisory-tools"
    text = "\n".join(verdict.repairs)
    assert "listed in required" not in text and "serialise" not in text
    assert "strict: true on tool loose needs these fixed first:" in text


# --- 10. Anthropic versioned tools accept strict -------------------------------


@STREAMED
def test_strict_on_a_versioned_anthropic_tool_is_read(stream):
    request = {"tools": [{"type": "bash_20250124", "name": "bash", "strict": True}], "messages": []}
    reply = anthropic_reply(
        [{"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "ls"}}]
    )
    assert inspect(exchange_of("messages", request, reply, stream)).state == "strict-serialised"


# --- 11. Bytes that are not UTF-8, and NULs, inside a stream event -------------


def test_an_event_with_invalid_utf8_or_a_nul_keeps_its_arguments_and_says_so():
    arguments = '{"note": "caf\\u00e9"}'
    reply = response([call("call_1", "note_it", arguments)], [fn("note_it", {"type": "object"})])
    wire = sse("responses", reply)
    broken = wire.replace(b"caf\\\\u00e9", b"caf\xe9")  # a Latin-1 byte where UTF-8 was due
    nul = wire.replace(b"caf\\\\u00e9", b"caf\x00")
    for body, kept in ((broken, '{"note": "caf\ufffd"}'), (nul, '{"note": "caf\x00"}')):
        verdict = inspect(
            Exchange(
                method="POST",
                url=URLS["responses"],
                request_body=b"{}",
                status=200,
                response_headers=SSE,
                response_body=body,
            )
        )
        assert verdict.calls[0].arguments_raw == kept
        assert [e.type for e in verdict.stream_errors] == ["malformed_event"]
        assert "read leniently" in verdict.reason


def test_arguments_in_an_event_that_cannot_be_read_are_unknown_not_empty():
    reply = chat_reply([chat_call("call_1", "lookup_rate")])
    wire = sse("chat", reply).split(b"\n\n")
    damaged = [part if b'"arguments"' not in part else part[:-3] for part in wire]
    body = b"\n\n".join(damaged)
    verdict = inspect(
        Exchange(
            method="POST",
            url=URLS["chat"],
            request_body=b"{}",
            status=200,
            response_headers=SSE,
            response_body=body,
        )
    )
    assert verdict.calls[0].arguments_raw == ""
    assert verdict.calls[0].parse_error.type == "StreamError"
    assert verdict.stream_errors[0].type == "malformed_event"


# --- 12. No arguments key at all ------------------------------------------------


@STREAMED
def test_a_call_without_an_arguments_key_says_the_key_was_missing(stream):
    reply = chat_reply([chat_call("toolu_vrtx_1", "find_content", arguments=None)])
    request = {"tools": [chat_tool("find_content", strict=False)], "messages": []}
    (found,) = inspect(exchange_of("chat", request, reply, stream)).calls
    assert (found.arguments_raw, found.parse_error.type) == ("", "MissingArguments")
    bare = {k: v for k, v in call("call_1", "lookup_rate").items() if k != "arguments"}
    (found,) = inspect(exchange_of("responses", {"input": "x"}, response([bare]), stream)).calls
    assert found.parse_error.type == "MissingArguments"


def test_an_empty_arguments_string_is_still_an_empty_document():
    reply = chat_reply([chat_call("call_1", "find_content", arguments="")])
    (found,) = inspect(exchange_of("chat", {"messages": []}, reply)).calls
    assert found.parse_error.message == "Input is a zero-length, empty document"
