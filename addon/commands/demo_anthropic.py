"""The demo's Anthropic steps: Messages on Anthropic's API and Claude on Bedrock (its event
stream), with replies in the shapes anthropic-sdk-python and real captures show."""

from __future__ import annotations

import json
from typing import Any

from ..harness import eventstream
from ..harness.replay import Reply
from .demo_agent import WEATHER, Step, consume, json_reply, sse_reply

ANTHROPIC_TOOLS = [
    {"name": "get_weather", "description": "Weather for a city", "input_schema": WEATHER},
    {
        "name": "make_file",
        "description": "Write a file",
        "input_schema": {
            "type": "object",
            "properties": {
                "filename": {"type": "string"},
                "lines": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["filename", "lines"],
        },
    },
]


def message(
    message_id: str, blocks: list[dict[str, Any]], stop: str = "tool_use"
) -> dict[str, Any]:
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": "claude-haiku-4-5-20251001",
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 656,
            "output_tokens": 74,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


def messages_events(
    reply: dict[str, Any], cut_tool_input: str | None = None
) -> list[dict[str, Any]]:
    """Anthropic's stream events; with cut_tool_input, the tool input stops there and
    stop_reason is max_tokens."""
    out: list[dict[str, Any]] = [
        {"type": "message_start", "message": {**reply, "content": [], "stop_reason": None}},
        {"type": "ping"},
    ]
    for index, block in enumerate(reply["content"]):
        if block["type"] == "text":
            out.append(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                }
            )
            out.append(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "text_delta", "text": block["text"]},
                }
            )
        else:
            raw = cut_tool_input if cut_tool_input is not None else json.dumps(block["input"])
            out.append(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {**block, "input": {}},
                }
            )
            for start in range(0, len(raw), 9):
                out.append(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {
                            "type": "input_json_delta",
                            "partial_json": raw[start : start + 9],
                        },
                    }
                )
        out.append({"type": "content_block_stop", "index": index})
    stop = "max_tokens" if cut_tool_input is not None else reply["stop_reason"]
    out.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": 74},
        }
    )
    out.append({"type": "message_stop"})
    return out


def messages_stream(reply: dict[str, Any], cut_tool_input: str | None = None) -> list[bytes]:
    """The events as Anthropic's SSE stream: `event:` and `data:` lines."""
    return [
        f"event: {event['type']}\n".encode() + b"data: " + json.dumps(event).encode() + b"\n\n"
        for event in messages_events(reply, cut_tool_input)
    ]


def bedrock_stream(reply: dict[str, Any]) -> list[bytes]:
    """The events as Bedrock's InvokeModelWithResponseStream sends them: each one base64 in a
    `chunk` of AWS's event stream, with no pings, and the invocation's metrics on the last."""
    events = [event for event in messages_events(reply) if event["type"] != "ping"]
    events[-1]["amazon-bedrock-invocationMetrics"] = {
        "inputTokenCount": 656,
        "outputTokenCount": 74,
        "invocationLatency": 1843,
        "firstByteLatency": 612,
    }
    return [eventstream.chunk(event) for event in events]


ALICE, BOB = "toolu_0167cfEnoQaPviGdVXA95zcu", "toolu_01EEe2V5HD1Ac4rKiUR4HD2T"
BEDROCK_MODEL = "global.anthropic.claude-haiku-4-5-20251001-v1:0"


def _anthropic_stream(client: Any, **request: Any) -> Any:
    with client.messages.stream(**request) as stream:
        return consume(stream)


STEPS: list[Step] = [
    Step(
        "anthropic-parallel",
        "Anthropic: two tool_use blocks in one turn (no strict: fanout-no-strict)",
        json_reply(
            message(
                "msg_011S3wxtqL5CVescWqS3zeg2",
                [
                    {"type": "text", "text": "I'll look both up."},
                    {
                        "type": "tool_use",
                        "id": ALICE,
                        "name": "get_weather",
                        "input": {"city": "Paris", "country": "FR", "units": "c"},
                    },
                    {
                        "type": "tool_use",
                        "id": BOB,
                        "name": "get_weather",
                        "input": {"city": "Rome", "country": "IT", "units": "c"},
                    },
                ],
            )
        ),
        lambda c: c.anthropic.messages.create(
            model="claude-haiku-4-5",
            max_tokens=1024,
            tools=ANTHROPIC_TOOLS,
            messages=[{"role": "user", "content": "Weather in Paris and Rome?"}],
        ),
    ),
    Step(
        "anthropic-truncated",
        "a truncated argument: max_tokens cut the tool input mid-JSON (streamed)",
        sse_reply(
            messages_stream(
                message(
                    "msg_01UdjYBBipA9omjYhicnevgq",
                    [
                        {"type": "text", "text": "Writing the file."},
                        {
                            "type": "tool_use",
                            "id": "toolu_01EKqbqmZrGRXy18eN7m9kvY",
                            "name": "make_file",
                            "input": {},
                        },
                    ],
                ),
                cut_tool_input='{"filename": "taxes.txt", "lines": ["# 2025 RETURN", "Line 1: wages 84,',
            )
        ),
        lambda c: _anthropic_stream(
            c.anthropic,
            model="claude-haiku-4-5",
            max_tokens=60,
            tools=ANTHROPIC_TOOLS,
            messages=[{"role": "user", "content": "Write my tax notes to a file"}],
        ),
    ),
    Step(
        "anthropic-orphan",
        "an orphan result, and the 400 it earns",
        json_reply(
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "messages.0.content.1: unexpected `tool_use_id` found in `tool_result` blocks: toolu_01GHndag5wQmbzNihYmV2UBj. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.",
                },
                "request_id": "req_011CYHyk9NPsBYeGbC9LuDNK",
            },
            400,
        ),
        lambda c: c.anthropic.messages.create(
            model="claude-haiku-4-5",
            max_tokens=1024,
            tools=ANTHROPIC_TOOLS,
            messages=[
                {"role": "user", "content": "What's the weather in SF in Celsius?"},
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_01GHndag5wQmbzNihYmV2UBj",
                            "content": "20C",
                        }
                    ],
                },
            ],
        ),
        expect_error=True,
    ),
    Step(
        "bedrock-stream",
        "Claude on Bedrock, streamed in AWS's event stream: two calls, one off its schema",
        Reply(
            headers=[
                ("content-type", eventstream.CONTENT_TYPE),
                ("x-amzn-requestid", "5b0d1f6e-3c1a-4f0e-9d55-0c2f7d8a4e61"),
                ("x-amzn-bedrock-content-type", "application/json"),
            ],
            chunks=bedrock_stream(
                message(
                    "msg_bdrk_01JqRnJ2Vd3XbqYh1Ujd4ZQb",
                    [
                        {"type": "text", "text": "Checking both cities."},
                        {
                            "type": "tool_use",
                            "id": "toolu_bdrk_01Hx8kqEw4VnU1cKp6s7Ttwq",
                            "name": "get_weather",
                            "input": {"city": "Oslo", "country": "NO", "units": "c"},
                        },
                        {
                            "type": "tool_use",
                            "id": "toolu_bdrk_01Pz3mYvB5dGkR2aLw9nXe4s",
                            "name": "get_weather",
                            "input": {"city": "Madrid", "units": "kelvin"},
                        },
                    ],
                )
            ),
            delay=0.01,
        ),
        lambda c: _anthropic_stream(
            c.bedrock,
            model=BEDROCK_MODEL,
            max_tokens=1024,
            tools=ANTHROPIC_TOOLS,
            messages=[{"role": "user", "content": "Weather in Oslo and Madrid?"}],
        ),
    ),
]
