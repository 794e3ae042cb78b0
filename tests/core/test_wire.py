"""The wire layer: every non-streaming capture read into one Turn, asserted by value."""

import json

import pytest
from support.captures import JSON, URLS, Pair, pairs, spec_pair, text

from tooltap.core import detect_api, inspect, parallel, read_turn
from tooltap.core.dialects import DIALECTS, ROUTE_PATH_KEPT, ROUTES_KEPT, Routes, route


def calls(verdict):
    return [(c.call_id, c.name, c.arguments_raw) for c in verdict.calls]


@pytest.mark.parametrize(
    ("method", "url", "api"),
    [
        ("POST", "https://api.openai.com/v1/responses", "responses"),
        ("POST", "https://api.openai.com/v1/chat/completions", "chat"),
        (
            "POST",
            "https://res.openai.azure.com/openai/deployments/gpt4o/chat/completions?api-version=2024-06-01",
            "chat",
        ),
        (
            "POST",
            "https://res.openai.azure.com/openai/responses?api-version=2025-04-01",
            "responses",
        ),
        ("POST", "https://res.openai.azure.com/openai/v1/chat/completions", "chat"),
        ("POST", "https://api.anthropic.com/v1/messages?beta=true", "messages"),
        ("POST", "http://127.0.0.1:8080/v1/messages/", "messages"),
        ("GET", "https://api.openai.com/v1/responses/resp_1", "responses"),
        ("GET", "https://api.openai.com/v1/chat/completions", None),
        ("DELETE", "https://api.openai.com/v1/responses/resp_1", None),
        ("POST", "https://api.openai.com/v1/responses/resp_1/cancel", None),
        ("POST", "https://api.openai.com/v1/threads/thread_1/messages", None),
        ("POST", "https://api.anthropic.com/v1/messages/count_tokens", None),
        ("POST", "https://api.openai.com/v1/embeddings", None),
        ("POST", "http://[::1", None),
    ],
)
def test_the_dialect_is_detected_from_method_and_path(method, url, api):
    assert detect_api(method, url) == api


def test_chat_parallel_capture_gives_both_calls_with_raw_arguments():
    request = {
        "model": "gpt-4o-2024-08-06",
        "messages": [{"role": "user", "content": "weather in Edinburgh and AAPL"}],
        "tools": [
            {
                "type": "function",
                "function": {"name": "GetWeatherArgs", "strict": True, "parameters": {}},
            },
            {
                "type": "function",
                "function": {"name": "get_stock_price", "strict": True, "parameters": {}},
            },
        ],
    }
    pair = Pair(
        URLS["chat"], request, 200, JSON, text("chat_nonstream_parallel_tool_calls.json").encode()
    )
    verdict = inspect(pair.exchange())
    assert verdict.api == "chat"
    assert verdict.model == "gpt-4o-2024-08-06"
    assert verdict.response_id == "chatcmpl-ABfvyvfNWKcl7Ohqos4UFrmMs1v4C"
    assert calls(verdict) == [
        (
            "call_fdNz3vOBKYgOIpMdWotB9MjY",
            "GetWeatherArgs",
            '{"city": "Edinburgh", "country": "GB", "units": "c"}',
        ),
        (
            "call_h1DWI1POMJLb0KwIyQHWXD4p",
            "get_stock_price",
            '{"ticker": "AAPL", "exchange": "NASDAQ"}',
        ),
    ]
    assert verdict.state == "strict-void"


def test_the_chat_spec_example_keeps_its_multiline_arguments_byte_exact():
    verdict = inspect(
        spec_pair(
            "openapi_chat_functions_request.json", "openapi_chat_functions_response.json", "chat"
        ).exchange()
    )
    assert (verdict.api, verdict.model) == ("chat", "gpt-4o-mini")
    assert calls(verdict) == [
        ("call_abc123", "get_current_weather", '{\n"location": "Boston, MA"\n}')
    ]
    assert verdict.state == "no-strict-declared"
    assert verdict.calls[0].schema_errors == []


def test_responses_prefers_the_echo_where_an_absent_strict_resolved_on_the_server():
    pair = spec_pair(
        "openapi_responses_functions_request.json",
        "openapi_responses_functions_response.json",
        "responses",
    )
    assert "strict" not in pair.request["tools"][0]
    verdict = inspect(pair.exchange())
    assert (verdict.api, verdict.model) == ("responses", "gpt-5.4")
    assert verdict.response_id == "resp_67ca09c5efe0819096d0511c92b8c890096610f474011cc0"
    assert calls(verdict) == [
        (
            "call_unLAR8MvFNptuiZK6K6HCy5k",
            "get_current_weather",
            '{"location":"Boston, MA","unit":"celsius"}',
        )
    ]
    assert verdict.state == "strict-at-risk"
    # Without the echo the request alone claims no strict tool.
    assert read_turn("responses", pair.request, {}).tools[0].strict is None


def test_a_responses_turn_without_calls_records_its_output_types():
    pair = Pair(
        URLS["responses"],
        {"model": "gpt-4o-mini", "input": "hi"},
        200,
        JSON,
        text("responses_nonstream_text_openai_python_snapshot.json").encode(),
    )
    verdict = inspect(pair.exchange())
    assert (verdict.model, verdict.calls, verdict.output_types) == (
        "gpt-4o-mini-2024-07-18",
        [],
        ["message"],
    )
    assert verdict.state == "no-tools"


@pytest.mark.parametrize(
    ("name", "index", "model", "expected"),
    [
        (
            "anthropic_400_orphan_tool_result.json",
            0,
            "claude-haiku-4-5-20251001",
            [
                (
                    "toolu_01GHndag5wQmbzNihYmV2UBj",
                    "get_weather",
                    '{"location":"San Francisco, CA","units":"c"}',
                )
            ],
        ),
        (
            "anthropic_roundtrip_tool_use_tool_result.json",
            0,
            "claude-haiku-4-5-20251001",
            [
                (
                    "toolu_011bpynHqFZ9P4u5rSaXsTJQ",
                    "get_weather",
                    '{"location":"San Francisco, CA","units":"f"}',
                )
            ],
        ),
        ("anthropic_roundtrip_tool_use_tool_result.json", 1, "claude-haiku-4-5-20251001", []),
        (
            "anthropic_roundtrip_tool_result_is_error.json",
            0,
            "claude-haiku-4-5-20251001",
            [
                (
                    "toolu_01A9HHF5Ezy3oBrKmSgfASm9",
                    "get_weather",
                    '{"location":"San Francisco, CA","units":"f"}',
                )
            ],
        ),
        (
            "pydanticai_anthropic_parallel_tool_calls.yaml",
            0,
            "claude-haiku-4-5-20251001",
            [
                ("toolu_0167cfEnoQaPviGdVXA95zcu", "retrieve_entity_info", '{"name":"Alice"}'),
                ("toolu_01EEe2V5HD1Ac4rKiUR4HD2T", "retrieve_entity_info", '{"name":"Bob"}'),
                ("toolu_01XFyAjstT3966qvRynZyVPo", "retrieve_entity_info", '{"name":"Charlie"}'),
                ("toolu_013mnQZbgtK2oe3Mo3XKJsx3", "retrieve_entity_info", '{"name":"Daisy"}'),
            ],
        ),
        (
            "pydanticai_gemini_openai_compat_empty_tool_call_id.yaml",
            0,
            "gemini-2.5-pro-preview-05-06",
            [("", "get_current_time", "{}")],
        ),
        (
            "pydanticai_test_anthropic_mixed_strict_tool_run.yaml",
            0,
            "claude-sonnet-4-5-20250929",
            [("toolu_01Ttepb9joVoQFHP568v7UAL", "country_source", "{}")],
        ),
        (
            "pydanticai_test_anthropic_mixed_strict_tool_run.yaml",
            1,
            "claude-sonnet-4-5-20250929",
            [("toolu_011j5uC2Tg3TZJo3nmLtJ8Mm", "capital_lookup", '{"country":"Japan"}')],
        ),
        (
            "pydanticai_test_native_output.yaml",
            0,
            "gpt-4o-2024-08-06",
            [("call_tTAThu8l2S9hNky2krdwijGP", "get_user_country", "{}")],
        ),
        (
            "pydanticai_test_openai_responses_model_simple_response_with_tool_call.yaml",
            0,
            "gpt-4o-2024-08-06",
            [("call_YfwRsW8sUxDKipwyhWTzOXCA", "get_capital", '{"country":"PotatoLand"}')],
        ),
    ],
)
def test_every_non_streaming_capture_yields_its_dialect_model_and_calls(
    name, index, model, expected
):
    pair = pairs(name)[index]
    verdict = inspect(pair.exchange())
    assert verdict.api == detect_api("POST", pair.url)
    assert verdict.outcome == "inspected"
    assert verdict.model == model
    assert calls(verdict) == expected
    assert all(c.parse_error is None and c.schema_errors == [] for c in verdict.calls)


def test_anthropic_strict_tools_are_read_and_never_voided_by_parallel_calls():
    verdict = inspect(pairs("pydanticai_test_anthropic_mixed_strict_tool_run.yaml")[0].exchange())
    assert verdict.state == "strict-serialised"
    assert "documents no conflict" in verdict.detail


def test_disable_parallel_tool_use_is_anthropics_parallel_tool_calls_false():
    request = {
        "model": "claude",
        "tools": [{"name": "t", "input_schema": {"type": "object"}, "strict": True}],
        "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
    }
    turn = read_turn("messages", request, {"content": []})
    assert turn.parallel_tool_calls is False
    assert parallel.classify_turn(turn)[0] == "strict-serialised"


def test_native_output_reads_the_flat_text_format_beside_a_loose_tool():
    verdict = inspect(pairs("pydanticai_test_native_output.yaml")[0].exchange())
    assert verdict.format_state == "advisory-tools"
    assert "get_user_country" in verdict.format_detail


def test_namespaced_custom_and_builtin_tools_are_told_apart():
    request = {
        "tools": [
            {"type": "web_search"},
            {
                "type": "namespace",
                "name": "crm",
                "tools": [
                    {
                        "type": "function",
                        "name": "lookup",
                        "strict": True,
                        "parameters": {"type": "object"},
                    }
                ],
            },
            {
                "type": "custom",
                "name": "write_sql",
                "format": {"type": "grammar", "syntax": "regex", "definition": "SELECT .+"},
            },
        ]
    }
    response = {
        "output": [
            {"type": "web_search_call", "id": "ws_1", "status": "completed"},
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "lookup",
                "namespace": "crm",
                "arguments": "{}",
            },
            {
                "type": "custom_tool_call",
                "call_id": "call_2",
                "name": "write_sql",
                "input": "SELECT 1",
            },
        ]
    }
    turn = read_turn("responses", request, response)
    assert [(t.name, t.type, t.namespace) for t in turn.tools] == [
        ("lookup", "function", "crm"),
        ("write_sql", "custom", None),
    ]
    assert [(c.call_id, c.type, c.arguments_raw) for c in turn.calls] == [
        ("call_1", "function_call", "{}"),
        ("call_2", "custom_tool_call", "SELECT 1"),
    ]
    assert turn.tool(turn.calls[0]).namespace == "crm"
    assert turn.output_types == ["web_search_call", "function_call", "custom_tool_call"]
    assert turn.awaiting == ["call_1", "call_2"]


def test_junk_is_tolerated_and_the_good_items_still_found():
    request = {
        "tools": [
            None,
            "x",
            {"type": "function", "function": None},
            {"type": "function", "function": {"name": "ok"}},
        ],
        "parallel_tool_calls": "yes",
    }
    response = {
        "choices": [
            None,
            {
                "index": 0,
                "message": {
                    "tool_calls": [
                        7,
                        {"id": "c", "function": {"name": "ok", "arguments": {"a": 1}}},
                    ]
                },
            },
        ]
    }
    turn = read_turn("chat", request, response)
    assert [t.name for t in turn.tools] == ["ok"]
    assert turn.parallel_tool_calls is None
    assert [(c.call_id, c.arguments_raw) for c in turn.calls] == [("c", '{"a":1}')]
    assert read_turn("messages", [1, 2], "nonsense").calls == []


def test_the_legacy_functions_field_and_function_call_are_read():
    request = {"functions": [{"name": "f", "parameters": {"type": "object"}}]}
    response = {"choices": [{"message": {"function_call": {"name": "f", "arguments": "{}"}}}]}
    turn = read_turn("chat", request, response)
    assert [t.name for t in turn.tools] == ["f"]
    assert [(c.name, c.arguments_raw) for c in turn.calls] == [("f", "{}")]
    assert turn.output_types == ["function_call"]


def test_anthropic_structured_output_is_enforced_by_construction():
    schema = {"type": "object", "properties": {}, "additionalProperties": False, "required": []}
    request = {"output_config": {"format": {"type": "json_schema", "schema": schema}}}
    verdict = inspect(
        Pair(URLS["messages"], request, 200, JSON, json.dumps({"content": []}).encode()).exchange()
    )
    assert verdict.format_state == "enforced"


def test_the_path_table_is_remembered_within_its_bounds():
    """What the table says of a path is kept for the next request on it: a bounded number of
    paths, none longer than the bound, each answered as the table answers it afresh."""
    routes = Routes()
    for n in range(ROUTES_KEPT + 10):
        assert routes.route("GET", f"/v1/responses/resp_{n}") == (None, "responses")
    assert 0 < len(routes) <= ROUTES_KEPT
    long = "/" + "v" * ROUTE_PATH_KEPT + "/chat/completions"
    assert routes.route("POST", long) == (None, "chat")
    assert len(routes) == 10  # full: forgotten at once, then the ten past it; the long one never
    for method, path in [("POST", "/v1/chat/completions"), ("POST", "/v1/messages"),
                         ("POST", "/model/anthropic.claude-3/invoke"), ("GET", "/v1/models"),
                         ("POST", "/api/chat"), ("POST", "/mcp")]:  # fmt: skip
        fresh = next((d.api for d in DIALECTS.values() if d.recognise(method, path)), None)
        assert routes.route(method, path) == route(method, path)
        assert routes.route(method, path)[1] == fresh  # the second time, from memory
