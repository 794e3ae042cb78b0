"""The demo's OpenAI steps (Chat Completions, Responses, its WebSocket mode), with replies in
OpenAI's wire shapes, as openai-python and real captures show them."""

from __future__ import annotations

import json
from typing import Any

from ..harness.sockets import Step as SocketStep
from .demo_agent import STOCK, TICKET, WEATHER, Step, consume, json_reply, sse_reply


def chat_tools(strict: bool, ticket: bool = False) -> list[dict[str, Any]]:
    tools = [("get_weather", WEATHER), ("get_stock_price", STOCK)] + (
        [("create_ticket", TICKET)] if ticket else []
    )
    return [
        {"type": "function", "function": {"name": n, "strict": strict, "parameters": p}}
        for n, p in tools
    ]


SEARCH_TOOL = {"type": "tool_search", "execution": "client", "description": "Find more tools."}
RATE_TOOL = {
    "type": "function",
    "name": "get_exchange_rate",
    "strict": True,
    "parameters": {
        "type": "object",
        "additionalProperties": False,
        "required": ["from_currency", "to_currency"],
        "properties": {"from_currency": {"type": "string"}, "to_currency": {"type": "string"}},
    },
}
# The loaded tool's call, missing to_currency: its schema came from the search, not tools[].
RATE_CALL = ("call_NVKCEhbEqPWTnSUGhcIHwR3F", "get_exchange_rate", '{"from_currency":"USD"}')


def responses_tools(strict: bool) -> list[dict[str, Any]]:
    return [
        {"type": "function", "name": n, "strict": strict, "parameters": p, "description": None}
        for n, p in (("get_weather", WEATHER), ("get_stock_price", STOCK))
    ]


def chat_completion(
    completion_id: str, calls: list[tuple[str, str, str]], text: str | None = None
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
    if calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in calls
        ]
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": 1764480000,
        "model": "gpt-4o-2024-08-06",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if calls else "stop",
            }
        ],
        "usage": {"prompt_tokens": 149, "completion_tokens": 60, "total_tokens": 209},
        "system_fingerprint": "fp_b40fb1c6fb",
    }


def chat_stream(completion_id: str, calls: list[tuple[str, str, str]]) -> list[bytes]:
    """Chat chunks: role first, each call's id and name, its arguments in pieces, then usage and [DONE]."""
    head = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": 1764480000,
        "model": "gpt-4o-2024-08-06",
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        body = {
            **head,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        return b"data: " + json.dumps(body).encode() + b"\n\n"

    out = [chunk({"role": "assistant", "content": None})]
    for index, (call_id, name, arguments) in enumerate(calls):
        out.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }
                    ]
                }
            )
        )
        for start in range(0, len(arguments), 7):
            out.append(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": index,
                                "function": {"arguments": arguments[start : start + 7]},
                            }
                        ]
                    }
                )
            )
    out.append(chunk({}, "tool_calls"))
    out.append(
        b"data: "
        + json.dumps(
            {
                **head,
                "choices": [],
                "usage": {"prompt_tokens": 80, "completion_tokens": 20, "total_tokens": 100},
            }
        ).encode()
        + b"\n\n"
    )
    out.append(b"data: [DONE]\n\n")
    return out


def response_object(
    response_id: str,
    calls: list[tuple[str, str, str]],
    tools: list[dict[str, Any]],
    text_format: dict[str, Any] | None = None,
    text: str | None = None,
    *,
    namespace: str | None = None,
) -> dict[str, Any]:
    output: list[dict[str, Any]] = [
        {
            "id": f"fc_{call_id[5:]}",
            "type": "function_call",
            "status": "completed",
            "arguments": arguments,
            "call_id": call_id,
            "name": name,
        }
        | ({"namespace": namespace} if namespace else {})
        for call_id, name, arguments in calls
    ]
    if text is not None:
        output.append(
            {
                "id": f"msg_{response_id[5:]}",
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "annotations": [], "text": text}],
            }
        )
    return {
        "id": response_id,
        "object": "response",
        "created_at": 1764480000,
        "status": "completed",
        "model": "gpt-5.1-2025-11-13",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": tools,
        "text": {"format": text_format or {"type": "text"}, "verbosity": "medium"},
        "error": None,
        "incomplete_details": None,
        "usage": {"input_tokens": 45, "output_tokens": 25, "total_tokens": 70},
        "store": True,
    }


def responses_events(response: dict[str, Any]) -> list[dict[str, Any]]:
    """Responses events: created, each output item added/deltas/done, then completed."""
    start = {**response, "status": "in_progress", "output": [], "usage": None}
    out: list[dict[str, Any]] = [
        {"type": "response.created", "response": start, "sequence_number": 0}
    ]
    for index, item in enumerate(response["output"]):
        out.append(
            {
                "type": "response.output_item.added",
                "output_index": index,
                "item": {**item, "status": "in_progress"},
            }
        )
        if item["type"] == "message":
            text = item["content"][0]["text"]
            for start_at in range(0, len(text), 12):
                out.append(
                    {
                        "type": "response.output_text.delta",
                        "item_id": item["id"],
                        "output_index": index,
                        "content_index": 0,
                        "delta": text[start_at : start_at + 12],
                    }
                )
        out.append({"type": "response.output_item.done", "output_index": index, "item": item})
    out.append({"type": "response.completed", "response": response})
    return out


def responses_stream(response: dict[str, Any]) -> list[bytes]:
    """The events as an SSE stream: `event:` and `data:` lines."""
    return [
        f"event: {event['type']}\n".encode() + b"data: " + json.dumps(event).encode() + b"\n\n"
        for event in responses_events(response)
    ]


def socket_frames(response: dict[str, Any]) -> list[str]:
    """The events as WebSocket mode sends them: one compact JSON message each."""
    return [json.dumps(event, separators=(",", ":")) for event in responses_events(response)]


USER = [
    {"role": "user", "content": "What's the weather in Edinburgh and Lisbon, and AAPL's price?"}
]
EDINBURGH = (
    "call_fdNz3vOBKYgOIpMdWotB9MjY",
    "get_weather",
    '{"city": "Edinburgh", "country": "GB", "units": "c"}',
)
LISBON = (
    "call_Q6pW65MUgW9vF59BmItYGos3",
    "get_weather",
    '{"city": "Lisbon", "country": "PT", "units": "c"}',
)
AAPL = (
    "call_h1DWI1POMJLb0KwIyQHWXD4p",
    "get_stock_price",
    '{"ticker": "AAPL", "exchange": "NASDAQ"}',
)
FANOUT_RESPONSE = "resp_0775572d10a16b66006a8d85285ef487d2ae865d3657af7276"
BOSTON = ("call_2FQdm3Br7Qb35YUBSkDR7kue", "get_weather", '{"city": "Boston", "units": "kelvin"}')
PARIS = ("call_H5DxLSFnsGhiROnUiDHmgyc8", "get_stock_price", '{"ticker": "MC", "exchange": "EPA"}')


def _invoice_format(strict: bool | None) -> dict[str, Any]:
    fmt: dict[str, Any] = {"type": "json_schema", "name": "invoice", "schema": TICKET}
    if strict is not None:
        fmt["strict"] = strict
    return fmt


SOCKET_FIRST = "resp_0a76d7cc9190bb9d0069c5b9d1743c81a182203d3de7d50b2d"
SOCKET_SECOND = "resp_0123ba578f5e03220069c5b9d2ecd481a2b2e77235daabd270"
# What the upstream plays on the WebSocket-mode socket: two turns.
SOCKET_SCRIPT = [
    SocketStep(None, []),
    SocketStep(
        "response.create",
        socket_frames(response_object(SOCKET_FIRST, [EDINBURGH, LISBON], responses_tools(True))),
    ),
    SocketStep(
        "response.create",
        socket_frames(
            response_object(
                SOCKET_SECOND,
                [],
                responses_tools(True),
                text="Edinburgh: 12C and rain. I have no reading for Lisbon.",
            )
            | {"previous_response_id": SOCKET_FIRST}
        ),
    ),
]


def _until_done(connection: Any) -> None:
    for event in connection:
        if event.type in ("response.completed", "response.failed", "error"):
            return


def _socket_session(client: Any) -> None:
    """Two turns on one socket: a fan-out, then a follow-up that answers one call of two."""
    with client.responses.connect() as connection:
        connection.response.create(model="gpt-5.1", input=USER, tools=responses_tools(True))
        _until_done(connection)
        connection.response.create(
            model="gpt-5.1",
            previous_response_id=SOCKET_FIRST,
            tools=responses_tools(True),
            input=[
                {"type": "function_call_output", "call_id": EDINBURGH[0], "output": "12C, rain"}
            ],
        )
        _until_done(connection)


STEPS: list[Step] = [
    Step(
        "chat-fanout",
        "strict-void: strict tools, parallel_tool_calls left on, three calls",
        json_reply(
            chat_completion("chatcmpl-ABfvyvfNWKcl7Ohqos4UFrmMs1v4C", [EDINBURGH, LISBON, AAPL])
        ),
        lambda c: c.openai.chat.completions.create(
            model="gpt-4o", messages=USER, tools=chat_tools(True)
        ),
    ),
    Step(
        "chat-stream-one-call",
        "strict-at-risk: the same configuration, streamed, one call this time",
        sse_reply(chat_stream("chatcmpl-ABfwERreu9s99xXsVuOWtIB2UOx62", [EDINBURGH])),
        lambda c: consume(
            c.openai.chat.completions.create(
                model="gpt-4o", messages=USER, tools=chat_tools(True), stream=True
            )
        ),
    ),
    Step(
        "chat-serialised",
        "strict-serialised: parallel_tool_calls false, the guarantee holds",
        json_reply(chat_completion("chatcmpl-ABfwCgi41eStOcARjZq97ohCEGBPO", [AAPL])),
        lambda c: c.openai.chat.completions.create(
            model="gpt-4o", messages=USER, tools=chat_tools(True), parallel_tool_calls=False
        ),
    ),
    Step(
        "responses-fanout",
        "fanout-no-strict, and an argument that fails its schema (units: kelvin)",
        json_reply(response_object(FANOUT_RESPONSE, [BOSTON, PARIS], responses_tools(False))),
        lambda c: c.openai.responses.create(
            model="gpt-5.1", input="Weather in Boston, and LVMH?", tools=responses_tools(False)
        ),
    ),
    Step(
        "responses-tool-failure",
        "a tool failure: the follow-up answers both calls, one with an error payload",
        json_reply(
            response_object(
                "resp_04041325ab8ae30400698c519fb7fc81979972618138fc336d",
                [],
                responses_tools(False),
                text="Boston is cold.",
            )
        ),
        lambda c: c.openai.responses.create(
            model="gpt-5.1",
            previous_response_id=FANOUT_RESPONSE,
            tools=responses_tools(False),
            input=[
                {
                    "type": "function_call_output",
                    "call_id": BOSTON[0],
                    "output": '{"ok": false, "error": "units must be c or f"}',
                },
                {"type": "function_call_output", "call_id": PARIS[0], "output": "712.40 EUR"},
            ],
        ),
    ),
    Step(
        "responses-advisory-schema",
        "advisory-schema: a JSON schema without strict, and what blocks strict",
        sse_reply(
            responses_stream(
                response_object(
                    "resp_01830d662ab3856501693c3217ba4c8190a3ddf6c839d4f12a",
                    [],
                    [],
                    _invoice_format(None),
                    text='{"title": "Printer on fire"}',
                )
            )
        ),
        lambda c: consume(
            c.openai.responses.create(
                model="gpt-5.1",
                input="File a ticket",
                stream=True,
                text={"format": _invoice_format(None)},
            )
        ),
    ),
    Step(
        "responses-websocket",
        "WebSocket mode: two turns on one socket; the follow-up leaves a call unanswered",
        None,
        lambda c: _socket_session(c.openai),
        turns=2,
    ),
    Step(
        "chat-rejected",
        "a rejected request: strict on a schema the strict subset refuses",
        json_reply(
            {
                "error": {
                    "message": "Invalid schema for function 'create_ticket': In context=(), 'additionalProperties' is required to be supplied and to be false.",
                    "type": "invalid_request_error",
                    "param": "tools[2].function.parameters",
                    "code": "invalid_function_parameters",
                }
            },
            400,
        ),
        lambda c: c.openai.chat.completions.create(
            model="gpt-4o", messages=USER, tools=chat_tools(True, ticket=True)
        ),
        expect_error=True,
    ),
    Step(
        "chat-unanswered",
        "an unanswered call: the loop answered tool_calls[0] only",
        json_reply(
            {
                "error": {
                    "message": f"An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {AAPL[0]}",
                    "type": "invalid_request_error",
                    "param": "messages.[3].role",
                    "code": None,
                }
            },
            400,
        ),
        lambda c: c.openai.chat.completions.create(
            model="gpt-4o",
            tools=chat_tools(True),
            messages=[
                *USER,
                chat_completion("x", [EDINBURGH, AAPL])["choices"][0]["message"],
                {"role": "tool", "tool_call_id": EDINBURGH[0], "content": "12C, rain"},
            ],
        ),
        expect_error=True,
    ),
    Step(
        "responses-tool-search",
        "tool search: the client ran it; the tool it loaded is checked like a declared one",
        json_reply(
            response_object(
                "resp_0a1d5c3e9b7f24680069bb7f8c5890819d86cb58c280c603ff",
                [RATE_CALL],
                [SEARCH_TOOL],
                namespace="get_exchange_rate",
            )
        ),
        lambda c: c.openai.responses.create(
            model="gpt-5.4",
            tools=[SEARCH_TOOL],
            input=[
                {"role": "user", "content": "How many euros is 100 dollars?"},
                {
                    "type": "tool_search_call",
                    "call_id": "call_tsc_5Qm2rR0xDq9LkTn3Wz",
                    "execution": "client",
                    "arguments": {"query": "exchange rate"},
                },
                {
                    "type": "tool_search_output",
                    "call_id": "call_tsc_5Qm2rR0xDq9LkTn3Wz",
                    "execution": "client",
                    "tools": [RATE_TOOL],
                },
            ],
        ),
    ),
]
