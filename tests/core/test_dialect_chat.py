"""Chat Completions, read field by field: the turn, the stream reassembled, the loop's wording."""

import json

import pytest
from support.captures import text

from tooltap.core import Exchange, inspect
from tooltap.core.dialects import chat


def chunks(name):
    """The JSON chunks of a Chat SSE capture, in order, [DONE] left out."""
    return [
        json.loads(line[len("data: ") :])
        for line in text(name).splitlines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]


def assemble(*events, done=False):
    assembler = chat.Assembler()
    for event in events:
        assembler.event(event)
    if done:
        assembler.done_marker()
    return assembler


def delta(index=0, finish=None, **fields):
    return {"choices": [{"index": index, "delta": fields, "finish_reason": finish}]}


# --- read_turn ----------------------------------------------------------------


def turn(request=None, message=None, **response):
    if message is not None:
        response["choices"] = [{"index": 0, "message": message}]
    return chat.read_turn(request or {}, response)


def test_a_turn_reads_its_settings_from_the_request_and_its_ids_from_the_response():
    request = {
        "model": "gpt-4o",
        "parallel_tool_calls": False,
        "response_format": {"type": "json_object"},
    }
    read = turn(request, {"content": "{}"}, id="chatcmpl-1", model="gpt-4o-2024-08-06")
    assert read.api == "chat"
    assert read.model == "gpt-4o-2024-08-06"  # the response's, which names the snapshot
    assert read.response_id == "chatcmpl-1"
    assert read.parallel_tool_calls is False
    assert read.output_format == {"type": "json_object"}
    # A response without a model falls back to the request's; without either, none.
    assert turn(request, {}).model == "gpt-4o"
    assert turn({}, {}).model is None
    assert turn({}, {}).response_id is None


@pytest.mark.parametrize("value, read", [(True, True), (False, False), (None, None), ("no", None)])
def test_parallel_tool_calls_is_read_only_as_a_boolean(value, read):
    request = {} if value is None else {"parallel_tool_calls": value}
    assert turn(request, {}).parallel_tool_calls is read


def choice(index, call_id):
    """A choice whose one call is named after it, so the choice read shows in the calls."""
    made = {"message": {"tool_calls": [{"id": call_id, "function": {"name": "f"}}]}}
    return made if index is None else made | {"index": index}


@pytest.mark.parametrize(
    "choices, read",
    [
        # n > 1 gives alternatives: choice 0 is read, wherever it sits in the list.
        ([choice(1, "b"), choice(0, "a")], ["a"]),
        ([choice(0, "a"), choice(1, "b")], ["a"]),
        # A choice without an index is choice 0.
        ([choice(1, "b"), choice(None, "a")], ["a"]),
        # No choice 0 at all: the first one.
        ([choice(2, "c"), choice(3, "d")], ["c"]),
        (["junk", choice(3, "d")], ["d"]),
        ([], []),
    ],
)
def test_choice_zero_is_the_one_read(choices, read):
    assert [c.call_id for c in chat.read_turn({}, {"choices": choices}).calls] == read


def test_function_custom_and_legacy_calls_are_read_with_their_kinds():
    message = {
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": " f ", "arguments": "{}"}},
            # A compatible server that leaves type out still means a function call.
            {"id": "call_2", "function": {"name": "g", "arguments": '{"a":1}'}},
            {"id": "call_3", "type": "custom", "custom": {"name": "sql", "input": "SELECT 1"}},
            # Nameless calls cannot be matched to a tool and are left out.
            {"id": "call_4", "type": "function", "function": {"name": " ", "arguments": "{}"}},
            {"id": "call_5", "type": "custom", "custom": {"input": "x"}},
        ],
    }
    read = turn({}, message)
    assert [(c.call_id, c.name, c.type, c.arguments_raw) for c in read.calls] == [
        ("call_1", "f", "function_call", "{}"),
        ("call_2", "g", "function_call", '{"a":1}'),
        ("call_3", "sql", "custom_tool_call", "SELECT 1"),
    ]
    assert read.awaiting == ["call_1", "call_2", "call_3"]
    assert read.output_types == ["tool_calls"]


def test_a_custom_call_without_input_is_noted_as_missing():
    read = turn({}, {"tool_calls": [{"id": "c", "type": "custom", "custom": {"name": "sql"}}]})
    assert read.calls[0].arguments_missing is True
    assert read.calls[0].arguments_raw == ""


def test_the_legacy_function_call_has_no_id_and_awaits_nothing():
    message = {"function_call": {"name": " f ", "arguments": '{"x":1}'}}
    read = turn({}, message)
    assert [(c.call_id, c.name, c.type, c.arguments_raw) for c in read.calls] == [
        ("", "f", "function_call", '{"x":1}')
    ]
    # A legacy call is answered by a role "function" message, which names no id.
    assert read.awaiting == []


@pytest.mark.parametrize(
    "message, types",
    [
        ({"content": "hi"}, ["text"]),
        ({"content": None, "refusal": "I can't help with that."}, ["refusal"]),
        ({"content": "", "refusal": None, "tool_calls": []}, []),
        (
            {
                "content": "a",
                "refusal": "b",
                "tool_calls": [{"id": "c", "function": {"name": "f"}}],
                "function_call": {"name": "g"},
            },
            ["text", "refusal", "tool_calls", "function_call"],
        ),
    ],
)
def test_output_types_name_what_the_message_holds(message, types):
    assert turn({}, message).output_types == types


def test_tools_function_custom_and_legacy_functions():
    request = {
        "tools": [
            {
                "type": "function",
                "function": {"name": "f", "strict": True, "parameters": {"type": "object"}},
            },
            # No type: read as a function tool.
            {"function": {"name": "g", "parameters": {"type": "string"}}},
            # A custom tool takes free text: no strict, no JSON Schema, whatever it carries.
            {
                "type": "custom",
                "custom": {"name": "sql", "strict": True, "parameters": {"type": "object"}},
            },
            {"type": "web_search", "web_search": {"name": "search"}},  # not a client tool
            {"type": "function", "function": {"name": "  "}},
        ],
        "functions": [
            {"name": " old ", "strict": False, "parameters": {"type": "object", "properties": {}}},
            {"name": ""},
        ],
    }
    assert [(t.name, t.type, t.strict, t.parameters) for t in turn(request, {}).tools] == [
        ("f", "function", True, {"type": "object"}),
        ("g", "function", None, {"type": "string"}),
        ("sql", "custom", None, None),
        ("old", "function", False, {"type": "object", "properties": {}}),
    ]


@pytest.mark.parametrize(
    "request_, names",
    [
        ({}, None),
        ({"tool_choice": "none"}, []),
        ({"tool_choice": {"type": "function", "function": {"name": "f"}}}, ["f"]),
        # The legacy function_call: "none", or {"name"} to force one.
        ({"function_call": "none"}, []),
        ({"function_call": "auto"}, None),
        ({"function_call": {"name": "f"}}, ["f"]),
        # tool_choice, when both are sent, is the one that counts.
        ({"tool_choice": "auto", "function_call": {"name": "f"}}, None),
        ({"tool_choice": "none", "function_call": {"name": "f"}}, []),
    ],
)
def test_tool_choice_and_the_legacy_function_call_narrow_the_callable_tools(request_, names):
    assert turn(request_, {}).callable_names == names


# --- finish_reasons -------------------------------------------------------------


def test_finish_reasons_are_each_choices_own():
    response = {
        "choices": [
            {"index": 0, "finish_reason": "tool_calls"},
            {"index": 1, "finish_reason": None},
            {"index": 2, "finish_reason": "length"},
            "junk",
        ]
    }
    assert chat.finish_reasons(response) == ["tool_calls", "length"]
    assert chat.finish_reasons({}) == []


# --- Assembler --------------------------------------------------------------------


def test_a_real_stream_assembles_into_the_unstreamed_response():
    assembler = assemble(*chunks("chat_stream_single_tool_call.sse"), done=True)
    assert assembler.complete
    assert assembler.result() == {
        "object": "chat.completion",
        "id": "chatcmpl-ABfwERreu9s99xXsVuOWtIB2UOx62",
        "model": "gpt-4o-2024-08-06",
        "created": 1727346182,
        "system_fingerprint": "fp_143bb8492c",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,  # a tool-call-only message has content null
                    "tool_calls": [
                        {
                            "id": "call_4XzlGBLtUe9dy3GVNV4jhq7h",
                            "type": "function",
                            "function": {
                                "name": "get_weather",
                                "arguments": '{"city":"New York City"}',
                            },
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {
            "prompt_tokens": 44,
            "completion_tokens": 16,
            "total_tokens": 60,
            "completion_tokens_details": {"reasoning_tokens": 0},
        },
    }


def test_text_and_refusal_pieces_are_joined_and_choices_kept_apart():
    assembler = assemble(
        {"id": "chatcmpl-1", "created": 1, "model": "m", "system_fingerprint": "fp"},
        delta(0, role="assistant", content="Hel"),
        delta(1, refusal="I can"),
        delta(0, content="lo"),
        delta(1, refusal="'t."),
        delta(0, finish="stop"),
        delta(1, finish="stop"),
    )
    # No usage chunk: no usage key, as an unstreamed response without usage.
    assert assembler.result() == {
        "object": "chat.completion",
        "id": "chatcmpl-1",
        "created": 1,
        "model": "m",
        "system_fingerprint": "fp",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Hello"},
                "finish_reason": "stop",
            },
            {
                "index": 1,
                # No role delta: the assistant's; no content delta: null.
                "message": {"role": "assistant", "content": None, "refusal": "I can't."},
                "finish_reason": "stop",
            },
        ],
    }


def test_the_head_keeps_the_first_non_empty_values():
    # Azure's leading chunk has empty id and model (WIRE.md D): the later ones count.
    assembler = assemble(
        {"id": "", "model": "", "created": 0, "choices": []},
        {"id": "chatcmpl-2", "model": "gpt-4o", "created": 5, "system_fingerprint": "fp_a"},
        {"id": "chatcmpl-3", "model": "other", "created": 6, "system_fingerprint": "fp_b"},
    )
    result = assembler.result()
    assert (result["id"], result["model"], result["created"], result["system_fingerprint"]) == (
        "chatcmpl-2",
        "gpt-4o",
        5,
        "fp_a",
    )


def test_the_role_is_the_one_the_stream_sent():
    result = assemble(delta(role="developer", content="x")).result()
    assert result["choices"][0]["message"]["role"] == "developer"


def test_fragments_accumulate_by_index_keeping_the_first_id_type_and_name():
    call = {"index": 0, "function": {}}
    assembler = assemble(
        delta(
            tool_calls=[{"index": 0, "id": "call_a", "type": "function", "function": {"name": "f"}}]
        ),
        # vLLM-style: a fresh id (and here a name) on later fragments; the first ones stand.
        delta(
            tool_calls=[
                call
                | {"id": "call_b", "type": "other", "function": {"name": "g", "arguments": '{"x"'}}
            ]
        ),
        delta(tool_calls=[call | {"function": {"arguments": ":1}"}}]),
    )
    assert assembler.result()["choices"][0]["message"]["tool_calls"] == [
        {"id": "call_a", "type": "function", "function": {"name": "f", "arguments": '{"x":1}'}}
    ]


def test_a_call_with_no_id_type_name_or_arguments_reads_as_empty_strings():
    assembler = assemble(delta(tool_calls=[{"index": 0}]))
    # No arguments fragment: the key is left out (missing, not empty).
    assert assembler.result()["choices"][0]["message"]["tool_calls"] == [
        {"id": "", "type": "function", "function": {"name": ""}}
    ]


def test_the_type_a_fragment_names_is_kept():
    assembler = assemble(delta(tool_calls=[{"index": 0, "id": "c", "type": "custom"}]))
    assert assembler.result()["choices"][0]["message"]["tool_calls"][0]["type"] == "custom"


def test_fragments_without_an_index_are_each_a_new_call_and_junk_is_skipped():
    assembler = assemble(
        delta(
            tool_calls=[
                "junk",
                {"id": "call_1", "function": {"name": "f", "arguments": "{}"}},
                7,
                {"id": "call_2", "function": {"name": "g", "arguments": "[]"}},
            ]
        )
    )
    calls = assembler.result()["choices"][0]["message"]["tool_calls"]
    assert [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in calls] == [
        ("call_1", "f", "{}"),
        ("call_2", "g", "[]"),
    ]


@pytest.mark.parametrize(
    "events, done, complete",
    [
        ([], False, False),
        ([], True, True),  # [DONE] ends the stream, whatever came before
        ([delta(content="x")], True, True),
        ([delta(content="x")], False, False),
        # No [DONE] (HF router, Perplexity): every choice finished is a whole turn.
        ([delta(0, finish="stop"), delta(1, content="x")], False, False),
        ([delta(0, finish="stop"), delta(1, finish="length")], False, True),
    ],
)
def test_complete(events, done, complete):
    assert assemble(*events, done=done).complete is complete


def test_an_error_chunk_is_kept_and_read_no_further():
    assembler = assemble({"error": {"type": "server_error", "message": "boom"}, "id": "x"})
    assert [(e.type, e.message) for e in assembler.errors] == [("server_error", "boom")]
    assert "id" not in assembler.result()


# --- check_loop -------------------------------------------------------------------


def test_the_loops_repairs_name_chats_id_field():
    request = {
        "messages": [
            {"role": "assistant", "tool_calls": [{"id": "call_1"}]},
            {"role": "user", "content": "hi"},
        ]
    }
    (error,) = chat.check_loop(request).errors
    assert error.rule == "unanswered-call"
    assert error.repair == (
        "answer every call with exactly one result carrying its tool_call_id, in the next request; "
        "a tool that failed still gets a result describing the failure, or the API rejects the "
        "request."
    )


# --- a provider that holds schemas, strict or not (xAI) -------------------------------------


def exchange(model, status=200, calls=2, answered_by=None, fingerprint=None, **strict):
    """A Chat exchange declaring a tool and a json_schema format without strict (unless given),
    whose response makes `calls` calls of the tool."""
    request = {
        "model": model,
        "messages": [{"role": "user", "content": "date, then pwd"}],
        "tools": [{"type": "function", "function": {"name": "system", **strict, "parameters": {
            "type": "object", "properties": {"command": {"type": "string"}}}}}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "Out", "schema": {
            "type": "object", "properties": {"answer": {"type": "string"}}}}},
    }  # fmt: skip
    made = [{"id": f"call_{i}", "type": "function",
             "function": {"name": "system", "arguments": '{"command":"date"}'}}
            for i in range(calls)]  # fmt: skip
    response = (
        {"model": answered_by or model, "system_fingerprint": fingerprint, "choices": [{
            "index": 0, "message": {"role": "assistant", "tool_calls": made},
            "finish_reason": "tool_calls"}]}
        if status == 200
        else {"error": {"message": "Incorrect API key provided", "type": "invalid_request"}}
    )  # fmt: skip
    return Exchange(
        method="POST",
        url="https://api.x.ai/v1/chat/completions",
        request_body=json.dumps(request).encode(),
        status=status,
        response_headers={"content-type": "application/json"},
        response_body=json.dumps(response).encode(),
    )


def test_grok_holds_every_call_and_a_json_schema_format_strict_or_not():
    held = inspect(exchange("grok-4-0709"))
    assert (held.state, held.format_state) == ("strict-serialised", "enforced")
    assert "strict or not" in held.detail and "strict or not" in held.format_detail
    assert not [r for r in held.repairs if "strict" in r]
    # Through a gateway, named as OpenRouter names it; the response's model is the one read.
    assert inspect(exchange("x-ai/grok-4")).format_state == "enforced"
    assert inspect(exchange("grok", answered_by="grok-3-mini")).state == "strict-serialised"
    # Any other model on Chat Completions: strict absent is no guarantee, as OpenAI's API says.
    loose = inspect(exchange("gpt-4o"))
    assert (loose.state, loose.format_state) == ("fanout-no-strict", "advisory-schema")
    assert inspect(exchange("grok-4-0709", calls=1)).state == "strict-serialised"


def test_a_refusal_from_grok_is_not_explained_by_openais_strict_subset():
    for strict in ({}, {"strict": True}):
        refused = inspect(exchange("grok-4-0709", status=400, **strict))
        assert refused.rejected is not None and refused.rejected.blockers == []
    # OpenAI's own refusal of the same strict tool is explained by OpenAI's subset.
    blockers = inspect(exchange("gpt-4o", status=400, strict=True)).rejected.blockers
    assert blockers[0] == "tool system: $: needs additionalProperties: false"


@pytest.mark.parametrize("fingerprint", ["fp_ollama", "b5379-360a9c98"])
def test_ollama_and_llama_cpp_hold_a_json_schema_format_by_grammar_strict_or_not(fingerprint):
    # Ollama's OpenAI-compatible API and llama.cpp's server, named by their fingerprint, build a
    # grammar from the format's schema; their tool calls are held to nothing.
    fanout = inspect(exchange("qwen3", fingerprint=fingerprint))
    # Beside its loose tools the format is strict and the calls are not, as the server runs them.
    assert (fanout.state, fanout.format_state) == ("fanout-no-strict", "advisory-tools")
    alone = exchange("qwen3", fingerprint=fingerprint, calls=0)
    request = json.loads(alone.request_body)
    del request["tools"]
    held = inspect(alone.model_copy(update={"request_body": json.dumps(request).encode()}))
    assert (held.state, held.format_state) == ("no-tools", "enforced")
    assert held.format_detail.startswith("the server holds a json_schema format to its schema")
    for other in (None, "fp_44709d6fcb", "b5379"):
        assert inspect(exchange("qwen3", fingerprint=other)).format_state == "advisory-schema"


def test_a_stream_names_its_server_by_the_fingerprint_its_chunks_carry():
    assembler = assemble(
        {"id": "chatcmpl-1", "model": "qwen3", "system_fingerprint": "fp_ollama", **delta(
            role="assistant", content='{"answer": "Paris"}')},
        delta(finish="stop"),
        done=True,
    )  # fmt: skip
    request = {"response_format": {"type": "json_schema", "json_schema": {"name": "Out",
               "schema": {"type": "object"}}}}  # fmt: skip
    assert chat.read_turn(request, assembler.result()).format_held
    assert not chat.read_turn(request, {}).format_held
