"""OpenAI Responses, read field by field: the stream rebuilt when cut, the turn, its paths."""

import json

import pytest
from support.captures import text

from tooltap.core.dialects import responses


def events_of(name):
    return [json.loads(line) for line in text(name).splitlines() if line.strip()]


def assemble(*events):
    assembler = responses.Assembler()
    for event in events:
        assembler.event(event)
    return assembler


def added(index, **item):
    return {"type": "response.output_item.added", "output_index": index, "item": item}


def args_delta(item_id, piece, kind="response.function_call_arguments.delta"):
    return {"type": kind, "item_id": item_id, "delta": piece}


# --- Assembler ---------------------------------------------------------------------------


def test_a_whole_stream_is_its_final_response():
    events = events_of("responses_stream_function_call_gpt51.jsonl")
    assembler = assemble(*events)
    assert assembler.complete
    assert assembler.result() == events[-1]["response"]


@pytest.mark.parametrize("final", ["response.completed", "response.incomplete", "response.failed"])
def test_each_final_event_ends_the_stream(final):
    assembler = assemble({"type": final, "response": {"id": "resp_1", "status": "x", "output": []}})
    assert assembler.complete
    assert assembler.result() == {"id": "resp_1", "status": "x", "output": []}


def test_a_final_event_without_a_response_object_ends_nothing():
    assert not assemble({"type": "response.completed", "response": "junk"}).complete
    assert not assemble({"type": "response.completed"}).complete


def test_a_cut_stream_is_rebuilt_from_its_items_and_deltas():
    events = events_of("responses_stream_function_call_gpt51.jsonl")
    # Cut after the argument deltas, before .done and response.completed.
    assembler = assemble(*events[:9])
    assert not assembler.complete
    rebuilt = assembler.result()
    created = events[0]["response"]
    assert rebuilt == created | {
        "status": "incomplete",
        "output": [
            {
                "id": "fc_0775572d10a16b66006a8d8528e8a887d2a32ef76463d40c98",
                "type": "function_call",
                "status": "in_progress",
                "arguments": '{"city":"Beijing"}',
                "call_id": "call_2FQdm3Br7Qb35YUBSkDR7kue",
                "name": "get_weather",
            }
        ],
    }


def test_a_cut_custom_tool_call_gets_its_input_from_the_deltas():
    events = events_of("responses_stream_custom_tool_call_SYNTHETIC.jsonl")
    (item,) = assemble(*events[:6]).result()["output"]
    assert (item["type"], item["input"]) == (
        "custom_tool_call",
        "SELECT * FROM users WHERE age > 25",
    )
    assert "arguments" not in item


@pytest.mark.parametrize("start", ["response.created", "response.in_progress", "response.queued"])
def test_the_newest_start_event_is_the_base_of_a_rebuilt_response(start):
    assembler = assemble(
        {"type": "response.created", "response": {"id": "resp_1", "model": "a"}},
        {"type": start, "response": {"id": "resp_1", "model": "b"}},
        {"type": "response.in_progress", "response": "junk"},
    )
    assert assembler.result() == {
        "id": "resp_1",
        "model": "b",
        "output": [],
        "status": "incomplete",
    }


def test_the_done_text_wins_over_the_deltas_and_a_completed_item_keeps_its_own():
    assembler = assemble(
        added(0, id="fc_1", type="function_call", status="in_progress", arguments=""),
        args_delta("fc_1", '{"a":'),
        {
            "type": "response.function_call_arguments.done",
            "item_id": "fc_1",
            "arguments": '{"a":1}',
        },
        added(1, id="ct_1", type="custom_tool_call", status="in_progress", input=""),
        args_delta("ct_1", "SEL", "response.custom_tool_call_input.delta"),
        {"type": "response.custom_tool_call_input.done", "item_id": "ct_1", "input": "SELECT 1"},
        # Completed with its arguments: nothing to fill in.
        added(2, id="fc_2", type="function_call", status="completed", arguments='{"b":2}'),
        args_delta("fc_2", '{"stale"'),
        # Completed but empty: filled in from what streamed.
        added(3, id="fc_3", type="function_call", status="completed", arguments=""),
        args_delta("fc_3", "{}"),
        # Nothing streamed for it: left as it came.
        added(4, id="fc_4", type="function_call", status="in_progress", arguments=""),
    )
    output = assembler.result()["output"]
    assert [item.get("arguments", item.get("input")) for item in output] == [
        '{"a":1}',
        "SELECT 1",
        '{"b":2}',
        "{}",
        "",
    ]


def test_items_are_placed_by_output_index_and_replaced_by_their_done_event():
    assembler = assemble(
        added(1, id="msg_1", type="message"),
        added(0, id="rs_1", type="reasoning"),
        {
            "type": "response.output_item.done",
            "output_index": 1,
            "item": {"id": "msg_1", "type": "message", "status": "completed"},
        },
        # No output_index: after the items so far.
        {"type": "response.output_item.added", "item": {"id": "fc_9", "type": "function_call"}},
        {"type": "response.output_item.added", "output_index": 5, "item": "junk"},
    )
    assert [(i["id"], i.get("status")) for i in assembler.result()["output"]] == [
        ("rs_1", None),
        ("msg_1", "completed"),
        ("fc_9", None),
    ]


def test_deltas_that_are_not_text_are_skipped():
    assembler = assemble(
        added(0, id="fc_1", type="function_call", arguments=""),
        args_delta("fc_1", None),
        args_delta("fc_1", "{}"),
        {"type": "response.function_call_arguments.done", "item_id": "fc_1", "arguments": 7},
        {"type": "response.custom_tool_call_input.done", "item_id": "fc_1", "input": None},
    )
    assert assembler.result()["output"][0]["arguments"] == "{}"


def test_the_error_event_is_kept_in_either_shape():
    events = events_of("responses_stream_error_nested_then_failed.jsonl")
    assembler = assemble(*events)
    assert [e.type for e in assembler.errors] == ["insufficient_quota"]
    assert assembler.complete  # response.failed is final
    flat = assemble({"type": "error", "code": "rate_limit_exceeded", "message": "slow down"})
    assert [(e.type, e.message) for e in flat.errors] == [("rate_limit_exceeded", "slow down")]


def test_done_marker_means_nothing_here():
    assembler = responses.Assembler()
    assembler.done_marker()
    assert not assembler.complete


# --- read_turn ---------------------------------------------------------------------------


def test_settings_come_from_the_responses_echo_else_from_the_request():
    request = {
        "parallel_tool_calls": True,
        "tool_choice": "none",
        "text": {"format": {"type": "text"}},
    }
    echo = {
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "text": {"format": {"type": "json_object"}},
    }
    turn = responses.read_turn(request, echo)
    assert (turn.parallel_tool_calls, turn.callable_names, turn.output_format) == (
        False,
        None,
        {"type": "json_object"},
    )
    # A response without the keys (a stored one read back trimmed): the request's.
    turn = responses.read_turn(request, {})
    assert (turn.parallel_tool_calls, turn.callable_names, turn.output_format) == (
        True,
        [],
        {"type": "text"},
    )
    # An echoed null is what the server says, not a gap to fill from the request.
    assert responses.read_turn(request, {"parallel_tool_calls": None}).parallel_tool_calls is None


def test_tools_function_custom_namespaced_and_hosted():
    tools = [
        {"type": "function", "name": "f", "strict": True, "parameters": {"type": "object"}},
        {"name": "untyped", "parameters": {"type": "string"}},  # no type: a function tool
        # A custom tool takes free text: no strict, no JSON Schema.
        {"type": "custom", "name": "sql", "strict": True, "parameters": {"type": "object"}},
        {"type": "function", "name": " "},
        {"type": "web_search"},
        {"type": "mcp", "name": "not-a-client-tool", "server_label": "x"},
        {"type": "namespace", "name": "crm", "tools": [{"type": "function", "name": "lookup"}]},
        # A namespace with no name groups its tools under none.
        {"type": "namespace", "tools": [{"type": "function", "name": "loose"}]},
    ]
    turn = responses.read_turn({"tools": tools}, {})
    assert [(t.name, t.type, t.strict, t.parameters, t.namespace) for t in turn.tools] == [
        ("f", "function", True, {"type": "object"}, None),
        ("untyped", "function", None, {"type": "string"}, None),
        ("sql", "custom", None, None, None),
        ("lookup", "function", None, None, "crm"),
        ("loose", "function", None, None, None),
    ]


def test_a_tool_delivered_again_is_listed_once():
    request = {
        "tools": [{"type": "function", "name": "f", "strict": True}],
        "input": [
            {
                "type": "additional_tools",
                "tools": [{"type": "function", "name": "f", "strict": False}],
            },
            {"type": "tool_search_output", "tools": [{"type": "function", "name": "g"}]},
        ],
    }
    output = [
        {
            "type": "tool_search_output",
            "execution": "server",
            "tools": [{"type": "function", "name": "g"}],
        }
    ]
    turn = responses.read_turn(request, {"output": output})
    assert [(t.name, t.strict) for t in turn.tools] == [("f", True), ("g", None)]


def test_only_function_and_custom_calls_with_a_name_are_calls():
    output = [
        {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"},
        {"type": "function_call", "call_id": "call_2", "name": " ", "arguments": "{}"},
        # Hosted calls carry names too, and the provider runs them.
        {
            "type": "mcp_call",
            "id": "mcp_1",
            "name": "search",
            "arguments": "{}",
            "server_label": "x",
        },
        {"type": "custom_tool_call", "call_id": "call_3", "name": "sql", "input": "SELECT 1"},
    ]
    turn = responses.read_turn({}, {"output": output})
    assert [(c.call_id, c.type, c.arguments_raw) for c in turn.calls] == [
        ("call_1", "function_call", "{}"),
        ("call_3", "custom_tool_call", "SELECT 1"),
    ]


@pytest.mark.parametrize(
    "item, call_id",
    [
        ({"type": "function_call", "call_id": "call_1"}, "call_1"),
        ({"type": "mcp_approval_request", "id": "mcpr_1", "call_id": "x"}, "mcpr_1"),
        # A tool search is the client's to answer only when it runs it.
        ({"type": "tool_search_call", "call_id": "ts_1", "execution": "client"}, "ts_1"),
        ({"type": "tool_search_call", "call_id": "ts_1", "execution": "server"}, ""),
        ({"type": "tool_search_call", "call_id": "ts_1"}, ""),
        # A shell in a hosted container is the provider's.
        ({"type": "shell_call", "call_id": "sh_1"}, "sh_1"),
        ({"type": "shell_call", "call_id": "sh_1", "environment": {"type": "local"}}, "sh_1"),
        ({"type": "shell_call", "call_id": "sh_1", "environment": {"type": "container_auto"}}, ""),
        ({"type": "web_search_call", "id": "ws_1", "call_id": "x"}, ""),
    ],
)
def test_client_call_id(item, call_id):
    assert responses.client_call_id(item) == call_id


@pytest.mark.parametrize(
    "item, ids",
    [
        ({"type": "function_call_output", "call_id": "call_1"}, ["call_1"]),
        ({"type": "mcp_approval_response", "approval_request_id": "mcpr_1"}, ["mcpr_1"]),
        # local_shell_call_output carries the call id in `id` (openai-python).
        ({"type": "local_shell_call_output", "call_id": "ls_1", "id": "ls_2"}, ["ls_1", "ls_2"]),
        ({"type": "local_shell_call_output", "id": "ls_2"}, ["ls_2"]),
        ({"type": "local_shell_call_output", "call_id": "ls_1", "id": "ls_1"}, ["ls_1"]),
        ({"type": "tool_search_output", "call_id": "ts_1", "execution": "client"}, ["ts_1"]),
        # A server tool search's output answers nothing of the client's.
        ({"type": "tool_search_output", "call_id": "ts_1", "execution": "server"}, []),
        ({"type": "function_call", "call_id": "call_1"}, []),
    ],
)
def test_result_call_ids(item, ids):
    assert responses.result_call_ids(item) == ids


@pytest.mark.parametrize(
    "method, path, retrieval",
    [
        ("GET", "/v1/responses/resp_1", True),
        ("get", "/v1/responses/resp_1/", True),
        ("GET", "/openai/v1/responses/resp_1", True),
        ("GET", "/v1/responses/XX", True),  # an id is whatever follows, whatever its letters
        ("GET", "/v1/responses", False),
        ("GET", "/v1/responses/", False),
        ("POST", "/v1/responses/resp_1", False),
        ("GET", "/v1/responses/resp_1/input_items", False),
    ],
)
def test_is_retrieval(method, path, retrieval):
    assert responses.is_retrieval(method, path) is retrieval
    assert responses.recognise(method, path) is retrieval


@pytest.mark.parametrize(
    "method, path, spoken",
    [
        ("POST", "/v1/responses", True),
        ("post", "/openai/responses", True),
        ("PUT", "/v1/responses", False),
    ],
)
def test_recognise_a_new_response(method, path, spoken):
    assert responses.recognise(method, path) is spoken


# --- finish_reasons and unfinished --------------------------------------------------------


@pytest.mark.parametrize(
    "response, reasons",
    [
        ({"status": "completed"}, ["completed"]),
        # An incomplete response says why.
        (
            {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}},
            ["max_output_tokens"],
        ),
        ({"status": "incomplete", "incomplete_details": None}, ["incomplete"]),
        (
            {"status": "completed", "incomplete_details": {"reason": "content_filter"}},
            ["completed"],
        ),
        ({}, []),
    ],
)
def test_finish_reasons(response, reasons):
    assert responses.finish_reasons(response) == reasons


@pytest.mark.parametrize(
    "method, request_, status, stream, complete, waits",
    [
        # A whole body: unfinished while queued or in progress.
        ("POST", {}, "queued", False, True, True),
        ("POST", {}, "in_progress", False, True, True),
        ("POST", {}, "completed", False, True, False),
        ("POST", {}, None, False, True, False),
        # A stream of a background response, or one resumed by GET, cut before its end.
        ("POST", {"background": True}, None, True, False, True),
        ("POST", {"background": True}, None, True, True, False),
        ("GET", None, None, True, False, True),
        ("get", None, None, True, False, True),
        ("POST", {"background": "true"}, None, True, False, False),
        ("POST", {}, None, True, False, False),
    ],
)
def test_unfinished(method, request_, status, stream, complete, waits):
    assert responses.unfinished(method, request_, status, stream, complete) is waits


# --- check_loop --------------------------------------------------------------------------


def test_the_loops_repairs_name_the_call_id_field():
    orphan = {"type": "function_call_output", "call_id": "call_9", "output": "x"}
    (error,) = responses.check_loop({"input": [orphan]}, None).errors
    assert (error.rule, error.ids, error.where) == ("orphan-result", ["call_9"], "input.0")
    assert error.repair == (
        "send a result only for a call in the preceding model turn, with the same call_id; "
        "restore the call it answers or drop the result."
    )
