"""The log sink's argument policy: what each tooltap_log_arguments mode lets through."""

import io
import json

import pytest
from structlog.testing import LogCapture

from tooltap.addon.sinks.log import JOIN_KEYS, ExchangeIds, LogSink, short_id
from tooltap.addon.sinks.redaction import (
    ArgumentPolicy,
    HashKeyError,
    hash_key,
    hash_key_problem,
    hash_key_shared,
    redact_text,
)
from tooltap.core import Exchange, Verdict, inspect

FLOW = "5a3c1e2f-9b7d-4c11-8e2a-0d6f1b2c3d4e"  # a mitmproxy flow id
REQUEST = {
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "login",
                "parameters": {
                    "type": "object",
                    "properties": {"user": {"type": "string"}, "password": {"type": "integer"}},
                },
            },
        }
    ]
}
RESPONSE = {
    "id": "c",
    "model": "m",
    "choices": [
        {
            "index": 0,
            "message": {
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {
                            "name": "login",
                            "arguments": '{"user": "ann", "password": "hunter2-SECRET", "nested": {"api_key": "k-SECRET"}}',
                        },
                    }
                ]
            },
        }
    ],
}


def inspect_chat():
    return inspect(
        Exchange(
            method="POST",
            url="https://api.openai.com/v1/chat/completions",
            request_body=json.dumps(REQUEST).encode(),
            status=200,
            response_headers={"content-type": "application/json"},
            response_body=json.dumps(RESPONSE).encode(),
        )
    )


def events(mode):
    stream = io.StringIO()
    LogSink("json", mode, stream).emit(
        inspect_chat(), "api.openai.com", "/v1/chat/completions", 0.1
    )
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_raw_keeps_the_arguments_byte_exact_and_the_validator_message():
    call = events("raw")[0]
    assert (
        call["arguments_raw"]
        == RESPONSE["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
    )
    assert call["schema_errors"] == [
        {"path": "$.password", "message": '"hunter2-SECRET" is not of type "integer"'}
    ]


def test_redact_masks_secret_keys_at_any_depth_and_the_messages_that_quote_them():
    logged = json.dumps(events("redact"))
    assert "SECRET" not in logged
    call = events("redact")[0]
    assert (
        call["arguments_raw"]
        == '{"user":"ann","password":"[redacted]","nested":{"api_key":"[redacted]"}}'
    )
    assert call["schema_errors"] == [{"path": "$.password", "message": "[redacted]"}]


def test_hash_is_keyed_and_omit_drops_the_arguments():
    assert "SECRET" not in json.dumps(events("hash")) + json.dumps(events("omit"))
    a, b = ArgumentPolicy("hash", b"key-one"), ArgumentPolicy("hash", b"key-two")
    assert a.arguments("1234") != b.arguments("1234")  # not a bare digest of a short secret
    assert a.arguments("1234") == ArgumentPolicy("hash", b"key-one").arguments("1234")
    assert events("omit")[0]["arguments_raw"] is None


def test_the_hash_key_comes_from_the_environment_else_the_file_it_names_else_is_drawn(
    monkeypatch, tmp_path
):
    monkeypatch.delenv("TOOLTAP_HASH_KEY", raising=False)
    monkeypatch.delenv("TOOLTAP_HASH_KEY_FILE", raising=False)
    assert hash_key() != hash_key() and not hash_key_shared()  # drawn, one per process
    (tmp_path / "key").write_text("a1b2c3d4e5f6\n")
    monkeypatch.setenv("TOOLTAP_HASH_KEY_FILE", str(tmp_path / "key"))
    assert hash_key() == b"a1b2c3d4e5f6" and hash_key_shared() and hash_key_problem() is None
    monkeypatch.setenv("TOOLTAP_HASH_KEY", "from-the-environment")  # the variable wins
    assert hash_key() == b"from-the-environment"


@pytest.mark.parametrize("content", [None, "", " \n"])
def test_a_key_file_named_but_missing_or_empty_is_an_error_never_a_key_drawn_instead(
    monkeypatch, tmp_path, content
):
    monkeypatch.delenv("TOOLTAP_HASH_KEY", raising=False)
    path = tmp_path / "key"
    if content is not None:
        path.write_text(content)
    monkeypatch.setenv("TOOLTAP_HASH_KEY_FILE", str(path))
    with pytest.raises(HashKeyError):
        hash_key()
    problem = hash_key_problem()
    assert problem is not None and problem.startswith(f"TOOLTAP_HASH_KEY_FILE={path}: ")


def test_truncated_arguments_are_redacted_by_pattern():
    assert redact_text('{"user": "ann", "token": "abc') == '{"user": "ann", "token": "[redacted]"'
    assert (
        ArgumentPolicy("redact").message("bad key sk-abcdefghijkl12 in Bearer abcdefghij123")
        == "bad key [redacted] in [redacted]"
    )


def captured(verdict, mode="raw"):
    capture = LogCapture()
    sink = LogSink(arguments=mode, stream=io.StringIO(), processors=[capture])
    sink.emit(verdict, "api.openai.com", "/v1/chat/completions", 0.25)
    return capture.entries


def test_the_events_are_data_a_tool_call_then_the_turn_that_sums_it_up():
    call, turn = captured(inspect_chat())
    assert (call["event"], call["log_level"], call["call_id"], call["name"]) == (
        "tool_call",
        "warning",  # its argument fails the schema
        "call_1",
        "login",
    )
    assert (turn["event"], turn["log_level"], turn["calls"], turn["inspect_ms"]) == (
        "turn",
        "warning",
        1,
        0.25,
    )
    assert (turn["host"], turn["path"], turn["state"]) == (
        "api.openai.com",
        "/v1/chat/completions",
        "no-strict-declared",
    )


def test_a_fan_out_without_strict_is_reported_at_info_and_a_finding_at_warning():
    fanout = Verdict(api="chat", outcome="inspected", state="fanout-no-strict")
    void = Verdict(api="chat", outcome="inspected", state="strict-void")
    cut = Verdict(api="chat", outcome="unparseable", reason="response body is not JSON")
    assert [captured(v)[-1]["log_level"] for v in (fanout, void, cut)] == [
        "info",
        "warning",
        "warning",
    ]


def test_what_a_session_says_outside_its_turns_is_logged_without_a_turn_line():
    said = Verdict(
        api="realtime",
        outcome="inspected",
        transport="websocket",
        scope="session",
        session_errors=[{"type": "input_audio_buffer_commit_empty", "message": "too small"}],
        loop_errors=[
            {"rule": "unanswered-call", "ids": ["call_b"], "where": "w", "repair": "r"},
            {"rule": "unanswered-at-close", "ids": ["call_c"], "where": "w", "repair": "r"},
        ],
    )
    assert [(e["event"], e["log_level"]) for e in captured(said)] == [
        ("loop_error", "warning"),
        ("loop_error", "info"),  # a hang-up while a tool ran fails nothing by default
        ("session_error", "info"),
    ]
    session_error = captured(said)[-1]
    assert (session_error["type"], session_error["message"]) == (
        "input_audio_buffer_commit_empty",
        "too small",
    )


def test_nothing_reaches_the_stream_when_the_processors_capture_the_events():
    stream, capture = io.StringIO(), LogCapture()
    LogSink(stream=stream, processors=[capture]).emit(inspect_chat(), "h", "/p", 0.0)
    assert stream.getvalue() == "" and len(capture.entries) == 2


def test_a_hosted_call_is_a_tool_call_line_that_names_its_server_and_no_client_call():
    hosted = {
        "call_id": "mcp_1",
        "name": "search_events",
        "type": "mcp_call",
        "arguments_raw": "{}",
        "hosted": True,
        "server": "google_calendar",
    }
    verdict = Verdict(
        api="responses", outcome="inspected", state="no-strict-declared", calls=[hosted]
    )
    call, no_call, turn = captured(verdict)
    assert (call["event"], call["call_id"], call["hosted"], call["server"]) == (
        "tool_call",
        "mcp_1",
        True,
        "google_calendar",
    )
    # The model called none of the client's tools: as without the hosted call.
    assert (no_call["event"], turn["event"], turn["calls"]) == ("no_tool_call", "turn", 0)


def test_every_line_of_an_exchange_carries_its_id_response_model_and_path():
    verdict = Verdict(
        api="chat",
        outcome="inspected",
        response_id="chatcmpl-9",
        model="gpt-4o",
        state="fanout-no-strict",
        calls=[
            {
                "call_id": "call_a",
                "name": "f",
                "type": "function",
                "arguments_raw": "{",
                "parse_error": {"type": "JSONDecodeError", "message": "EOF", "position": 1},
            },
            {"call_id": "call_b", "name": "g", "type": "function", "arguments_raw": "{}"},
        ],
        loop_errors=[{"rule": "orphan-result", "ids": ["call_x"], "where": "w", "repair": "r"}],
        tool_results=[{"call_id": "call_y", "where": "messages.3", "outcome": "error"}],
        rejected={"status": 400, "type": "invalid_request_error", "message": "no"},
    )
    capture = LogCapture()
    sink = LogSink(stream=io.StringIO(), processors=[capture])
    sink.emit(verdict, "h", "/v1/chat/completions", 0.1, ExchangeIds.of_flow(FLOW))
    lines = capture.entries
    assert [line["event"] for line in lines] == [
        "tool_call", "tool_call", "loop_error", "request_rejected", "tool_result_error", "turn",
    ]  # fmt: skip
    for line in lines:
        assert {k: line[k] for k in JOIN_KEYS} == {
            "exchange": "5a3c1e2f9b7d",
            "response_id": "chatcmpl-9",
            "model": "gpt-4o",
            "path": "/v1/chat/completions",
        }
        assert "session" not in line and "turn" not in line  # an HTTP exchange has neither
    # The turn names its findings, each once, in report order.
    assert lines[-1]["findings"] == [
        "fanout-no-strict",
        "argument-parse",
        "orphan-result",
        "rejected",
    ]


def test_a_sockets_lines_carry_its_session_and_turn_and_the_session_lines_no_turn():
    turn = Verdict(api="realtime", outcome="inspected", transport="websocket", state="no-tools")
    said = Verdict(
        api="realtime",
        outcome="inspected",
        transport="websocket",
        scope="session",
        session_errors=[{"type": "x", "message": "y"}],
    )
    capture = LogCapture()
    sink = LogSink(stream=io.StringIO(), processors=[capture])
    sink.emit(turn, "h", "/v1/realtime", 0.1, ExchangeIds.of_socket(FLOW, 3))
    sink.emit(said, "h", "/v1/realtime", 0.1, ExchangeIds.of_socket(FLOW, None))
    (turn_line, session_line) = capture.entries
    assert (turn_line["exchange"], turn_line["session"], turn_line["turn"]) == (
        "5a3c1e2f9b7d.3",
        "5a3c1e2f9b7d",
        3,
    )
    assert (session_line["event"], session_line["exchange"], session_line["turn"]) == (
        "session_error",
        "5a3c1e2f9b7d",
        None,
    )


def test_an_exchange_without_a_flow_gets_a_fresh_id_of_the_same_shape():
    first, second = short_id(""), short_id("")
    assert first != second and len(first) == len(second) == 12
    assert int(first, 16) >= 0  # hex digits


def test_a_tool_time_line_per_answered_call_and_the_turn_says_its_time_and_tokens():
    on_time = {"call_id": "c1", "name": "f", "waited_ms": 900.0, "issued_at": 1, "answered_at": 2}
    late = on_time | {"call_id": "c2", "waited_ms": 75000.0, "late": True}
    verdict = Verdict(
        api="chat",
        outcome="inspected",
        model="gpt-4o",
        state="no-tools",
        duration_ms=640.5,
        first_token_ms=None,
        usage={"input_tokens": 30, "output_tokens": 2, "reasoning_tokens": 0},
        tool_wait_ms=75000.0,
        tool_times=[on_time, late],
    )
    entries = captured(verdict)
    timed = [e for e in entries if e["event"] == "tool_time"]
    assert [(e["call_id"], e["waited_ms"], e["late"], e["log_level"]) for e in timed] == [
        ("c1", 900.0, False, "info"),
        ("c2", 75000.0, True, "warning"),
    ]
    assert "issued_at" not in timed[0] and timed[0]["ran_ms"] is None
    (turn,) = [e for e in entries if e["event"] == "turn"]
    assert (turn["duration_ms"], turn["first_token_ms"], turn["tool_wait_ms"]) == (
        640.5,
        None,
        75000.0,
    )
    assert (turn["input_tokens"], turn["output_tokens"], turn["reasoning_tokens"]) == (30, 2, 0)
    assert "cached_input_tokens" not in turn  # not broken out by this API: not said
    quiet = [e for e in captured(Verdict(api="chat", outcome="inspected")) if e["event"] == "turn"]
    assert quiet[0]["input_tokens"] is None and "tool_wait_ms" not in quiet[0]
