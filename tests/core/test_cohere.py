"""Cohere's v2 chat, read as Cohere documents it and its clients send it: its path, its calls
(arguments a JSON string, kept raw), `strict_tools` with no parallel rule, `tool_choice`,
`response_format` with a schema under either name, its usage, its SSE stream (a single call per
`tool-call-start`, a 200 that ends in `ERROR`), its loop by `tool_call_id`, reported only where
it is certain, and its 4xx in its own words."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.cohere_stream import events_of, sse

from tooltap.core import Exchange, StreamReader, inspect
from tooltap.core.dialects import detect_api
from tooltap.core.dialects.cohere import MAX_NODES, _objects, cohere_blockers
from tooltap.core.unread import unread_reason
from tooltap.core.wire import check_loop

URL = "https://api.cohere.com/v2/chat"
MODEL = "command-a-03-2025"
SSE = "text/event-stream"
WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "units": {"type": "string", "enum": ["c", "f"]}},
    "required": ["city"],
}
STOCK = {"type": "object", "properties": {"ticker": {"type": "string"}}, "required": ["ticker"]}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather now.",
                                      "parameters": WEATHER}},
    {"type": "function", "function": {"name": "get_stock", "parameters": STOCK}},
]  # fmt: skip
PARIS = ("get_weather_a1b2c3d4e5f6", "get_weather", '{"city":"Paris","units":"c"}')
ROME = ("get_weather_q2m7x0ta9k1z", "get_weather", '{"city": "Rome", "units": "kelvin"}')
USAGE = {"billed_units": {"input_tokens": 31, "output_tokens": 24},
         "tokens": {"input_tokens": 944, "output_tokens": 58}, "cached_tokens": 480}  # fmt: skip
# The fields a streamed turn must share with the same turn unstreamed.
KEEP = ("api", "model", "response_id", "state", "format_state", "calls", "output_types",
        "finish_reasons", "usage", "duplicates", "repairs", "loop_errors", "awaiting")  # fmt: skip


def ask(**fields: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": "Paris and Rome?"}]} | fields


def tool_call(call: tuple[str, str, str]) -> dict[str, Any]:
    call_id, name, arguments = call
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def answer(*calls: tuple[str, str, str], finish: str = "TOOL_CALL", **message: Any) -> dict:
    said: dict[str, Any] = {"role": "assistant"} | message
    if calls:
        said |= {"tool_plan": "I will look both up.", "tool_calls": [tool_call(c) for c in calls]}
    return {"id": "40a2cb77-4eda-43bc-8086-e69899dc5b24", "message": said,
            "finish_reason": finish, "usage": USAGE}  # fmt: skip


def exchange(request: Any, body: bytes | dict, content_type: str = "application/json",
             status: int = 200, url: str = URL) -> Exchange:  # fmt: skip
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return Exchange(
        method="POST",
        url=url,
        request_body=json.dumps(request).encode(),
        status=status,
        response_headers={"content-type": content_type},
        response_body=raw,
    )


def calls_of(verdict: Any) -> list[tuple[str, str, str]]:
    return [(c.call_id, c.name, c.arguments_raw) for c in verdict.calls]


# --- where it is read --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "url", "api"),
    [
        ("POST", "https://api.cohere.com/v2/chat", "cohere"),
        ("POST", "https://api.cohere.ai/v2/chat", "cohere"),
        ("POST", "http://127.0.0.1:8000/cohere/v2/chat", "cohere"),  # behind a path prefix
        ("GET", "https://api.cohere.com/v2/chat", None),
        ("POST", "https://api.cohere.com/v1/chat", None),  # v1: another body, not read
        ("POST", "https://api.cohere.com/v2/embed", None),
    ],
)
def test_post_v2_chat_is_read_as_cohere_and_nothing_else_of_coheres(method, url, api):
    assert detect_api(method, url) == api


@pytest.mark.parametrize(
    ("path", "said"),
    [
        ("/v1/chat", "Cohere's v1 chat (/v1/chat): it calls tools, and tooltap does not read it"),
        ("/v2/embed", "Cohere's embed (embeddings): it makes no tool calls, and is not read"),
        ("/v1/rerank", "Cohere's rerank: it makes no tool calls, and is not read"),
        ("/v1/embeddings", "embeddings (OpenAI's API and those compatible with it): it makes no "
                           "tool calls, and is not read"),
        ("/v1/threads/thread_abc/runs", "OpenAI's Assistants API (threads and runs): it calls "
                                        "tools, and tooltap does not read it"),
        ("/v1/chat/completions", "stored Chat Completions, read back: the turns it holds are not "
                                 "read here"),  # a GET: a POST there is Chat's
        ("/v1/completions", "legacy text completions (/completions): it makes no tool calls, "
                            "and is not read"),
        ("/v1/models", "a model list or a model's details: it makes no tool calls, and is not read"),
        ("/v1/something/new", "not an endpoint tooltap reads"),
    ],
)  # fmt: skip
def test_a_path_no_dialect_reads_is_said_as_what_it_is_and_never_as_no_tool_calls_unknown(
    path, said
):
    assert unread_reason(path).startswith(said)


def test_an_exchange_on_coheres_v1_chat_is_not_read_and_says_it_is_a_tool_calling_api():
    verdict = inspect(exchange({"message": "hi", "chat_history": []}, {"text": "hi"},
                               url="https://api.cohere.com/v1/chat"))  # fmt: skip
    assert (verdict.api, verdict.outcome) == (None, "not_read")
    assert "it calls tools, and tooltap does not read it" in (verdict.reason or "")
    assert "/v2/chat, is read" in (verdict.reason or "")


# --- the turn ----------------------------------------------------------------------------------


def test_a_turns_calls_keep_their_arguments_raw_and_are_checked_against_their_schema():
    verdict = inspect(exchange(ask(tools=TOOLS), answer(PARIS, ROME)))
    assert calls_of(verdict) == [PARIS, ROME]  # byte for byte, spaces and all
    assert [e.message for e in verdict.calls[1].schema_errors] == [
        '"kelvin" is not one of "c" or "f"'
    ]
    assert verdict.awaiting == [PARIS[0], ROME[0]]
    assert verdict.repairs[-1] == (
        f"answer {ROME[0]} with a tool message (its tool_call_id set) saying what was wrong "
        "rather than dropping the call, and keep the raw arguments for the post-mortem: "
        "Cohere's tool use sends one tool message for each call."
    )


def test_a_response_names_no_model_so_the_turns_model_is_the_one_asked_for():
    verdict = inspect(exchange(ask(), answer(finish="COMPLETE", content=[
        {"type": "text", "text": "Hello."}])))  # fmt: skip
    assert (verdict.model, verdict.request_model) == (MODEL, MODEL)
    assert verdict.response_id == "40a2cb77-4eda-43bc-8086-e69899dc5b24"
    assert verdict.finish_reasons == ["COMPLETE"]


def test_strict_tools_makes_every_tool_strict_and_several_calls_void_nothing():
    verdict = inspect(exchange(ask(tools=TOOLS, strict_tools=True), answer(PARIS, ROME)))
    assert verdict.state == "strict-serialised"
    assert "documents no conflict" in (verdict.detail or "")
    assert verdict.duplicates == {"get_weather": 2}


def test_several_calls_without_strict_tools_are_a_fanout_with_coheres_own_repair():
    verdict = inspect(exchange(ask(tools=TOOLS, strict_tools=False), answer(PARIS, ROME)))
    assert verdict.state == "fanout-no-strict"
    assert verdict.repairs[0] == (
        "no schema guarantee was in place to lose. Validate tool arguments in your own handler, "
        "or set strict_tools: true (Cohere documents no conflict between strict tools and "
        "several calls in one turn)."
    )
    one = inspect(exchange(ask(tools=TOOLS), answer(PARIS)))
    assert one.state == "no-strict-declared"


@pytest.mark.parametrize(
    ("choice", "state"),
    [("NONE", "no-tools"), ("REQUIRED", "strict-serialised"), (None, "strict-serialised")],
)
def test_tool_choice_none_leaves_no_tool_callable_and_required_leaves_them_all(choice, state):
    request = ask(tools=TOOLS, strict_tools=True) | ({"tool_choice": choice} if choice else {})
    assert inspect(exchange(request, answer(PARIS))).state == state


@pytest.mark.parametrize(
    ("response_format", "state"),
    [
        ({"type": "json_object"}, "no-schema"),
        ({"type": "json_object", "json_schema": STOCK}, "enforced"),  # the API reference's name
        ({"type": "json_object", "schema": STOCK}, "enforced"),  # the guide's, and LangChain's
        ({"type": "text"}, "free-text"),
        (None, "free-text"),
        ({"type": "json_schema", "json_schema": {"schema": STOCK}}, "advisory-schema"),
    ],
)
def test_json_object_is_json_mode_and_a_schema_under_either_name_holds_the_output(
    response_format, state
):
    request = ask() | ({"response_format": response_format} if response_format else {})
    body = answer(finish="COMPLETE", content=[{"type": "text", "text": '{"ticker":"EQNR"}'}])
    verdict = inspect(exchange(request, body))
    assert verdict.format_state == state
    if state == "no-schema":
        assert verdict.repairs == [
            "give response_format a json_schema beside type json_object: JSON mode holds the "
            "output to JSON, and to no shape."
        ]


def test_the_usage_is_the_tokens_the_model_used_not_the_billed_units_and_cache_where_said():
    verdict = inspect(exchange(ask(tools=TOOLS), answer(PARIS)))
    assert verdict.usage == {"input_tokens": 944, "output_tokens": 58, "cached_input_tokens": 480}
    billed_only = answer(PARIS) | {"usage": {"billed_units": {"input_tokens": 3}}}
    assert inspect(exchange(ask(), billed_only)).usage == {}  # unknown is absent, never 0
    cached_none = answer(PARIS) | {"usage": {"tokens": {"input_tokens": 9}, "cached_tokens": 0}}
    assert inspect(exchange(ask(), cached_none)).usage == {
        "input_tokens": 9,
        "cached_input_tokens": 0,  # said: nothing came from cache
    }
    junk = answer(PARIS) | {"usage": {"tokens": {"input_tokens": 1.5, "output_tokens": True}}}
    assert inspect(exchange(ask(), junk)).usage == {}


def test_the_output_types_are_the_content_blocks_then_the_plan_then_the_calls():
    body = answer(PARIS, content=[{"type": "thinking", "thinking": "Paris first."}])
    assert inspect(exchange(ask(tools=TOOLS), body)).output_types == [
        "thinking",
        "tool_plan",
        "tool_calls",
    ]


def test_a_call_with_no_name_is_no_call_and_one_with_no_arguments_says_so():
    body = answer()
    body["message"]["tool_calls"] = [
        {"id": "x_1", "type": "function", "function": {"arguments": "{}"}},
        {"id": "get_stock_9", "type": "function", "function": {"name": "get_stock"}},
    ]
    verdict = inspect(exchange(ask(tools=TOOLS), body))
    assert calls_of(verdict) == [("get_stock_9", "get_stock", "")]
    assert verdict.calls[0].parse_error is not None
    assert verdict.calls[0].parse_error.type == "MissingArguments"


# --- the stream --------------------------------------------------------------------------------


def test_a_streamed_turn_gives_the_verdict_the_same_turn_gives_unstreamed():
    body = answer(PARIS, ROME, content=[{"type": "thinking", "thinking": "Two cities, two calls."}])
    whole = inspect(exchange(ask(tools=TOOLS), body))
    streamed = inspect(exchange(ask(tools=TOOLS, stream=True), sse(events_of(body)), SSE))
    assert (streamed.stream, streamed.reason, streamed.stream_errors) == (True, None, [])
    assert {k: getattr(streamed, k) for k in KEEP} == {k: getattr(whole, k) for k in KEEP}


def test_the_stream_reassembles_into_the_answer_cohere_sends_unstreamed():
    body = answer(PARIS, ROME, content=[{"type": "thinking", "thinking": "Two cities."},
                                        {"type": "text", "text": "Looking."}])  # fmt: skip
    reader = StreamReader("cohere")
    reader.feed(sse(events_of(body)))
    result = reader.close()
    assert (result.complete, result.bad_events, result.errors) == (True, 0, [])
    assert result.response == body


def test_a_200_stream_that_ends_in_error_is_a_stream_error_in_coheres_words():
    said = "your request resulted in an invalid tool generation. Try updating the messages or tool definitions"
    events = events_of(answer(PARIS))[:4]  # the start and some of the plan
    events.append({"type": "message-end", "delta": {"finish_reason": "ERROR", "usage": {},
                                                    "error": said,
                                                    "error_type": "INVALID_TOOL_GENERATION"}})  # fmt: skip
    verdict = inspect(exchange(ask(tools=TOOLS, stream=True), sse(events), SSE))
    assert verdict.status == 200 and verdict.outcome == "inspected"
    assert [(e.type, e.message) for e in verdict.stream_errors] == [
        ("INVALID_TOOL_GENERATION", said)
    ]
    assert (verdict.finish_reasons, verdict.usage, verdict.calls) == (["ERROR"], {}, [])


def test_a_stream_that_times_out_is_a_stream_error_too():
    events = [{"type": "message-end", "delta": {"finish_reason": "TIMEOUT"}}]
    verdict = inspect(exchange(ask(stream=True), sse(events), SSE))
    assert [(e.type, e.message) for e in verdict.stream_errors] == [("TIMEOUT", "")]


def test_a_stream_cut_before_message_end_says_so_and_keeps_what_came_whole():
    events = events_of(answer(PARIS, ROME))
    cut = [e for e in events if e["type"] != "message-end"]
    cut = cut[: len(cut) - 3]  # Rome's last pieces never came
    verdict = inspect(exchange(ask(tools=TOOLS, stream=True), sse(cut), SSE))
    assert verdict.reason == "the stream ended before its final event"
    assert verdict.calls[0].arguments_raw == PARIS[2]
    assert verdict.calls[1].parse_error is not None  # what came of Rome's, as it came
    # `data: [DONE]` with no message-end before it does not make the stream whole.
    assert verdict.finish_reasons == []


def test_a_call_whose_arguments_nothing_gave_is_missing_not_empty_and_a_stray_piece_no_call():
    reader = StreamReader("cohere")
    reader.feed(sse([
        {"type": "tool-call-start", "index": 0, "delta": {"message": {"tool_calls": {
            "id": "get_stock_1", "type": "function", "function": {"name": "get_stock"}}}}},
        {"type": "tool-call-delta", "index": 1, "delta": {"message": {"tool_calls": {
            "function": {"arguments": "{}"}}}}},  # a piece for a call never started: no call
        {"type": "message-end", "delta": {"finish_reason": "TOOL_CALL"}},
    ]))  # fmt: skip
    calls = reader.close().response["message"]["tool_calls"]
    assert calls == [{"id": "get_stock_1", "type": "function", "function": {"name": "get_stock"}}]


def test_citations_and_a_list_of_calls_in_one_start_are_kept():
    reader = StreamReader("cohere")
    reader.feed(sse([
        {"type": "tool-call-start", "delta": {"message": {"tool_calls": [
            tool_call(PARIS), tool_call(ROME)]}}},
        {"type": "citation-start", "index": 0, "delta": {"message": {"citations": {
            "start": 0, "end": 5, "text": "Paris"}}}},
        {"type": "citation-end", "index": 0},
        {"type": "debug", "prompt": "..."},
        {"type": "message-end", "delta": {"finish_reason": "COMPLETE"}},
    ]))  # fmt: skip
    message = reader.close().response["message"]
    assert [c["function"]["arguments"] for c in message["tool_calls"]] == [PARIS[2], ROME[2]]
    assert message["citations"] == [{"start": 0, "end": 5, "text": "Paris"}]


# --- the loop ----------------------------------------------------------------------------------


def history(*messages: dict[str, Any]) -> dict[str, Any]:
    asked = {"role": "user", "content": "Paris and Rome?"}
    return ask(tools=TOOLS, messages=[asked, *messages])


def called(*calls: tuple[str, str, str]) -> dict[str, Any]:
    return {"role": "assistant", "tool_plan": "Look both up.",
            "tool_calls": [tool_call(c) for c in calls]}  # fmt: skip


def result(call_id: str, content: Any) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def document(data: Any) -> list[dict[str, Any]]:
    return [{"type": "document", "document": {"data": data}}]


def test_a_history_as_langchain_sends_it_answers_every_call_with_no_finding():
    report = check_loop("cohere", history(
        called(PARIS, ROME),
        result(PARIS[0], document({"output": "21C"})),
        result(ROME[0], '{"temperature": 18}'),
    ))  # fmt: skip
    assert report.errors == []
    assert [(r.call_id, r.where, r.outcome) for r in report.results] == [
        (PARIS[0], "messages.2", "ok"),
        (ROME[0], "messages.3", "ok"),
    ]


def test_a_result_for_no_call_is_an_orphan_and_a_second_for_one_call_a_duplicate():
    report = check_loop("cohere", history(
        called(PARIS),
        result(PARIS[0], "21C"),
        result(PARIS[0], "21C"),
        result("get_weather_nosuchcall", "18C"),
    ))  # fmt: skip
    assert [(e.rule, e.ids, e.where) for e in report.errors] == [
        ("duplicate-result", [PARIS[0]], "messages.3"),
        ("orphan-result", ["get_weather_nosuchcall"], "messages.4"),
    ]
    assert report.errors[0].repair.startswith("send one result per tool_call_id")


@pytest.mark.parametrize("content", ["", [], None])
def test_an_empty_result_is_reported(content):
    report = check_loop("cohere", history(called(PARIS), result(PARIS[0], content)))
    assert [(e.rule, e.ids) for e in report.errors] == [("empty-result", [PARIS[0]])]


def test_a_call_is_unanswered_only_when_another_call_of_its_turn_was_answered():
    partly = check_loop("cohere", history(called(PARIS, ROME), result(PARIS[0], "21C")))
    assert [(e.rule, e.ids, e.where) for e in partly.errors] == [
        ("unanswered-call", [ROME[0]], "messages.1")
    ]
    # Answered not at all: declined, or stopped on purpose; Cohere documents no refusal of it.
    declined = history(called(PARIS, ROME), {"role": "user", "content": "Never mind."})
    assert check_loop("cohere", declined).errors == []


@pytest.mark.parametrize(
    ("content", "outcome"),
    [
        ('{"error": "no such city"}', "error"),
        (document({"error": "no such city"}), "error"),
        (document('{"ok": false}'), "error"),  # the guides' json.dumps(data)
        ([{"type": "text", "text": '{"status": "failed"}'}], "error"),
        (document({"output": "Error: no such city"}), "ok"),  # words, not an error payload
        ("21C", "ok"),
    ],
)
def test_a_results_outcome_is_read_from_its_text_or_its_documents_data(content, outcome):
    report = check_loop("cohere", history(called(PARIS), result(PARIS[0], content)))
    assert [r.outcome for r in report.results] == [outcome]


def test_only_the_newest_turn_of_a_history_sent_again_is_reported():
    old = check_loop("cohere", history(
        called(PARIS), result("get_weather_nosuchcall", "1"), result(PARIS[0], "21C"),
        {"role": "assistant", "content": "Paris is 21C."},
        {"role": "user", "content": "And Rome?"},
        called(ROME), result(ROME[0], "18C"),
    ))  # fmt: skip
    assert old.errors == []  # the orphan was reported when it was new
    assert [r.call_id for r in old.results] == [ROME[0]]


def test_an_id_made_again_in_a_later_turn_is_owed_again():
    report = check_loop("cohere", history(
        called(PARIS), result(PARIS[0], "21C"), called(PARIS, ROME), result(PARIS[0], "22C"),
        result(ROME[0], "18C"),
    ))  # fmt: skip
    assert report.errors == []


# --- rejections, blockers and repairs ----------------------------------------------------------


def test_a_4xx_is_a_rejection_in_coheres_words_with_its_own_blockers_for_strict_tools():
    said = "invalid request: strict_tools requires at least one required parameter per tool"
    loose = {"type": "object", "properties": {"q": {"type": "string", "minLength": 3}}}
    request = ask(tools=[{"type": "function", "function": {"name": "search", "parameters": loose}}],
                  strict_tools=True)  # fmt: skip
    body = {"id": "d5f1f0d3-7c37-4c8f-9d0e-5c0f3c0e2e10", "message": said}
    verdict = inspect(exchange(request, body, status=400))
    assert verdict.rejected is not None
    assert (verdict.rejected.status, verdict.rejected.message) == (400, said)
    assert verdict.rejected.blockers == [
        "tool search: $: an object needs at least one required property",
        "tool search: $.properties.q.minLength: not supported",
    ]


def test_coheres_subset_is_its_guides_list_and_never_openais_rules():
    assert cohere_blockers(WEATHER) == []  # an optional property is fine, unlike OpenAI's
    odd = {
        "type": "object",
        "required": ["a"],
        "properties": {
            "a": {"type": "string", "pattern": "^[A-Z]+$", "format": "email"},
            "b": {"type": "array", "items": {"type": "object", "properties": {}}, "maxItems": 3},
            "c": {"oneOf": [{"type": "integer", "minimum": 1}], "format": {"odd": 1}},
        },
    }
    assert cohere_blockers(odd) == [
        "$.properties.a.pattern: ^, $, ?= and ?! are not supported",
        "$.properties.a.format: only date-time, uuid, date and time are supported",
        "$.properties.b.maxItems: not supported",
        "$.properties.c.oneOf: not supported",
        "$.properties.c.format: only date-time, uuid, date and time are supported",
        "$.properties.b.items: an object needs at least one required property",
        "$.properties.c.oneOf[0].minimum: not supported",
    ]
    assert cohere_blockers({"type": "array"}) == ["$: the top level must have type object"]
    assert cohere_blockers("nope") == ["$: not a schema object"]


def test_the_walk_over_a_schema_stops_at_its_bound():
    wide = {"type": "object", "required": ["p0"],
            "properties": {f"p{i}": {"type": "string"} for i in range(MAX_NODES * 2)}}  # fmt: skip
    assert len(list(_objects(wide))) <= MAX_NODES


def test_an_enforced_format_names_what_its_schema_says_outside_coheres_subset():
    schema = {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer",
                                                                        "maximum": 9}}}  # fmt: skip
    request = ask(response_format={"type": "json_object", "json_schema": schema})
    verdict = inspect(exchange(request, answer(finish="COMPLETE", content=[
        {"type": "text", "text": '{"n": 12}'}])))  # fmt: skip
    assert verdict.format_state == "enforced"
    assert verdict.repairs == [
        "check these in your own code: they are outside the subset Cohere's Structured "
        "Outputs support: $.properties.n.maximum: not supported"
    ]


def test_its_tools_are_pinned_with_their_descriptions_under_its_system_text():
    request = ask(tools=TOOLS, messages=[{"role": "system", "content": "You are a broker."},
                                         {"role": "user", "content": "EQNR?"}])  # fmt: skip
    verdict = inspect(exchange(request, answer(PARIS)))
    assert verdict.definitions is not None
    declared = {d.name: json.loads(d.canonical) for d in verdict.definitions.declared}
    assert declared["get_weather"]["description"] == "Weather now."
    assert declared["get_stock"]["inputSchema"] == STOCK
    other = inspect(exchange(ask(tools=TOOLS), answer(PARIS)))
    assert other.definitions is not None
    agents = {d.origin.agent for d in [*verdict.definitions.declared, *other.definitions.declared]}
    assert len(agents) == 2  # another system text is another agent of the application


# --- what each part of a reading holds to ------------------------------------------------------


def assembled(*events: dict[str, Any]) -> dict[str, Any]:
    reader = StreamReader("cohere")
    reader.feed(sse([*events, {"type": "message-end", "delta": {"finish_reason": "COMPLETE"}}]))
    return reader.close().response


def test_blocks_and_calls_keep_the_order_of_their_index_whatever_order_they_start_in():
    message = assembled(
        {"type": "content-start", "index": 1, "delta": {"message": {"content": {"type": "text", "text": "Then "}}}},
        {"type": "content-start", "index": 0, "delta": {"message": {"content": {"type": "thinking", "thinking": ""}}}},
        {"type": "content-delta", "index": 1, "delta": {"message": {"content": {"text": "text."}}}},
        {"type": "content-delta", "index": 0, "delta": {"message": {"content": {"thinking": "First."}}}},
        {"type": "tool-call-start", "index": 1, "delta": {"message": {"tool_calls": {"id": "b", "function": {"name": "get_stock", "arguments": ""}}}}},
        {"type": "tool-call-start", "index": 0, "delta": {"message": {"tool_calls": tool_call(PARIS)}}},
    )["message"]  # fmt: skip
    assert message["content"] == [
        {"type": "thinking", "thinking": "First."},
        {"type": "text", "text": "Then text."},  # what its start said, then its pieces
    ]
    assert [(c["id"], c["type"]) for c in message["tool_calls"]] == [
        (PARIS[0], "function"),
        ("b", "function"),  # a start that names no type is a function's, as Cohere's all are
    ]


def test_the_plan_is_only_what_its_deltas_said_and_every_citation_is_kept():
    start = {"id": "m1", "type": "message-start", "delta": {"message": {
        "role": "assistant", "content": [], "tool_plan": "", "tool_calls": [], "citations": []}}}  # fmt: skip
    cite = {"type": "citation-start", "delta": {"message": {"citations": {"start": 0, "end": 1}}}}
    both = {
        "type": "citation-start",
        "delta": {"message": {"citations": [{"start": 2}, {"end": 3}]}},
    }
    message = assembled(start, cite, both)["message"]
    assert "tool_plan" not in message  # the skeleton's "" is no plan
    assert message["citations"] == [{"start": 0, "end": 1}, {"start": 2}, {"end": 3}]


def test_an_error_said_at_the_end_is_a_stream_error_whatever_the_finish_reason():
    reader = StreamReader("cohere")
    reader.feed(sse([{"type": "message-end", "delta": {"finish_reason": "MAX_TOKENS",
                                                       "error": "generation cut"}}]))  # fmt: skip
    assert [(e.type, e.message) for e in reader.close().errors] == [
        ("MAX_TOKENS", "generation cut")
    ]


def test_a_negative_token_count_is_junk_and_absent():
    body = answer(PARIS) | {"usage": {"tokens": {"input_tokens": -1, "output_tokens": 3}}}
    assert inspect(exchange(ask(), body)).usage == {"output_tokens": 3}


def test_a_call_is_a_function_call_as_the_rules_name_it():
    (call,) = inspect(exchange(ask(tools=TOOLS), answer(PARIS))).calls
    assert call.type == "function_call"


def test_results_after_a_user_message_are_still_read_and_hidden_text_in_them_is_found():
    report = check_loop("cohere", history(
        called(PARIS),
        {"role": "user", "content": "Go on."},
        result(PARIS[0], document({"output": "21C\U000e0069\U000e0067\U000e006e"})),
    ))  # fmt: skip
    assert report.errors == []
    ((found,),) = [r.hidden for r in report.results]
    assert found.kind == "tag"


def test_the_subset_is_walked_into_every_place_a_schema_nests():
    nested = {
        "type": "object",
        "required": ["a"],
        "properties": {"a": {"type": ["object", "null"], "properties": {}}},
        "$defs": {"d": {"type": "string", "minLength": 1}},
        "definitions": {"e": {"type": "string", "maxLength": 1}},
        "anyOf": [{"type": "integer", "minimum": 0}],
        "allOf": [{"type": "integer", "maximum": 9}],
        "prefixItems": [{"type": "number", "exclusiveMinimum": 0}],
        "items": {"type": "array", "minItems": 1},
        "additionalProperties": {"type": "array", "uniqueItems": True},
    }
    assert cohere_blockers(nested) == [
        "$.allOf: not supported",
        "$.properties.a: an object needs at least one required property",  # a type list too
        "$.$defs.d.minLength: not supported",
        "$.definitions.e.maxLength: not supported",
        "$.anyOf[0].minimum: not supported",
        "$.allOf[0].maximum: not supported",
        "$.prefixItems[0].exclusiveMinimum: not supported",
        "$.items.minItems: not supported",
        "$.additionalProperties.uniqueItems: not supported",
    ]


def test_a_format_beside_loose_tools_is_advisory_and_each_tools_blockers_are_named():
    loose = {"type": "object", "properties": {"q": {"type": "string"}}}
    tools = [{"type": "function", "function": {"name": "search", "parameters": loose}}, TOOLS[1]]
    request = ask(tools=tools, response_format={"type": "json_object", "json_schema": STOCK})
    verdict = inspect(exchange(request, answer(finish="COMPLETE", content=[
        {"type": "text", "text": '{"ticker": "EQNR"}'}])))  # fmt: skip
    assert verdict.format_state == "advisory-tools"
    assert verdict.repairs == [
        "set strict_tools: true, or validate tool arguments in your own handler: the format "
        "holds the text, never a tool call's arguments.",
        "strict_tools on tool search needs these fixed first:",
        "  $: an object needs at least one required property",
    ]


def test_the_repair_names_twenty_places_outside_the_subset_and_counts_the_rest():
    wide = {"type": "object", "required": ["p00"],
            "properties": {f"p{i:02}": {"type": "string", "minLength": 1} for i in range(23)}}  # fmt: skip
    verdict = inspect(exchange(ask(response_format={"type": "json_object", "schema": wide}),
                               answer(finish="COMPLETE")))  # fmt: skip
    (repair,) = verdict.repairs
    assert repair.count("not supported") == 20
    assert repair.endswith("$.properties.p19.minLength: not supported (and 3 more)")


def test_starts_that_name_no_index_take_the_next_place():
    text = {
        "type": "content-start",
        "delta": {"message": {"content": {"type": "text", "text": "a"}}},
    }
    call = {"type": "tool-call-start", "delta": {"message": {"tool_calls": tool_call(PARIS)}}}
    message = assembled(text, text, call, call)["message"]
    assert [b["text"] for b in message["content"]] == ["a", "a"]
    assert [c["id"] for c in message["tool_calls"]] == [PARIS[0], PARIS[0]]


def test_a_result_naming_no_call_is_passed_over_and_the_results_after_it_are_read():
    report = check_loop("cohere", history(
        called(PARIS, ROME), {"role": "tool", "content": "18C"},
        result(PARIS[0], "21C"), result(ROME[0], "18C"),
    ))  # fmt: skip
    assert report.errors == []
    assert [r.call_id for r in report.results] == [PARIS[0], ROME[0]]


@pytest.mark.parametrize(("count", "tail"), [(2, ""), (20, ""), (21, " (and 1 more)")])
def test_places_outside_the_subset_are_joined_and_cut_at_twenty(count, tail):
    schema = {"type": "object", "required": ["p00"],
              "properties": {f"p{i:02}": {"type": "string", "minLength": 1} for i in range(count)}}  # fmt: skip
    loose = [{"type": "function", "function": {"name": "f", "parameters": STOCK}}]
    for request in (ask(response_format={"type": "json_object", "schema": schema}),
                    ask(response_format={"type": "json_object", "schema": schema}, tools=loose)):  # fmt: skip
        repair = inspect(exchange(request, answer(finish="COMPLETE"))).repairs[-1]
        shown = "; ".join(
            f"$.properties.p{i:02}.minLength: not supported" for i in range(min(count, 20))
        )
        assert repair.endswith(f"Structured Outputs support: {shown}{tail}")


def test_the_first_token_is_the_plans_first_piece_not_the_messages_start():
    plan = events_of(answer(PARIS))  # message-start, the plan's pieces, the call, message-end
    pieces = [sse(plan[:1], done=False), sse(plan[1:2], done=False), sse(plan[2:])]
    ends = [sum(len(p) for p in pieces[: i + 1]) for i in range(3)]
    t0 = 1_800_000_000.0
    verdict = inspect(Exchange(
        method="POST", url=URL, request_body=json.dumps(ask(tools=TOOLS, stream=True)).encode(),
        status=200, response_headers={"content-type": SSE}, response_body=b"".join(pieces),
        request_start=t0, request_end=t0 + 0.005, response_end=t0 + 0.9,
        arrivals=((ends[0], t0 + 0.2), (ends[1], t0 + 0.5), (ends[2], t0 + 0.9)),
    ))  # fmt: skip
    assert verdict.first_token_ms == pytest.approx(495.0, abs=0.001)  # from the request's end
    assert verdict.duration_ms == pytest.approx(900.0, abs=0.001)
    assert verdict.usage == {"input_tokens": 944, "output_tokens": 58, "cached_input_tokens": 480}
