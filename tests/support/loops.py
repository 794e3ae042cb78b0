"""Scripted agent loops, as a team tests its own: a player answers with a scripted model, the
official SDK (openai, anthropic) talks to it, and the loop under test sends the results back.

The model asks for three tools in one turn; get_events fails. Each loop is one way of answering:
  correct         every call answered once, by id; the failure answered as a failure
  first-only      only tool_calls[0] answered (the loop that has only seen one call)
  split           every call answered, one user message per result with a note between
                  (Messages only)
  duplicate       every call answered, the first one twice
  dropped-failure the failed call left out

The player's replies are the APIs' wire bytes, whole or as an event stream, chunk by chunk.
Nothing here knows of tooltap: the plugin watches the SDKs from outside.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import anthropic
import openai
from openai.types.chat import ChatCompletionMessage

LOOPS = ("correct", "first-only", "split", "duplicate", "dropped-failure")
# What tooltap must find in each loop, and nothing else that an audit fails on.
EXPECTED = {
    "correct": set(),
    "first-only": {"unanswered-call"},
    "split": {"split-results"},
    "duplicate": {"duplicate-result"},
    "dropped-failure": {"unanswered-call"},
}
CITY = {"city": "Lisbon"}
CALLS = [("c1", "get_weather"), ("c2", "get_traffic"), ("c3", "get_events")]
FAILS = "get_events"
MODEL = {"openai": "gpt-4.1", "anthropic": "claude-sonnet-4-5"}
PATH = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}
BASE = "http://model.test"
TURNS = 2  # the model's: it asks for the tools, then answers


def tool_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    }


def tools(sdk: str) -> list[dict[str, Any]]:
    names = [name for _, name in CALLS]
    if sdk == "openai":
        return [
            {"type": "function", "function": {"name": n, "parameters": tool_schema()}}
            for n in names
        ]
    # strict: Anthropic documents no conflict between strict tools and parallel calls.
    return [
        {"name": n, "description": n, "input_schema": tool_schema(), "strict": True} for n in names
    ]


# --- the scripted model: replies as wire bytes --------------------------------------------


def replies(sdk: str, stream: bool) -> list[list[bytes]]:
    """The two turns: three calls, then an answer; each a list of chunks as a server sends."""
    build = {"openai": _chat, "anthropic": _messages}[sdk]
    return [build(CALLS, stream), build([], stream)]


def content_type(stream: bool) -> str:
    return "text/event-stream" if stream else "application/json"


def _chat(calls: list[tuple[str, str]], stream: bool) -> list[bytes]:
    wanted = [
        {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(CITY)}}
        for i, n in calls
    ]
    finish = "tool_calls" if calls else "stop"
    text = None if calls else "Mild, light traffic, nothing on."
    head = {"id": "chatcmpl-1", "created": 1, "model": MODEL["openai"]}
    if not stream:
        message = {
            "role": "assistant",
            "content": text,
            **({"tool_calls": wanted} if calls else {}),
        }
        body = {
            **head,
            "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": finish, "message": message}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 9, "total_tokens": 29},
        }
        return [json.dumps(body).encode()]
    chunk = {**head, "object": "chat.completion.chunk"}
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": text}]
    deltas += [{"tool_calls": [{"index": n, **call}]} for n, call in enumerate(wanted)]
    events = [
        {**chunk, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas
    ]
    events.append({**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    return [f"data: {json.dumps(e)}\n\n".encode() for e in events] + [b"data: [DONE]\n\n"]


def _messages(calls: list[tuple[str, str]], stream: bool) -> list[bytes]:
    blocks = [{"type": "tool_use", "id": i, "name": n, "input": CITY} for i, n in calls]
    if not calls:
        blocks = [{"type": "text", "text": "Mild, light traffic, nothing on."}]
    stop = "tool_use" if calls else "end_turn"
    usage = {"input_tokens": 20, "output_tokens": 9}
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": MODEL["anthropic"]}
    if not stream:
        body = {**message, "content": blocks, "stop_reason": stop, "usage": usage}
        return [json.dumps(body).encode()]
    events: list[tuple[str, dict[str, Any]]] = [
        (
            "message_start",
            {"message": {**message, "content": [], "stop_reason": None, "usage": usage}},
        )
    ]
    for index, block in enumerate(blocks):
        if block["type"] == "tool_use":
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            start, delta = (
                {"type": "text", "text": ""},
                {"type": "text_delta", "text": block["text"]},
            )
        events += [
            ("content_block_start", {"index": index, "content_block": start}),
            ("content_block_delta", {"index": index, "delta": delta}),
            ("content_block_stop", {"index": index}),
        ]
    events += [
        ("message_delta", {"delta": {"stop_reason": stop}, "usage": {"output_tokens": 9}}),
        ("message_stop", {}),
    ]
    return [
        f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()
        for name, data in events
    ]


class Player:
    """The scripted model behind a mock: each request gets the next reply, in order."""

    def __init__(self, sdk: str, stream: bool) -> None:
        self.script = iter(replies(sdk, stream))
        self.stream = stream
        self.requests: list[bytes] = []

    def next(self, body: bytes) -> tuple[dict[str, str], list[bytes]]:
        self.requests.append(body)
        return {"content-type": content_type(self.stream)}, next(self.script)

    def handler(self, httpx: Any, asynchronous: bool) -> Callable[[Any], Any]:
        """A MockTransport (or respx side effect) handler answering with httpx's own Response;
        a stream's chunks come one by one from a generator, read once, as from a socket (the
        openai SDK reads on past [DONE] to drain the connection: a stream that started over
        when read again would hand it every event twice)."""

        def handle(request: Any) -> Any:
            headers, chunks = self.next(request.content)
            if not self.stream:
                return httpx.Response(200, headers=headers, content=chunks[0])
            body = _async_chunks(chunks) if asynchronous else (c for c in chunks)
            return httpx.Response(200, headers=headers, content=body)

        return handle


async def _async_chunks(chunks: list[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


# --- the loops under test -----------------------------------------------------------------


def run_tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    if name == FAILS:
        raise RuntimeError("events service timed out")
    return {"city": arguments["city"], "ok": True}


def executed(calls: list[tuple[str, str, dict[str, Any]]]) -> list[tuple[str, str, bool]]:
    """Each call run: (id, output, failed)."""
    done = []
    for call_id, name, arguments in calls:
        try:
            done.append((call_id, json.dumps(run_tool(name, arguments)), False))
        except RuntimeError as exc:
            done.append((call_id, f"error: {exc}", True))
    return done


def answer(
    sdk: str, loop: str, calls: list[tuple[str, str, dict[str, Any]]]
) -> list[dict[str, Any]]:
    """The messages a loop appends after the assistant's turn."""
    results = executed(calls[:1] if loop == "first-only" else calls)
    if loop == "dropped-failure":
        results = [r for r in results if not r[2]]
    if loop == "duplicate":
        results = [results[0], *results]
    if sdk == "openai":
        return [{"role": "tool", "tool_call_id": i, "content": out} for i, out, _ in results]
    blocks = [
        {
            "type": "tool_result",
            "tool_use_id": i,
            "content": out,
            **({"is_error": True} if bad else {}),
        }
        for i, out, bad in results
    ]
    if loop == "split":
        # One user message per result, each with the loop's note after it, as a loop ported
        # from Chat writes them. (Consecutive user messages alone are one turn to the Messages
        # API, which merges them: that is not split.)
        split: list[dict[str, Any]] = []
        for block in blocks:
            note = {"role": "system", "content": f"ran {block['tool_use_id']}"}
            split += [*([note] if split else []), {"role": "user", "content": [block]}]
        return split
    return [{"role": "user", "content": blocks}]


def assistant(
    sdk: str, message: Any
) -> tuple[dict[str, Any], list[tuple[str, str, dict[str, Any]]]]:
    """The assistant's turn as the next request repeats it, and its calls."""
    if sdk == "openai":
        calls = [
            (c.id, c.function.name, json.loads(c.function.arguments))
            for c in message.tool_calls or []
        ]
        said = {
            "role": "assistant",
            "content": message.content,
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                for i, n, a in calls
            ],
        }
        return said, calls
    calls = [(b.id, b.name, dict(b.input)) for b in message.content if b.type == "tool_use"]
    return {"role": "assistant", "content": [b.model_dump() for b in message.content]}, calls


def _request(sdk: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    common = {"model": MODEL[sdk], "messages": messages, "tools": tools(sdk)}
    return common if sdk == "openai" else {**common, "max_tokens": 512}


def _chat_message(chunks: Any) -> Any:
    """A streamed Chat turn assembled the way a loop does it: calls by index."""
    calls: dict[int, dict[str, Any]] = {}
    text = ""
    for chunk in chunks:
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for call in choice.delta.tool_calls or []:
                into = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                into["id"] = call.id or into["id"]
                into["name"] += call.function.name or ""
                into["arguments"] += call.function.arguments or ""
    return ChatCompletionMessage.model_validate(
        {
            "role": "assistant",
            "content": text or None,
            "tool_calls": [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": c["arguments"]},
                }
                for c in calls.values()
            ]
            or None,
        }
    )


def run(sdk: str, client: Any, loop: str, stream: bool) -> str:
    """The loop, synchronously: ask, run the tools, answer, ask again; the final text."""
    messages = opening()
    for _ in range(TURNS):
        final = _step(sdk, loop, messages, _ask(sdk, client, _request(sdk, messages), stream))
        if final is not None:
            return final
    raise AssertionError(f"the model still asked for tools after {TURNS} turns")


async def run_async(sdk: str, client: Any, loop: str, stream: bool) -> str:
    """The same loop on the SDK's async client."""
    messages = opening()
    for _ in range(TURNS):
        message = await _ask_async(sdk, client, _request(sdk, messages), stream)
        final = _step(sdk, loop, messages, message)
        if final is not None:
            return final
    raise AssertionError(f"the model still asked for tools after {TURNS} turns")


def opening() -> list[dict[str, Any]]:
    return [{"role": "user", "content": "What's Lisbon like right now?"}]


def _step(sdk: str, loop: str, messages: list[dict[str, Any]], message: Any) -> str | None:
    """The loop's answer to the model's turn, added to messages; the final text when the turn
    asked for no tool."""
    said, calls = assistant(sdk, message)
    if not calls:
        return _text(sdk, message)
    messages += [said, *answer(sdk, loop, calls)]
    return None


def _ask(sdk: str, client: Any, request: dict[str, Any], stream: bool) -> Any:
    """The model's turn, as the SDK hands it over (a streamed one, assembled)."""
    if sdk == "openai" and stream:
        with client.chat.completions.create(**request, stream=True) as chunks:
            return _chat_message(chunks)
    if sdk == "openai":
        return client.chat.completions.create(**request).choices[0].message
    if stream:
        with client.messages.stream(**request) as events:
            return events.get_final_message()
    return client.messages.create(**request)


async def _ask_async(sdk: str, client: Any, request: dict[str, Any], stream: bool) -> Any:
    if sdk == "openai" and stream:
        chunks = await client.chat.completions.create(**request, stream=True)
        return _chat_message([chunk async for chunk in chunks])
    if sdk == "openai":
        return (await client.chat.completions.create(**request)).choices[0].message
    if stream:
        async with client.messages.stream(**request) as events:
            return await events.get_final_message()
    return await client.messages.create(**request)


def _text(sdk: str, message: Any) -> str:
    if sdk == "openai":
        return str(message.content)
    return "".join(b.text for b in message.content if b.type == "text")


def client(sdk: str, asynchronous: bool, http_client: Any = None) -> Any:
    """The official SDK's client for the player's address (through http_client, if given)."""
    kinds = {
        ("openai", False): openai.OpenAI,
        ("openai", True): openai.AsyncOpenAI,
        ("anthropic", False): anthropic.Anthropic,
        ("anthropic", True): anthropic.AsyncAnthropic,
    }
    base = f"{BASE}/v1" if sdk == "openai" else BASE
    extra = {"http_client": http_client} if http_client is not None else {}
    return kinds[sdk, asynchronous](
        api_key="sk-test-0123456789abcdef", base_url=base, max_retries=0, **extra
    )
