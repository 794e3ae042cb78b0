"""inspect(): argument diagnostics, the three failure layers, and outcomes for bad input."""

import gzip
import json

import pytest
from support.captures import JSON, SSE, URLS, exchange_of, pairs, sse

from tooltap.core import OPENAI_LIMITS, Exchange, ParseError, ValidatorCache, inspect
from tooltap.core.arguments import compile_schema, diagnose
from tooltap.core.parallel import repair_lines
from tooltap.core.wire import Tool, ToolCall

SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["order_id", "channel"],
    "properties": {
        "order_id": {"type": "string"},
        "channel": {"type": ["string", "null"], "enum": ["web", "app", None]},
    },
}
TOOL = Tool(name="lookup_order", strict=True, parameters=SCHEMA)


def call(arguments, kind="function_call"):
    return ToolCall(call_id="call_1", name="lookup_order", type=kind, arguments_raw=arguments)


def test_each_schema_violation_is_reported_with_its_path():
    found = diagnose(call('{"order_id": 7, "extra": true, "channel": "fax"}'), TOOL)
    assert found.parse_error is None
    assert sorted((e.path, e.message) for e in found.schema_errors) == [
        ("$", "Additional properties are not allowed ('extra' was unexpected)"),
        ("$.channel", '"fax" is not one of "web", "app" or null'),
        ("$.order_id", '7 is not of type "string"'),
    ]
    missing = diagnose(call('{"order_id": "A-100"}'), TOOL)
    assert [(e.path, e.message) for e in missing.schema_errors] == [
        ("$", '"channel" is a required property')
    ]
    assert diagnose(call('{"order_id": "A-100", "channel": null}'), TOOL).schema_errors == []


def test_truncated_json_reports_a_parse_error_and_keeps_the_raw_text():
    raw = '{"order_id": "A-1'
    found = diagnose(call(raw), TOOL)
    assert found.arguments_raw == raw
    assert (found.parse_error.type, found.parse_error.position) == ("JSONDecodeError", len(raw))
    assert found.schema_errors == []


def test_an_invalid_schema_is_reported_as_such_not_raised():
    found = diagnose(call("{}"), Tool(name="lookup_order", parameters={"type": 12}))
    assert found.schema_problem.startswith("the declared schema is invalid")
    assert found.schema_errors == []


def test_a_remote_ref_is_never_fetched():
    found = diagnose(
        call("{}"), Tool(name="lookup_order", parameters={"$ref": "https://example.com/s.json"})
    )
    assert "remote $ref https://example.com/s.json is not fetched" in found.schema_problem


def test_a_self_referencing_schema_validates_without_looping():
    tree = {"type": "object", "properties": {"child": {"$ref": "#"}, "n": {"type": "integer"}}}
    found = diagnose(
        call('{"child": {"child": {"n": "x"}}}'), Tool(name="lookup_order", parameters=tree)
    )
    assert [(e.path, e.message) for e in found.schema_errors] == [
        ("$.child.child.n", '"x" is not of type "integer"')
    ]


def test_free_form_custom_tool_input_is_not_parsed_as_json():
    found = diagnose(call("SELECT * FROM t", kind="custom_tool_call"), None)
    assert found.parse_error is None and found.schema_errors == []


def test_validators_are_compiled_once_per_schema():
    cache = ValidatorCache(size=2)
    first = cache.get(SCHEMA)
    assert cache.get(json.loads(json.dumps(SCHEMA))) is first
    cache.get({"type": "string"})
    cache.get({"type": "number"})
    assert cache.get(SCHEMA) is not first  # evicted, least recently used
    assert compile_schema({"type": 12}).startswith("the declared schema is invalid")


def test_a_cache_keys_a_schema_by_its_content_not_its_key_order():
    cache = ValidatorCache(size=2)
    first = cache.get({"type": "object", "required": []})
    assert cache.get({"required": [], "type": "object"}) is first
    second = cache.get({"type": "string"})
    assert cache.get({"type": "object", "required": []}) is first  # two fit in two
    assert cache.get({"type": "string"}) is second


def test_the_default_cache_keeps_the_256_schemas_used_last():
    cache = ValidatorCache()
    compiled = [cache.get({"maxLength": n}) for n in range(257)]
    assert cache.get({"maxLength": 256}) is compiled[256]
    assert cache.get({"maxLength": 1}) is compiled[1]
    assert cache.get({"maxLength": 0}) is not compiled[0]


def test_a_schema_that_is_not_json_is_a_schema_problem_not_a_crash():
    tool = Tool(name="lookup_order", parameters={"type": "object", "enum": {1, 2}})
    cached = diagnose(call('{"order_id": "A-1"}'), tool, ValidatorCache())
    assert (cached.schema_problem, cached.schema_errors) == (
        "the tool schema is not JSON-serialisable",
        [],
    )
    uncached = diagnose(call('{"order_id": "A-1"}'), tool)
    assert uncached.schema_problem == "the declared schema is invalid: Unsupported type: 'set'"


def test_thousands_of_errors_are_capped():
    schema = {
        "type": "object",
        "properties": {"xs": {"type": "array", "items": {"type": "integer"}}},
    }
    found = diagnose(
        call(json.dumps({"xs": ["a"] * 5000})), Tool(name="lookup_order", parameters=schema)
    )
    assert len(found.schema_errors) == 21
    assert [(e.path, e.message) for e in found.schema_errors[-2:]] == [
        ("$.xs[19]", '"a" is not of type "integer"'),
        ("$", "more than 20 errors; the rest are not listed"),
    ]


def test_an_anthropic_tool_with_no_input_gives_an_empty_object():
    request = {"tools": [{"name": "now", "input_schema": {"type": "object", "properties": {}}}]}
    response = {"content": [{"type": "tool_use", "id": "toolu_1", "name": "now", "input": {}}]}
    verdict = inspect(
        Exchange(
            method="POST",
            url=URLS["messages"],
            request_body=json.dumps(request).encode(),
            status=200,
            response_headers=JSON,
            response_body=json.dumps(response).encode(),
        )
    )
    assert [(c.arguments_raw, c.parse_error, c.schema_errors) for c in verdict.calls] == [
        ("{}", None, [])
    ]


def test_the_real_400_becomes_a_rejected_finding_with_the_apis_message():
    verdict = inspect(pairs("anthropic_400_orphan_tool_result.json")[1].exchange())
    assert verdict.outcome == "inspected"
    assert verdict.state is None
    assert (verdict.rejected.status, verdict.rejected.type) == (400, "invalid_request_error")
    assert verdict.rejected.message.startswith(
        "messages.0.content.1: unexpected `tool_use_id` found in `tool_result` blocks"
    )
    assert [e.rule for e in verdict.loop_errors] == ["orphan-result"]


def test_a_400_under_strict_tools_carries_the_schema_blockers():
    request = {
        "model": "gpt-4o",
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "f",
                    "strict": True,
                    "parameters": {
                        "type": "object",
                        "properties": {"a": {"type": "string", "minLength": 2}},
                    },
                },
            }
        ],
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "out", "strict": True, "schema": {"type": "array"}},
        },
    }
    error = {
        "error": {
            "message": "Invalid schema for function 'f'",
            "type": "invalid_request_error",
            "param": "tools[0]",
            "code": None,
        }
    }
    verdict = inspect(
        Exchange(
            method="POST",
            url=URLS["chat"],
            request_body=json.dumps(request).encode(),
            status=400,
            response_headers=JSON,
            response_body=json.dumps(error).encode(),
        )
    )
    assert verdict.rejected.message == "Invalid schema for function 'f'"
    assert verdict.rejected.blockers == [
        "tool f: $: needs additionalProperties: false",
        "tool f: $: every property must be listed in required; missing a. Use a nullable type for the optional ones rather than leaving them out.",
        "tool f: $.a: minLength are silently unenforced under constrained decoding. Keep them for your own validator if you like, but do not rely on the model honouring them.",
        "format out: $: the root type must be object, not array",
    ]


def test_error_bodies_of_every_shape_are_read():
    def rejected(body, status=429):
        return inspect(
            Exchange(
                method="POST",
                url=URLS["responses"],
                request_body=b"{}",
                status=status,
                response_headers=JSON,
                response_body=body,
            )
        ).rejected

    assert (
        rejected(
            b'{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}'
        ).message
        == "slow down"
    )
    assert rejected(b'{"message":"flat","code":"quota"}').type == "quota"
    assert rejected(b"<html>Too Many Requests</html>").message == "<html>Too Many Requests</html>"


def test_5xx_and_no_response_are_upstream_errors():
    error = inspect(
        Exchange(
            method="POST",
            url=URLS["messages"],
            request_body=b"{}",
            status=529,
            response_headers=JSON,
            response_body=b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
        )
    )
    assert (error.outcome, error.reason) == ("upstream_error", "529 overloaded_error: Overloaded")
    assert (
        inspect(Exchange(method="POST", url=URLS["chat"], request_body=b"{}", status=None)).outcome
        == "upstream_error"
    )


def test_bodies_that_are_not_json_objects_are_unparseable_with_a_reason():
    # The parser's own words follow in brackets; what tooltap says is pinned.
    not_json, not_object = "response body is not JSON (", "response body is not a JSON object"
    for body, reason in (
        (b"", not_json),
        (b"not json", not_json),
        (b"[1, 2]", not_object),
        (b"\xff\xfe", not_json),
        (b"null", not_object),
        (b"[" * 100_000, not_json),
    ):
        verdict = inspect(
            Exchange(
                method="POST",
                url=URLS["chat"],
                request_body=b"{}",
                status=200,
                response_headers=JSON,
                response_body=body,
            )
        )
        assert verdict.outcome == "unparseable", body[:10]
        assert verdict.reason is not None and verdict.reason.startswith(reason), verdict.reason
    deep = inspect(
        Exchange(
            method="POST",
            url=URLS["chat"],
            request_body=b"[" * 100_000,
            status=200,
            response_headers=JSON,
            response_body=b"{}",
        )
    )
    assert (deep.outcome, deep.reason) == ("unparseable", "request body is not a JSON object")


def test_a_wrong_content_type_is_sniffed_rather_than_trusted():
    wire = b'data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n'
    verdict = inspect(
        Exchange(
            method="POST",
            url=URLS["chat"],
            request_body=b"{}",
            status=200,
            response_headers={"content-type": "text/plain"},
            response_body=wire,
        )
    )
    assert (verdict.outcome, verdict.stream, verdict.output_types) == ("inspected", True, ["text"])


def test_other_endpoints_are_not_read_and_say_so():
    verdict = inspect(
        Exchange(
            method="POST",
            url="https://api.openai.com/v1/embeddings",
            request_body=b"{}",
            status=200,
            response_headers=JSON,
            response_body=b"{}",
        )
    )
    assert (verdict.api, verdict.outcome, verdict.status) == (None, "not_read", 200)


def test_the_verdict_is_json_ready_and_its_keys_are_the_log_fields():
    verdict = inspect(pairs("pydanticai_anthropic_parallel_tool_calls.yaml")[0].exchange())
    as_dict = json.loads(json.dumps(verdict.to_dict()))
    assert {
        "api",
        "model",
        "response_id",
        "state",
        "format_state",
        "calls",
        "duplicates",
        "loop_errors",
        "repairs",
        "rejected",
        "output_types",
    } <= set(as_dict)
    assert as_dict["duplicates"] == {"retrieve_entity_info": 4}
    assert as_dict["state"] == "fanout-no-strict"
    assert set(as_dict["calls"][0]) >= {
        "call_id",
        "name",
        "arguments_raw",
        "parse_error",
        "schema_errors",
    }


def test_findings_are_named_once_per_occurrence_and_the_default_set_is_what_fails():
    from tooltap.core.findings import DEFAULT, NAMES, findings
    from tooltap.core.inspection import Rejected, Verdict

    verdict = Verdict(
        api="chat",
        outcome="inspected",
        state="strict-void",
        format_state="advisory-schema",
        calls=[
            {"call_id": "a", "name": "f", "type": "function_call", "arguments_raw": "{",
             "parse_error": {"type": "JSONDecodeError", "message": "eof"}},
            {"call_id": "b", "name": "f", "type": "function_call", "arguments_raw": "{}",
             "schema_errors": [{"path": "$", "message": "x"}, {"path": "$.y", "message": "y"}]},
        ],
        loop_errors=[{"rule": "orphan-result", "ids": ["z"], "where": "messages.2", "repair": "r"}],
        rejected=Rejected(status=400, type="invalid_request_error", message="no"),
    )  # fmt: skip
    assert findings(verdict) == [
        "strict-void",
        "advisory-schema",
        "argument-parse",
        "argument-schema",
        "orphan-result",
        "rejected",
    ]
    assert set(NAMES) - DEFAULT == {
        "strict-at-risk",
        "fanout-no-strict",
        "unanswered-at-close",
        "session-error",
        "serial-execution",  # only the team knows whether the calls were independent
    }
    quiet = Verdict(
        api="chat", outcome="inspected", state="fanout-no-strict", format_state="free-text"
    )
    assert findings(quiet) == ["fanout-no-strict"]


def test_the_work_on_one_response_is_bounded_and_the_verdict_says_what_was_left():
    from tooltap.core.inspection import MAX_CALLS

    tool = {
        "type": "function",
        "function": {"name": "f", "strict": True, "parameters": {"type": "object"}},
    }
    calls = [
        {"id": f"call_{n}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        for n in range(MAX_CALLS + 1500)
    ]
    body = {"id": "c", "model": "m", "choices": [{"index": 0, "message": {"tool_calls": calls}}]}
    verdict = inspect(
        Exchange(
            method="POST",
            url=URLS["chat"],
            request_body=json.dumps({"tools": [tool], "messages": []}).encode(),
            status=200,
            response_headers=JSON,
            response_body=json.dumps(body).encode(),
        )
    )
    assert (len(verdict.calls), verdict.more_calls, verdict.call_count) == (MAX_CALLS, 1500, 2000)
    assert verdict.state == "strict-void"  # the state still counts every call
    assert verdict.unchecked == [
        f"1500 call(s) past the first {MAX_CALLS} were counted, not validated nor logged one by one"
    ]


def test_a_responses_history_past_the_bound_is_walked_from_its_newest_items():
    from tooltap.core import loop, wire

    assert loop.MAX_HISTORY == 10_000  # the README's figure
    items = [
        {"type": "function_call", "call_id": "call_old", "name": "f", "arguments": "{}"},
        *({"role": "user", "content": str(n)} for n in range(loop.MAX_HISTORY - 1)),
        {"type": "function_call_output", "call_id": "call_old", "output": "late but fine"},
    ]
    report = wire.check_loop("responses", {"input": items})
    # The call fell out of view, so its output cannot be called an orphan.
    assert report.errors == []
    assert report.unchecked == [
        "the 1 oldest of 10001 input items were not checked (the last 10000 were)"
    ]
    # One message fewer: all 10,000 are walked and the output answers its call.
    whole = wire.check_loop("responses", {"input": [*items[:-2], items[-1]]})
    assert (whole.errors, whole.unchecked) == ([], [])


def test_each_finding_is_told_apart_by_names_paths_and_places_free_of_ids():
    from tooltap.core.findings import occurrences
    from tooltap.core.inspection import Rejected, Verdict

    verdict = Verdict(
        api="responses",
        outcome="inspected",
        state="strict-void",
        format_state="advisory-schema",
        calls=[
            {"call_id": "call_1", "name": "lookup", "type": "function_call", "arguments_raw": "{",
             "parse_error": {"type": "JSONDecodeError", "message": "eof"}},
            {"call_id": "call_2", "name": "create", "type": "function_call", "arguments_raw": "{}",
             "schema_errors": [{"path": "$.y", "message": "y"}, {"path": "$", "message": "x"},
                               {"path": "$.y", "message": "z"}]},
            {"call_id": "call_3", "name": "ok", "type": "function_call", "arguments_raw": "{}"},
        ],
        loop_errors=[{"rule": "unanswered-call", "ids": ["call_9"],
                      "where": "previous_response_id resp_Ab-1", "repair": "r"}],
        rejected=Rejected(status=400, type="invalid_request_error", message="no"),
        session_errors=[{"type": "input_audio_buffer_commit_empty", "message": "m"}],
    )  # fmt: skip
    assert [(f.name, f.detail) for f in occurrences(verdict)] == [
        ("strict-void", "create,lookup,ok"),
        ("advisory-schema", ""),
        ("argument-parse", "lookup"),
        ("argument-schema", "create $,$.y"),
        ("unanswered-call", "previous_response_id <id>"),
        ("rejected", "400 invalid_request_error"),
        ("session-error", "input_audio_buffer_commit_empty"),
    ]


CHAT_REQUEST = {
    "model": "gpt-4o",
    "tools": [{"type": "function", "function": {"name": "lookup_order", "strict": True,
                                                "parameters": SCHEMA}}],
    "messages": [{"role": "user", "content": "where is A-1?"}],
}  # fmt: skip


def chat_reply(*calls):
    tool_calls = [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        for call_id, name, arguments in calls
    ]
    return {
        "id": "chatcmpl-1",
        "model": "gpt-4o-2024-08-06",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "tool_calls": tool_calls},
             "finish_reason": "tool_calls"}
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 5},
    }  # fmt: skip


GOOD = ("call_1", "lookup_order", '{"order_id": "A-1", "channel": null}')
REPLY = chat_reply(GOOD)


def test_an_endpoint_that_calls_no_tools_is_not_read_and_says_why():
    verdict = inspect(Exchange(method="GET", url="https://api.openai.com/v1/models", status=200))
    assert (verdict.outcome, verdict.reason) == (
        "not_read",
        "a model list or a model's details: it makes no tool calls, and is not read",
    )


def test_a_turn_carries_its_status_both_models_and_its_usage():
    verdict = inspect(exchange_of("chat", CHAT_REQUEST, REPLY))
    assert (verdict.status, verdict.request_model, verdict.model) == (
        200,
        "gpt-4o",
        "gpt-4o-2024-08-06",
    )
    assert verdict.usage == {"input_tokens": 12, "output_tokens": 5}


def test_from_500_up_the_upstream_failed_and_below_it_the_request_was_rejected():
    error = {"error": {"type": "server_error", "message": "boom"}}
    failed = inspect(exchange_of("chat", CHAT_REQUEST, error, status=500))
    assert (failed.outcome, failed.reason, failed.rejected) == (
        "upstream_error",
        "500 server_error: boom",
        None,
    )
    refused = inspect(exchange_of("chat", CHAT_REQUEST, error, status=499))
    assert (refused.outcome, refused.request_model, refused.model) == (
        "inspected",
        "gpt-4o",
        "gpt-4o",
    )
    assert (refused.rejected.status, refused.rejected.message) == (499, "boom")


def test_an_upstream_failure_quotes_the_first_300_characters_of_a_body_that_is_not_json():
    verdict = inspect(exchange_of("chat", CHAT_REQUEST, {}, status=502, response_body=b"x" * 400))
    assert verdict.reason == "502 : " + "x" * 300


def test_a_request_body_is_read_through_its_content_encoding_and_must_be_a_json_object():
    packed = gzip.compress(json.dumps(CHAT_REQUEST).encode())
    verdict = inspect(
        exchange_of(
            "chat",
            CHAT_REQUEST,
            REPLY,
            request_body=packed,
            request_headers={"Content-Encoding": "gzip"},
        )
    )
    assert (verdict.outcome, verdict.request_model) == ("inspected", "gpt-4o")
    broken = inspect(
        exchange_of(
            "chat",
            CHAT_REQUEST,
            REPLY,
            request_body=b"xx",
            request_headers={"content-encoding": "gzip"},
        )
    )
    assert (broken.outcome, broken.reason) == (
        "unparseable",
        "request body could not be decoded: Error -3 while decompressing data: incorrect header check",
    )
    listed = inspect(exchange_of("chat", CHAT_REQUEST, REPLY, request_body=b"[]"))
    assert (listed.outcome, listed.reason) == ("unparseable", "request body is not a JSON object")


def test_a_response_that_is_not_a_json_object_is_unparseable_in_the_parsers_words():
    not_json = "response body is not JSON (unexpected character, expected a JSON value)"
    gzip_sse = SSE | {"content-encoding": "gzip"}
    cases = [
        (JSON, b"<html>", False, not_json),
        # Labelled JSON, it is read as JSON, as the client reads it, even when it looks like SSE.
        (JSON, sse("chat", REPLY), False, not_json),
        (JSON, b"[1]", False, "response body is not a JSON object"),
        (SSE, b": a comment and nothing else\n\n", True, "stream carried no JSON events"),
        (gzip_sse, b"xx", True,
         "stream could not be decoded: Error -3 while decompressing data: incorrect header check"),
    ]  # fmt: skip
    for headers, body, stream, reason in cases:
        verdict = inspect(
            exchange_of("chat", CHAT_REQUEST, REPLY, response_headers=headers, response_body=body)
        )
        assert (verdict.outcome, verdict.stream, verdict.reason) == ("unparseable", stream, reason)


def test_the_decoded_size_limit_applies_to_json_and_to_streams():
    json_body = gzip.compress(json.dumps(REPLY).encode())
    stream_body = gzip.compress(sse("chat", REPLY))
    for headers, body, reason in (
        (
            JSON,
            json_body,
            "response body could not be decoded: decoded body exceeds the size limit",
        ),
        (SSE, stream_body, "stream could not be decoded: decoded body exceeds the size limit"),
    ):
        exchange = exchange_of(
            "chat",
            CHAT_REQUEST,
            REPLY,
            response_headers=headers | {"content-encoding": "gzip"},
            response_body=body,
        )
        assert inspect(exchange).outcome == "inspected"
        assert inspect(exchange, max_decoded=100).reason == reason


@pytest.mark.parametrize(
    "head",
    [b"\n\n", b"event: chunk\n", b": keep-alive\n\n", b"id: 1\n"],
    ids=["blank-lines", "event", "comment", "id"],
)
def test_a_stream_sent_without_its_content_type_is_known_by_its_first_field(head):
    body = head + sse("chat", REPLY)
    verdict = inspect(
        exchange_of(
            "chat",
            CHAT_REQUEST,
            REPLY,
            response_headers={"content-type": "text/plain"},
            response_body=body,
        )
    )
    assert (verdict.outcome, verdict.stream, [c.call_id for c in verdict.calls]) == (
        "inspected",
        True,
        ["call_1"],
    )


def test_exactly_the_call_bound_leaves_nothing_unchecked():
    from tooltap.core.inspection import MAX_CALLS

    reply = chat_reply(*[(f"call_{n}", "lookup_order", "{}") for n in range(MAX_CALLS)])
    verdict = inspect(exchange_of("chat", CHAT_REQUEST, reply))
    assert (len(verdict.calls), verdict.more_calls, verdict.unchecked) == (MAX_CALLS, 0, [])


def test_bad_arguments_and_a_name_called_twice_each_get_their_repair_word_for_word():
    reply = chat_reply(
        GOOD,
        ("call_2", "lookup_order", '{"order_id": 7, "channel": null}'),
        ("", "lookup_order", "{"),
    )
    repairs = inspect(exchange_of("chat", CHAT_REQUEST, reply)).repairs
    assert repairs[-2:] == [
        "duplicate: lookup_order called 3 time(s) in one turn. Handlers keyed on the tool "
        "name rather than call_id will double apply.",
        "answer call_2, lookup_order with an error result bound to the same call id rather "
        "than dropping the call, and keep the raw arguments for the post-mortem: a call "
        "left unanswered fails the next request.",
    ]
    assert inspect(exchange_of("chat", CHAT_REQUEST, REPLY)).repairs == repair_lines(
        "strict-at-risk"
    )


def test_a_turn_with_no_tools_at_all_keeps_the_plain_no_tools_detail():
    plain = {"model": "gpt-4o", "messages": CHAT_REQUEST["messages"]}
    verdict = inspect(exchange_of("chat", plain, chat_reply()))
    assert (verdict.state, verdict.detail) == ("no-tools", "no named tools declared in this turn")
    none = dict(CHAT_REQUEST, tool_choice="none")
    verdict = inspect(exchange_of("chat", none, chat_reply()))
    assert (verdict.state, verdict.detail) == (
        "no-tools",
        "tool_choice leaves none of the 1 declared tool(s) callable, so no call could be at risk",
    )


def test_the_verdict_lists_what_the_loop_check_left_unchecked(monkeypatch):
    from tooltap.core import loop

    monkeypatch.setattr(loop, "MAX_HISTORY", 1)
    request = {"model": "gpt-4o", "input": [{"role": "user", "content": "a"}] * 2}
    reply = {"id": "resp_1", "model": "gpt-4o", "status": "completed", "output": []}
    verdict = inspect(exchange_of("responses", request, reply))
    assert verdict.unchecked == ["the 1 oldest of 2 input items were not checked (the last 1 were)"]


def test_a_background_response_not_yet_final_says_so_and_keeps_its_stream_errors():
    queued = {"id": "resp_1", "model": "gpt-4o", "status": "queued", "output": []}
    verdict = inspect(exchange_of("responses", {"model": "gpt-4o", "background": True}, queued))
    assert verdict.reason == (
        "the response is queued: a background response is classified once, when it reaches "
        "a final status"
    )
    assert verdict.state is None


def test_the_format_repair_is_built_from_the_schema_the_request_sent():
    loose = {"type": "object", "properties": {"note": {"type": "string"}}}
    request = {
        "model": "gpt-4o",
        "input": "x",
        "text": {"format": {"type": "json_schema", "name": "n", "schema": loose}},
    }
    reply = {"id": "resp_1", "model": "gpt-4o", "status": "completed", "output": []}
    assert inspect(exchange_of("responses", request, reply)).repairs == [
        "strict: true would be refused for this schema until these are fixed:",
        "  $: needs additionalProperties: false",
        "  $: every property must be listed in required; missing note. Use a nullable type "
        "for the optional ones rather than leaving them out.",
    ]


def deep(levels):
    """An object schema nested `levels` objects deep, strict-clean at every level."""
    schema = {"type": "string"}
    for _ in range(levels):
        schema = {
            "type": "object",
            "additionalProperties": False,
            "required": ["x"],
            "properties": {"x": schema},
        }
    return schema


LOOSE = {"type": "object", "properties": {"a": {"type": "string"}}}
BAD_SCHEMA = json.dumps({"error": {"type": "invalid_request_error", "message": "bad"}}).encode()


def rejected(api, request, **options):
    exchange = exchange_of(api, request, {}, status=400, response_body=BAD_SCHEMA)
    return inspect(exchange, **options).rejected


def test_a_rejection_is_explained_only_by_what_was_declared_strict():
    loose_only = {
        "messages": [],
        "tools": [
            {"type": "function", "function": {"name": "clean", "strict": True, "parameters": deep(1)}},
            {"type": "function", "function": {"name": "loose", "parameters": LOOSE}},
        ],
        "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": LOOSE}},
    }  # fmt: skip
    assert rejected("chat", loose_only).blockers == []
    unnamed = {
        "messages": [],
        "response_format": {
            "type": "json_schema",
            "json_schema": {"strict": True, "schema": LOOSE},
        },
    }
    assert rejected("chat", unnamed).blockers == [
        "format: $: needs additionalProperties: false",
        "format: $: every property must be listed in required; missing a. Use a nullable type "
        "for the optional ones rather than leaving them out.",
    ]


def test_a_rejection_is_explained_under_the_limits_given():
    request = {
        "messages": [],
        "tools": [{"type": "function", "function": {"name": "deep", "strict": True, "parameters": deep(7)}}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "d", "strict": True, "schema": deep(7)}},
    }  # fmt: skip
    assert rejected("chat", request).blockers == [
        "tool deep: $.x.x.x.x.x: nested 6 levels deep, past the limit of 5",
        "format d: $.x.x.x.x.x: nested 6 levels deep, past the limit of 5",
    ]
    assert rejected("chat", request, limits=OPENAI_LIMITS).blockers == []


def test_an_anthropic_output_format_is_held_to_anthropics_rules_for_a_format_not_a_tool():
    # An array at the root is fine for a format; a tool's input_schema must be an object.
    array = {"type": "array", "items": {"type": "string"}}
    request = {
        "messages": [],
        "output_config": {"format": {"type": "json_schema", "schema": array}},
    }
    assert rejected("messages", request).blockers == []


def test_anthropic_advisory_tools_list_only_the_client_tools_that_are_not_strict():
    strict = {"type": "object", "additionalProperties": False, "required": ["a"],
              "properties": {"a": {"type": "string"}}}  # fmt: skip
    request = {
        "messages": [],
        "output_config": {"format": {"type": "json_schema", "schema": strict}},
        "tools": [
            {"name": "contact", "strict": True, "input_schema": LOOSE},
            {"name": "unstrict", "strict": False, "input_schema": LOOSE},
            {"type": "web_search_20250305", "name": "web_search"},
        ],
    }
    reply = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
             "content": [{"type": "text", "text": "{}"}], "stop_reason": "end_turn"}  # fmt: skip
    verdict = inspect(exchange_of("messages", request, reply))
    assert (verdict.format_state, verdict.repairs) == (
        "advisory-tools",
        [
            "Set strict: true on every tool beside the strict output format. Anthropic's strict "
            "subset keeps optional properties, and needs additionalProperties: false on every "
            "object.",
            "strict: true on tool unstrict needs these fixed first:",
            "  $: needs additionalProperties: false",
        ],
    )


def test_the_format_repair_applies_the_limits_given():
    request = {
        "input": "x",
        "text": {"format": {"type": "json_schema", "name": "d", "schema": deep(7)}},
    }
    reply = {"id": "resp_1", "model": "gpt-4o", "status": "completed", "output": []}
    assert inspect(exchange_of("responses", request, reply), limits=OPENAI_LIMITS).repairs == [
        "This schema already satisfies the strict subset, so setting strict: true is a "
        "one-line change. Somebody dropped the flag and the request kept succeeding."
    ]


def chunk(delta, finish=None):
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return b"data: " + json.dumps({"id": "c", "model": "m", "choices": [choice]}).encode() + b"\n\n"


def test_a_stream_says_what_it_dropped_and_read_leniently_and_only_empty_arguments_are_unknown():
    first = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "lookup_order", "arguments": '{"order_id": "caf#"}'},
    }
    second = {"index": 1, "id": "call_2", "type": "function", "function": {"name": "lookup_order"}}
    lost = {"index": 1, "function": {"arguments": "{}"}}
    events = [
        chunk({"role": "assistant", "tool_calls": [first]}).replace(b"caf#", b"caf\xe9"),
        chunk({"tool_calls": [second]}),
        chunk({"tool_calls": [lost]})[:-6] + b"\n\n",  # cut inside the JSON
        chunk({}, "tool_calls"),
        b"data: [DONE]\n\n",
    ]
    streamed = {"response_headers": SSE, "response_body": b"".join(events)}
    verdict = inspect(exchange_of("chat", CHAT_REQUEST, REPLY, **streamed))
    note = (
        "1 stream event(s) could not be read and were dropped; 1 stream event(s) held invalid "
        "UTF-8 or raw control characters, read leniently"
    )
    assert verdict.reason == note
    unknown = "the arguments are unknown: an event of this stream could not be read"
    assert [(c.arguments_raw, c.parse_error) for c in verdict.calls] == [
        ('{"order_id": "caf\ufffd"}', None),
        ("", ParseError(type="StreamError", message=unknown)),
    ]
    streamed["response_body"] = b"".join(events[1:3])
    cut = inspect(exchange_of("chat", CHAT_REQUEST, REPLY, **streamed))
    assert cut.reason == (
        "the stream ended before its final event; 1 stream event(s) could not be read and were dropped"
    )


def test_a_background_stream_cut_short_says_so_and_keeps_its_stream_errors():
    reply = {"id": "resp_1", "model": "gpt-4o", "status": "completed", "output": []}
    wire = sse("responses", reply)
    cut = wire[: wire.index(b"event: response.completed")] + b"data: {broken\n\n"
    request = {"background": True, "stream": True, "input": "x"}
    verdict = inspect(
        exchange_of("responses", request, reply, response_headers=SSE, response_body=cut)
    )
    assert verdict.reason == (
        "the stream ended before the response reached a final status: a background response "
        "is classified once, when it reaches a final status"
    )
    assert [(e.type, e.message) for e in verdict.stream_errors] == [
        ("malformed_event", "1 stream event(s) could not be read and were dropped")
    ]
