"""inspect(): argument diagnostics, the three failure layers, and outcomes for bad input."""

import json

from support.captures import JSON, URLS, pairs

from tooltap.core import Exchange, ValidatorCache, inspect
from tooltap.core.arguments import compile_schema, diagnose
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


def test_thousands_of_errors_are_capped():
    schema = {
        "type": "object",
        "properties": {"xs": {"type": "array", "items": {"type": "integer"}}},
    }
    found = diagnose(
        call(json.dumps({"xs": ["a"] * 5000})), Tool(name="lookup_order", parameters=schema)
    )
    assert len(found.schema_errors) == 21
    assert found.schema_errors[-1].message == "more than 20 errors; the rest are not listed"


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


def test_other_endpoints_are_skipped():
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
    assert (verdict.api, verdict.outcome) == (None, "skipped")


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
    from tooltap.core import loop

    assert loop.MAX_HISTORY == 10_000  # the README's figure
    items = [
        {"type": "function_call", "call_id": "call_old", "name": "f", "arguments": "{}"},
        *({"role": "user", "content": str(n)} for n in range(loop.MAX_HISTORY - 1)),
        {"type": "function_call_output", "call_id": "call_old", "output": "late but fine"},
    ]
    report = loop.check_loop("responses", {"input": items})
    # The call fell out of view, so its output cannot be called an orphan.
    assert report.errors == []
    assert report.unchecked == [
        "the 1 oldest of 10001 input items were not checked (the last 10000 were)"
    ]
    # One message fewer: all 10,000 are walked and the output answers its call.
    whole = loop.check_loop("responses", {"input": [*items[:-2], items[-1]]})
    assert (whole.errors, whole.unchecked) == ([], [])
