"""The Realtime API read as the Responses turn it mirrors: its turn, its final event, its loop."""

import pytest

from tooltap.core import parallel
from tooltap.core.dialects import realtime
from tooltap.core.loop import REPAIRS

SESSION = {
    "tools": [
        {
            "type": "function",
            "name": "get_weather",
            "strict": True,  # not honoured by Realtime function tools
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        }
    ]
}


def call(call_id, status="completed", arguments='{"city":"Paris"}'):
    return {
        "type": "function_call",
        "id": f"item_{call_id}",
        "call_id": call_id,
        "name": "get_weather",
        "arguments": arguments,
        "status": status,
    }


def test_a_response_is_read_as_a_realtime_turn_with_the_sessions_tools():
    response = {
        "id": "resp_1",
        "status": "completed",
        "output": [call("call_1"), {"type": "message", "role": "assistant", "content": []}],
        # A response carries no tool list of its own to trust: the session's count.
        "tools": [{"type": "function", "name": "other", "strict": True}],
    }
    turn = realtime.read_turn(SESSION, response)
    assert (turn.api, turn.response_id) == ("realtime", "resp_1")
    assert [(t.name, t.strict, t.parameters) for t in turn.tools] == [
        ("get_weather", None, SESSION["tools"][0]["parameters"])
    ]
    assert [(c.call_id, c.arguments_raw) for c in turn.calls] == [("call_1", '{"city":"Paris"}')]
    assert turn.awaiting == ["call_1"]
    assert turn.output_types == ["function_call", "message"]


def test_a_call_cut_off_by_a_cancelled_response_is_not_a_call():
    response = {
        "id": "resp_2",
        "status": "cancelled",
        "output": [call("call_1"), call("call_2", "incomplete", '{"ci'), "junk"],
    }
    turn = realtime.read_turn(SESSION, response)
    assert [c.call_id for c in turn.calls] == ["call_1"]
    assert turn.awaiting == ["call_1"]
    # Only an incomplete function call is dropped: an incomplete message is still output.
    message = {"type": "message", "status": "incomplete", "role": "assistant"}
    assert realtime.read_turn(SESSION, {"output": [message]}).output_types == ["message"]


def test_realtime_is_never_spoken_over_http():
    assert realtime.recognise("POST", "/v1/realtime") is False
    assert realtime.recognise("GET", "/v1/realtime") is False


def test_response_done_is_the_final_event_and_created_opens_it():
    assembler = realtime.Assembler()
    assembler.event(
        {"type": "response.created", "response": {"id": "resp_3", "status": "in_progress"}}
    )
    # Responses' own final events mean nothing on a Realtime socket.
    assembler.event({"type": "response.completed", "response": {"id": "resp_x", "output": []}})
    assert not assembler.complete
    assert assembler.result() == {"id": "resp_3", "status": "incomplete", "output": []}
    final = {"id": "resp_3", "status": "completed", "output": [call("call_1")]}
    assembler.event({"type": "response.done", "response": final})
    assert assembler.complete
    assert assembler.result() == final


def test_a_call_still_owed_is_not_owed_by_this_request():
    # The client answered nothing yet: the model may be waiting on a slow tool.
    request = {"previous_response_id": "resp_1", "input": []}
    assert realtime.check_loop(request, {"resp_1": ["call_1"]}).errors == []
    # An output for a call nobody made is still an orphan, named by where items come from.
    orphan = {"type": "function_call_output", "call_id": "call_9", "output": "x"}
    request = {"previous_response_id": "resp_1", "input": [orphan]}
    errors = realtime.check_loop(request, {"resp_1": ["call_1"]}).errors
    assert [(e.rule, e.ids, e.where) for e in errors] == [
        ("orphan-result", ["call_9"], "conversation.item.create.0")
    ]


def test_a_fan_out_without_strict_is_repaired_in_realtimes_terms():
    assert realtime.state_repairs("fanout-no-strict") == [
        "Realtime function tools have no strict mode, so no schema guarantee was in place "
        "to lose. Validate the arguments in your handler before running the tool, and "
        "answer an invalid call with a function_call_output that says what was wrong."
    ]


@pytest.mark.parametrize("state", ["no-tools", "no-strict-declared", "strict-void"])
def test_other_states_are_repaired_as_everywhere(state):
    assert realtime.state_repairs(state) == parallel.repair_lines(state)


# A Realtime call may be answered several responses later: the repair says so.
UNANSWERED = (
    "send a function_call_output with its call_id for every call, as soon as its "
    "tool finishes (a failed tool gets one describing the failure): the model "
    "answered later turns without this result, and the session ended without it."
)


def test_what_is_owed_when_the_socket_closes():
    assert realtime.owed_at_close([], [], "session") == []
    errors = realtime.owed_at_close(["call_1", "call_2"], ["call_3"], "session sess_1")
    assert [(e.rule, e.ids, e.where, e.repair) for e in errors] == [
        ("unanswered-call", ["call_1", "call_2"], "session sess_1", UNANSWERED),
        ("unanswered-at-close", ["call_3"], "session sess_1", REPAIRS["unanswered-at-close"]),
    ]
    assert [e.rule for e in realtime.owed_at_close([], ["call_3"], "s")] == ["unanswered-at-close"]
