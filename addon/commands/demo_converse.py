"""The demo's Bedrock Converse step, through boto3's own client."""

from __future__ import annotations

import json
from typing import Any

from ..harness.replay import Reply
from .demo_agent import WEATHER, Clients, Step

# Converse's calls: (toolUseId, name, input).
STOCKHOLM = ("tooluse_kq7Xw2nRzT4vB9mLp3cYhE", "get_weather", {"city": "Stockholm", "units": "c"})
BERGEN = ("tooluse_Vb5sN8dQe1jF6uHa0gWxKr", "get_weather", {"city": "Bergen", "units": "c"})


def _converse_unanswered(clients: Clients) -> Any:
    """A Converse follow-up that answers one of two calls, and that one with an error."""
    return clients.bedrock_runtime.converse(
        modelId="us.amazon.nova-2-lite-v1:0",
        toolConfig={
            "tools": [{"toolSpec": {"name": "get_weather", "inputSchema": {"json": WEATHER}}}]
        },
        messages=[
            {"role": "user", "content": [{"text": "Weather in Stockholm and Bergen?"}]},
            {
                "role": "assistant",
                "content": [
                    {"toolUse": {"toolUseId": i, "name": n, "input": a}}
                    for i, n, a in (STOCKHOLM, BERGEN)
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "toolResult": {
                            "toolUseId": BERGEN[0],
                            "status": "error",
                            "content": [{"text": "country is required"}],
                        }
                    }
                ],
            },
        ],
    )


STEPS: list[Step] = [
    Step(
        "converse-unanswered",
        "Bedrock Converse: a tool's error result, and a call left unanswered that Bedrock refuses",
        Reply(
            status=400,
            headers=[
                ("content-type", "application/json"),
                ("x-amzn-requestid", "a1c9e4b2-7f3d-4e8a-b6c0-2d5f9e1a7b38"),
                (
                    "x-amzn-errortype",
                    "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/",
                ),
            ],
            chunks=[
                json.dumps(
                    {
                        "message": "Expected toolResult blocks at messages.2.content for the "
                        f"following Ids: {STOCKHOLM[0]}"
                    }
                ).encode()
            ],
        ),
        _converse_unanswered,
        expect_error=True,
    ),
]
