"""Gemini through a real `tooltap run` with Google's own client, google-genai: the Gemini API
and Vertex AI, unary and streamed, against a loopback upstream answering in the shapes the
dialects corpus recorded. Credentials are dummies.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import google.oauth2.credentials
import httpx
import pytest
from google import genai
from google.genai import errors, types
from support.prom import sample, scrape

from tooltap.addon.harness.launch import Proxy
from tooltap.addon.harness.replay import ReplayServer, Reply, Seen

SIGNATURE = "CvgCAb4+9vup9EIJimw1po6h04G33NCsW3/75AeNkaA+CgZwaTVYQNaI3RaU+uU59eySPpRdKTbQ"
WEATHER = {
    "type": "OBJECT",
    "properties": {
        "city": {"type": "STRING"},
        "units": {"type": "STRING", "enum": ["c", "f"], "nullable": True},
    },
    "required": ["city"],
}
DECLARATIONS = [{"name": "get_weather", "description": "Weather for a city", "parameters": WEATHER}]
ASK = "Weather in Paris and Rome?"


def response(parts: list[dict[str, Any]], model: str, response_id: str) -> dict[str, Any]:
    return {
        "candidates": [
            {
                "content": {"role": "model", "parts": parts},
                "finishReason": "STOP",
                "index": 0,
                "finishMessage": "Model generated function call(s).",
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 74,
            "candidatesTokenCount": 30,
            "totalTokenCount": 104,
        },
        "modelVersion": model,
        "responseId": response_id,
    }


def call(city: str, units: str, call_id: str | None = None, signed: bool = False) -> dict:
    body = {"name": "get_weather", "args": {"city": city, "units": units}}
    part: dict[str, Any] = {"functionCall": body | ({"id": call_id} if call_id else {})}
    return part | ({"thoughtSignature": SIGNATURE} if signed else {})


def sse(chunks: list[dict[str, Any]]) -> Reply:
    return Reply(
        headers=[("content-type", "text/event-stream")],
        chunks=[b"data: " + json.dumps(c).encode() + b"\r\n\r\n" for c in chunks],
        delay=0.01,
    )


def array(chunks: list[dict[str, Any]]) -> Reply:
    """The stream without alt=sse: one JSON array, a whole response at a time."""
    texts = [json.dumps(c, indent=2) for c in chunks]
    pieces = ["[" + texts[0]] + ["\n,\r\n" + t for t in texts[1:]]
    pieces[-1] += "\n]"
    return Reply(
        headers=[("content-type", "application/json; charset=UTF-8")],
        chunks=[p.encode() for p in pieces],
        delay=0.01,
    )


def error(message: str, violations: list[dict[str, str]] | None = None) -> Reply:
    details = (
        [{"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": violations}]
        if violations
        else []
    )
    body = {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}
    body["error"] |= {"details": details} if details else {}
    return Reply(
        400, [("content-type", "application/json; charset=UTF-8")], [json.dumps(body).encode()]
    )


PARALLEL = response(
    [call("Paris", "c", "8hd01vsf", signed=True), call("Rome", "kelvin", "q2m7x0ta")],
    "gemini-3-flash-preview",
    "z3ShaYDJO7ib1e8P2s6quQU",
)
STREAMED = [  # Gemini 2.5: no ids; one call a chunk, then the finish
    response([call("Paris", "c", signed=True)], "gemini-2.5-flash", "a1QraYb2Kc6m1e8P4pGS8Ao"),
    response([call("Rome", "f")], "gemini-2.5-flash", "a1QraYb2Kc6m1e8P4pGS8Ao"),
    response([{"text": ""}], "gemini-2.5-flash", "a1QraYb2Kc6m1e8P4pGS8Ao"),
]
for chunk in STREAMED[:-1]:
    del chunk["candidates"][0]["finishReason"]
UNANSWERED = (
    "Please ensure that the number of function response parts is equal to the number of "
    "function call parts of the function call turn."
)
UNSIGNED = (
    "Function call is missing a thought_signature in functionCall parts. This is required for "
    "tools to work correctly, and missing thought_signature may lead to degraded model "
    "performance. Additional data, function call `default_api:get_weather` , position 2. "
    "Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
)
UNKNOWN = (  # google-genai sends the Schema's fields in snake_case, and the API names them so
    'Invalid JSON payload received. Unknown name "additional_properties" at '
    "'tools[0].function_declarations[0].parameters': Cannot find field."
)
REPLIES = {
    "parallel": Reply(
        headers=[("content-type", "application/json; charset=UTF-8")],
        chunks=[json.dumps(PARALLEL, indent=2).encode()],
    ),
    "streamed": sse(STREAMED),
    "array": array(STREAMED),
    "unanswered": error(UNANSWERED),
    "unsigned": error(UNSIGNED),
    "unknown-field": error(
        UNKNOWN,
        [{"field": "tools[0].function_declarations[0].parameters", "description": UNKNOWN}],
    ),
}


def route(seen: Seen) -> Reply:
    return REPLIES[seen.headers["x-scenario"]]


@pytest.fixture(scope="module")
def upstream():
    with ReplayServer(route) as server:
        yield server


@pytest.fixture(scope="module")
def proxy(upstream):
    with Proxy.tooltap([upstream.url], "--log-format", "json") as running:
        yield running


def gemini_api(proxy: Proxy, scenario: str) -> genai.Client:
    options = types.HttpOptions(
        base_url=proxy.url, api_version="v1beta", headers={"x-scenario": scenario}
    )
    return genai.Client(api_key="AIza-dummy-not-a-real-key", http_options=options)


def vertex(proxy: Proxy, scenario: str) -> genai.Client:
    options = types.HttpOptions(base_url=proxy.url, headers={"x-scenario": scenario})
    return genai.Client(
        vertexai=True,
        project="tooltap-test",
        location="us-central1",
        credentials=google.oauth2.credentials.Credentials(token="ya29.dummy"),
        http_options=options,
    )


def config(mode: str = "AUTO") -> types.GenerateContentConfig:
    return types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=DECLARATIONS)],
        tool_config=types.ToolConfig(
            function_calling_config=types.FunctionCallingConfig(mode=mode)
        ),
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )


def test_a_parallel_turn_with_ids_its_calls_logged_and_an_argument_off_its_schema(proxy):
    mark = proxy.mark()
    client = gemini_api(proxy, "parallel")
    answer = client.models.generate_content(
        model="gemini-3-flash-preview", contents=ASK, config=config()
    )
    assert [c.id for c in answer.function_calls] == ["8hd01vsf", "q2m7x0ta"]
    (turn,) = proxy.wait_for("turn", 1, since=mark)
    calls = proxy.wait_for("tool_call", 2, since=mark)
    assert {k: turn[k] for k in ("api", "model", "response_id", "state", "calls", "stream")} == {
        "api": "gemini",
        "model": "gemini-3-flash-preview",
        "response_id": "z3ShaYDJO7ib1e8P2s6quQU",
        "state": "fanout-no-strict",
        "calls": 2,
        "stream": False,
    }
    assert turn["path"] == "/v1beta/models/gemini-3-flash-preview:generateContent"
    assert [(c["call_id"], c["name"], c["arguments_raw"]) for c in calls] == [
        ("8hd01vsf", "get_weather", '{"city":"Paris","units":"c"}'),
        ("q2m7x0ta", "get_weather", '{"city":"Rome","units":"kelvin"}'),
    ]
    assert calls[1]["schema_errors"] == [
        {"path": "$.units", "message": '"kelvin" is not one of "c" or "f"'}
    ]


def test_a_validated_stream_on_vertex_without_ids_is_read_whole_and_strict(proxy, upstream):
    mark = proxy.mark()
    client = vertex(proxy, "streamed")
    got = [
        c.function_calls
        for c in client.models.generate_content_stream(
            model="gemini-2.5-flash", contents=ASK, config=config("VALIDATED")
        )
    ]
    assert [c[0].args["city"] for c in got if c] == ["Paris", "Rome"]
    (turn,) = proxy.wait_for("turn", 1, since=mark)
    calls = proxy.wait_for("tool_call", 2, since=mark)
    assert (turn["state"], turn["calls"], turn["stream"], turn["model"]) == (
        "strict-serialised",
        2,
        True,
        "gemini-2.5-flash",
    )
    assert turn["path"] == (
        "/v1beta1/projects/tooltap-test/locations/us-central1/publishers/google/models/"
        "gemini-2.5-flash:streamGenerateContent"
    )
    # No ids: each call is named by its place among the turn's calls.
    assert [c["call_id"] for c in calls] == ["functionCall[0]", "functionCall[1]"]
    seen = upstream.seen[-1]
    assert seen.path.endswith(":streamGenerateContent?alt=sse")
    assert seen.headers["authorization"] == "Bearer ya29.dummy"


def test_the_json_array_stream_passes_chunk_by_chunk_and_gives_the_same_turn(proxy, upstream):
    mark = proxy.mark()
    url = f"{proxy.url}/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    body = {"contents": [{"role": "user", "parts": [{"text": ASK}]}],
            "tools": [{"functionDeclarations": DECLARATIONS}]}  # fmt: skip
    arrived = []
    with httpx.stream("POST", url, json=body, headers={"x-scenario": "array"}, timeout=10) as got:
        for piece in got.iter_raw():
            arrived.append(piece)
    assert b"".join(arrived) == REPLIES["array"].body  # every byte as the upstream sent it
    assert len(arrived) == len(REPLIES["array"].chunks)  # and a piece at a time, not held back
    (turn,) = proxy.wait_for("turn", 1, since=mark)
    assert (turn["state"], turn["calls"], turn["stream"]) == ("fanout-no-strict", 2, True)


def test_an_unanswered_call_is_the_400_gemini_answers(proxy):
    mark = proxy.mark()
    client = gemini_api(proxy, "unanswered")
    history = [
        types.Content(role="user", parts=[types.Part(text=ASK)]),
        types.Content(
            role="model",
            parts=[
                types.Part.model_validate(p) for p in PARALLEL["candidates"][0]["content"]["parts"]
            ],
        ),
        types.Content(
            role="user",
            parts=[types.Part.from_function_response(name="get_weather", response={"temp": 21})],
        ),
    ]
    with pytest.raises(errors.ClientError):
        client.models.generate_content(
            model="gemini-3-flash-preview", contents=history, config=config()
        )
    (loop,) = proxy.wait_for("loop_error", 1, since=mark)
    (rejected,) = proxy.wait_for("request_rejected", 1, since=mark)
    # The response without an id answers the first open call of its name; the second is left.
    assert (loop["rule"], loop["ids"], loop["where"]) == (
        "unanswered-call",
        ["q2m7x0ta"],
        "contents.1",
    )
    assert (rejected["status"], rejected["type"], rejected["message"]) == (
        400,
        "INVALID_ARGUMENT",
        UNANSWERED,
    )


def test_a_gemini_3_replay_without_its_thought_signature_is_named(proxy):
    mark = proxy.mark()
    client = gemini_api(proxy, "unsigned")
    unsigned = [{k: v for k, v in p.items() if k != "thoughtSignature"}
                for p in PARALLEL["candidates"][0]["content"]["parts"]]  # fmt: skip
    history = [
        types.Content(role="user", parts=[types.Part(text=ASK)]),
        types.Content(role="model", parts=[types.Part.model_validate(p) for p in unsigned]),
        types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(
                        id=i, name="get_weather", response={"temp": t}
                    )
                )
                for i, t in (("8hd01vsf", 21), ("q2m7x0ta", 24))
            ],
        ),
    ]
    with pytest.raises(errors.ClientError):
        client.models.generate_content(
            model="gemini-3-flash-preview", contents=history, config=config()
        )
    (loop,) = proxy.wait_for("loop_error", 1, since=mark)
    assert (loop["rule"], loop["ids"], loop["where"]) == (
        "missing-thought-signature",
        ["8hd01vsf"],
        "contents.1.parts.0",
    )


def test_a_schema_field_the_gemini_api_does_not_know_explains_its_400(proxy):
    mark = proxy.mark()
    client = gemini_api(proxy, "unknown-field")
    closed = [{**DECLARATIONS[0], "parameters": {**WEATHER, "additionalProperties": False}}]
    with pytest.raises(errors.ClientError):
        client.models.generate_content(
            model="gemini-2.5-flash",
            contents=ASK,
            config=types.GenerateContentConfig(tools=[types.Tool(function_declarations=closed)]),
        )
    (rejected,) = proxy.wait_for("request_rejected", 1, since=mark)
    assert rejected["message"] == UNKNOWN
    assert rejected["blockers"] == [
        "tool get_weather: $: additional_properties is not a field of Gemini's Schema (JSON "
        "Schema goes in parametersJsonSchema)"
    ]


def test_the_metrics_count_gemini_turns_calls_and_rejections(proxy):
    values = scrape(proxy)
    for state, count in (("fanout-no-strict", 2), ("strict-serialised", 1)):
        turns = sum(
            v for (name, labels), v in values.items()
            if name == "tooltap_turns_total" and ("api", "gemini") in labels and ("state", state) in labels
        )  # fmt: skip
        assert turns == count, state
    assert sample(values, "tooltap_rejected_requests_total", api="gemini", status="400") == 3


def test_gemini_read_offline_from_a_flow_file_and_a_har_gives_the_live_findings(tmp_path, upstream):
    """The same traffic saved by the proxy as flows (-w) and as HAR, then audited."""
    flows, har = tmp_path / "flows.mitm", tmp_path / "flows.har"
    saving = ("-w", str(flows), "--set", f"hardump={har}", "--set", "store_streamed_bodies=true")
    with Proxy.tooltap([upstream.url], "--log-format", "json", extra=saving) as saved:
        # A client is kept while it is used: a genai.Client closes its connections when collected.
        parallel, streamed = gemini_api(saved, "parallel"), vertex(saved, "streamed")
        parallel.models.generate_content(
            model="gemini-3-flash-preview", contents=ASK, config=config()
        )
        chunks = streamed.models.generate_content_stream(
            model="gemini-2.5-flash", contents=ASK, config=config("VALIDATED")
        )
        assert len(list(chunks)) == 3
        url = f"{saved.url}/v1beta/models/gemini-2.5-flash:streamGenerateContent"
        body = {"contents": [{"role": "user", "parts": [{"text": ASK}]}]}
        httpx.post(url, json=body, headers={"x-scenario": "array"}, timeout=10)
        unanswered = gemini_api(saved, "unanswered")
        with pytest.raises(errors.ClientError):
            unanswered.models.generate_content(
                model="gemini-3-flash-preview", contents=ASK, config=config()
            )
        live = saved.wait_for("turn", 4)
    found = [(t["api"], t["stream"], t.get("state"), t["calls"], t["status"]) for t in live]
    assert found == [
        ("gemini", False, "fanout-no-strict", 2, 200),
        ("gemini", True, "strict-serialised", 2, 200),
        ("gemini", True, "no-tools", 2, 200),
        ("gemini", False, None, 0, 400),
    ]
    for source in (["-r", str(flows)], ["--har", str(har)]):
        done = subprocess.run(
            [sys.executable, "-m", "tooltap.addon.commands.cli", "audit", *source,
             "--format", "json"],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        *rows, _summary = [json.loads(row) for row in done.stdout.splitlines()]
        offline = [(r["api"], r["stream"], r["state"], len(r["calls"]), r["status"]) for r in rows]
        assert offline == found, source
