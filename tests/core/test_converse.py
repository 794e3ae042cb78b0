"""Bedrock Converse, read as AWS documents it: its tools and calls, its stream, its loop as
Bedrock refuses it, and its strict subset; nothing AWS does not document is a finding."""

from __future__ import annotations

import json

from tooltap.core import Exchange, inspect
from tooltap.core.dialects.converse import converse_blockers
from tooltap.core.wire import check_loop

URL = "https://bedrock-runtime.us-east-1.amazonaws.com/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse"
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "units": {"type": "string", "enum": ["c", "f"]}},
    "required": ["city"],
    "additionalProperties": False,
}


def tool(name: str, strict: bool | None = None) -> dict:
    spec = {"name": name, "description": "d", "inputSchema": {"json": SCHEMA}}
    return {"toolSpec": spec | ({} if strict is None else {"strict": strict})}


def use(call_id: str, name: str = "get_weather", arguments: dict | None = None) -> dict:
    return {
        "toolUse": {"toolUseId": call_id, "name": name, "input": arguments or {"city": "Paris"}}
    }


def result(call_id: str, status: str | None = None, content: list | None = None) -> dict:
    body = {"toolUseId": call_id, "content": [{"text": "12C"}] if content is None else content}
    return {"toolResult": body | ({"status": status} if status else {})}


def converse(request: dict, content: list, stop: str = "tool_use") -> Exchange:
    response = {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop,
        "usage": {"inputTokens": 40, "outputTokens": 12, "totalTokens": 52},
    }
    return Exchange(
        method="POST",
        url=URL,
        request_body=json.dumps(request).encode(),
        status=200,
        response_headers={"content-type": "application/json"},
        response_body=json.dumps(response).encode(),
    )


def ask(*tools: dict, **settings) -> dict:
    return {"messages": [{"role": "user", "content": [{"text": "Paris?"}]}],
            "toolConfig": {"tools": list(tools)}} | settings  # fmt: skip


def test_a_turn_its_calls_its_model_from_the_path_and_its_usage():
    verdict = inspect(
        converse(ask(tool("get_weather")), [{"text": "Let me look."}, use("tooluse_1")])
    )
    assert (verdict.api, verdict.state, verdict.request_model) == (
        "converse",
        "no-strict-declared",
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
    )
    assert [(c.call_id, c.name, c.arguments_raw) for c in verdict.calls] == [
        ("tooluse_1", "get_weather", '{"city":"Paris"}')
    ]
    assert (verdict.finish_reasons, verdict.usage, verdict.output_types) == (
        ["tool_use"],
        {"input_tokens": 40, "output_tokens": 12},
        ["text", "toolUse"],
    )


def test_a_strict_fan_out_is_not_called_void_aws_documents_no_such_conflict():
    verdict = inspect(converse(ask(tool("get_weather", strict=True)), [use("a"), use("b")]))
    assert verdict.state == "strict-serialised"
    assert inspect(converse(ask(tool("get_weather")), [use("a"), use("b")])).state == (
        "fanout-no-strict"
    )


def test_arguments_are_validated_against_the_tool_spec():
    verdict = inspect(converse(ask(tool("get_weather")), [use("a", arguments={"town": "Rome"})]))
    assert [e.message for e in verdict.calls[0].schema_errors] == [
        "Additional properties are not allowed ('town' was unexpected)",
        '"city" is a required property',
    ]


def test_a_forced_tool_narrows_what_can_be_called():
    forced = ask(tool("get_weather", strict=True), tool("lookup"))
    forced["toolConfig"]["toolChoice"] = {"tool": {"name": "lookup"}}
    assert inspect(converse(forced, [use("a", "lookup")])).state == "no-strict-declared"


def test_a_nova_server_tool_is_no_client_call():
    nova = {"toolUse": {"toolUseId": "t1", "name": "nova_grounding", "type": "server_tool_use",
                        "input": {"query": "q"}}}  # fmt: skip
    verdict = inspect(converse(ask(tool("get_weather")), [nova, {"text": "It is 4.0.6."}]))
    assert verdict.calls == [] and verdict.awaiting == []


def test_the_validated_output_format_is_read_as_strict():
    fmt = {"textFormat": {"type": "json_schema", "structure": {"jsonSchema": {
        "schema": json.dumps(SCHEMA), "name": "weather"}}}}  # fmt: skip
    verdict = inspect(converse(ask(outputConfig=fmt), [{"text": '{"city": "Paris"}'}], "end_turn"))
    assert verdict.format_state == "enforced"


def history(*messages: tuple[str, list]) -> dict:
    return {"messages": [{"role": role, "content": content} for role, content in messages]}


def loop(request: dict) -> list[tuple[str, list[str], str]]:
    return [(e.rule, e.ids, e.where) for e in check_loop("converse", request).errors]


ASKED = ("user", [{"text": "Paris and Rome?"}])
CALLED = ("assistant", [use("a"), use("b")])


def test_every_call_answered_in_the_next_message_is_clean_text_beside_them_too():
    assert loop(history(ASKED, CALLED, ("user", [result("a"), result("b")]))) == []
    # LangChain puts the user's text before the results; Bedrock takes it.
    assert (
        loop(history(ASKED, CALLED, ("user", [{"text": "here"}, result("a"), result("b")]))) == []
    )
    # Strands: the results, then the next prompt in a user message of its own.
    strands = history(
        ASKED, CALLED, ("user", [result("a"), result("b")]), ("user", [{"text": "?"}])
    )
    assert loop(strands) == []


def test_a_call_not_answered_in_the_next_message_is_unanswered_even_if_answered_later():
    assert loop(history(ASKED, CALLED, ("user", [result("a")]))) == [
        ("unanswered-call", ["b"], "messages.1")
    ]
    split = history(ASKED, CALLED, ("user", [result("a")]), ("user", [result("b")]))
    assert loop(split) == [
        ("unanswered-call", ["b"], "messages.1"),
        ("orphan-result", ["b"], "messages.3.content.0"),
    ]


def test_orphans_duplicates_failures_and_empty_failures():
    request = history(
        ASKED,
        CALLED,
        ("user", [result("a"), result("a"), result("b", "error", []), result("ghost")]),
    )
    report = check_loop("converse", request)
    assert [(e.rule, e.ids) for e in report.errors] == [
        ("duplicate-result", ["a"]),
        ("empty-result", ["b"]),
        ("orphan-result", ["ghost"]),
    ]
    assert [(r.call_id, r.outcome) for r in report.results] == [
        ("a", "ok"), ("a", "ok"), ("b", "error"), ("ghost", "ok"),
    ]  # fmt: skip
    # An empty result with no error status is not refused: not a finding.
    assert (
        loop(history(ASKED, ("assistant", [use("a")]), ("user", [result("a", content=[])]))) == []
    )


def test_the_strict_subset_is_the_one_aws_lists():
    assert converse_blockers(SCHEMA) == []
    assert converse_blockers({"type": "object", "properties": {"n": {"type": "integer"}}}) == []
    loose = {
        "type": "object",
        "additionalProperties": True,
        "properties": {
            "n": {"type": "integer", "minimum": 1},
            "s": {"type": "string", "maxLength": 9, "format": "regex"},
            "l": {"type": "array", "minItems": 2, "items": {"$ref": "https://x/s.json"}},
            "me": {"$ref": "#"},
        },
    }
    assert sorted(converse_blockers(loose)) == sorted([
        "$: additionalProperties must be false when given (Bedrock structured outputs (the Bedrock user guide))",
        "$.n: minimum is not supported (Bedrock structured outputs (the Bedrock user guide))",
        "$.s: maxLength is not supported (Bedrock structured outputs (the Bedrock user guide))",
        "$.s: format 'regex' is not supported (Bedrock structured outputs (the Bedrock user guide))",
        "$.l: minItems above 1 is not supported (Bedrock structured outputs (the Bedrock user guide))",
        "$.l.items: an external $ref is not supported (Bedrock structured outputs (the Bedrock user guide))",
        "$: a recursive schema is not supported (Bedrock structured outputs (the Bedrock user guide))",
    ])  # fmt: skip


def test_a_converse_stream_gives_the_turn_the_same_call_gives_unstreamed():
    from tooltap.addon.harness.eventstream import converse_event

    events = [
        ("messageStart", {"role": "assistant"}),
        ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Let me look."}}),
        ("contentBlockStop", {"contentBlockIndex": 0}),
        ("contentBlockStart", {"contentBlockIndex": 1,
                               "start": {"toolUse": {"toolUseId": "tooluse_1", "name": "get_weather"}}}),
        ("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"toolUse": {"input": '{"city":'}}}),
        ("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"toolUse": {"input": ' "Paris"}'}}}),
        ("contentBlockStop", {"contentBlockIndex": 1}),
        ("messageStop", {"stopReason": "tool_use"}),
        ("metadata", {"usage": {"inputTokens": 40, "outputTokens": 12}, "metrics": {"latencyMs": 9}}),
    ]  # fmt: skip
    stream = b"".join(converse_event(kind, payload) for kind, payload in events)
    streamed = inspect(
        converse(ask(tool("get_weather")), []).model_copy(
            update={
                "url": URL + "-stream",
                "response_headers": {"content-type": "application/vnd.amazon.eventstream"},
                "response_body": stream,
            }
        )
    )
    whole = inspect(
        converse(ask(tool("get_weather")), [{"text": "Let me look."}, use("tooluse_1")])
    )
    assert (streamed.stream, streamed.reason) == (True, None)
    keep = ("state", "calls", "finish_reasons", "usage", "output_types", "request_model")
    assert {k: getattr(streamed, k) for k in keep} == {k: getattr(whole, k) for k in keep}


def test_a_refusal_is_named_by_the_header_aws_puts_its_type_in():
    message = "Expected toolResult blocks at messages.2.content for the following Ids: tooluse_b"
    refused = converse(ask(tool("get_weather")), []).model_copy(
        update={
            "status": 400,
            "response_headers": {
                "content-type": "application/json",
                "x-amzn-errortype": "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/",
            },
            "response_body": json.dumps({"message": message}).encode(),
        }
    )
    rejected = inspect(refused).rejected
    assert (rejected.status, rejected.type, rejected.message) == (
        400,
        "ValidationException",
        message,
    )
    unnamed = refused.model_copy(update={"response_headers": {"content-type": "application/json"}})
    assert inspect(unnamed).rejected.type == ""
