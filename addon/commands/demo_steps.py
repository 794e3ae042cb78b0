"""The demo's scripted agent: each step is one real SDK call and the reply the upstream replays.

Shapes follow the real captures (openai-python, anthropic-sdk-python, pydantic-ai and
Bedrock recordings); between them the steps produce every kind of finding tooltap
reports. A step's client sends `x-demo-step` so the upstream knows which reply to play.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tooltap.core.wire import detect_socket

from ..harness import eventstream
from ..harness.replay import Reply, Seen
from ..harness.sockets import Step as SocketStep
from . import demo_cohere, demo_live, demo_mcp, demo_ollama

JSON = [("content-type", "application/json"), ("x-request-id", "req_demo")]
SSE = [("content-type", "text/event-stream; charset=utf-8"), ("cache-control", "no-cache")]

WEATHER = {
    "type": "object",
    "additionalProperties": False,
    "required": ["city", "country", "units"],
    "properties": {
        "city": {"type": "string"},
        "country": {"type": "string"},
        "units": {"type": "string", "enum": ["c", "f"]},
    },
}
STOCK = {
    "type": "object",
    "additionalProperties": False,
    "required": ["ticker", "exchange"],
    "properties": {"ticker": {"type": "string"}, "exchange": {"type": "string"}},
}
# Not strict-compatible: no additionalProperties, a property left out of required, minLength.
TICKET = {
    "type": "object",
    "required": ["title"],
    "properties": {"title": {"type": "string", "minLength": 5}, "priority": {"type": "string"}},
}


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


# --- reply builders, in each API's wire shape ---------------------------------


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


def json_reply(body: dict[str, Any], status: int = 200) -> Reply:
    return Reply(status=status, headers=JSON, chunks=[json.dumps(body).encode()])


def sse_reply(chunks: list[bytes]) -> Reply:
    return Reply(headers=SSE, chunks=chunks, delay=0.01)


# --- the steps ----------------------------------------------------------------

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
ALICE, BOB = "toolu_0167cfEnoQaPviGdVXA95zcu", "toolu_01EEe2V5HD1Ac4rKiUR4HD2T"


BEDROCK_API_KEY = "ABSKZGVtby1ub3QtYS1yZWFsLWtleQ=="  # a Bedrock API key's shape: any works here
BEDROCK_MODEL = "global.anthropic.claude-haiku-4-5-20251001-v1:0"


class Clients:
    """The official SDKs, all pointed at one base URL and sending the same extra headers.

    Each SDK's client is made once and shared by every copy `with_headers` makes, as
    `with_options` shares its connections.
    """

    def __init__(
        self,
        base_url: str,
        headers: Mapping[str, str] | None = None,
        made: Mapping[str, Any] | None = None,  # SDK clients made elsewhere, by property name
        ca: str | None = None,  # the proxy's CA, for a client that speaks TLS to it
    ) -> None:
        self.base_url = base_url
        self.headers = dict(headers or {})
        self._made: dict[str, Any] = dict(made or {})
        self.ca = ca

    def with_headers(self, headers: Mapping[str, str]) -> Clients:
        copy = Clients(self.base_url, {**self.headers, **headers}, ca=self.ca)
        copy._made = self._made
        return copy

    def _sdk(self, name: str, make: Callable[[], Any]) -> Any:
        if name not in self._made:
            self._made[name] = make()
        return self._made[name].with_options(default_headers=self.headers)

    @property
    def openai(self) -> Any:
        import openai  # noqa: PLC0415 - the SDKs are the demo extra

        return self._sdk(
            "openai",
            lambda: openai.OpenAI(
                base_url=self.base_url + "/v1", api_key="sk-demo-not-a-real-key", max_retries=0
            ),
        )

    @property
    def anthropic(self) -> Any:
        import anthropic  # noqa: PLC0415

        return self._sdk(
            "anthropic",
            lambda: anthropic.Anthropic(
                base_url=self.base_url, api_key="sk-ant-demo-not-a-real-key", max_retries=0
            ),
        )

    @property
    def bedrock(self) -> Any:
        """Claude on Bedrock through anthropic's own client, with a Bedrock API key: a bearer
        token signs nothing, so a reverse proxy in front of Bedrock breaks nothing."""
        import anthropic  # noqa: PLC0415

        return self._sdk(
            "bedrock",
            lambda: anthropic.AnthropicBedrock(
                base_url=self.base_url,
                api_key=BEDROCK_API_KEY,
                aws_region="us-east-1",
                max_retries=0,
            ),
        )

    @property
    def gemini(self) -> Any:
        """google-genai's client for the Gemini API, with an API key (any works here)."""
        from google import genai  # noqa: PLC0415
        from google.genai import types  # noqa: PLC0415

        # One client per set of headers, kept: a genai.Client closes its connections when
        # it is collected, even while its `models` are in use.
        key = "gemini " + json.dumps(self.headers, sort_keys=True)
        if key not in self._made:
            options = types.HttpOptions(
                base_url=self.base_url, api_version="v1beta", headers=dict(self.headers)
            )
            self._made[key] = genai.Client(api_key="AIza-demo-not-a-real-key", http_options=options)
        return self._made[key]

    @property
    def gemini_live(self) -> Any:
        """google-genai's client for the Live API. It always speaks wss://, so it connects to
        the proxy's port over TLS (mitmproxy answers TLS there too) and trusts the proxy's CA."""
        import ssl  # noqa: PLC0415

        from google import genai  # noqa: PLC0415
        from google.genai import types  # noqa: PLC0415

        key = "gemini_live " + json.dumps(self.headers, sort_keys=True)
        if key not in self._made:
            options = types.HttpOptions(
                base_url=self.base_url,
                headers=dict(self.headers),
                async_client_args={"ssl": ssl.create_default_context(cafile=self.ca)},
            )
            self._made[key] = genai.Client(api_key="AIza-demo-not-a-real-key", http_options=options)
        return self._made[key]

    @property
    def bedrock_runtime(self) -> Any:
        """boto3's bedrock-runtime client. It signs with SigV4 and dummy keys, which the demo's
        upstream does not check (boto3 sends a Bedrock API key to https endpoints only); real
        Bedrock checks the signed Host, so there tooltap runs in regular mode."""
        import boto3  # noqa: PLC0415
        from botocore.config import Config  # noqa: PLC0415

        client = boto3.client(
            "bedrock-runtime",
            region_name="us-east-1",
            endpoint_url=self.base_url,
            aws_access_key_id="AKIADEMONOTAREALKEY0",
            aws_secret_access_key="demo-not-a-real-secret",  # noqa: S106 - a dummy
            config=Config(retries={"total_max_attempts": 1}),  # one attempt, as the SDKs above
        )
        extra = dict(self.headers)
        client.meta.events.register(
            "before-send.bedrock-runtime.*", lambda request, **_: request.headers.update(extra)
        )
        return client


def client_errors() -> tuple[type[Exception], ...]:
    """What the SDKs raise for an HTTP error status."""
    import anthropic  # noqa: PLC0415
    import openai  # noqa: PLC0415
    from botocore.exceptions import ClientError  # noqa: PLC0415
    from google.genai.errors import APIError  # noqa: PLC0415

    return (openai.APIStatusError, anthropic.APIStatusError, ClientError, APIError)


def status_of(error: Exception) -> int:
    """The HTTP status an SDK's error carries."""
    status = getattr(error, "status_code", None) or getattr(error, "code", None)
    if status is None:  # botocore's ClientError
        status = getattr(error, "response", {}).get("ResponseMetadata", {}).get("HTTPStatusCode")
    return int(status or 0)


@dataclass
class Step:
    name: str
    shows: str
    reply: Reply | None  # None: SOCKET_STEPS has its script, or the MCP tool server answers
    call: Callable[[Clients], Any]
    expect_error: bool = False
    turns: int = 1  # the turns it makes


def _invoice_format(strict: bool | None) -> dict[str, Any]:
    fmt: dict[str, Any] = {"type": "json_schema", "name": "invoice", "schema": TICKET}
    if strict is not None:
        fmt["strict"] = strict
    return fmt


def _consume(stream: Any) -> Any:
    for _ in stream:
        pass
    return stream


def _anthropic_stream(client: Any, **request: Any) -> Any:
    with client.messages.stream(**request) as stream:
        return _consume(stream)


SOCKET_FIRST = "resp_0a76d7cc9190bb9d0069c5b9d1743c81a182203d3de7d50b2d"
SOCKET_SECOND = "resp_0123ba578f5e03220069c5b9d2ecd481a2b2e77235daabd270"
SOCKET_STEPS = {
    "responses-websocket": [
        SocketStep(None, []),
        SocketStep(
            "response.create",
            socket_frames(
                response_object(SOCKET_FIRST, [EDINBURGH, LISBON], responses_tools(True))
            ),
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
    ],
    "gemini-live": demo_live.SCRIPT,
}


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


# Gemini 3's two parallel calls: only the first part carries the thought signature.
GEMINI_CALLS = [
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
            tools=[types.Tool(function_declarations=[
                {"name": "get_weather", "description": "Weather for a city",
                 "parameters_json_schema": WEATHER}])],
        ),
    )  # fmt: skip


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
        lambda c: _consume(
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
        lambda c: _consume(
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
    Step(
        "gemini-unsigned",
        "Gemini 3: a replayed call that lost its thought signature, and the 400 it earns",
        json_reply(
            {"error": {"code": 400, "message": UNSIGNED, "status": "INVALID_ARGUMENT"}}, 400
        ),
        _gemini_unsigned,
        expect_error=True,
    ),
    Step(
        "gemini-live",
        "Gemini Live: a voice agent's session; an argument off its schema, a NON_BLOCKING"
        " booking answered turns later",
        None,
        lambda c: demo_live.session(c.gemini_live),
        turns=demo_live.TURNS,
    ),
    Step(
        "ollama-stream",
        "Ollama's own API (the ollama client, NDJSON): two calls, one off its schema, after a"
        " history that answered one of two calls by tool_name",
        demo_ollama.reply(),
        lambda c: demo_ollama.chat(c.base_url, c.headers, chat_tools(strict=False)),
    ),
    Step(
        "cohere-stream",
        "Cohere's v2 chat (the cohere client, SSE): a 200 stream that ends in ERROR, after a"
        " history that answered a call with nothing",
        demo_cohere.reply(),
        lambda c: demo_cohere.chat(c.base_url, c.headers, WEATHER),
    ),
    Step(
        "mcp-tools",
        "an MCP tool server: arguments off a tool's inputSchema, a result off its outputSchema,"
        " and a call to a tool it never listed",
        None,
        lambda c: demo_mcp.session(c.base_url + demo_mcp.PATH, c.headers),
        turns=demo_mcp.EXCHANGES,
    ),
    Step(
        "mcp-definitions",
        "an MCP server no one should trust: a description that hides text in tag characters,"
        " and a tool rewritten mid-session after notifications/tools/list_changed",
        None,
        lambda c: demo_mcp.session(c.base_url + demo_mcp.HEADLINES_PATH, c.headers, True),
        turns=demo_mcp.HEADLINES_EXCHANGES,
    ),
]

BY_NAME = {step.name: step for step in STEPS}
# A client that sends no x-demo-step (e.g. your own, with --serve) gets a representative reply per API.
DEFAULTS = {
    "/chat/completions": "chat-fanout",
    "/responses": "responses-fanout",
    "/messages": "anthropic-parallel",
    "/invoke-with-response-stream": "bedrock-stream",
    "/converse": "converse-unanswered",
    ":generateContent": "gemini-unsigned",
    "/api/chat": "ollama-stream",
    "/v2/chat": "cohere-stream",
}


def socket_route(path: str, headers: dict[str, str]) -> list[SocketStep]:
    """What a WebSocket plays: its step's script, else WebSocket mode's for any /responses
    socket and the Live step's for any Gemini Live one."""
    name = headers.get("x-demo-step", "")
    if name not in SOCKET_STEPS and path.partition("?")[0].rstrip("/").endswith("/responses"):
        name = "responses-websocket"
    elif name not in SOCKET_STEPS and detect_socket(path) == "gemini_live":
        name = "gemini-live"
    return list(SOCKET_STEPS.get(name, []))


def route(seen: Seen) -> Reply:
    step = BY_NAME.get(seen.headers.get("x-demo-step", ""))
    if step is None:
        path = seen.path.partition("?")[0].rstrip("/")
        step = next(
            (BY_NAME[name] for suffix, name in DEFAULTS.items() if path.endswith(suffix)), None
        )
    if step is None or step.reply is None:
        return json_reply(
            {
                "error": {
                    "message": "the demo upstream serves chat/completions, responses, "
                    "messages, Bedrock's invoke-with-response-stream and converse, "
                    f"Gemini's generateContent, Ollama's /api/chat and Cohere's /v2/chat, not "
                    f"{seen.path}",
                    "type": "not_found",
                }
            },
            404,
        )
    return step.reply
