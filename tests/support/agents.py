"""Agent loops on google-genai and ollama, and the scripted model they talk to: a loopback
server (tooltap's ReplayServer) answering with each API's wire bytes, whole or streamed, to the
clients as they are built by default (no transport of the test's own).

The model asks for get_weather, then answers in text. Two cases:
  correct     the model's call is on get_weather's declared schema, and the loop answers it
  off-schema  the model's call has a town where the schema requires a city (argument-schema)
Either way the loop answers the call, by id where the API has one, so the loop is never at
fault. Nothing here knows of tooltap.
"""

from __future__ import annotations

import json
from typing import Any

from tooltap.addon.harness.replay import Reply, Route, Seen

CASES = ("correct", "off-schema")
EXPECTED = {"correct": set(), "off-schema": {"argument-schema"}}
ARGUMENTS = {"correct": {"city": "Lisbon"}, "off-schema": {"town": "Lisbon"}}
CITY = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}
ANSWER = ["Mild", " and sunny."]  # the model's final text, in two pieces when streamed
TURNS = 2  # the model's: it asks for the tool, then answers


def run_tool(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"city": arguments.get("city") or arguments.get("town"), "temperature": 21}


def _json(reply: dict[str, Any]) -> Reply:
    return Reply(chunks=[json.dumps(reply).encode()])


# --- Gemini (google-genai) ----------------------------------------------------------------

GEMINI_MODEL = "gemini-2.5-flash"


def gemini_route(case: str) -> Route:
    """generateContent, and :streamGenerateContent?alt=sse, whose every event is a whole
    GenerateContentResponse."""

    def route(seen: Seen) -> Reply:
        request = json.loads(seen.body)
        answered = any("functionResponse" in p for c in request["contents"] for p in c["parts"])
        if answered:
            parts = [[{"text": text}] for text in ANSWER]
        else:
            call = {"id": "fc-1", "name": "get_weather", "args": ARGUMENTS[case]}
            parts = [[{"functionCall": call}]]
        events = [_gemini(p, last=i == len(parts) - 1) for i, p in enumerate(parts)]
        if ":streamGenerateContent" not in seen.path:
            whole = [part for p in parts for part in p]
            return _json(_gemini(whole, last=True))
        chunks = [b"data: %s\r\n\r\n" % json.dumps(event).encode() for event in events]
        return Reply(headers=[("content-type", "text/event-stream")], chunks=chunks)

    return route


def _gemini(parts: list[dict[str, Any]], last: bool) -> dict[str, Any]:
    candidate = {"content": {"role": "model", "parts": parts}, "index": 0}
    usage = {"promptTokenCount": 12, "candidatesTokenCount": 5, "totalTokenCount": 17}
    return {
        "candidates": [{**candidate, **({"finishReason": "STOP"} if last else {})}],
        **({"usageMetadata": usage} if last else {}),
        "modelVersion": GEMINI_MODEL,
    }


def gemini_config() -> Any:
    from google.genai import types

    declaration = types.FunctionDeclaration(
        name="get_weather", description="The weather in a city.", parameters_json_schema=CITY
    )
    return types.GenerateContentConfig(tools=[types.Tool(function_declarations=[declaration])])


def gemini_loop(client: Any, stream: bool) -> str:
    """A Gemini agent loop on the sync client: ask, run the calls, answer them, ask again."""
    models, contents = client.models, _opening_contents()
    for _ in range(TURNS):
        if stream:
            chunks = list(models.generate_content_stream(**_gemini_request(contents)))
        else:
            chunks = [models.generate_content(**_gemini_request(contents))]
        final = _gemini_step(contents, chunks)
        if final is not None:
            return final
    raise AssertionError(f"the model still asked for tools after {TURNS} turns")


async def gemini_loop_async(client: Any, stream: bool) -> str:
    """The same loop on the async client (client.aio)."""
    models, contents = client.aio.models, _opening_contents()
    for _ in range(TURNS):
        if stream:
            chunks = [c async for c in await models.generate_content_stream(
                **_gemini_request(contents))]  # fmt: skip
        else:
            chunks = [await models.generate_content(**_gemini_request(contents))]
        final = _gemini_step(contents, chunks)
        if final is not None:
            return final
    raise AssertionError(f"the model still asked for tools after {TURNS} turns")


def _opening_contents() -> list[Any]:
    from google.genai import types

    return [types.Content(role="user", parts=[types.Part(text="What's Lisbon like?")])]


def _gemini_request(contents: list[Any]) -> dict[str, Any]:
    return {"model": GEMINI_MODEL, "contents": contents, "config": gemini_config()}


def _gemini_step(contents: list[Any], chunks: list[Any]) -> str | None:
    """The model's turn (its streamed chunks, or the one whole response) and the loop's
    answer, added to contents; the final text when the turn asked for no tool."""
    from google.genai import types

    parts = [p for chunk in chunks for p in chunk.candidates[0].content.parts]
    calls = [p.function_call for p in parts if p.function_call is not None]
    if not calls:
        return "".join(p.text or "" for p in parts)
    answers = [
        types.Part.from_function_response(name=call.name, response=run_tool(call.args))
        for call in calls
    ]
    for answer, call in zip(answers, calls, strict=True):
        answer.function_response.id = call.id  # Gemini pairs by id where the call has one
    contents += [
        types.Content(role="model", parts=parts),
        types.Content(role="user", parts=answers),
    ]
    return None


# --- Ollama -------------------------------------------------------------------------------

OLLAMA_MODEL = "qwen3:8b"
OLLAMA_TOOLS = [
    {
        "type": "function",
        "function": {"name": "get_weather", "description": "The weather.", "parameters": CITY},
    }
]


def ollama_route(case: str) -> Route:
    """/api/chat: one JSON object, or (stream, the client's default) newline-delimited JSON,
    the last line with done: true."""

    def route(seen: Seen) -> Reply:
        request = json.loads(seen.body)
        answered = any(m["role"] == "tool" for m in request["messages"])
        if answered:
            messages = [{"role": "assistant", "content": text} for text in ANSWER]
        else:
            call = {"function": {"name": "get_weather", "arguments": ARGUMENTS[case]}}
            messages = [{"role": "assistant", "content": "", "tool_calls": [call]}]
        if not request.get("stream", True):
            content = "".join(m["content"] for m in messages)
            return _json(_ollama({**messages[0], "content": content}, done=True))
        lines = [_ollama(m, done=False) for m in messages]
        lines.append(_ollama({"role": "assistant", "content": ""}, done=True))
        chunks = [json.dumps(line).encode() + b"\n" for line in lines]
        return Reply(headers=[("content-type", "application/x-ndjson")], chunks=chunks)

    return route


def _ollama(message: dict[str, Any], done: bool) -> dict[str, Any]:
    line = {"model": OLLAMA_MODEL, "created_at": "2026-01-05T10:00:00Z", "message": message}
    if done:
        return {
            **line,
            "done": True,
            "done_reason": "stop",
            "prompt_eval_count": 12,
            "eval_count": 5,
        }
    return {**line, "done": False}


def ollama_loop(client: Any, stream: bool) -> str:
    """An Ollama agent loop on ollama.Client: ask, run the calls, answer each by its tool's
    name (ollama-python's own way), ask again."""
    messages = _opening_messages()
    for _ in range(TURNS):
        said = client.chat(model=OLLAMA_MODEL, messages=messages, tools=OLLAMA_TOOLS, stream=stream)
        final = _ollama_step(messages, list(said) if stream else [said])
        if final is not None:
            return final
    raise AssertionError(f"the model still asked for tools after {TURNS} turns")


async def ollama_loop_async(client: Any, stream: bool) -> str:
    """The same loop on ollama.AsyncClient."""
    messages = _opening_messages()
    for _ in range(TURNS):
        said = await client.chat(
            model=OLLAMA_MODEL, messages=messages, tools=OLLAMA_TOOLS, stream=stream
        )
        final = _ollama_step(messages, [c async for c in said] if stream else [said])
        if final is not None:
            return final
    raise AssertionError(f"the model still asked for tools after {TURNS} turns")


def _opening_messages() -> list[dict[str, Any]]:
    return [{"role": "user", "content": "What's Lisbon like?"}]


def _ollama_step(messages: list[Any], lines: list[Any]) -> str | None:
    """The model's turn (its lines, or the one whole response) and the loop's answer, added to
    messages; the final text when the turn asked for no tool."""
    calls = [call for line in lines for call in line.message.tool_calls or []]
    text = "".join(line.message.content or "" for line in lines)
    if not calls:
        return text
    messages.append({"role": "assistant", "content": text, "tool_calls": calls})
    messages += [
        {
            "role": "tool",
            "tool_name": call.function.name,
            "content": json.dumps(run_tool(dict(call.function.arguments))),
        }
        for call in calls
    ]
    return None
