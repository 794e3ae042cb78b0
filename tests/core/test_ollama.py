"""Ollama's own API, read as Ollama documents it and its clients send it: its paths, its calls
(arguments an object, ids only from newer servers), no strict tools, `format` as the output
format, its NDJSON streams (typed or not, cut, with bad lines and error lines), and its loop by
id, name or position, reported only where it is certain."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tooltap.core import Exchange, StreamReader, inspect
from tooltap.core.dialects import detect_api, dialect
from tooltap.core.dialects.ollama import MAX_NODES, unheld
from tooltap.core.wire import check_loop

CHAT = "http://localhost:11434/api/chat"
GENERATE = "http://localhost:11434/api/generate"
NDJSON = "application/x-ndjson"
WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "units": {"type": "string", "enum": ["c", "f"]}},
    "required": ["city"],
}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}]
# The fields a streamed turn must share with the same turn unstreamed.
KEEP = ("api", "model", "state", "format_state", "calls", "output_types", "finish_reasons",
        "usage", "duplicates", "repairs", "loop_errors", "stream_errors")  # fmt: skip


def call(city: Any, call_id: str | None = None, index: int = 0, **extra: Any) -> dict:
    function = {"index": index, "name": "get_weather", "arguments": {"city": city}} | extra
    return {"function": function} | ({"id": call_id} if call_id else {})


def line(message: dict[str, Any] | None = None, done: bool = False, **top: Any) -> dict:
    body: dict[str, Any] = {"model": "qwen3:8b", "created_at": "2026-11-30T10:00:00.1Z"}
    if message is not None:
        body["message"] = {"role": "assistant", "content": ""} | message
    body |= {"done": done} | top
    if done:
        body |= {"done_reason": "stop", "prompt_eval_count": 169, "eval_count": 31}
    return body


def ask(**fields: Any) -> dict[str, Any]:
    return {"model": "qwen3:8b", "messages": [{"role": "user", "content": "Paris?"}]} | fields


def exchange(request: Any, body: bytes, content_type: str = NDJSON, url: str = CHAT,
             status: int = 200) -> Exchange:  # fmt: skip
    return Exchange(
        method="POST",
        url=url,
        request_body=json.dumps(request).encode(),
        status=status,
        response_headers={"content-type": content_type} if content_type else {},
        response_body=body,
    )


def ndjson(lines: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(item).encode() + b"\n" for item in lines)


STREAM = [
    line({"thinking": "The user wants "}),
    line({"thinking": "weather."}),
    line({"tool_calls": [call("Paris", "call_ab12cd34")]}),
    line({"tool_calls": [call("Rome", "call_q2m7x0ta", 1, arguments={"city": 7})]}),
    line({"content": "Checking"}),
    line({"content": " both."}),
    line({}, done=True),
]
WHOLE = line(
    {
        "content": "Checking both.",
        "thinking": "The user wants weather.",
        "tool_calls": [
            call("Paris", "call_ab12cd34"),
            call("Rome", "call_q2m7x0ta", 1, arguments={"city": 7}),
        ],
    },
    done=True,
)


def unstreamed() -> Any:
    return inspect(exchange(ask(tools=TOOLS, stream=False), json.dumps(WHOLE).encode(), "json"))


@pytest.mark.parametrize(
    ("method", "path", "api"),
    [
        ("POST", "/api/chat", "ollama"),
        ("POST", "/api/generate", "ollama"),
        ("POST", "/ollama/api/chat", "ollama"),  # Open WebUI's prefix
        ("POST", "/api/chat/", "ollama"),
        ("GET", "/api/chat", None),
        ("POST", "/api/tags", None),
        ("POST", "/api/embed", None),
        ("POST", "/v1/chat/completions", "chat"),  # its OpenAI-compatible API is Chat's
    ],
)
def test_the_paths_it_reads(method, path, api):
    assert detect_api(method, "http://localhost:11434" + path) == api


def test_a_streamed_turn_gives_the_verdict_the_same_turn_gives_unstreamed():
    streamed = inspect(exchange(ask(tools=TOOLS), ndjson(STREAM)))
    whole = unstreamed()
    assert (streamed.stream, streamed.reason, whole.stream) == (True, None, False)
    assert {k: getattr(streamed, k) for k in KEEP} == {k: getattr(whole, k) for k in KEEP}
    assert streamed.output_types == ["thinking", "text", "tool_calls"]
    assert (streamed.finish_reasons, streamed.usage) == (
        ["stop"],
        {"input_tokens": 169, "output_tokens": 31},
    )


@pytest.mark.parametrize(
    ("asked", "answered", "model"),
    [("qwen3:8b", "qwen3:8b-q4_K_M", "qwen3:8b-q4_K_M"), ("qwen3:8b", None, "qwen3:8b"),
     (None, None, None)],
)  # fmt: skip
def test_the_model_is_the_one_the_answer_names_else_the_one_asked_for(asked, answered, model):
    request = {"messages": ask()["messages"], "stream": False} | ({"model": asked} if asked else {})
    body = line({"content": "Hi"}, done=True)
    body = {k: v for k, v in body.items() if k != "model"} | (
        {"model": answered} if answered else {}
    )
    verdict = inspect(exchange(request, json.dumps(body).encode(), "application/json"))
    assert verdict.model == model


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_any_split_of_an_ndjson_stream_gives_the_same_turn(data):
    raw = ndjson(STREAM).replace(b"\n", b"\r\n", 2)  # a \r before the \n is whitespace
    cuts = sorted(data.draw(st.sets(st.integers(1, len(raw) - 1), max_size=16)))
    reader = StreamReader("ollama", framing="ndjson")
    for start, end in zip([0, *cuts], [*cuts, len(raw)], strict=True):
        reader.feed(raw[start:end])
    split = reader.close()
    whole = StreamReader("ollama", framing="ndjson")
    whole.feed(raw)
    assert split == whole.close()
    assert (split.complete, split.bad_events, split.events) == (True, 0, len(STREAM))
    assert split.response == WHOLE  # the answer the server sends when asked not to stream


def test_each_call_keeps_its_id_or_is_named_by_its_place_and_its_arguments_as_sent():
    calls = [
        call("Paris", "call_ab12cd34"),
        call("Rome"),  # an older server: no id, no index
        {"function": {"name": "get_weather", "arguments": '{"city": "Oslo"'}},  # a string, cut
        {"function": {"name": "get_weather"}},
        {"function": {"arguments": {}}},  # no name: no call
    ]
    body = json.dumps(line({"tool_calls": calls}, done=True)).encode()
    verdict = inspect(exchange(ask(tools=TOOLS, stream=False), body, "application/json"))
    assert [(c.call_id, c.arguments_raw) for c in verdict.calls] == [
        ("call_ab12cd34", '{"city":"Paris"}'),
        ("tool_calls[1]", '{"city":"Rome"}'),
        ("tool_calls[2]", '{"city": "Oslo"'),
        ("tool_calls[3]", ""),
    ]
    assert {c.type for c in verdict.calls} == {"function_call"}
    assert verdict.calls[2].parse_error.type == "JSONDecodeError"
    assert verdict.calls[3].parse_error.type == "MissingArguments"
    assert verdict.awaiting == []  # Ollama refuses no history: nothing is owed to it


def test_no_tool_is_strict_whatever_the_request_says_and_a_fan_out_voids_nothing():
    strict = [{"type": "function", "function": {"name": "get_weather", "strict": True,
                                                "parameters": WEATHER}}]  # fmt: skip
    fanout = inspect(exchange(ask(tools=strict), ndjson(STREAM)))
    assert fanout.state == "fanout-no-strict"
    assert "ask for it with format" in fanout.repairs[0]
    one = inspect(exchange(ask(tools=strict), ndjson([STREAM[2], STREAM[-1]])))
    assert one.state == "no-strict-declared"
    assert inspect(exchange(ask(), ndjson(STREAM[4:]))).state == "no-tools"


@pytest.mark.parametrize(
    ("declared", "state"),
    [
        ({"function": {"name": "get_weather", "parameters": WEATHER}}, "fanout-no-strict"),
        # Ollama's server renders every tool to the model whatever its type (template.go)
        ({"type": "tool", "function": {"name": "get_weather", "parameters": WEATHER}},
         "fanout-no-strict"),
        ({"type": "function", "function": {"name": " ", "parameters": WEATHER}}, "no-tools"),
        ({"type": "function", "function": {"parameters": WEATHER}}, "no-tools"),
    ],
)  # fmt: skip
def test_every_named_tool_is_declared_whatever_its_type(declared, state):
    verdict = inspect(exchange(ask(tools=[declared]), ndjson(STREAM)))
    assert verdict.state == state


def test_bad_arguments_are_answered_in_ollamas_terms():
    verdict = inspect(exchange(ask(tools=TOOLS), ndjson(STREAM)))
    assert verdict.calls[1].schema_errors[0].path == "$.city"
    assert verdict.repairs[-1] == (
        "answer call_q2m7x0ta with a tool message (tool_name set) saying what was wrong rather "
        "than dropping the call, and keep the raw arguments for the post-mortem: Ollama takes "
        "a history with a call left unanswered, and the model reads it as never run."
    )


@pytest.mark.parametrize(
    ("declared", "state"),
    [
        (None, "free-text"),
        ("", "free-text"),  # langchaingo sends "format": ""
        ("json", "no-schema"),
        ({"type": "object", "properties": {"age": {"type": "integer"}}}, "enforced"),
        ({}, "enforced"),
        ("yaml", "unknown-format"),  # Ollama refuses it: invalid format
        (True, "unknown-format"),
    ],
)
def test_format_is_the_output_format(declared, state):
    request = ask() | ({} if declared is None else {"format": declared})
    verdict = inspect(exchange(request, ndjson(STREAM[4:])))
    assert verdict.format_state == state


def test_a_format_ollama_refuses_is_named_as_it_was_sent():
    verdict = inspect(exchange(ask(format="yaml"), ndjson(STREAM[4:])))
    assert verdict.format_detail.startswith("Format type '\"yaml\"' is not one tooltap knows")


def test_a_schema_beside_tools_leaves_their_arguments_unheld_and_what_the_grammar_skips_is_said():
    schema = {
        "type": "object",
        "properties": {
            "price": {"type": "number", "minimum": 0},
            "count": {"type": "integer", "minimum": 1},
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
            "seen": {"type": "string", "format": "date-time"},
            "mail": {"type": ["string", "null"], "format": "email"},
            "ratio": {"type": ["number", "null"], "exclusiveMaximum": 1},
        },
        "not": {"required": ["x"]},
    }
    verdict = inspect(exchange(ask(tools=TOOLS, format=schema), ndjson(STREAM[4:])))
    assert verdict.format_state == "advisory-tools"
    assert verdict.repairs == [
        "validate tool arguments in your own handler: Ollama holds the format output to its "
        "schema, never a tool call's arguments (it has no strict tools).",
        "check these in your own code: the grammar Ollama samples the format under does not "
        "hold them: $.not, $.properties.price.minimum, $.properties.tags.uniqueItems, "
        "$.properties.mail.format, $.properties.ratio.exclusiveMaximum",
    ]
    alone = inspect(exchange(ask(format=WEATHER), ndjson(STREAM[4:])))
    assert (alone.format_state, alone.repairs) == ("enforced", [])
    json_mode = inspect(exchange(ask(format="json"), ndjson(STREAM[4:])))
    assert json_mode.repairs[0].startswith('give format a JSON schema rather than "json"')


def test_json_mode_and_a_schema_alone_are_answered_in_ollamas_terms():
    json_mode = inspect(exchange(ask(format="json"), ndjson(STREAM[4:])))
    assert json_mode.repairs == [
        'give format a JSON schema rather than "json": JSON mode holds the output to JSON, and '
        "to no shape."
    ]
    halves = inspect(
        exchange(ask(format={"type": "number", "multipleOf": 0.5}), ndjson(STREAM[4:]))
    )
    assert (halves.format_state, halves.repairs) == (
        "enforced",
        [
            "check these in your own code: the grammar Ollama samples the format under does not "
            "hold them: $.multipleOf"
        ],
    )


@pytest.mark.parametrize(("count", "more"), [(20, ""), (21, " (and 1 more)")])
def test_twenty_unheld_keywords_are_named_and_the_rest_counted(count, more):
    prices = {f"p{i}": {"type": "number", "minimum": 0} for i in range(count)}
    schema = {"type": "object", "properties": prices}
    verdict = inspect(exchange(ask(format=schema), ndjson(STREAM[4:])))
    named = ", ".join(f"$.properties.p{i}.minimum" for i in range(20))
    assert verdict.repairs == [
        "check these in your own code: the grammar Ollama samples the format under does not "
        f"hold them: {named}{more}"
    ]


def test_the_schema_walk_is_bounded_and_total():
    deep: Any = {"type": "string"}
    for _ in range(MAX_NODES + 100):
        deep = {"type": "array", "items": deep, "uniqueItems": True}
    assert len(unheld(deep)) == MAX_NODES  # one for each node it read
    assert unheld([1, {"not": 2}]) == [] and unheld("x") == []


def test_the_schema_walk_reads_every_place_a_schema_holds_one():
    schema = {
        "type": "object",
        "properties": {"flag": True, "n": {"type": "number", "maximum": 9}},  # true: any value
        "$defs": {"d": {"minProperties": 1}},
        "anyOf": [{"multipleOf": 2}],
        "prefixItems": [{"uniqueItems": True}],
        "items": {"type": "string", "format": "email"},
        "additionalProperties": {"not": {}},
    }
    assert unheld(schema) == [
        "$.properties.n.maximum",
        "$.$defs.d.minProperties",
        "$.anyOf[0].multipleOf",
        "$.prefixItems[0].uniqueItems",
        "$.items.format",
        "$.additionalProperties.not",
    ]


def test_generate_carries_no_tools_and_reads_its_text_and_format():
    request = {"model": "llama3.2", "prompt": "Why?", "format": "json", "tools": TOOLS}
    lines = [
        {"model": "llama3.2", "created_at": "t", "response": "{", "done": False},
        {"model": "llama3.2", "created_at": "t", "response": "}", "done": False},
        {
            "model": "llama3.2",
            "created_at": "t",
            "response": "",
            "done": True,
            "done_reason": "stop",
            "context": [1, 2],
            "eval_count": 2,
        },
    ]
    verdict = inspect(exchange(request, ndjson(lines), url=GENERATE))
    assert (verdict.state, verdict.format_state, verdict.output_types) == (
        "no-tools",
        "no-schema",
        ["text"],
    )
    assert verdict.usage == {"output_tokens": 2}
    # A model with a built-in parser may still call a tool: it is read, against no tool.
    called = {"model": "gpt-oss:20b", "response": "", "done": True,
              "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": 1}}}]}  # fmt: skip
    verdict = inspect(
        exchange(
            {"model": "gpt-oss:20b", "prompt": "x", "stream": False},
            json.dumps(called).encode(),
            "application/json",
            GENERATE,
        )
    )
    assert [(c.name, c.schema_errors) for c in verdict.calls] == [("get_weather", [])]
    assert verdict.state == "no-tools"


def test_a_generate_stream_adds_up_to_its_whole_answer_tool_calls_and_all():
    top = {"model": "gpt-oss:20b", "created_at": "t"}
    calls = [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]
    lines = [
        top | {"response": "", "thinking": "Weather.", "done": False},
        top | {"response": "", "tool_calls": calls, "done": False},
        top | {"response": "Checking", "done": False},
        top | {"response": " now.", "done": True, "done_reason": "stop", "eval_count": 9},
    ]
    reader = StreamReader("ollama", framing="ndjson")
    reader.feed(ndjson(lines))
    assert reader.close().response == top | {
        "response": "Checking now.",
        "thinking": "Weather.",
        "tool_calls": calls,
        "done": True,
        "done_reason": "stop",
        "eval_count": 9,
    }
    verdict = inspect(exchange({"model": "gpt-oss:20b", "prompt": "Paris?"}, ndjson(lines),
                               url=GENERATE))  # fmt: skip
    assert [(c.call_id, c.name) for c in verdict.calls] == [("tool_calls[0]", "get_weather")]


def test_a_stream_cut_short_keeps_what_came_whole_and_says_it_ended_early():
    raw = ndjson(STREAM)
    cut = raw[: raw.index(b'"content": "Checking"') + 5]  # inside a line
    verdict = inspect(exchange(ask(tools=TOOLS), cut))
    assert [c.call_id for c in verdict.calls] == ["call_ab12cd34", "call_q2m7x0ta"]
    assert verdict.reason == "the stream ended before its final event"
    assert verdict.stream_errors == []  # the half line was cut, not malformed
    assert verdict.finish_reasons == []  # the done_reason comes with the last line


def test_a_bad_line_is_a_malformed_event_and_the_rest_is_read():
    raw = (
        ndjson(STREAM[:3]) + b'{"model": "qwen3:8b", "message": nonsense}\n\n' + ndjson(STREAM[3:])
    )
    verdict = inspect(exchange(ask(tools=TOOLS), raw))
    assert [e.type for e in verdict.stream_errors] == ["malformed_event"]
    assert (
        verdict.stream_errors[0].message == "1 stream event(s) could not be read and were dropped"
    )
    assert (verdict.reason, len(verdict.calls)) == (
        "1 stream event(s) could not be read and were dropped",
        2,
    )
    latin = inspect(exchange(ask(), ndjson(STREAM[4:]).replace(b"both", b"b\xf6th")))
    assert latin.reason.endswith("read leniently")


def test_an_error_line_inside_a_stream_is_the_servers_error():
    raw = ndjson(STREAM[:5]) + b'{"error":"an error was encountered while running the model"}\n'
    verdict = inspect(exchange(ask(tools=TOOLS), raw))
    assert [(e.type, e.message) for e in verdict.stream_errors] == [
        ("", "an error was encountered while running the model")
    ]
    assert verdict.reason == "the stream ended before its final event"
    assert len(verdict.calls) == 2


@pytest.mark.parametrize(
    ("status", "outcome"),
    [(400, "inspected"), (404, "inspected"), (500, "upstream_error"), (502, "upstream_error")],
)
def test_an_error_before_the_stream_is_the_status_and_its_message(status, outcome):
    body = b'{"error":"registry.ollama.ai/library/gemma3:1b does not support tools"}'
    # Ollama types an error application/json; a stream's type is kept by some proxies.
    for content_type in ("application/json; charset=utf-8", NDJSON):
        verdict = inspect(exchange(ask(tools=TOOLS), body, content_type, status=status))
        assert verdict.outcome == outcome
        if outcome == "inspected":
            assert (verdict.rejected.status, verdict.rejected.message) == (
                status,
                "registry.ollama.ai/library/gemma3:1b does not support tools",
            )
        else:
            assert verdict.reason.endswith("does not support tools")


def test_ollama_coms_stream_typed_application_json_is_read_as_a_stream():
    verdict = inspect(exchange(ask(tools=TOOLS), ndjson(STREAM), "application/json"))
    assert (verdict.stream, verdict.reason, len(verdict.calls)) == (True, None, 2)
    untyped = inspect(exchange(ask(tools=TOOLS), ndjson(STREAM), ""))
    assert (untyped.stream, len(untyped.calls)) == (True, 2)
    garbage = inspect(exchange(ask(), b"<html>502 Bad Gateway</html>", "text/html"))
    assert (garbage.outcome, garbage.stream) == ("unparseable", False)
    assert garbage.reason.startswith("response body is not JSON")


# --- the loop ----------------------------------------------------------------------------------


def history(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"model": "qwen3:8b", "tools": TOOLS, "messages": [
        {"role": "user", "content": "Paris and Rome?"}, *messages]}  # fmt: skip


def assistant(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": list(calls)}


def tool(content: str = "21C", **naming: str) -> dict[str, Any]:
    return {"role": "tool", "content": content, **naming}


def loop(request: dict[str, Any]) -> list[tuple[str, list[str], str]]:
    return [(e.rule, e.ids, e.where) for e in check_loop("ollama", request).errors]


def test_results_answer_by_id_where_both_carry_one_else_by_name_else_by_position():
    by_id = history(
        assistant(call("Paris", "call_a"), call("Rome", "call_b", 1)),
        tool("24C", tool_call_id="call_b"),
        tool("21C", tool_call_id="call_a"),
    )
    report = check_loop("ollama", by_id)
    assert (report.errors, [r.call_id for r in report.results]) == ([], ["call_b", "call_a"])
    # ollama-python drops ids: a result names its call by tool_name, or not at all (LangChain).
    by_name = history(assistant(call("Paris"), call("Rome")), tool(tool_name="get_weather"),
                      tool(tool_name="get_weather"))  # fmt: skip
    by_place = history(assistant(call("Paris"), call("Rome")), tool(), tool())
    for request in (by_name, by_place):
        report = check_loop("ollama", request)
        assert (report.errors, [r.call_id for r in report.results]) == (
            [],
            ["get_weather", "get_weather"],
        )
    # An id that names no call of the turn still answers one by name or place: no alarm.
    mismatched = history(assistant(call("Paris", "call_a")), tool(tool_call_id="lc-uuid-1"))
    assert loop(mismatched) == []


def test_a_call_is_unanswered_only_when_other_results_of_its_turn_came():
    partly = history(assistant(call("Paris", "call_a"), call("Rome", "call_b", 1)),
                     tool(tool_name="get_weather"))  # fmt: skip
    assert loop(partly) == [("unanswered-call", ["call_b"], "messages.1")]
    then_user = history(assistant(call("Paris"), call("Rome")), tool(),
                        {"role": "user", "content": "and?"})  # fmt: skip
    assert loop(then_user) == [("unanswered-call", ["get_weather"], "messages.1")]
    # No result at all: the loop was stopped or the call declined, which Ollama takes.
    declined = history(assistant(call("Paris")), {"role": "user", "content": "never mind"})
    assert loop(declined) == []
    assert loop(history(assistant(call("Paris")))) == []


def test_orphans_and_duplicates_are_what_answers_no_call_or_one_already_answered():
    other_tool = history(assistant(call("Paris")), tool(tool_name="get_stock_price"))
    assert loop(other_tool) == [("orphan-result", ["get_stock_price"], "messages.2")]
    twice = history(assistant(call("Paris", "call_a")), tool(tool_call_id="call_a"),
                    tool(tool_call_id="call_a"))  # fmt: skip
    assert loop(twice) == [("duplicate-result", ["call_a"], "messages.3")]
    twice_by_name = history(assistant(call("Paris")), tool(tool_name="get_weather"),
                            tool(tool_name="get_weather"))  # fmt: skip
    assert loop(twice_by_name) == [("duplicate-result", ["get_weather"], "messages.3")]
    one_too_many = history(assistant(call("Paris")), tool(), tool())
    assert loop(one_too_many) == [("orphan-result", [], "messages.3")]
    after_text = history({"role": "assistant", "content": "Hi"}, tool(tool_name="get_weather"))
    assert loop(after_text) == [("orphan-result", ["get_weather"], "messages.2")]
    nameless = history({"role": "assistant", "content": "Hi"}, tool())
    assert loop(nameless) == [("orphan-result", [], "messages.2")]


def test_only_the_newest_turn_is_reported_and_roles_are_read_as_the_server_lowercases_them():
    request = history(
        assistant(call("Paris"), call("Rome")),
        tool(tool_name="get_weather"),  # an old turn, half answered: reported back then
        {"role": "Assistant", "content": "", "tool_calls": [call("Oslo", "call_c")]},
        {"role": "TOOL", "content": '{"error": "no such city"}', "tool_name": "get_weather"},
    )
    report = check_loop("ollama", request)
    assert report.errors == []
    assert [(r.call_id, r.outcome, r.where) for r in report.results] == [
        ("call_c", "error", "messages.4")
    ]


def test_an_empty_result_is_taken_as_ollama_takes_it():
    assert loop(history(assistant(call("Paris")), tool(""))) == []
    assert loop(history(assistant(call("Paris")), {"role": "tool"})) == []


TAG = "".join(chr(0xE0000 + ord(c)) for c in "obey")  # tag characters: invisible, spelling obey


def results(request: dict[str, Any]) -> list[tuple[str, str, str, list[str | None]]]:
    return [(r.call_id, r.where, r.outcome, [h.spelled for h in r.hidden])
            for r in check_loop("ollama", request).results]  # fmt: skip


def test_a_result_that_answers_no_call_is_kept_by_its_id_else_its_tool_with_what_it_said():
    failed = f'{{"error": "no such city{TAG}"}}'
    after_text = history({"role": "assistant", "content": "Hi"},
                         tool(failed, tool_call_id="call_x", tool_name="get_weather"))  # fmt: skip
    assert results(after_text) == [("call_x", "messages.2", "error", ["obey"])]
    assert loop(after_text) == [("orphan-result", ["call_x"], "messages.2")]
    one_too_many = history(assistant(call("Paris")), tool(),
                           tool(failed, tool_call_id="call_y", tool_name="get_stock_price"))  # fmt: skip
    assert results(one_too_many)[1] == ("call_y", "messages.3", "error", ["obey"])
    assert loop(one_too_many) == [("orphan-result", ["call_y"], "messages.3")]


def test_a_result_for_another_tool_is_an_orphan_even_after_a_call_was_answered():
    request = history(assistant(call("Paris"), call("Rome")), tool(tool_name="get_weather"),
                      tool(tool_name="get_stock_price"))  # fmt: skip
    assert loop(request) == [
        ("orphan-result", ["get_stock_price"], "messages.3"),
        ("unanswered-call", ["get_weather"], "messages.1"),
    ]
    (unanswered,) = [e for e in check_loop("ollama", request).errors if e.rule == "unanswered-call"]
    assert unanswered.repair.startswith(
        "answer every call with exactly one result carrying its tool_name,"
    )


def test_a_call_with_an_id_answered_twice_by_name_is_a_duplicate():
    # newer servers give calls ids, and ollama-python drops them from the results
    twice = history(assistant(call("Paris", "call_a")), tool(tool_name="get_weather"),
                    tool(tool_name="get_weather"))  # fmt: skip
    assert loop(twice) == [("duplicate-result", ["get_weather"], "messages.3")]


def test_a_call_with_neither_id_nor_name_is_named_by_its_place():
    request = history(assistant(call("Paris"), {"function": {"arguments": {}}}),
                      tool(tool_name="get_weather"))  # fmt: skip
    assert loop(request) == [("unanswered-call", ["messages.1.tool_calls.1"], "messages.1")]


def test_only_the_models_messages_make_calls():
    request = history({"role": "user", "content": "", "tool_calls": [call("Paris")]},
                      tool(tool_name="get_weather"))  # fmt: skip
    assert loop(request) == [("orphan-result", ["get_weather"], "messages.2")]


def test_the_instructions_are_the_system_text_of_either_path():
    generate = {"model": "llama3.2", "prompt": "Why?", "system": "Be brief."}
    assert dialect("ollama").instructions(generate) == "Be brief."
    chat = ask(messages=[{"role": "system", "content": "Be brief."},
                         {"role": "user", "content": "Hi"},
                         {"role": "system", "content": "Answer in French."}])  # fmt: skip
    assert dialect("ollama").instructions(chat) == "Be brief.\nAnswer in French."
