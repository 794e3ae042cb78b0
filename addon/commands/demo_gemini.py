"""The demo's Gemini step, through google-genai's own client."""

from __future__ import annotations

from typing import Any

from .demo_agent import WEATHER, Clients, Step, json_reply

# Gemini 3's two parallel calls: only the first part carries the thought signature.
GEMINI_CALLS: list[dict[str, Any]] = [
    {
        "functionCall": {"id": "8hd01vsf", "name": "get_weather",
                         "args": {"city": "Kyoto", "country": "JP", "units": "c"}},
        "thoughtSignature": "CvgCAb4+9vup9EIJimw1po6h04G33NCsW3/75AeNkaA+CgZwaTVYQNaI3RaU+uU59eyS",
    },
    {
        "functionCall": {"id": "q2m7x0ta", "name": "get_weather",
                         "args": {"city": "Osaka", "country": "JP", "units": "c"}},
    },
]  # fmt: skip
UNSIGNED = (
    "Function call is missing a thought_signature in functionCall parts. This is required for "
    "tools to work correctly, and missing thought_signature may lead to degraded model "
    "performance. Additional data, function call `default_api:get_weather` , position 2. "
    "Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
)


def _gemini_unsigned(clients: Clients) -> Any:
    """A Gemini 3 follow-up whose history dropped the calls' thought signature."""
    from google.genai import types  # noqa: PLC0415

    unsigned = [{k: v for k, v in part.items() if k != "thoughtSignature"} for part in GEMINI_CALLS]
    return clients.gemini.models.generate_content(
        model="gemini-3-flash-preview",
        contents=[
            types.Content(role="user", parts=[types.Part(text="Weather in Kyoto and Osaka?")]),
            types.Content(role="model", parts=[types.Part.model_validate(p) for p in unsigned]),
            types.Content(
                role="user",
                parts=[
                    types.Part(
                        function_response=types.FunctionResponse(
                            id=part["functionCall"]["id"], name="get_weather",
                            response={"temp_c": temp},
                        )
                    )
                    for part, temp in zip(GEMINI_CALLS, (14, 17), strict=True)
                ],
            ),
        ],
        config=types.GenerateContentConfig(
            tools=[types.Tool(function_declarations=[types.FunctionDeclaration(
                name="get_weather", description="Weather for a city",
                parameters_json_schema=WEATHER)])],
        ),
    )  # fmt: skip


STEPS: list[Step] = [
    Step(
        "gemini-unsigned",
        "Gemini 3: a replayed call that lost its thought signature, and the 400 it earns",
        json_reply(
            {"error": {"code": 400, "message": UNSIGNED, "status": "INVALID_ARGUMENT"}}, 400
        ),
        _gemini_unsigned,
        expect_error=True,
    ),
]
