"""The demo's Cohere step: the official `cohere` client (ClientV2) against the demo's upstream,
which answers in Cohere's v2 chat stream as api.cohere.com does.

The agent asked for two cities' weather; its history answered both calls, one with an empty
document list. The model's next turn plans a call and then fails: the stream ends under a 200
with `finish_reason: "ERROR"` and `INVALID_TOOL_GENERATION`, as Cohere's API sends it (the
recordings hold this very ending). The client sees a stream that finished; tooltap logs the
API's error.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..harness.replay import Reply

MODEL = "command-a-03-2025"
ASK = "Weather in Tromsø and Bergen?"
# The last turn's calls, with ids as Cohere makes them (the tool's name and 12 characters).
EARLIER = [
    ("get_weather_r8d0r2e0kw9s", {"city": "Tromsø", "country": "NO", "units": "c"}),
    ("get_weather_1xkvt035n7dj", {"city": "Bergen", "country": "NO", "units": "c"}),
]
PLAN = "I will look up the weather in Bergen again, as the last lookup returned nothing."
ERROR = (
    "your request resulted in an invalid tool generation. Try updating the messages or tool "
    "definitions"
)


def _event(body: dict[str, Any]) -> bytes:
    data = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    return f"event: {body['type']}\ndata: {data}\n\n".encode()


def reply() -> Reply:
    """The stream: the message's start, its plan in pieces, then its end in error, and the bare
    `data: [DONE]` Cohere sends last."""
    start = {"role": "assistant", "content": [], "tool_plan": "", "tool_calls": [], "citations": []}
    events = [{"id": "1f774166-0ca9-4885-8622-b7f549a38978", "type": "message-start",
               "delta": {"message": start}}]  # fmt: skip
    events += [
        {"type": "tool-plan-delta", "delta": {"message": {"tool_plan": PLAN[i : i + 12]}}}
        for i in range(0, len(PLAN), 12)
    ]
    events.append({"type": "message-end", "delta": {
        "finish_reason": "ERROR", "usage": {}, "error": ERROR,
        "error_type": "INVALID_TOOL_GENERATION"}})  # fmt: skip
    chunks = [*map(_event, events), b"data: [DONE]\n\n"]
    return Reply(headers=[("content-type", "text/event-stream")], chunks=chunks, delay=0.01)


def tools(parameters: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The demo's weather tool, as Cohere declares one."""
    return [{"type": "function", "function": {"name": "get_weather", "parameters": parameters}}]


def chat(base_url: str, headers: Mapping[str, str], parameters: Mapping[str, Any]) -> list[Any]:
    """The agent's next turn, streamed through the cohere client."""
    import cohere  # noqa: PLC0415 - the SDKs are the demo extra

    client = cohere.ClientV2(api_key="demo", base_url=base_url)
    calls = [
        {
            "id": i,
            "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps(a)},
        }
        for i, a in EARLIER
    ]
    weather = [{"type": "document", "document": {"data": {"temperature": "-3C", "sky": "snow"}}}]
    history: list[Any] = [
        {"role": "user", "content": ASK},
        {"role": "assistant", "tool_plan": "I will look up both cities.", "tool_calls": calls},
        {"role": "tool", "tool_call_id": EARLIER[0][0], "content": weather},
        # The tool returned nothing, and the loop sent nothing on.
        {"role": "tool", "tool_call_id": EARLIER[1][0], "content": []},
    ]
    stream = client.chat_stream(
        model=MODEL,
        messages=history,
        tools=tools(parameters),  # type: ignore[arg-type]  # a dict goes as it is: the wire's shape
        request_options={"additional_headers": dict(headers)},
    )
    return list(stream)
