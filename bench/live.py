"""Benchmark: the inspector's cost per Gemini Live turn, beside a Realtime turn and a Chat
Completions stream carrying the same content, side by side in one run.

The content of one round, in each API's own messages: the user asks; the model says a short
sentence and makes two calls (get_weather, the same arguments); the client answers both; the
model answers in ten text pieces, with five chunks of audio (on the sockets). A socket carries
ten rounds after its setup (Gemini Live's `setup`, Realtime's `session.update`); the Chat
stream is two exchanges a round, the second carrying the history, as Chat must.

Two figures per API:
- look: what the proxy's tap does with each socket message, on mitmproxy's event loop (the
  message's kind from its head, whether it is held, whether its batch goes at once), per
  message and per turn;
- inspect per turn: what the inspector does with the messages held (the session reader, then
  inspect() on each turn it finishes, with a warm ValidatorCache), divided by the turns.
Timed as core_cost times (the fastest of several runs, the garbage collector off), so the
ratios travel across machines.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from tooltap.core import Exchange, ValidatorCache, inspect
from tooltap.core.dialects import socket_reader, socket_reading

from .core_cost import TIMING, per_call
from .sizes import Size

ROUNDS = 10  # per socket
PIECES = 10  # the answer's text pieces
AUDIO = 5  # audio chunks per answer, on the sockets
ANSWER = "Paris is 12 degrees and cloudy; Rome is 18 and sunny. Take a light jacket to Paris."
PREAMBLE = "Let me check both cities."
CALLS = [
    ("get_weather", {"city": "Paris", "units": "c"}),
    ("get_weather", {"city": "Rome", "units": "c"}),
]
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "units": {"type": "string", "enum": ["c", "f"]}},
    "required": ["city", "units"],
}
CHUNK = base64.b64encode(bytes(3200)).decode()  # 100 ms of 16 kHz 16-bit PCM
LIVE_URL = (
    "wss://generativelanguage.googleapis.com/ws/"
    "google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
)
REALTIME_URL = "wss://api.openai.com/v1/realtime?model=gpt-realtime"
CHAT_URL = "https://api.openai.com/v1/chat/completions"

Message = tuple[bytes, bool, bool]  # (bytes, from the client, a text frame)


def _pieces(text: str) -> list[str]:
    step = -(-len(text) // PIECES)
    return [text[i : i + step] for i in range(0, len(text), step)]


def _json(value: Any, indent: int | None = None) -> bytes:
    return json.dumps(value, indent=indent, separators=None if indent else (",", ":")).encode()


def live_socket() -> list[Message]:
    """A Gemini Live socket: the server's messages as Google sends them (pretty JSON, binary)."""

    def server(value: Any) -> Message:
        return _json(value, indent=2), False, False

    def client(value: Any) -> Message:
        return _json(value), True, True

    declarations = [{"name": "get_weather", "parametersJsonSchema": SCHEMA}]
    out = [client({"setup": {"model": "models/gemini-live-2.5-flash-preview",
                             "tools": [{"functionDeclarations": declarations}]}})]  # fmt: skip
    out.append(server({"setupComplete": {}}))
    for number in range(ROUNDS):
        ids = [f"fc_{number}_{i}" for i in range(len(CALLS))]
        out.append(client({"client_content": {"turns": [{"role": "user", "parts": [{"text": "Paris and Rome?"}]}], "turnComplete": True}}))  # fmt: skip
        out.append(server({"serverContent": {"modelTurn": {"parts": [{"text": PREAMBLE}]}}}))
        out.append(server({"toolCall": {"functionCalls": [
            {"id": i, "name": n, "args": a} for i, (n, a) in zip(ids, CALLS, strict=True)]}}))  # fmt: skip
        out.append(client({"tool_response": {"functionResponses": [
            {"id": i, "name": n, "response": {"temperature": 12}}
            for i, (n, _) in zip(ids, CALLS, strict=True)]}}))  # fmt: skip
        for piece in _pieces(ANSWER):
            out.append(server({"serverContent": {"modelTurn": {"parts": [{"text": piece}]}}}))
        for _ in range(AUDIO):
            audio = {"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": CHUNK}}
            out.append(server({"serverContent": {"modelTurn": {"parts": [audio]}}}))
        out.append(server({"serverContent": {"generationComplete": True}}))
        out.append(server({"serverContent": {"turnComplete": True}, "usageMetadata": {
            "promptTokenCount": 120, "responseTokenCount": 40, "totalTokenCount": 160}}))  # fmt: skip
    return out


def realtime_socket() -> list[Message]:
    """A Realtime socket carrying the same rounds, in the Realtime API's events."""

    def event(value: Any, from_client: bool) -> Message:
        return _json(value), from_client, True

    tools = [{"type": "function", "name": "get_weather", "parameters": SCHEMA}]
    out = [event({"type": "session.update", "session": {"type": "realtime", "tools": tools}}, True)]
    for number in range(ROUNDS):
        user = {"type": "message", "role": "user",
                "content": [{"type": "input_text", "text": "Paris and Rome?"}]}  # fmt: skip
        out.append(event({"type": "conversation.item.create", "item": user}, True))
        out.append(event({"type": "response.create"}, True))
        calling, answering = f"resp_{number:04d}a", f"resp_{number:04d}b"
        items = []
        out.append(event({"type": "response.created", "response": {"id": calling, "status": "in_progress", "output": []}}, False))  # fmt: skip
        said = {"id": f"item_{number}_p", "type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": PREAMBLE}]}  # fmt: skip
        out.append(event({"type": "response.output_text.delta", "response_id": calling, "delta": PREAMBLE}, False))  # fmt: skip
        items.append(said)
        for index, (name, args) in enumerate(CALLS):
            call_id, arguments = f"call_{number}_{index}", json.dumps(args)
            item = {"id": f"item_{number}_{index}", "type": "function_call", "status": "completed",
                    "name": name, "call_id": call_id, "arguments": arguments}  # fmt: skip
            head = {"response_id": calling, "item_id": item["id"], "call_id": call_id}
            out.append(event({"type": "response.output_item.added", "response_id": calling, "item": item | {"arguments": ""}}, False))  # fmt: skip
            for at in range(0, len(arguments), len(arguments) // 2 + 1):
                delta = arguments[at : at + len(arguments) // 2 + 1]
                out.append(event({"type": "response.function_call_arguments.delta", **head, "delta": delta}, False))  # fmt: skip
            out.append(event({"type": "response.function_call_arguments.done", **head, "arguments": arguments}, False))  # fmt: skip
            out.append(event({"type": "response.output_item.done", "response_id": calling, "item": item}, False))  # fmt: skip
            items.append(item)
        out.append(event({"type": "response.done", "response": {"id": calling, "status": "completed", "output": items}}, False))  # fmt: skip
        for item in items[1:]:
            output = {"type": "function_call_output", "call_id": item["call_id"], "output": '{"temperature": 12}'}  # fmt: skip
            out.append(event({"type": "conversation.item.create", "item": output}, True))
        out.append(event({"type": "response.create"}, True))
        out.append(event({"type": "response.created", "response": {"id": answering, "status": "in_progress", "output": []}}, False))  # fmt: skip
        for piece in _pieces(ANSWER):
            out.append(event({"type": "response.output_text.delta", "response_id": answering, "delta": piece}, False))  # fmt: skip
        for _ in range(AUDIO):
            out.append(event({"type": "response.output_audio.delta", "response_id": answering, "delta": CHUNK}, False))  # fmt: skip
        answer = {"id": f"item_{number}_a", "type": "message", "role": "assistant",
                  "content": [{"type": "output_text", "text": ANSWER}]}  # fmt: skip
        usage = {"input_tokens": 120, "output_tokens": 40}
        out.append(event({"type": "response.done", "response": {"id": answering, "status": "completed", "output": [answer], "usage": usage}}, False))  # fmt: skip
    return out


def chat_exchanges() -> list[Exchange]:
    """The same rounds over Chat Completions streams: two exchanges a round."""
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}}]
    history: list[dict[str, Any]] = []
    exchanges = []

    def sse(chunks: list[dict[str, Any]]) -> bytes:
        return b"".join(b"data: " + _json(c) + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "model": "gpt-4o",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}  # fmt: skip

    def exchange(chunks: list[dict[str, Any]]) -> Exchange:
        request = _json({"model": "gpt-4o", "stream": True, "tools": tools, "messages": history})
        return Exchange(method="POST", url=CHAT_URL, request_body=request, status=200,
                        response_headers={"content-type": "text/event-stream"},
                        response_body=sse(chunks))  # fmt: skip

    for number in range(ROUNDS):
        history.append({"role": "user", "content": "Paris and Rome?"})
        ids = [f"call_{number}_{i}" for i in range(len(CALLS))]
        chunks = [chunk({"role": "assistant", "content": PREAMBLE})]
        for index, (call_id, (name, args)) in enumerate(zip(ids, CALLS, strict=True)):
            arguments = json.dumps(args)
            half = len(arguments) // 2
            chunks.append(chunk({"tool_calls": [{"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": arguments[:half]}}]}))  # fmt: skip
            chunks.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": arguments[half:]}}]}))  # fmt: skip
        chunks.append(chunk({}, "tool_calls"))
        exchanges.append(exchange(chunks))
        history.append({"role": "assistant", "content": PREAMBLE, "tool_calls": [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, (n, a) in zip(ids, CALLS, strict=True)]})  # fmt: skip
        history += [
            {"role": "tool", "tool_call_id": i, "content": '{"temperature": 12}'} for i in ids
        ]
        exchanges.append(exchange([*(chunk({"content": p}) for p in _pieces(ANSWER)), chunk({}, "stop")]))  # fmt: skip
        history.append({"role": "assistant", "content": ANSWER})
    return exchanges


def look(api: str, messages: list[Message]) -> int:
    """The tap's work on every message; how many it holds."""
    held = 0
    reading = socket_reading(api)
    for content, _, is_text in messages:
        if reading.readable(is_text):
            kind = reading.kind(content)
            if reading.needed(content, kind):
                held += 1
                reading.ends_turn(content, kind)
    return held


def read(api: str, url: str, messages: list[Message], validators: ValidatorCache) -> int:
    """The inspector's work on the messages held; how many turns it inspected."""
    reader = socket_reader(api, url, 8 << 20)
    reading = socket_reading(api)
    turns = 0
    for content, from_client, is_text in messages:
        if reading.wanted(content, is_text):
            for turn in reader.feed(content, from_client):
                verdict = inspect(turn.exchange, turn.prior, validators=validators)
                turns += verdict.scope == "turn"
    for turn in reader.close():
        inspect(turn.exchange, turn.prior, validators=validators)
    return turns


def run(size: Size) -> dict[str, Any]:
    timing = TIMING[size]
    rows: dict[str, dict[str, Any]] = {}
    for api, url, messages in (
        ("gemini_live", LIVE_URL, live_socket()),
        ("realtime", REALTIME_URL, realtime_socket()),
    ):
        validators = ValidatorCache()
        turns = read(api, url, messages, validators)
        held = look(api, messages)
        t_look = per_call(lambda api=api, messages=messages: look(api, messages), timing)
        t_read = per_call(
            lambda api=api, url=url, m=messages, v=validators: read(api, url, m, v), timing
        )
        rows[api] = {
            "messages": len(messages),
            "held": held,
            "bytes": sum(len(m) for m, _, _ in messages),
            "turns": turns,
            "look_us_per_message": round(t_look / len(messages) * 1e6, 3),
            "look_us_per_turn": round(t_look / turns * 1e6, 1),
            "inspect_us_per_turn": round(t_read / turns * 1e6, 1),
        }
    exchanges = chat_exchanges()
    validators = ValidatorCache()

    def chat() -> None:
        for exchange in exchanges:
            inspect(exchange, {}, validators=validators)

    chat()
    rows["chat"] = {
        "messages": len(exchanges),
        "bytes": sum(len(e.request_body) + len(e.response_body) for e in exchanges),
        "turns": len(exchanges),
        "inspect_us_per_turn": round(per_call(chat, timing) / len(exchanges) * 1e6, 1),
    }
    live = rows["gemini_live"]["inspect_us_per_turn"]
    return {
        "rounds": ROUNDS,
        "rows": rows,
        "live_to_realtime": round(live / rows["realtime"]["inspect_us_per_turn"], 2),
        "live_to_chat": round(live / rows["chat"]["inspect_us_per_turn"], 2),
        "look_live_to_realtime": round(
            rows["gemini_live"]["look_us_per_turn"] / rows["realtime"]["look_us_per_turn"], 2
        ),
    }
