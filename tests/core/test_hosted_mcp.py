"""Hosted MCP calls: the Responses API's `mcp` tool and Anthropic's MCP connector run MCP calls
inside a model turn. Their arguments are checked (against the server's list where the turn holds
it), their failures counted, and none of it touches the client's turn: state, loop, awaiting."""

import copy
import json
from pathlib import Path

from support.captures import JSON, URLS, exchange_of

from tooltap.core import inspect
from tooltap.core.dialects import responses
from tooltap.core.findings import findings, occurrences

CORPUS = Path(__file__).parents[1] / "corpus" / "realworld" / "exchanges.jsonl"
RECORDS = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines()]


def recorded(source_part):
    (record,) = [r for r in RECORDS if source_part in r["source"]]
    return record


# pydantic-ai's Responses turn with the hosted mcp tool: an mcp_list_tools, then two mcp_calls.
CALENDAR = recorded("test_openai_responses_model_mcp_server_tool_with_connector.yaml#0")
CALENDAR_REQUEST = json.loads(CALENDAR["request_body"])
CALENDAR_RESPONSE = json.loads(CALENDAR["response_body"])
FIRST_CALL = "mcp_0558010cf1416a490068faa0fdf64481a085a3e5b8f7d6559a"
SECOND_CALL = "mcp_0558010cf1416a490068faa102400481a09fa35e84bc26c170"
BAD_ARGUMENTS = '{"max_results": "fifty", "calendar_id": 7, "query": null}'
BAD_ERRORS = [
    ("$.max_results", '"fifty" is not of type "integer"'),
    ("$.calendar_id", "7 is not valid under any of the schemas listed in the 'anyOf' keyword"),
]


def verdict_of(request, response, url=URLS["responses"], headers=JSON):
    body = response if isinstance(response, bytes) else json.dumps(response).encode()
    api = "messages" if "/messages" in url else "responses"
    changes = {"url": url, "response_headers": headers, "response_body": body}
    return inspect(exchange_of(api, request, {}, **changes))


def calendar(arguments=None, list_in=("output",), **changes):
    """The recorded turn, the first call's arguments replaced, its tool list moved or dropped."""
    request, response = copy.deepcopy(CALENDAR_REQUEST), copy.deepcopy(CALENDAR_RESPONSE)
    listing = response["output"][0]
    assert listing["type"] == "mcp_list_tools"
    if arguments is not None:
        response["output"][2]["arguments"] = arguments
    response["output"][2].update(changes)
    if "output" not in list_in:
        response["output"][0] = {"type": "reasoning", "id": "rs_x", "summary": []}
    if "input" in list_in:
        request["input"].insert(0, listing)
    return verdict_of(request, response)


def told_apart(verdict):
    """Each finding's name and what tells it apart (a baseline's key)."""
    return [(f.name, f.detail) for f in occurrences(verdict)]


def schema_errors(verdict):
    return [[(e.path, e.message) for e in call.schema_errors] for call in verdict.calls]


def test_the_recorded_turn_checks_each_mcp_call_against_the_listed_schema_and_counts_failures():
    verdict = verdict_of(CALENDAR_REQUEST, CALENDAR_RESPONSE)
    assert [(c.call_id, c.name, c.type, c.hosted, c.server) for c in verdict.calls] == [
        (FIRST_CALL, "search_events", "mcp_call", True, "google_calendar"),
        (SECOND_CALL, "search_events", "mcp_call", True, "google_calendar"),
    ]
    # Both argument objects fit the listed input_schema: no error, and the schema applied.
    assert [(c.parse_error, c.schema_errors, c.schema_problem) for c in verdict.calls] == [
        (None, [], None),
        (None, [], None),
    ]
    # Both calls came back with an error (an HTTP 500 from the connector): tool failures.
    assert [(r.call_id, r.where, r.outcome) for r in verdict.tool_results] == [
        (FIRST_CALL, "output.2", "error"),
        (SECOND_CALL, "output.4", "error"),
    ]
    assert (verdict.state, verdict.call_count, verdict.hosted_count) == ("no-tools", 0, 2)
    assert (verdict.awaiting, verdict.duplicates, verdict.repairs) == ([], {}, [])
    assert told_apart(verdict) == []


def test_arguments_off_the_listed_input_schema_are_reported_by_path():
    verdict = calendar(BAD_ARGUMENTS)
    assert schema_errors(verdict) == [BAD_ERRORS, []]
    assert told_apart(verdict) == [("argument-schema", "search_events $.calendar_id,$.max_results")]
    # The provider answers its own calls: the client is told to answer none of them.
    assert verdict.repairs == []


def test_a_list_re_sent_in_the_requests_input_serves_as_well():
    assert schema_errors(calendar(BAD_ARGUMENTS, list_in=("input",))) == [BAD_ERRORS, []]


def test_with_no_list_in_view_the_arguments_are_only_parsed():
    verdict = calendar(BAD_ARGUMENTS, list_in=())
    assert schema_errors(verdict) == [[], []]
    assert told_apart(verdict) == []
    broken = calendar('{"max_results": 5', list_in=())
    assert broken.calls[0].parse_error is not None
    assert told_apart(broken) == [("argument-parse", "search_events")]


def test_a_list_from_another_server_is_not_this_calls_list():
    verdict = calendar(BAD_ARGUMENTS, server_label="other_calendar")
    assert schema_errors(verdict) == [[], []]
    assert verdict.calls[0].server == "other_calendar"


def test_an_mcp_call_with_output_and_no_error_is_ok_and_one_still_running_has_no_result():
    done = calendar(output="no events today", error=None, status="completed")
    assert [(r.call_id, r.where, r.outcome) for r in done.tool_results] == [
        (FIRST_CALL, "output.2", "ok"),
        (SECOND_CALL, "output.4", "error"),
    ]
    running = calendar(output=None, error=None, status="calling")
    assert [(r.call_id, r.outcome) for r in running.tool_results] == [(SECOND_CALL, "error")]


STRICT_TOOL = {
    "type": "function",
    "name": "get_weather",
    "strict": True,
    "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
}


def mixed_turn(client_calls):
    """A strict function tool beside the hosted mcp tool; the response's output is the
    recorded one (its two search_events mcp_calls) plus the given function calls."""
    request = {**CALENDAR_REQUEST, "tools": [*CALENDAR_REQUEST["tools"], STRICT_TOOL]}
    response = {**CALENDAR_RESPONSE, "tools": request["tools"]}
    response["output"] = [*CALENDAR_RESPONSE["output"], *client_calls]
    return verdict_of(request, response)


def test_a_turn_whose_only_calls_are_hosted_keeps_the_state_it_had_without_them():
    verdict = mixed_turn([])
    assert {
        "state": verdict.state,
        "detail": verdict.detail,
        "duplicates": verdict.duplicates,
        "awaiting": verdict.awaiting,
        "call_count": verdict.call_count,
        "repairs": verdict.repairs,
    } == {
        "state": "strict-at-risk",
        "detail": (
            "strict declared on 1 tool(s) with parallel_tool_calls left on, and this turn "
            "happened to return 0 call(s). The configuration is loaded; it did not fire here."
        ),
        "duplicates": {},
        "awaiting": [],
        "call_count": 0,
        "repairs": [
            "this turn was fine and the configuration is not. The same request shape returns "
            "several calls whenever the model decides to, so set parallel_tool_calls false "
            "before it does."
        ],
    }
    # Two hosted calls to one tool are not a client's duplicate, nor a fan-out.
    assert verdict.hosted_count == 2
    assert findings(verdict) == ["strict-at-risk"]


def test_a_client_call_beside_hosted_ones_is_the_turns_only_call():
    call = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": "{}",
        "status": "completed",
    }
    verdict = mixed_turn([call])
    assert [(c.call_id, c.hosted) for c in verdict.calls] == [
        ("call_1", False),
        (FIRST_CALL, True),
        (SECOND_CALL, True),
    ]
    assert (verdict.state, verdict.awaiting, verdict.duplicates) == (
        "strict-at-risk",
        ["call_1"],
        {},
    )
    assert (verdict.call_count, verdict.hosted_count) == (1, 2)
    assert told_apart(verdict) == [("strict-at-risk", "get_weather")]


# pydantic-ai's streamed Messages turn with the MCP connector (deepwiki), and activeagent's
# unstreamed one (github, three calls).
DEEPWIKI = recorded("test_anthropic_mcp_servers_stream.yaml#0")
GITHUB = recorded("docs/actions_examples/mcps.yml#0")
DEEPWIKI_CALL = (
    "mcptoolu_01FZmJ5UspaX5BB9uU339UT1",
    "ask_question",
    "mcp_tool_use",
    '{"repoName":"pydantic/pydantic-ai","question":"What is this repository about? What are '
    'its main features and purpose?"}',
    "deepwiki",
)
MESSAGES = "https://api.anthropic.com/v1/messages?beta=true"


def calls_of(verdict):
    return [(c.call_id, c.name, c.type, c.arguments_raw, c.server) for c in verdict.calls]


def test_a_streamed_mcp_tool_use_is_the_call_the_same_turn_gives_unstreamed():
    request = json.loads(DEEPWIKI["request_body"])
    streamed = verdict_of(
        request, DEEPWIKI["response_body"].encode(), MESSAGES, headers=DEEPWIKI["response_headers"]
    )
    call_id, name, _, arguments, server = DEEPWIKI_CALL
    body = {
        "id": "msg_01Xf6SmUVY1mDrSwFc5RsY3n",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "stop_reason": "end_turn",
        "content": [
            {"type": "thinking", "thinking": "...", "signature": "x"},
            {
                "type": "mcp_tool_use",
                "id": call_id,
                "name": name,
                "input": json.loads(arguments),
                "server_name": server,
            },
            {
                "type": "mcp_tool_result",
                "tool_use_id": call_id,
                "is_error": False,
                "content": [{"type": "text", "text": "a GenAI agent framework"}],
            },
            {"type": "text", "text": "It is an agent framework."},
        ],
    }
    whole = verdict_of({**request, "stream": False}, body, MESSAGES)
    assert calls_of(streamed) == calls_of(whole) == [DEEPWIKI_CALL]
    for verdict in (streamed, whole):
        assert [(c.hosted, c.schema_errors, c.schema_problem) for c in verdict.calls] == [
            (True, [], None)
        ]
        assert [(r.call_id, r.where, r.outcome) for r in verdict.tool_results] == [
            (call_id, "content.2", "ok")
        ]
        assert (verdict.state, verdict.call_count, verdict.awaiting) == ("no-tools", 0, [])


def test_mcp_tool_use_is_parsed_only_and_an_is_error_result_is_a_tool_failure():
    request = json.loads(GITHUB["request_body"])
    body = json.loads(GITHUB["response_body"])
    ok = verdict_of(request, body, MESSAGES)
    assert [(c.name, c.server, c.hosted, c.schema_errors) for c in ok.calls] == [
        ("search_repositories", "github", True, [])
    ] * 3
    assert [(r.where, r.outcome) for r in ok.tool_results] == [
        ("content.4", "ok"),
        ("content.5", "ok"),
        ("content.6", "ok"),
    ]
    body["content"][5]["is_error"] = True
    body["content"][1]["input"] = "not an object"  # input must be an object: a parse error
    failed = verdict_of(request, body, MESSAGES)
    assert [(r.where, r.outcome) for r in failed.tool_results] == [
        ("content.4", "ok"),
        ("content.5", "error"),
        ("content.6", "ok"),
    ]
    assert told_apart(failed) == [("argument-parse", "search_repositories")]
    assert (failed.state, failed.call_count, failed.awaiting, failed.repairs) == (
        "no-tools",
        0,
        [],
        [],
    )


def test_a_cut_responses_stream_rebuilds_an_mcp_calls_arguments_from_its_events():
    item = {"type": "mcp_call", "id": "mcp_1", "name": "search_events", "arguments": ""}
    item |= {"server_label": "google_calendar", "status": "in_progress"}
    delta = "response.mcp_call_arguments.delta"
    events = [
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": delta, "item_id": "mcp_1", "delta": '{"max_results": '},
        {"type": delta, "item_id": "mcp_1", "delta": "5}"},
    ]
    assembler = responses.Assembler()
    for event in events:
        assembler.event(event)
    assert assembler.result()["output"][0]["arguments"] == '{"max_results": 5}'
    done = {"type": "response.mcp_call_arguments.done", "item_id": "mcp_1", "arguments": "{}"}
    assembler.event(done)
    assert assembler.result()["output"][0]["arguments"] == "{}"  # the done text wins
