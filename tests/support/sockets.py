"""WebSocket event sequences for the tests: the real recordings, and turns built on them.

The recordings (tests/corpus/wire/pydanticai_*.yaml, see sources.txt) give the
envelopes: the Responses response object and the Realtime session and response
objects as the live APIs sent them, and the order and shape of the events of
a call. New turns (two calls, other ids) are built on those envelopes with the
same events in the same order, so a scenario the recordings lack still looks
as the API sends it.
"""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any

import yaml

from support.captures import WIRE
from tooltap.addon.harness.sockets import Frame, Step
from tooltap.core import inspect

RESPONSES_CASSETTE = "pydanticai_responses_websocket_tools.yaml"
REALTIME_CASSETTE = "pydanticai_realtime_tool_call_round.yaml"
TRIGGERS = ("response.create", "session.update")


def frame(event: dict[str, Any]) -> str:
    """One event as the API sends it: compact JSON, keys in order."""
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False)


def recording(name: str) -> list[tuple[str, dict[str, Any]]]:
    """A recording's messages in order, as (direction, event): sent is the client's."""
    data = yaml.safe_load((WIRE / name).read_text(encoding="utf-8"))
    return [(i["direction"], i["data"]) for i in data["interactions"]]


def steps_of(messages: list[tuple[str, dict[str, Any]]]) -> list[Step]:
    """A recording as an upstream script: what the server sent after each request.

    Only response.create and session.update trigger replies; what the server
    sent after any other client message belongs to the step before it.
    """
    steps = [Step(None, [])]
    for direction, event in messages:
        if direction == "sent":
            if event["type"] in TRIGGERS:
                steps.append(Step(event["type"], []))
        else:
            steps[-1].frames.append(frame(event))
    return steps


def sent(messages: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    return [event for direction, event in messages if direction == "sent"]


# --- Responses WebSocket mode -------------------------------------------------


def responses_envelope() -> dict[str, Any]:
    """The recorded response object (response.completed of the first turn), output emptied."""
    for direction, event in recording(RESPONSES_CASSETTE):
        if direction == "received" and event["type"] == "response.completed":
            return copy.deepcopy(event["response"]) | {"output": []}
    raise AssertionError("the recording has no response.completed")


def call_item(item_id: str, call_id: str, name: str, arguments: str) -> dict[str, Any]:
    """A function_call output item, keys in the recorded order."""
    return {
        "id": item_id,
        "type": "function_call",
        "status": "completed",
        "arguments": arguments,
        "call_id": call_id,
        "name": name,
    }


def text_item(item_id: str, text: str) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "message",
        "status": "completed",
        "content": [{"type": "output_text", "annotations": [], "logprobs": [], "text": text}],
        "role": "assistant",
    }


def responses_turn(
    response_id: str,
    output: list[dict[str, Any]],
    previous_response_id: str | None = None,
    stream_id: str | None = None,
) -> list[str]:
    """One Responses turn's events, in the recorded order and shapes."""
    done = responses_envelope() | {
        "id": response_id,
        "previous_response_id": previous_response_id,
        "output": output,
    }
    start = done | {"status": "in_progress", "completed_at": None, "output": [], "usage": None}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": start},
        {"type": "response.in_progress", "response": start},
    ]
    for index, item in enumerate(output):
        if item["type"] == "function_call":
            opened = item | {"status": "in_progress", "arguments": ""}
            events.append(
                {"type": "response.output_item.added", "item": opened, "output_index": index}
            )
            arguments = item["arguments"]
            for at in range(0, len(arguments), 6):
                events.append(
                    {
                        "type": "response.function_call_arguments.delta",
                        "delta": arguments[at : at + 6],
                        "item_id": item["id"],
                        "obfuscation": "F9sTnZUy90B8VC",
                        "output_index": index,
                    }
                )
            events.append(
                {
                    "type": "response.function_call_arguments.done",
                    "arguments": arguments,
                    "item_id": item["id"],
                    "output_index": index,
                }
            )
        else:
            opened = item | {"status": "in_progress", "content": []}
            events.append(
                {"type": "response.output_item.added", "item": opened, "output_index": index}
            )
            text = item["content"][0]["text"]
            for at in range(0, len(text), 8):
                events.append(
                    {
                        "type": "response.output_text.delta",
                        "content_index": 0,
                        "delta": text[at : at + 8],
                        "item_id": item["id"],
                        "logprobs": [],
                        "output_index": index,
                    }
                )
        events.append({"type": "response.output_item.done", "item": item, "output_index": index})
    events.append({"type": "response.completed", "response": done})
    for number, event in enumerate(events):
        event["sequence_number"] = number
        if stream_id is not None:
            event["stream_id"] = stream_id
    return [frame(e) for e in events]


def responses_error(status: int, code: str, message: str, param: str | None = None) -> str:
    """A request-level error event, in the shape OpenAI's WebSocket-mode guide shows."""
    error = {"code": code, "message": message, "param": param}
    return frame({"type": "error", "status": status, "error": error})


# --- Realtime -----------------------------------------------------------------


def realtime_session(tools: list[dict[str, Any]]) -> tuple[str, str]:
    """The recorded session.created, and its session.updated echo with these tools."""
    created = updated = None
    for direction, event in recording(REALTIME_CASSETTE):
        if direction == "received" and event["type"] == "session.created":
            created = event
        if direction == "received" and event["type"] == "session.updated":
            updated = copy.deepcopy(event)
            updated["session"]["tools"] = tools
    assert created is not None and updated is not None
    return frame(created), frame(updated)


def realtime_turn(response_id: str, calls: list[tuple[str, str, str]], text: str = "") -> list[str]:
    """One Realtime response: function calls (call_id, name, arguments) or text, as recorded."""
    recorded = next(
        event
        for direction, event in recording(REALTIME_CASSETTE)
        if direction == "received" and event["type"] == "response.done"
    )
    numbers = itertools.count()

    def event_id() -> str:
        return f"event_{response_id[5:13]}{next(numbers):05d}"

    output: list[dict[str, Any]] = []
    done = copy.deepcopy(recorded["response"]) | {"id": response_id, "output": output}
    start = done | {"status": "in_progress", "output": [], "usage": None}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "event_id": event_id(), "response": start}
    ]
    for index, (call_id, name, arguments) in enumerate(calls):
        item_id = f"item_{call_id[5:]}"
        item = {"id": item_id, "type": "function_call", "status": "completed", "name": name,
                "call_id": call_id, "arguments": arguments}  # fmt: skip
        head = {"event_id": event_id(), "response_id": response_id}
        events.append({"type": "response.output_item.added", **head, "output_index": index,
                       "item": item | {"status": "in_progress", "arguments": ""}})  # fmt: skip
        for at in range(0, len(arguments), 5):
            events.append({"type": "response.function_call_arguments.delta", "event_id": event_id(),
                           "response_id": response_id, "item_id": item_id, "output_index": index,
                           "call_id": call_id, "delta": arguments[at : at + 5],
                           "obfuscation": "O4cpPd15CXvoEW9"})  # fmt: skip
        events.append({"type": "response.function_call_arguments.done", "event_id": event_id(),
                       "response_id": response_id, "item_id": item_id, "output_index": index,
                       "call_id": call_id, "name": name, "arguments": arguments})  # fmt: skip
        events.append({"type": "response.output_item.done", "event_id": event_id(),
                       "response_id": response_id, "output_index": index, "item": item})  # fmt: skip
        output.append(item)
    if text:
        item_id = f"item_{response_id[5:]}t"
        item = {"id": item_id, "type": "message", "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": text}]}  # fmt: skip
        events.append({"type": "response.output_item.added", "event_id": event_id(),
                       "response_id": response_id, "output_index": len(output),
                       "item": item | {"status": "in_progress", "content": []}})  # fmt: skip
        for at in range(0, len(text), 6):
            events.append({"type": "response.output_text.delta", "event_id": event_id(),
                           "response_id": response_id, "item_id": item_id,
                           "output_index": len(output), "content_index": 0,
                           "delta": text[at : at + 6]})  # fmt: skip
        events.append({"type": "response.output_item.done", "event_id": event_id(),
                       "response_id": response_id, "output_index": len(output), "item": item})  # fmt: skip
        output.append(item)
    events.append({"type": "response.done", "event_id": event_id(), "response": done})
    return [frame(e) for e in events]


def read_to_the_close(reader: Any, messages: list[tuple[bool, bytes]], end: Any = None) -> None:
    """A socket read to its close (end: the close itself) and every turn inspected: nothing
    raises, nothing stays held."""
    turns = []
    for from_client, message in messages:
        turns += reader.feed(message, from_client)
    turns += reader.close(end)
    for turn in turns:
        inspect(turn.exchange, turn.prior)
    assert reader.held == 0


def script(*steps: tuple[str | None, list[Frame]]) -> list[Step]:
    return [Step(trigger, list(frames)) for trigger, frames in steps]
