"""Gemini, read as Google documents it: its paths, its Schema, its modes, its two stream
framings, Vertex AI's streamed arguments, and its loop as Gemini refuses it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tooltap.core import Exchange, inspect
from tooltap.core.dialects.gemini import (
    SCHEMA_FIELDS,
    VERTEX_FIELDS,
    model_in_path,
    schema_blockers,
    to_json_schema,
)
from tooltap.core.wire import check_loop

GEMINI = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash"
VERTEX = (
    "https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/us-central1/"
    "publishers/google/models/gemini-2.5-flash"
)
WEATHER = {
    "type": "OBJECT",
    "properties": {"city": {"type": "STRING"}, "units": {"type": "STRING", "enum": ["c", "f"]}},
    "required": ["city"],
}
DECLARED = [{"functionDeclarations": [{"name": "get_weather", "parameters": WEATHER}]}]


def call(city: str, call_id: str | None = None, **extra: Any) -> dict[str, Any]:
    body = {"name": "get_weather", "args": {"city": city}} | ({"id": call_id} if call_id else {})
    return {"functionCall": body} | extra


def answer(name: str = "get_weather", call_id: str | None = None, **response: Any) -> dict:
    body = {"name": name, "response": response or {"temp": 21}}
    return {"functionResponse": body | ({"id": call_id} if call_id else {})}


def reply(parts: list[dict[str, Any]], finish: Any = "STOP") -> dict[str, Any]:
    candidate = {"content": {"role": "model", "parts": parts}, "index": 0}
    return {
        "candidates": [candidate | ({"finishReason": finish} if finish else {})],
        "usageMetadata": {"promptTokenCount": 40, "candidatesTokenCount": 12},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "z3ShaYDJO7ib1e8P2s6quQU",
    }


def ask(**settings: Any) -> dict[str, Any]:
    base = {"contents": [{"role": "user", "parts": [{"text": "Paris?"}]}], "tools": DECLARED}
    return base | settings


def exchange(request: dict, body: bytes, url: str = GEMINI + ":generateContent",
             content_type: str = "application/json", status: int = 200) -> Exchange:  # fmt: skip
    return Exchange(
        method="POST",
        url=url,
        request_body=json.dumps(request).encode(),
        status=status,
        response_headers={"content-type": content_type},
        response_body=body,
    )


def unary(request: dict, parts: list[dict[str, Any]]) -> Any:
    return inspect(exchange(request, json.dumps(reply(parts)).encode()))


@pytest.mark.parametrize(
    ("path", "model"),
    [
        ("/v1beta/models/gemini-2.5-flash:generateContent", "gemini-2.5-flash"),
        ("/v1/models/gemini-3-pro-preview:streamGenerateContent", "gemini-3-pro-preview"),
        ("/v1beta/tunedModels/my-tuned-7:generateContent", "my-tuned-7"),
        ("/v1/projects/p/locations/global/publishers/google/models/gemini-2.0-flash-001:generateContent",
         "gemini-2.0-flash-001"),
        ("/v1beta1/publishers/google/models/gemini-2.5-pro:generateContent", "gemini-2.5-pro"),
        ("/v1/projects/p/locations/us-east5/endpoints/4242:generateContent", "4242"),
        ("/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude:generateContent", None),
        ("/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude:rawPredict", None),
        ("/v1beta/models/gemini-2.5-flash:countTokens", None),
        ("/v1beta/models/gemini-2.5-flash", None),
    ],
)  # fmt: skip
def test_the_paths_it_reads_and_the_model_each_names(path, model):
    assert model_in_path(path) == model


def test_googles_schema_is_read_as_the_json_schema_it_means():
    given = {
        "type": "OBJECT",
        "properties": {
            "units": {"type": "STRING", "nullable": True, "enum": ["c", "f"]},
            "days": {"type": 3, "minimum": 1},  # enum-encoding=int: INTEGER
            "tags": {"type": "ARRAY", "items": {"type": "string"}, "max_items": 3},
        },
        "property_ordering": ["units", "days", "tags"],
        "required": ["units"],
    }
    assert to_json_schema(given) == {
        "type": "object",
        "properties": {
            "units": {"type": ["string", "null"], "enum": ["c", "f"]},
            "days": {"type": "integer", "minimum": 1},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        },
        "required": ["units"],
    }
    vertex = {"type": "OBJECT", "ref": "#/defs/City", "defs": {"City": {"type": "STRING"}}}
    assert to_json_schema(vertex) == {
        "type": "object", "$ref": "#/$defs/City", "$defs": {"City": {"type": "string"}}
    }  # fmt: skip


def test_a_key_that_is_no_field_of_the_schema_is_named_on_the_api_that_refuses_it():
    schema = {"type": "OBJECT", "additionalProperties": False,
              "properties": {"n": {"type": "INTEGER", "const": 3}, "l": {"type": "ARRAY",
                                   "items": {"$ref": "#/x"}}}}  # fmt: skip
    refused = [line.split(" is ")[0] for line in schema_blockers(schema, SCHEMA_FIELDS)]
    assert refused == ["$: additionalProperties", "$.n: const", "$.l.items: $ref"]
    on_vertex = [line.split(" is ")[0] for line in schema_blockers(schema, VERTEX_FIELDS)]
    assert on_vertex == ["$.n: const", "$.l.items: $ref"]
    assert schema_blockers(WEATHER, SCHEMA_FIELDS) == []


@pytest.mark.parametrize(
    ("settings", "state"),
    [
        ({}, "fanout-no-strict"),
        ({"toolConfig": {"functionCallingConfig": {"mode": "AUTO"}}}, "fanout-no-strict"),
        ({"toolConfig": {"functionCallingConfig": {"mode": "ANY"}}}, "strict-serialised"),
        ({"tool_config": {"function_calling_config": {"mode": "validated"}}}, "strict-serialised"),
        ({"toolConfig": {"functionCallingConfig": {"mode": 2}}}, "strict-serialised"),  # ANY
        ({"toolConfig": {"functionCallingConfig": {"mode": "NONE"}}}, "no-tools"),
        # VALIDATED is the default beside a structured output or a built-in tool.
        ({"generationConfig": {"responseMimeType": "application/json",
                               "responseJsonSchema": {"type": "object"}}}, "strict-serialised"),
        ({"tools": [*DECLARED, {"googleSearch": {}}]}, "strict-serialised"),
    ],
)  # fmt: skip
def test_the_modes_decide_the_state_and_a_fan_out_is_never_void(settings, state):
    verdict = unary(ask(**settings), [call("Paris"), call("Rome")])
    assert verdict.state == state
    assert verdict.state not in ("strict-void", "strict-at-risk")


def test_allowed_function_names_leave_only_those_callable():
    two = [{"functionDeclarations": [{"name": "get_weather", "parameters": WEATHER},
                                     {"name": "get_time"}]}]  # fmt: skip
    only = {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_time"]}}
    verdict = unary(ask(tools=two, toolConfig=only), [call("Paris")])
    assert verdict.state == "strict-serialised"
    assert "1 tool(s)" in verdict.detail


def test_calls_their_ids_or_places_their_arguments_and_what_is_no_client_call():
    parts = [
        {"text": "Checking.", "thoughtSignature": "c2ln"},
        {"executableCode": {"language": "PYTHON", "code": "print(1)"}},
        {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "1"}},
        call("Paris", "8hd01vsf"),
        {"function_call": {"name": "get_weather", "args": {"city": "Rome", "units": "kelvin"}}},
        {"text": "", "thoughtSignature": "c2ln"},
    ]
    verdict = unary(ask(), parts)
    assert [(c.call_id, c.arguments_raw) for c in verdict.calls] == [
        ("8hd01vsf", '{"city":"Paris"}'),
        ("functionCall[1]", '{"city":"Rome","units":"kelvin"}'),
    ]
    assert [e.path for e in verdict.calls[1].schema_errors] == ["$.units"]
    assert verdict.output_types == [
        "text", "executableCode", "codeExecutionResult", "functionCall", "functionCall"
    ]  # fmt: skip
    assert (verdict.model, verdict.request_model) == ("gemini-2.5-flash", "gemini-2.5-flash")
    assert verdict.usage == {"input_tokens": 40, "output_tokens": 12}


def test_finish_reasons_by_name_or_by_the_integers_both_apis_agree_on():
    body = reply([{"text": "hi"}], finish=1) | {"candidates": [
        {"content": {"parts": [{"text": "hi"}]}, "finishReason": 1},
        {"content": {"parts": []}, "finishReason": 2, "index": 1},
        {"content": {"parts": []}, "finishReason": 9, "index": 2},
    ]}  # fmt: skip
    verdict = inspect(exchange(ask(), json.dumps(body).encode()))
    assert verdict.finish_reasons == ["STOP", "MAX_TOKENS", "9"]


# --- streams -----------------------------------------------------------------------------------

CHUNKS = [
    reply([{"text": "Let me "}], finish=None),
    reply([{"text": "look."}, call("Paris", "a1", thoughtSignature="c2ln")], finish=None),
    reply([call("Rome", "b2")], finish=None),
    reply([{"text": ""}]),
]


def sse_body() -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + b"\r\n\r\n" for c in CHUNKS)


def array_body() -> bytes:
    return ("[" + "\n,\r\n".join(json.dumps(c, indent=2) for c in CHUNKS) + "\n]").encode()


STREAM = GEMINI + ":streamGenerateContent"
KEEP = ("state", "calls", "finish_reasons", "usage", "output_types", "response_id", "stream_errors")


def whole() -> Any:
    return unary(ask(), [{"text": "Let me look."}, call("Paris", "a1", thoughtSignature="c2ln"),
                         call("Rome", "b2")])  # fmt: skip


@pytest.mark.parametrize(
    ("body", "url", "content_type"),
    [
        (sse_body, STREAM + "?alt=sse", "text/event-stream"),
        (array_body, STREAM, "application/json; charset=UTF-8"),
        (array_body, STREAM, ""),  # recorded without its content type
    ],
)
def test_both_stream_framings_give_the_turn_the_same_call_gives_unstreamed(body, url, content_type):
    streamed = inspect(exchange(ask(), body(), url, content_type))
    assert (streamed.stream, streamed.reason) == (True, None)
    assert {k: getattr(streamed, k) for k in KEEP} == {k: getattr(whole(), k) for k in KEEP}


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_any_split_of_either_stream_gives_the_same_turn(data):
    from tooltap.core import StreamReader

    for raw in (sse_body(), array_body()):
        cuts = sorted(data.draw(st.sets(st.integers(1, len(raw) - 1), max_size=12)))
        reader = StreamReader("gemini", framing="jsonarray" if raw[:1] == b"[" else "sse")
        for start, end in zip([0, *cuts], [*cuts, len(raw)], strict=True):
            reader.feed(raw[start:end])
        result = reader.close()
        assert result.complete and result.bad_events == 0
        parts = result.response["candidates"][0]["content"]["parts"]
        assert [p.get("functionCall", {}).get("id") for p in parts] == [None, "a1", "b2", None]


def test_an_array_stream_cut_short_keeps_what_came_whole_and_says_it_ended_early():
    cut = array_body()[: len(array_body()) - 60]
    verdict = inspect(exchange(ask(), cut, STREAM))
    assert [c.call_id for c in verdict.calls] == ["a1", "b2"]
    assert verdict.reason == "the stream ended before its final event"
    garbage = inspect(exchange(ask(), b'[{"candidates": []}, nonsense', STREAM))
    assert garbage.stream_errors[0].type == "malformed_event"


def test_vertex_streamed_arguments_are_put_together_by_json_path():
    pieces = [
        {"functionCall": {"name": "plan", "id": "p1", "willContinue": True}},
        {"functionCall": {"partialArgs": [
            {"jsonPath": "$.city", "stringValue": "Bos", "willContinue": True}],
            "willContinue": True}},
        {"functionCall": {"partialArgs": [{"jsonPath": "$.city", "stringValue": "ton"}],
                          "willContinue": True}},
        {"functionCall": {"partialArgs": [
            {"jsonPath": "$.stops[1].days", "numberValue": 2},
            {"jsonPath": "$.stops[0].name", "stringValue": "Salem"},
            {"jsonPath": "$.hurry", "boolValue": False}], "willContinue": True}},
        {"functionCall": {}},
    ]  # fmt: skip
    chunks = [reply([p], finish=None) for p in pieces] + [reply([{"text": "Done."}])]
    body = b"".join(b"data: " + json.dumps(c).encode() + b"\r\n\r\n" for c in chunks)
    verdict = inspect(exchange(ask(), body, VERTEX + ":streamGenerateContent?alt=sse",
                               "text/event-stream"))  # fmt: skip
    assert [(c.call_id, c.name) for c in verdict.calls] == [("p1", "plan")]
    assert json.loads(verdict.calls[0].arguments_raw) == {
        "city": "Boston", "stops": [{"name": "Salem"}, {"days": 2}], "hurry": False
    }  # fmt: skip


def streamed(parts_by_chunk: list[list[dict[str, Any]]]) -> Any:
    """A Vertex AI stream of these chunks' parts, then a closing text chunk, inspected."""
    chunks = [reply(parts, finish=None) for parts in parts_by_chunk] + [reply([{"text": "."}])]
    body = b"".join(b"data: " + json.dumps(c).encode() + b"\r\n\r\n" for c in chunks)
    return inspect(exchange(ask(), body, VERTEX + ":streamGenerateContent?alt=sse",
                            "text/event-stream"))  # fmt: skip


def test_a_call_sent_whole_in_one_part_of_partial_args_holds_its_arguments():
    """js-genai's recording (Vertex AI, gemini-3-pro-preview): the name and every partialArg
    in one part, with no willContinue at all."""
    divide = {"functionCall": {"name": "customDivide", "partialArgs": [
        {"jsonPath": "$.denominator", "numberValue": 2},
        {"jsonPath": "$.numerator", "numberValue": 100}]}}  # fmt: skip
    for verdict in (streamed([[divide]]), unary(ask(), [divide])):
        assert [(c.name, c.arguments_raw, c.parse_error) for c in verdict.calls] == [
            ("customDivide", '{"denominator":2,"numerator":100}', None)
        ]


def test_a_null_a_quoted_path_and_a_closing_part_that_names_the_call_again():
    """python-genai's shapes: nullValue as NULL_VALUE, and a last part that repeats the name."""
    verdict = streamed([
        [{"functionCall": {"name": "plan", "willContinue": True}}],
        [{"functionCall": {"partialArgs": [
            {"jsonPath": "$['two words']", "stringValue": "a"},
            {"jsonPath": "$.tags[0]", "stringValue": "x"}], "willContinue": True}}],
        [{"functionCall": {"name": "plan", "partialArgs": [
            {"jsonPath": "$.country", "nullValue": "NULL_VALUE"}], "willContinue": False}}],
    ])  # fmt: skip
    assert [json.loads(c.arguments_raw) for c in verdict.calls] == [
        {"two words": "a", "tags": ["x"], "country": None}
    ]


# Any JSON object a function may be called with, but empty containers: partialArgs set values
# at paths, so an empty object or array has no path to be sent by.
ARGUMENT_KEYS = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1,
                        max_size=6)  # fmt: skip
ARGUMENTS = st.dictionaries(
    ARGUMENT_KEYS,
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers(-(10**6), 10**6)
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=12),
        lambda inner: (
            st.lists(inner, min_size=1, max_size=3)
            | st.dictionaries(ARGUMENT_KEYS, inner, min_size=1, max_size=3)
        ),
        max_leaves=8,
    ),
    max_size=4,
)


def leaves(value: Any, path: str = "$") -> list[tuple[str, Any]]:
    """(JSON path, scalar) for every scalar in value, in document order."""
    if isinstance(value, dict):
        steps = {key: f".{key}" if key.isidentifier() else f"[{json.dumps(key)}]" for key in value}
        return [leaf for key, sub in value.items() for leaf in leaves(sub, path + steps[key])]
    if isinstance(value, list):
        return [leaf for i, sub in enumerate(value) for leaf in leaves(sub, f"{path}[{i}]")]
    return [(path, value)]


def piece(path: str, value: Any) -> dict[str, Any]:
    if value is None:
        return {"jsonPath": path, "nullValue": "NULL_VALUE"}
    kind = {bool: "boolValue", str: "stringValue"}.get(type(value), "numberValue")
    return {"jsonPath": path, kind: value}


@settings(max_examples=150, deadline=None)
@given(ARGUMENTS, st.data())
def test_streamed_arguments_split_any_way_give_the_object_the_call_holds_unstreamed(args, data):
    # Each string in pieces (the last says no willContinue), the paths' pieces interleaved in
    # any order that keeps each path's own in order.
    queues = []
    for path, value in leaves(args):
        if isinstance(value, str):
            cuts = sorted(data.draw(st.lists(st.integers(0, len(value)), max_size=3)))
            texts = [value[a:b] for a, b in zip([0, *cuts], [*cuts, len(value)], strict=True)]
            queues.append([piece(path, t) | {"willContinue": True} for t in texts[:-1]]
                          + [piece(path, texts[-1])])  # fmt: skip
        else:
            queues.append([piece(path, value)])
    pieces: list[dict[str, Any]] = []
    while queues:
        queue = queues[data.draw(st.integers(0, len(queues) - 1))]
        pieces.append(queue.pop(0))
        queues = [q for q in queues if q]
    # The pieces over parts, the parts over chunks, the call opened and closed either way.
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(pieces) - 1)), max_size=4)))
    groups = [pieces[a:b] for a, b in zip([0, *cuts], [*cuts, len(pieces)], strict=True)]
    groups = [g for g in groups if g]
    # (A call of no arguments streams as its name and willContinue, then an empty part: sent
    # in one part, with no willContinue, it is a call sent with no args field at all.)
    styles = ["name alone", "name with the first", "no willContinue"] if pieces else ["name alone"]
    style = data.draw(st.sampled_from(styles))
    head = {"name": "plan", "id": "p1"}
    if style == "name alone":
        calls = [head | {"willContinue": True}]
        calls += [{"partialArgs": g, "willContinue": True} for g in groups] + [{}]
    elif style == "name with the first":
        calls = [{"partialArgs": g, "willContinue": True} for g in groups]
        calls[0] = calls[0] | head
        if data.draw(st.booleans()):
            calls.append({})  # an empty part ends it
        else:
            calls[-1] = {k: v for k, v in calls[-1].items() if k != "willContinue"}
    else:
        calls = [{"partialArgs": g} for g in groups]
        calls[0] = calls[0] | head
    parts = [{"functionCall": c} for c in calls]
    split = sorted(data.draw(st.sets(st.integers(1, len(parts)), max_size=3)))
    chunks = [parts[a:b] for a, b in zip([0, *split], [*split, len(parts)], strict=True)]
    verdict = streamed([c for c in chunks if c])
    whole = unary(ask(), [{"functionCall": head | {"args": args}}])
    assert [(c.call_id, c.name) for c in verdict.calls] == [("p1", "plan")]
    assert json.loads(verdict.calls[0].arguments_raw) == args
    assert json.loads(whole.calls[0].arguments_raw) == args
    assert verdict.reason is None


def test_an_error_is_read_with_its_status_in_any_framing():
    body = {"error": {"code": 400, "message": "API key not valid.", "status": "INVALID_ARGUMENT"}}
    for raw, content_type in ((json.dumps(body), "application/json"),
                              (json.dumps([body]), "application/json"),
                              (json.dumps(body), "text/event-stream")):  # fmt: skip
        rejected = inspect(exchange(ask(), raw.encode(), STREAM, content_type, 400)).rejected
        assert (rejected.type, rejected.message) == ("INVALID_ARGUMENT", "API key not valid.")


# --- the loop ----------------------------------------------------------------------------------


def loop(*contents: tuple[str, list[dict[str, Any]]], model: str = "gemini-2.5-flash") -> list:
    request = {"model": model,
               "contents": [{"role": role, "parts": parts} for role, parts in contents]}  # fmt: skip
    return [(e.rule, e.ids, e.where) for e in check_loop("gemini", request).errors]


USER = ("user", [{"text": "Paris and Rome?"}])


def test_responses_answer_by_id_where_both_carry_one_else_by_name_in_order():
    calls = ("model", [call("Paris", "a1"), call("Rome", "b2")])
    assert loop(USER, calls, ("user", [answer(call_id="b2"), answer(call_id="a1")])) == []
    assert loop(USER, calls, ("user", [answer(), answer()])) == []  # google-genai sends no ids
    assert loop(USER, ("model", [call("Paris"), call("Rome")]),
                ("user", [answer(call_id="tool_call_4419"), answer()])) == []  # fmt: skip
    assert loop(USER, calls, ("user", [answer(call_id="a1")])) == [
        ("unanswered-call", ["b2"], "contents.1")
    ]
    assert loop(USER, calls, ("user", [answer(call_id="a1"), answer(call_id="zz")])) == [
        ("orphan-result", ["zz"], "contents.2.parts.1"),
        ("unanswered-call", ["b2"], "contents.1"),
    ]
    assert loop(USER, calls, ("user", [answer(call_id="a1"), answer(call_id="b2"),
                                        answer(call_id="a1")])) == [
        ("duplicate-result", ["a1"], "contents.2.parts.2")
    ]  # fmt: skip


def test_consecutive_contents_of_one_role_are_one_turn_as_the_api_reads_them():
    calls = ("model", [call("Paris"), call("Rome")])
    one_each = [("user", [answer()]), ("function", [answer()])]
    assert loop(USER, calls, *one_each, ("user", [{"text": "thanks"}])) == []
    assert loop(USER, ("model", [call("Paris")]), ("model", [call("Rome")]),
                ("user", [answer(), answer()])) == []  # fmt: skip
    # A call in the first of two model contents is as much the newest turn's as the second's.
    assert loop(USER, ("model", [call("Paris", "a1")]), ("model", [call("Rome", "b2")]),
                ("user", [answer(call_id="b2")])) == [
        ("unanswered-call", ["a1"], "contents.1")
    ]  # fmt: skip


def test_responses_that_follow_no_call_answer_nothing_and_text_after_calls_is_accepted():
    assert loop(USER, ("model", [{"text": "Hi"}]), ("user", [answer()])) == [
        ("orphan-result", ["get_weather"], "contents.2.parts.0")
    ]
    # Recorded: gemini-2.0-flash took a user's text after a call with no response at all.
    assert loop(USER, ("model", [call("Paris")]), ("user", [{"text": "never mind"}])) == []


def test_an_error_in_a_response_is_a_tool_failure():
    request = {"contents": [{"role": "user", "parts": USER[1]},
                            {"role": "model", "parts": [call("Paris", "a1")]},
                            {"role": "user", "parts": [answer(call_id="a1", error="no such city")]}]}  # fmt: skip
    results = check_loop("gemini", request).results
    assert [(r.call_id, r.outcome, r.where) for r in results] == [
        ("a1", "error", "contents.2.parts.0")
    ]


def test_gemini_3_wants_the_first_call_of_each_step_of_the_current_turn_signed():
    signed = ("model", [call("Paris", "a1", thoughtSignature="c2ln"), call("Rome", "b2")])
    unsigned = ("model", [call("Paris", "a1"), call("Rome", "b2", thoughtSignature="c2ln")])
    answers = ("user", [answer(call_id="a1"), answer(call_id="b2")])
    assert loop(USER, signed, answers, model="gemini-3-flash-preview") == []
    assert loop(USER, unsigned, answers, model="gemini-3-pro-preview") == [
        ("missing-thought-signature", ["a1"], "contents.1.parts.0")
    ]
    assert loop(USER, unsigned, answers, model="gemini-3.1-pro-preview")[0][0] == (
        "missing-thought-signature"
    )
    assert loop(USER, unsigned, answers, model="gemini-2.5-flash") == []  # optional before 3
    # A step before the user's last own message is another turn: not checked.
    later = [("user", [{"text": "and Oslo?"}]), ("model", [{"text": "Sunny."}])]
    assert loop(USER, unsigned, answers, *later, model="gemini-3-pro-preview") == []
    step2 = ("model", [{"function_call": {"name": "get_weather", "args": {}},
                        "thought_signature": "c2ln"}])  # fmt: skip
    assert loop(USER, signed, answers, step2, model="gemini-3-pro-preview") == []
    # Parallel calls split over two model contents keep one signature, on the first.
    split = [("model", [call("Paris", "a1", thoughtSignature="c2ln")]),
             ("model", [call("Rome", "b2")])]  # fmt: skip
    assert loop(USER, *split, answers, model="gemini-3-pro-preview") == []


def test_a_vertex_schema_with_refs_validates_arguments_through_them():
    city = {"type": "OBJECT", "properties": {"name": {"type": "STRING"}}, "required": ["name"]}
    schema = {
        "type": "OBJECT",
        "properties": {"to": {"ref": "#/defs/City"}},
        "defs": {"City": city},
    }
    declared = [{"functionDeclarations": [{"name": "travel", "parameters": schema}]}]
    bad = {"functionCall": {"name": "travel", "args": {"to": {"nom": "Lyon"}}}}
    request = ask(tools=declared)
    verdict = inspect(exchange(request, json.dumps(reply([bad])).encode(),
                               VERTEX + ":generateContent"))  # fmt: skip
    (checked,) = verdict.calls
    assert checked.schema_problem is None
    assert [(e.path, e.message) for e in checked.schema_errors] == [
        ("$.to", '"name" is a required property')
    ]
