"""The Gemini Live API read off its socket (tooltap.core.dialects.gemini_live, its session
reader included): its turns, its calls against the setup's declarations, its
loop by id (answered, cancelled, non-blocking and late, never answered), its session signals,
and any messages in any order read without raising or holding bytes past the close.

Client messages are written as google-genai sends them (`tool_response`, `client_content` in
snake_case at the top, camelCase inside); server messages as the harness writes Google's.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.sockets import read_to_the_close

from tooltap.addon.harness import live
from tooltap.addon.inspection.session import Session
from tooltap.core.dialects import detect_socket, gemini_live, socket_reader, socket_reading
from tooltap.core.findings import DEFAULT, findings
from tooltap.core.sockets import SocketClose

URL = "wss://generativelanguage.googleapis.com/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
VERTEX = "wss://us-central1-aiplatform.googleapis.com/ws/google.cloud.aiplatform.v1beta1.LlmBidiService/BidiGenerateContent"
WEATHER, BOOKING = live.WEATHER, live.BOOKING
MODEL = "models/gemini-live-2.5-flash-preview"


def setup(*declarations: dict[str, Any], **more: Any) -> dict[str, Any]:
    tools = [{"functionDeclarations": list(declarations or (WEATHER, BOOKING))}]
    return {"setup": {"model": MODEL, "tools": tools, **more}}


def ask(words: str = "Weather in Paris?") -> dict[str, Any]:
    return {"client_content": {"turns": [{"role": "user", "parts": [{"text": words}]}]}}


def respond(*answers: tuple[str, str, dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """google-genai's send_tool_response: (id, name, response) per call."""
    return {
        "tool_response": {
            "functionResponses": [
                {"id": i, "name": n, "response": r, **extra} for i, n, r in answers
            ]
        }
    }


PARIS = ("fc_paris", "get_weather", {"city": "Paris", "units": "c"})
ROME = ("fc_rome", "get_weather", {"city": "Rome", "units": "kelvin"})
TICKET = ("fc_ticket", "book_ticket", {"flight": "LH1234"})


class Session_:
    """One socket: messages in, verdicts out (the turns inspected, the session's findings)."""

    def __init__(self, url: str = URL, max_turn: int = 8 << 20, late: bool = False) -> None:
        self.reader = socket_reader("gemini_live", url, max_turn, late)
        self.session = Session()
        self.turns: list[Any] = []

    def client(self, message: dict[str, Any]) -> None:
        self.turns += self.reader.feed(json.dumps(message).encode(), True)

    def server(self, *messages: bytes) -> None:
        for message in messages:
            self.turns += self.reader.feed(message, False)

    def close(self, end: SocketClose | None = None) -> list[Any]:
        self.turns += self.reader.close(end)
        out = []
        for turn in self.turns:
            if turn.said is not None:
                out.append(turn.said)
            elif turn.skipped is None:
                out.append(self.session.inspect(turn.exchange, turn.prior))
            else:
                out.append(turn.skipped)
        assert self.reader.held == 0
        return out


def rules(verdicts: list[Any]) -> list[tuple[str, list[str]]]:
    return [(e.rule, e.ids) for v in verdicts if not isinstance(v, str) for e in v.loop_errors]


def results(verdicts: list[Any]) -> list[tuple[str, str]]:
    return [
        (r.call_id, r.outcome) for v in verdicts if not isinstance(v, str) for r in v.tool_results
    ]


# --- recognition and the hot path ---------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent",
        "/ws/google.ai.generativelanguage.v1alpha.GenerativeService.BidiGenerateContent",
        "/ws/google.ai.generativelanguage.v1alpha.GenerativeService.BidiGenerateContentConstrained",
        "/ws/google.cloud.aiplatform.v1beta1.LlmBidiService/BidiGenerateContent",
    ],
)
def test_every_live_path_is_recognised_as_gemini_live(path):
    assert detect_socket(path + "?key=AIza") == "gemini_live"
    assert detect_socket("/v1beta/models/gemini-2.5-flash:streamGenerateContent") is None


def test_binary_frames_are_read_only_where_the_api_sends_json_in_them():
    assert socket_reading("gemini_live").readable(is_text=False)
    assert not socket_reading("realtime").readable(is_text=False)
    assert socket_reading("gemini_live").wanted(live.tool_call(PARIS), is_text=False)


def test_audio_realtime_input_and_transcriptions_are_never_held():
    assert socket_reading("gemini_live").kind(live.audio()) == "serverContent"
    assert not socket_reading("gemini_live").needed(live.audio(), "serverContent")
    chunk = json.dumps({"realtime_input": {"audio": {"data": live.SILENCE}}}).encode()
    assert socket_reading("gemini_live").kind(chunk) == "realtimeInput"
    assert not socket_reading("gemini_live").wanted(chunk, is_text=True)
    said = live.frame({"serverContent": {"outputTranscription": {"text": "Twelve"}}})
    assert not socket_reading("gemini_live").needed(said, "serverContent")
    # ... unless the message also ends the turn: its marker is read from its tail.
    ending = live.frame({"serverContent": {"outputTranscription": {"text": "."}, "turnComplete": True}})  # fmt: skip
    assert socket_reading("gemini_live").needed(ending, "serverContent")
    assert socket_reading("gemini_live").ends_turn(ending, "serverContent")


def test_client_content_and_text_input_are_held_media_only_with_function_parts():
    assert socket_reading("gemini_live").wanted(json.dumps(ask()).encode(), True)
    image = {"inlineData": {"mimeType": "image/jpeg", "data": live.SILENCE}}
    picture = {"clientContent": {"turns": [{"role": "user", "parts": [image]}]}}
    assert not socket_reading("gemini_live").wanted(json.dumps(picture).encode(), True)
    history = {"clientContent": {"turns": [{"role": "user", "parts": [image, {"functionResponse": {}}]}]}}  # fmt: skip
    assert socket_reading("gemini_live").wanted(json.dumps(history).encode(), True)
    for signal in ({"text": "Paris?"}, {"activityEnd": {}}, {"audioStreamEnd": True}):
        assert socket_reading("gemini_live").wanted(
            json.dumps({"realtimeInput": signal}).encode(), True
        )
    video = {"realtimeInput": {"video": {"mimeType": "image/jpeg", "data": live.SILENCE}}}
    assert not socket_reading("gemini_live").wanted(json.dumps(video).encode(), True)


def test_a_tool_call_and_a_turn_complete_send_the_batch_at_once():
    assert socket_reading("gemini_live").ends_turn(live.tool_call(PARIS), "toolCall")
    assert socket_reading("gemini_live").ends_turn(live.turn_complete(10, 2), "serverContent")
    assert not socket_reading("gemini_live").ends_turn(live.text("Hi"), "serverContent")
    # So do what may end a turn or the session: a cancellation, goAway, an error.
    for message in (live.cancellation("fc_paris"), live.go_away(), live.frame({"error": {}})):
        assert socket_reading("gemini_live").ends_turn(
            message, socket_reading("gemini_live").kind(message)
        )


USAGE = {
    "promptTokenCount": 147,
    "responseTokenCount": 36,
    "totalTokenCount": 183,
    "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 147}],
    "responseTokensDetails": [{"modality": "AUDIO", "tokenCount": 36}],
}


def test_a_long_message_ends_the_turn_whether_its_marker_comes_first_or_last():
    usage_after = live.frame({"serverContent": {"turnComplete": True}, "usageMetadata": USAGE})
    text_before = live.frame(
        {"serverContent": {"modelTurn": {"parts": [{"text": "x" * 400}]}, "turnComplete": True}}
    )
    for message in (usage_after, text_before):  # the marker in one end, the other end read too
        assert len(message) > gemini_live.HEAD + 100
        assert socket_reading("gemini_live").ends_turn(message, "serverContent")


def test_a_message_whose_key_is_not_in_its_head_is_held_and_left_to_the_reader():
    padded = b"{" + b" " * 300 + live.audio()[1:]
    assert socket_reading("gemini_live").kind(padded) is None
    assert socket_reading("gemini_live").needed(padded, None)
    assert socket_reading("gemini_live").ends_turn(padded, None)


def test_the_setups_acknowledgement_and_resumption_handles_are_never_held():
    update = live.frame({"sessionResumptionUpdate": {"newHandle": "CiQ4ZGQ1", "resumable": True}})
    for message in (live.setup_complete(), update):
        assert not socket_reading("gemini_live").needed(
            message, socket_reading("gemini_live").kind(message)
        )


def test_the_setup_reads_as_gemini_reads_a_request_under_auto():
    request = gemini_live.session_request(
        {
            "model": "projects/p/locations/us-central1/publishers/google/models/gemini-live-2.5",
            "tools": [{"googleSearch": {}}, {"functionDeclarations": [WEATHER]}],
        }
    )
    assert request["model"] == "gemini-live-2.5"
    # AUTO, though a built-in tool sits beside: the VALIDATED default is generateContent's.
    assert request["toolConfig"] == {"functionCallingConfig": {"mode": "AUTO"}}


def test_behavior_unset_blocks_on_the_gemini_api_and_not_on_vertex():
    declared = {"tools": [{"function_declarations": [WEATHER, BOOKING]}]}
    assert gemini_live.blocking_names(declared, vertex=False) == ({"get_weather"}, {"book_ticket"})
    assert gemini_live.blocking_names(declared, vertex=True) == (set(), {"get_weather", "book_ticket"})  # fmt: skip


def test_behavior_is_read_by_the_enums_names_and_numbers():
    behaviors = ("BLOCKING", 1, "NON_BLOCKING", 2, "UNSPECIFIED", 0)
    declared = {"tools": [{"functionDeclarations": [
        {"name": f"f{i}", "behavior": behavior} for i, behavior in enumerate(behaviors)]}]}  # fmt: skip
    assert gemini_live.blocking_names(declared, vertex=False) == (
        {"f0", "f1", "f4", "f5"},
        {"f2", "f3"},
    )
    assert gemini_live.blocking_names(declared, vertex=True) == (
        {"f0", "f1"},
        {"f2", "f3", "f4", "f5"},
    )


# --- turns ---------------------------------------------------------------------------------------


def test_a_call_answered_gives_two_clean_turns_and_an_ok_result():
    s = Session_()
    s.client(setup())
    s.server(live.setup_complete())
    s.client(ask())
    s.server(live.tool_call(PARIS))
    s.client(respond(("fc_paris", "get_weather", {"temperature": 12})))
    s.server(*live.answer("Paris is 12C.", 120, 8))
    calling, answering = s.close()
    assert (calling.api, calling.model, calling.state, calling.finish_reasons) == (
        "gemini_live", "gemini-live-2.5-flash-preview", "no-strict-declared", ["toolCall"],
    )  # fmt: skip
    assert [(c.call_id, c.name, c.arguments_raw, c.schema_errors) for c in calling.calls] == [
        ("fc_paris", "get_weather", '{"city":"Paris","units":"c"}', [])
    ]
    assert (answering.call_count, answering.output_types, answering.finish_reasons) == (
        0, ["text"], ["turnComplete"],
    )  # fmt: skip
    assert answering.usage == {"input_tokens": 120, "output_tokens": 8}
    assert results([calling, answering]) == [("fc_paris", "ok")]
    assert rules([calling, answering]) == []


def test_arguments_off_their_schema_are_schema_errors_and_two_calls_a_fan_out():
    s = Session_()
    s.client(setup())
    s.client(ask("Paris and Rome?"))
    s.server(live.tool_call(PARIS, ROME))
    (turn,) = s.close()[:1]
    assert turn.state == "fanout-no-strict"
    (rome,) = [c for c in turn.calls if c.schema_errors]
    assert (rome.call_id, [(e.path, e.message) for e in rome.schema_errors]) == (
        "fc_rome",
        [("$.units", '"kelvin" is not one of "c" or "f"')],
    )
    assert "argument-schema" in findings(turn)


def test_a_voice_turn_opens_at_generation_complete_its_audio_unread():
    s = Session_()
    s.client(setup())
    s.server(live.generation_complete(), live.turn_complete())
    s.server(live.turn_complete())  # a turn whose audio alone came: still a turn
    first, second = s.close()
    assert (first.finish_reasons, second.finish_reasons) == (["turnComplete"], ["turnComplete"])


def test_a_bare_turn_complete_right_after_a_tool_call_ends_that_turn_not_a_new_one():
    s = Session_()
    s.client(setup())
    s.server(live.tool_call(TICKET), live.turn_complete())
    s.client(respond(("fc_ticket", "book_ticket", {"status": "booked"}), scheduling="SILENT"))
    verdicts = s.close()
    assert [v.scope for v in verdicts] == ["turn", "session"]
    # No turn followed the response: it is counted at the close.
    assert (results(verdicts), rules(verdicts)) == ([("fc_ticket", "ok")], [])


def test_an_interrupted_turn_ends_at_its_turn_complete():
    s = Session_()
    s.client(setup())
    s.server(live.text("Let me"), live.interrupted(), live.turn_complete())
    (turn,) = s.close()
    assert turn.finish_reasons == ["interrupted"]


def test_a_call_part_inside_model_turn_is_output_not_a_call():
    s = Session_()
    s.client(setup())
    part = {"functionCall": {"id": "x", "name": "get_weather", "args": {}}}
    s.server(live.frame({"serverContent": {"modelTurn": {"parts": [part, {"text": "Hm"}]}}}))
    s.server(live.turn_complete())
    (turn,) = s.close()
    assert (turn.call_count, turn.output_types) == (0, ["text"])


def test_a_tool_config_sent_in_the_setup_is_read_as_gemini_reads_it():
    s = Session_()
    s.client(setup(toolConfig={"functionCallingConfig": {"mode": "ANY"}}))
    s.server(live.tool_call(PARIS, ROME))
    (turn,) = s.close()[:1]
    assert turn.state == "strict-serialised"


# --- the loop ----------------------------------------------------------------------------------


def test_a_cancelled_call_is_owed_nothing_and_a_response_to_it_is_no_orphan():
    s = Session_()
    s.client(setup())
    s.server(live.tool_call(PARIS), live.interrupted(), live.cancellation("fc_paris"))
    s.server(live.turn_complete())
    s.client(respond(("fc_paris", "get_weather", {"temperature": 12})))  # it ran before
    verdicts = s.close()
    assert rules(verdicts) == []
    assert results(verdicts) == [("fc_paris", "ok")]


def test_a_non_blocking_call_answered_turns_later_is_clean():
    s = Session_()
    s.client(setup())
    s.client(ask("Book LH1234, and what time is it in New York?"))
    s.server(live.tool_call(TICKET), *live.answer("Booking it now."))
    s.client(ask("And the time?"))
    s.server(*live.answer("It is noon in New York."))
    s.client(respond(("fc_ticket", "book_ticket", {"status": "booked"}), scheduling="WHEN_IDLE"))
    s.server(*live.answer("Your flight is booked."))
    verdicts = s.close()
    assert [v.call_count for v in verdicts] == [1, 0, 0, 0]
    assert (rules(verdicts), results(verdicts)) == ([], [("fc_ticket", "ok")])


def test_a_generator_call_answers_many_times_with_will_continue():
    s = Session_()
    s.client(setup())
    s.server(live.tool_call(TICKET), live.turn_complete())
    for status in ("searching", "found", "booked"):
        s.client(respond(("fc_ticket", "book_ticket", {"status": status}), willContinue=True))
    s.client(respond(("fc_ticket", "book_ticket", {}), willContinue=False, scheduling="SILENT"))
    verdicts = s.close()
    assert rules(verdicts) == []
    assert results(verdicts) == [("fc_ticket", "ok")] * 4


def test_a_blocking_call_never_answered_while_the_model_went_on_is_unanswered_call():
    s = Session_()
    s.client(setup())
    s.server(live.tool_call(PARIS))
    s.client(ask("Never mind, tell me a joke."))
    s.server(*live.answer("Why did the..."))
    verdicts = s.close()
    said = verdicts[-1]
    assert (said.scope, rules([said])) == ("session", [("unanswered-call", ["fc_paris"])])
    assert said.loop_errors[0].where == "the socket's close, after 2 turn(s)"
    assert said.loop_errors[0].repair.startswith("send a toolResponse with a functionResponse")
    assert "unanswered-call" in DEFAULT


def test_a_turn_completed_with_no_input_from_the_user_is_not_the_model_going_on():
    s = Session_()
    s.client(setup())
    # The end of the model turn that made the call, whatever the server sends for it.
    s.server(live.tool_call(PARIS), live.generation_complete(), live.turn_complete())
    assert rules(s.close()) == [("unanswered-at-close", ["fc_paris"])]


def test_a_hang_up_while_a_tool_runs_is_unanswered_at_close_and_fails_nothing():
    s = Session_()
    s.client(setup())
    s.server(live.tool_call(PARIS, TICKET))
    said = s.close()[-1]
    assert rules([said]) == [("unanswered-at-close", ["fc_paris", "fc_ticket"])]
    assert said.loop_errors[0].repair.endswith("send each functionResponse before closing.")
    assert "unanswered-at-close" not in DEFAULT


def test_a_non_blocking_call_left_open_while_the_model_talks_on_is_at_close_only():
    s = Session_()
    s.client(setup())
    s.server(live.tool_call(TICKET), *live.answer("Booking it."), *live.answer("Anything else?"))
    assert rules(s.close()) == [("unanswered-at-close", ["fc_ticket"])]


def test_calls_owed_when_the_server_said_go_away_may_be_answered_on_the_resumed_socket():
    s = Session_()
    s.client(setup())
    s.server(live.tool_call(PARIS), *live.answer("One moment."), live.go_away("5s"))
    verdicts = s.close()
    away = next(v for v in verdicts if v.session_errors)
    assert [(e.type, e.message) for e in away.session_errors] == [("goAway", "time left: 5s")]
    assert findings(away) == ["session-error"] and "session-error" not in DEFAULT
    assert rules(verdicts) == [("unanswered-at-close", ["fc_paris"])]


def test_the_close_a_go_away_announced_is_counted_once_whatever_its_code():
    # At the session's time limit the server says goAway, then closes with 1008 or 1011.
    s = Session_()
    s.client(setup())
    s.server(*live.answer("Sunny."), live.go_away("1s"))
    verdicts = s.close(SocketClose(1011, "Deadline expired", by_client=False))
    errors_ = [e.type for v in verdicts if not isinstance(v, str) for e in v.session_errors]
    assert errors_ == ["goAway"]


def test_a_context_update_replaces_the_sessions_tools_and_is_no_input_of_the_users():
    # google-genai's send_context_update(tools=[...]): the list replaces the setup's.
    non_blocking = {**WEATHER, "behavior": "NON_BLOCKING", "parameters": {"type": "object"}}
    update = {"contextUpdate": {"tools": {"tools": [{"functionDeclarations": [non_blocking]}]}}}
    s = Session_()
    s.client(setup(WEATHER))
    assert socket_reading("gemini_live").kind(json.dumps(update).encode()) == "contextUpdate"
    assert socket_reading("gemini_live").needed(json.dumps(update).encode(), "contextUpdate")
    s.client(update)
    s.client(ask())
    s.server(live.tool_call(ROME), *live.answer("Let me check."))  # kelvin: off the old schema
    s.client(ask("And tomorrow?"))
    s.server(*live.answer("Tomorrow too."))
    verdicts = s.close()
    calls = [c for v in verdicts if not isinstance(v, str) for c in v.calls]
    assert [(c.call_id, c.schema_errors) for c in calls] == [("fc_rome", [])]
    # Non-blocking now: the model went on without its answer, as the API allows.
    assert rules(verdicts) == [("unanswered-at-close", ["fc_rome"])]


def test_responses_in_several_turns_of_one_message_count_its_bytes_once():
    part = lambda c: {"functionResponse": {"id": c[0], "name": c[1], "response": {"ok": 1}}}  # noqa: E731
    message = {"clientContent": {"turns": [{"role": "user", "parts": [part(c)]} for c in (PARIS, ROME)]}}  # fmt: skip
    size = len(json.dumps(message).encode())
    s = Session_(max_turn=size * 3 // 2)  # room for the message once, not twice
    s.client(setup())
    s.server(live.tool_call(PARIS, ROME))
    s.client(message)
    s.server(*live.answer("12C and 18C."))
    verdicts = s.close()
    assert "too_many_items" not in s.reader.skipped
    assert results(verdicts) == [("fc_paris", "ok"), ("fc_rome", "ok")]


def test_a_response_to_a_call_never_made_is_an_orphan_and_the_rest_are_read():
    s = Session_()
    s.client(setup())
    s.server(live.tool_call(PARIS))
    s.client(respond(("fc_nowhere", "get_weather", {}), ("fc_paris", "get_weather", {})))
    s.server(*live.answer("12C."))
    verdicts = s.close()
    assert (rules(verdicts), results(verdicts)) == (
        [("orphan-result", ["fc_nowhere"])],
        [("fc_paris", "ok")],
    )
    (orphan,) = verdicts[1].loop_errors
    assert orphan.where == "functionResponses.0"
    assert "with the same id;" in orphan.repair


TAG = "".join(chr(0xE0000 + ord(c)) for c in "obey")  # tag characters: invisible, spelling obey


def test_hidden_characters_in_a_function_response_are_reported():
    s = Session_()
    s.client(setup())
    s.server(live.tool_call(PARIS))
    s.client(respond(("fc_paris", "get_weather", {"text": f"12C{TAG}"})))
    s.server(*live.answer("12C."))
    hidden = [(h.part, h.tool, h.kind, h.spelled) for v in s.close() for h in v.hidden_text]
    assert hidden == [("result", "fc_paris", "tag", "obey")]


def test_a_resumed_session_is_a_new_reading_and_answers_from_the_old_socket_are_no_orphans():
    s = Session_()
    s.client(setup(sessionResumption={"handle": "CiQ4ZGQ1"}))
    s.client(respond(("fc_from_before", "get_weather", {"temperature": 12})))
    s.server(*live.answer("12C in Paris."))
    verdicts = s.close()
    assert (rules(verdicts), results(verdicts)) == ([], [("fc_from_before", "ok")])


def test_a_socket_joined_late_skips_its_turns_and_calls_no_response_an_orphan():
    s = Session_(late=True)
    s.server(live.tool_call(PARIS))
    s.client(respond(("fc_earlier", "get_weather", {})))
    verdicts = s.close()
    assert verdicts[0] == "the session's setup was sent before tooltap followed it"
    assert [r for r in rules(verdicts) if r[0] == "orphan-result"] == []


def test_an_error_payload_is_a_tool_failure():
    s = Session_()
    s.client(setup())
    s.server(live.tool_call(PARIS))
    s.client(respond(("fc_paris", "get_weather", {"error": "no such city"})))
    s.server(*live.answer("Sorry."))
    assert results(s.close()) == [("fc_paris", "error")]


def test_vertex_calls_without_ids_are_answered_by_name():
    s = Session_(VERTEX)
    s.client({"setup": {"model": "projects/p/locations/l/publishers/google/models/gemini-live-2.5", "tools": [{"functionDeclarations": [WEATHER]}]}})  # fmt: skip
    s.server(live.frame({"toolCall": {"functionCalls": [{"name": "get_weather", "args": {"city": "Oslo"}}]}}))  # fmt: skip
    s.client({"tool_response": {"functionResponses": [{"name": "get_weather", "response": {"t": 1}}]}})  # fmt: skip
    s.server(*live.answer("1C."))
    verdicts = s.close()
    assert verdicts[0].calls[0].call_id == "functionCall[0]"
    assert (rules(verdicts), results(verdicts)) == ([], [("get_weather", "ok")])


def test_a_function_response_in_client_content_answers_its_call():
    s = Session_()
    s.client(setup())
    s.server(live.tool_call(PARIS))
    part = {"functionResponse": {"id": "fc_paris", "name": "get_weather", "response": {"t": 12}}}
    s.client({"clientContent": {"turns": [{"role": "user", "parts": [part]}]}})
    s.server(*live.answer("12C."))
    verdicts = s.close()
    assert (rules(verdicts), results(verdicts)) == ([], [("fc_paris", "ok")])


def test_an_error_message_is_a_session_error_not_a_finding_that_fails():
    s = Session_()
    s.client(setup())
    error = {"error": {"code": 400, "message": "Request contains an invalid argument.", "status": "INVALID_ARGUMENT"}}  # fmt: skip
    s.server(live.frame(error))
    (said,) = s.close()
    assert [(e.type, e.message) for e in said.session_errors] == [
        ("INVALID_ARGUMENT", "Request contains an invalid argument.")
    ]


QUOTA = "You exceeded your current quota, please check your plan and billing details."


def errors(verdicts: list[Any]) -> list[tuple[str, str]]:
    return [(e.type, e.message) for v in verdicts if not isinstance(v, str) for e in v.session_errors]  # fmt: skip


def test_a_server_close_with_an_error_code_is_a_session_error_with_its_reason():
    s = Session_()
    s.client(setup())
    s.client(ask())
    s.server(*live.answer("Sunny."))
    *turns, said = s.close(SocketClose(1008, QUOTA, by_client=False))
    assert len(turns) == 1 and turns[0].outcome == "inspected"
    assert errors([said]) == [
        ("policy_violation", f"the server closed the socket with 1008 (policy violation): {QUOTA}")
    ]
    assert (said.scope, said.reason) == (
        "session",
        "the server closed the socket with an error: policy_violation",
    )
    assert findings(said) == ["session-error"]
    assert "session-error" not in DEFAULT  # reported; fails an audit only when asked


@pytest.mark.parametrize(
    ("code", "kind"),
    [(1007, "invalid_frame_payload_data"), (1011, "internal_error"), (1006, "abnormal_closure"),
     (4003, "4003"), (1016, "1016"), (4999, "4999"), (5000, "invalid"), (999, "invalid")],
)  # fmt: skip
def test_every_error_code_is_typed_by_its_name_else_its_number(code, kind):
    s = Session_()
    s.client(setup())
    (said,) = s.close(SocketClose(code, "", by_client=False))
    assert errors([said]) == [(kind, f"the server closed the socket with {code} ({kind.replace('_', ' ')})")]  # fmt: skip


@pytest.mark.parametrize(
    "end",
    [SocketClose(1000, "", False), SocketClose(1001, "going away", False),
     SocketClose(1005, "", False), SocketClose(1011, "keepalive ping timeout", True),
     SocketClose(1008, QUOTA, None), SocketClose(None, "", False), None],
)  # fmt: skip
def test_a_normal_close_and_a_clients_close_say_nothing(end):
    s = Session_()
    s.client(setup())
    s.client(ask())
    s.server(*live.answer("Sunny."))
    (turn,) = s.close(end)
    assert turn.scope == "turn" and turn.session_errors == []


def test_a_close_that_cuts_a_turn_owing_a_call_says_all_three_in_order():
    s = Session_()
    s.client(setup())
    s.client(ask())
    s.server(live.tool_call(PARIS), live.text("While I look"))
    reason = "Internal error occurred."
    calling, cut, closed, owed = s.close(SocketClose(1011, reason, by_client=False))
    assert calling.calls[0].call_id == "fc_paris"
    assert cut.reason == "the turn ended before its final event"
    assert errors([closed]) == [("internal_error", f"the server closed the socket with 1011 (internal error): {reason}")]  # fmt: skip
    assert rules([owed]) == [("unanswered-at-close", ["fc_paris"])]


def test_a_close_reason_past_its_bound_is_cut_to_it():
    s = Session_()
    s.client(setup())
    (said,) = s.close(SocketClose(1008, "x" * 5_000, by_client=False))
    assert len(said.session_errors[0].message) < 400


# --- bounds and loss ----------------------------------------------------------------------------


def test_a_socket_closed_mid_turn_gives_the_cut_turn():
    s = Session_()
    s.client(setup())
    s.server(live.text("It is"))
    (turn,) = s.close()
    assert turn.reason == "the turn ended before its final event"


def test_a_turn_past_the_byte_bound_is_skipped():
    s = Session_(max_turn=300)
    s.client(setup())
    s.server(live.text("x" * 400), live.turn_complete())
    assert s.close() == ["the turn's events passed tooltap_max_body"]


def test_messages_lost_in_flight_forget_what_was_owed_and_read_no_orphan_after():
    s = Session_()
    s.client(setup())
    s.server(live.tool_call(PARIS), live.text("Checking"))
    (lost,) = s.reader.lost()
    assert lost.skipped == "messages of this turn were not kept for inspection"
    s.client(respond(("fc_paris", "get_weather", {}), ("fc_unseen", "get_weather", {})))
    s.server(*live.answer("Done."))
    verdicts = s.close()
    assert rules(verdicts) == []


CLIENT = [
    json.dumps(setup()).encode(),
    json.dumps(ask()).encode(),
    json.dumps(respond(("a", "get_weather", {}))).encode(),
    json.dumps(respond(("b", "book_ticket", {}), willContinue=True)).encode(),
]
SERVER = [
    live.tool_call(("a", "get_weather", {"city": "X"})),
    live.tool_call(("b", "book_ticket", {})),
    live.cancellation("a"),
    live.text("hi"),
    live.audio(),
    live.generation_complete(),
    live.interrupted(),
    live.turn_complete(3, 4),
    live.go_away(),
    live.frame({"usageMetadata": {"promptTokenCount": 1}}),
    live.frame({"error": {"code": 1011}}),
]


@settings(max_examples=300, deadline=None)
@given(
    messages=st.lists(
        st.one_of(
            st.tuples(st.just(True), st.sampled_from(CLIENT)),
            st.tuples(st.just(False), st.sampled_from(SERVER)),
            st.tuples(st.booleans(), st.binary(max_size=30)),
            st.tuples(
                st.booleans(),
                st.builds(
                    lambda key, value: json.dumps({key: value}).encode(),
                    st.sampled_from(["setup", "toolCall", "serverContent", "tool_response",
                                     "toolCallCancellation", "goAway", "clientContent"]),
                    st.one_of(st.none(), st.integers(), st.text(max_size=4),
                              st.dictionaries(st.text(max_size=12), st.integers(), max_size=2)),
                ),
            ),
        ),
        max_size=40,
    ),
    late=st.booleans(),
    end=st.none() | st.builds(SocketClose, st.none() | st.integers(), st.text(max_size=200),
                              st.none() | st.booleans()),
)  # fmt: skip
def test_any_messages_in_any_order_are_read_without_raising_and_nothing_is_held_after(
    messages, late, end
):
    read_to_the_close(socket_reader("gemini_live", URL, 2_048, late), messages, end)


def test_a_turns_text_pieces_past_the_first_are_not_held_and_its_verdict_is_the_same():
    s = Session_()
    s.client(setup())
    pieces = [live.text(f"piece {n} ") for n in range(10)]
    s.server(*pieces[:1])
    held_one = s.reader.held
    s.server(*pieces[1:])
    assert s.reader.held == held_one
    s.server(live.generation_complete(), live.turn_complete())
    (turn,) = s.close()
    assert (turn.output_types, turn.finish_reasons) == (["text"], ["turnComplete"])


def test_googles_pretty_json_and_compact_json_give_the_same_turn():
    verdicts = []
    for indent in (2, None):
        s = Session_()
        s.client(setup())
        s.server(json.dumps({"toolCall": {"functionCalls": [{"id": "fc_p", "name": "get_weather", "args": {"city": "Paris"}}]}}, indent=indent).encode())  # fmt: skip
        verdicts.append(s.close()[0])
    pretty, compact = verdicts
    assert pretty.model_dump() == compact.model_dump()
    assert pretty.calls[0].arguments_raw == '{"city":"Paris"}'


# --- the output format, in the setup google-genai sends --------------------------------------
#
# google-genai's AsyncLive.connect builds the setup from LiveConnectConfig with its own
# converters (live.py): on the Gemini API, `generation_config` passes through as the model's
# dump, in snake_case (`response_mime_type`, `response_schema`); on Vertex AI it is converted,
# in camelCase (`responseMimeType`, `responseSchema`, `responseJsonSchema`). The Live API's
# reference lists no response schema in a setup, and google-genai issue #1572 reports the API
# refusing one: a refused setup ends the session before any turn (read as a session error),
# so reading a schema as the constrained decoding generateContent gives raises no false alarm.


def sent_setup(config: Any, vertex: bool = False) -> dict[str, Any]:
    """The setup message google-genai sends for this LiveConnectConfig, built as live.py
    builds it (the same converter, dump and encoding)."""
    from google import genai
    from google.genai import _common, _live_converters, types

    client = (
        genai.Client(vertexai=True, api_key="AIza-test")
        if vertex
        else genai.Client(api_key="AIza-test")
    )
    convert = (
        _live_converters._LiveConnectParameters_to_vertex
        if vertex
        else _live_converters._LiveConnectParameters_to_mldev
    )
    parameters = types.LiveConnectParameters(model=MODEL, config=config)
    message = _common.convert_to_dict(
        convert(api_client=client._api_client, from_object=parameters.model_dump(exclude_none=True))
    )
    del message["config"]
    return _common.encode_unserializable_types(message)


def format_of(setup_message: dict[str, Any], vertex: bool = False) -> Any:
    """The verdict of a text turn after this setup."""
    session = Session_(VERTEX if vertex else URL)
    session.client(setup_message)
    session.client(ask())
    session.server(*live.answer("Paris is 12C."))
    (verdict,) = session.close()
    return verdict


def city_schema(types: Any) -> Any:
    return types.Schema(
        type=types.Type.OBJECT,
        properties={"city": types.Schema(type=types.Type.STRING)},
        required=["city"],
    )


@pytest.mark.parametrize("vertex", [False, True], ids=["gemini-api", "vertex-ai"])
def test_a_live_response_schema_as_google_genai_sends_it_reads_as_generate_contents(vertex):
    from google.genai import types

    config = types.LiveConnectConfig(
        generation_config=types.GenerationConfig(
            response_mime_type="application/json", response_schema=city_schema(types)
        )
    )
    message = sent_setup(config, vertex)
    generation = message["setup"]["generationConfig"]
    spelled = (
        ("responseMimeType", "responseSchema")
        if vertex
        else ("response_mime_type", "response_schema")
    )
    assert set(spelled) <= set(generation)  # the client's own spelling, as it sends it
    verdict = format_of(message, vertex)
    assert verdict.format_state == "enforced"
    assert verdict.repairs == []


@pytest.mark.parametrize("vertex", [False, True], ids=["gemini-api", "vertex-ai"])
def test_a_live_json_schema_as_google_genai_sends_it_is_read_as_the_schema_given(vertex):
    from google.genai import types

    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    config = types.LiveConnectConfig(
        generation_config=types.GenerationConfig(
            response_mime_type="application/json", response_json_schema=schema
        )
    )
    verdict = format_of(sent_setup(config, vertex), vertex)
    assert verdict.format_state == "enforced"


@pytest.mark.parametrize("vertex", [False, True], ids=["gemini-api", "vertex-ai"])
def test_live_json_mode_without_a_schema_is_no_schema_with_gemini_repair(vertex):
    from google.genai import types

    config = types.LiveConnectConfig(
        generation_config=types.GenerationConfig(response_mime_type="application/json")
    )
    verdict = format_of(sent_setup(config, vertex), vertex)
    assert verdict.format_state == "no-schema"
    assert any("responseJsonSchema" in line for line in verdict.repairs)


@pytest.mark.parametrize("vertex", [False, True], ids=["gemini-api", "vertex-ai"])
def test_a_live_session_with_no_generation_config_or_a_text_type_is_free_text(vertex):
    from google.genai import types

    plain = types.LiveConnectConfig(response_modalities=[types.Modality.TEXT])
    assert format_of(sent_setup(plain, vertex), vertex).format_state == "free-text"
    text = types.LiveConnectConfig(
        generation_config=types.GenerationConfig(
            response_mime_type="text/plain", response_schema=city_schema(types)
        )
    )
    # A schema beside a text type constrains nothing: the type decides, as on generateContent.
    assert format_of(sent_setup(text, vertex), vertex).format_state == "free-text"


# --- what the reader keeps, counts and says -----------------------------------------------------


def test_on_vertex_a_call_declared_without_a_behavior_is_non_blocking_to_the_end():
    s = Session_(VERTEX)
    s.client(setup(WEATHER))
    s.client(ask())
    s.server(live.tool_call(PARIS))
    s.client(ask("Never mind, tell me a joke."))
    s.server(*live.answer("Why did the..."))
    # On the Gemini API the same session is unanswered-call (the test above).
    assert rules(s.close()) == [("unanswered-at-close", ["fc_paris"])]


def test_on_vertex_a_call_declared_blocking_is_one_the_model_went_on_without():
    s = Session_(VERTEX)
    s.client(setup({**WEATHER, "behavior": "BLOCKING"}))
    s.server(live.tool_call(PARIS))
    s.client(ask("Never mind, tell me a joke."))
    s.server(*live.answer("Why did the..."))
    assert rules(s.close()) == [("unanswered-call", ["fc_paris"])]


def test_a_call_to_a_function_the_session_never_declared_blocks_on_the_gemini_api():
    s = Session_()
    s.client(setup(WEATHER))
    s.server(live.tool_call(("fc_x", "undeclared", {})))
    s.client(ask("Never mind."))
    s.server(*live.answer("Fine."))
    assert rules(s.close()) == [("unanswered-call", ["fc_x"])]


def test_junk_is_counted_each_time():
    s = Session_()
    for _ in range(3):
        s.server(b"not json")
    assert s.reader.skipped == {"not_json": 3}


def test_googles_pretty_json_is_held_as_one_line():
    s = Session_()
    s.client(setup())
    pretty = live.text("Sunny.")
    s.server(pretty, live.turn_complete())
    (turn,) = s.turns
    compact = json.dumps(json.loads(pretty), separators=(",", ":")).encode()
    assert turn.exchange.response_body.startswith(b"data: " + compact + b"\n\n")


def test_go_away_without_a_time_left_and_an_error_without_a_type_say_so():
    s = Session_()
    s.client(setup())
    s.server(live.frame({"goAway": {}}), live.frame({"error": {"message": "Something broke."}}))
    away, error = s.close()
    assert [(e.type, e.message) for e in away.session_errors] == [("goAway", "time left: ?")]
    assert away.reason == "the server will close the socket (goAway)"
    assert [(e.type, e.message) for e in error.session_errors] == [("error", "Something broke.")]
    assert error.reason == "the session sent an error: error"


def test_usage_sent_in_a_message_of_its_own_counts_in_the_running_turn():
    s = Session_()
    s.client(setup())
    s.client(ask())
    usage = {"promptTokenCount": 7, "responseTokenCount": 3, "totalTokenCount": 10}
    s.server(live.text("Sunny."), live.frame({"usageMetadata": usage}), live.turn_complete())
    (verdict,) = s.close()
    assert verdict.usage == {"input_tokens": 7, "output_tokens": 3}


def test_a_turn_cut_by_the_close_says_so_and_a_response_no_turn_took_is_judged_there():
    s = Session_()
    s.client(setup())
    s.server(live.tool_call(PARIS))
    s.client(respond(PARIS, ("fc_nowhere", "get_weather", {})))
    s.server(live.text("It is"))  # a turn opens, takes both responses, and is cut
    s.client(respond(("fc_ghost", "get_weather", {})))  # after it: no turn takes this one
    s.turns += s.reader.close()
    assert [t.cut for t in s.turns if t.said is None] == [False, True]
    said = s.turns[-1].said
    assert said.reason == "what the session's close left: calls owed, responses no turn took"
    assert [(e.rule, e.ids) for e in said.loop_errors] == [("orphan-result", ["fc_ghost"])]


def test_what_a_session_holds_is_let_go_as_each_turn_ends():
    s = Session_()
    s.client(setup())
    for call in (PARIS, ROME):
        s.client(ask())
        s.server(live.tool_call(call))
        assert s.reader.held == 0
        s.client(respond(call))
        assert s.reader.held > 0  # the response, until a turn takes it
        s.server(*live.answer("Done."))
        assert s.reader.held == 0
    assert s.reader.skipped == {}


def test_a_turn_is_timed_from_what_the_client_last_said_else_from_its_first_message():
    reader = socket_reader("gemini_live", URL, 8 << 20)
    reader.feed(json.dumps(setup()).encode(), True, 10.0)
    reader.feed(json.dumps(ask()).encode(), True, 100.0)
    (asked,) = [t for m, at in ((live.text("Hi."), 101.0), (live.turn_complete(), 102.0))
                for t in reader.feed(m, False, at)]  # fmt: skip
    (spoke,) = [t for m, at in ((live.text("Still there?"), 200.0), (live.turn_complete(), 201.0))
                for t in reader.feed(m, False, at)]  # fmt: skip
    assert (asked.exchange.request_start, asked.exchange.response_end) == (100.0, 102.0)
    assert (spoke.exchange.request_start, spoke.exchange.response_end) == (200.0, 201.0)


def test_a_call_replayed_in_the_clients_history_may_be_answered_without_being_owed():
    s = Session_()
    s.client(setup())
    replayed = {"role": "model", "parts": [{"functionCall": {"id": "fc_old", "name": "get_weather", "args": {}}}]}  # fmt: skip
    s.client({"clientContent": {"turns": [replayed]}})
    s.client(respond(("fc_old", "get_weather", {"t": 1})))
    s.server(*live.answer("1C."))
    verdicts = s.close()
    assert (rules(verdicts), results(verdicts)) == ([], [("fc_old", "ok")])


def test_vertex_calls_without_ids_never_answered_are_each_named_at_the_close():
    s = Session_(VERTEX)
    s.client(setup(WEATHER))
    unnamed = {"name": "get_weather", "args": {"city": "Oslo"}}
    s.server(live.frame({"toolCall": {"functionCalls": [unnamed, unnamed]}}))
    assert rules(s.close()) == [("unanswered-at-close", ["get_weather", "get_weather"])]


def test_a_voice_turn_that_shows_only_its_end_is_a_turn():
    s = Session_()
    s.client(setup())
    s.client(ask())
    s.server(live.turn_complete(5, 2))  # its audio not held: only its end
    (verdict,) = s.close()
    assert (verdict.scope, verdict.usage) == ("turn", {"input_tokens": 5, "output_tokens": 2})


def test_a_live_turns_usage_counts_its_thoughts_and_its_cached_input():
    s = Session_()
    s.client(setup())
    s.client(ask())
    usage = {"promptTokenCount": 7, "responseTokenCount": 3, "thoughtsTokenCount": 4,
             "cachedContentTokenCount": 2, "totalTokenCount": 14}  # fmt: skip
    s.server(live.text("Hi."), live.frame({"serverContent": {"turnComplete": True}, "usageMetadata": usage}))  # fmt: skip
    (verdict,) = s.close()
    # Output counts the thoughts, as OpenTelemetry's GenAI conventions say.
    assert verdict.usage == {"input_tokens": 7, "output_tokens": 7, "cached_input_tokens": 2,
                             "reasoning_tokens": 4}  # fmt: skip


def test_an_interrupted_voice_turn_shows_only_its_signs_and_ends_interrupted():
    s = Session_()
    s.client(setup())
    s.client(ask())
    s.server(live.interrupted(), live.turn_complete())  # its audio not held
    (verdict,) = s.close()
    assert verdict.finish_reasons == ["interrupted"]


def test_a_voice_turn_the_model_starts_is_timed_from_its_generation_complete():
    reader = socket_reader("gemini_live", URL, 8 << 20)
    reader.feed(json.dumps(setup()).encode(), True, 10.0)
    turns = reader.feed(live.generation_complete(), False, 101.0)
    turns += reader.feed(live.turn_complete(), False, 105.0)
    (turn,) = turns
    assert (turn.exchange.request_start, turn.exchange.response_end) == (101.0, 105.0)


def test_a_call_answered_again_later_by_id_or_by_name_is_no_orphan():
    for url, call, answer in (
        (URL, {"id": "fc_gen", "name": "get_weather", "args": {}}, {"id": "fc_gen"}),
        (VERTEX, {"name": "get_weather", "args": {}}, {}),
    ):
        s = Session_(url)
        s.client(setup(WEATHER))
        s.server(live.frame({"toolCall": {"functionCalls": [call]}}))
        for _ in range(2):  # a generator's further results (willContinue)
            s.client({"tool_response": {"functionResponses": [answer | {"name": "get_weather", "response": {"t": 1}}]}})  # fmt: skip
            s.server(*live.answer("1C."))
        assert rules(s.close()) == []


def test_a_response_by_name_to_a_call_never_made_is_an_orphan():
    s = Session_(VERTEX)
    s.client(setup(WEATHER))
    s.client({"tool_response": {"functionResponses": [{"name": "get_weather", "response": {}}]}})
    s.server(*live.answer("Hm."))
    assert rules(s.close()) == [("orphan-result", ["get_weather"])]


def test_responses_past_the_byte_bound_are_counted_and_still_answer_their_calls():
    answer = lambda n: respond((f"fc_{n}", "get_weather", {"t": 1}))  # noqa: E731
    size = len(json.dumps(answer(1)).encode())
    s = Session_(max_turn=2 * size)
    s.client(setup(WEATHER))
    s.server(live.frame({"toolCall": {"functionCalls": [{"id": f"fc_{n}", "name": "get_weather", "args": {}} for n in range(1, 5)]}}))  # fmt: skip
    for n, count in ((1, 0), (2, 0), (3, 1), (4, 2)):  # two fit the bound exactly
        s.client(answer(n))
        assert s.reader.skipped["too_many_items"] == count
    assert s.reader.held == 2 * size
    verdicts = s.close()
    assert (rules(verdicts), results(verdicts)) == ([], [("fc_1", "ok"), ("fc_2", "ok")])


def test_messages_lost_with_no_turn_running_count_the_responses_that_waited():
    s = Session_()
    s.client(setup())
    s.server(live.tool_call(PARIS, ROME))
    for expected in (1, 2):
        s.client(respond(PARIS if expected == 1 else ROME))
        assert s.reader.lost() == [] and s.reader.skipped == {"lost": expected}
        assert s.reader.held == 0


def test_a_context_update_without_tools_leaves_the_sessions_tools():
    s = Session_()
    s.client(setup(WEATHER))
    s.client({"contextUpdate": {"turns": []}})
    s.client(ask())
    s.server(live.tool_call(ROME))  # kelvin: off the setup's schema
    (verdict, *_) = s.close()
    assert [bool(c.schema_errors) for c in verdict.calls] == [True]


def test_on_vertex_a_context_updates_declaration_without_a_behavior_is_non_blocking():
    s = Session_(VERTEX)
    s.client(setup({**WEATHER, "behavior": "BLOCKING"}))
    update = {"contextUpdate": {"tools": {"tools": [{"functionDeclarations": [WEATHER]}]}}}
    s.client(update)
    s.server(live.tool_call(PARIS))
    s.client(ask("Never mind."))
    s.server(*live.answer("Fine."))
    assert rules(s.close()) == [("unanswered-at-close", ["fc_paris"])]


def test_a_nameless_call_is_passed_over_and_the_calls_after_it_are_owed():
    s = Session_()
    s.client(setup(WEATHER))
    calls = [{"id": "fc_blank", "name": " ", "args": {}}, {"id": "fc_paris", "name": "get_weather", "args": {}}]  # fmt: skip
    for _ in range(3):
        s.server(live.frame({"toolCall": {"functionCalls": calls}}))
    said = s.close()[-1]
    assert rules([said]) == [("unanswered-at-close", ["fc_paris"])]
    assert said.loop_errors[0].where == "the socket's close, after 3 turn(s)"


def test_only_a_turns_first_text_piece_is_held_whatever_comes_between():
    s = Session_()
    s.client(setup())
    code = live.frame(
        {"serverContent": {"modelTurn": {"parts": [{"executableCode": {"code": "1"}}]}}}
    )
    s.server(live.text("One"), code, live.text("two"), live.turn_complete())
    (turn,) = s.turns
    assert turn.exchange.response_body.count(b"data: ") == 3


def test_a_session_remembers_the_newest_calls_owed_up_to_its_bound():
    from tooltap.core.sockets import MAX_OPEN

    reader = socket_reader("gemini_live", URL, 64 << 20)
    reader.feed(json.dumps(setup(WEATHER)).encode(), True, 100.0)
    calls = [{"id": f"fc_{n}", "name": "get_weather", "args": {}} for n in range(MAX_OPEN + 1)]
    reader.feed(json.dumps({"toolCall": {"functionCalls": calls}}).encode(), False, 101.0)
    owed = reader.owed_calls()
    assert len(owed) == MAX_OPEN and "fc_0" not in owed and f"fc_{MAX_OPEN}" in owed
    # The one forgotten while owed may still be answered: its response is no orphan.
    reader.feed(json.dumps(respond(("fc_0", "get_weather", {"t": 1}))).encode(), True, 102.0)
    turns = [t for m in live.answer("1C.") for t in reader.feed(m, False, 103.0)]
    (turn,) = turns
    assert turn.prior == {"answers": ["fc_0"]}
