"""mitmproxy test flows for the addon's hooks, and reading back what its log wrote."""

from __future__ import annotations

import json
from typing import Any

from mitmproxy import http
from mitmproxy.test import tflow, tutils

CHAT_REQUEST = {
    "model": "gpt-4o",
    "messages": [{"role": "user", "content": "weather and stock"}],
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "GetWeatherArgs",
                "strict": True,
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                    "additionalProperties": False,
                },
            },
        },
        {
            "type": "function",
            "function": {
                "name": "get_stock_price",
                "strict": True,
                "parameters": {"type": "object"},
            },
        },
    ],
}


def make_flow(
    path: str,
    request: Any,
    response_body: bytes,
    headers: tuple[tuple[str, str], ...] = (("content-type", "application/json"),),
    host: str = "api.openai.com",
    method: str = "POST",
) -> http.HTTPFlow:
    req = tutils.treq(
        method=method.encode(),
        host=host,
        port=443,
        scheme=b"https",
        path=path.encode(),
        headers=((b"content-type", b"application/json"),),
        content=json.dumps(request).encode() if request is not None else b"",
    )
    if not any(k.lower() in ("content-length", "transfer-encoding") for k, _ in headers):
        # A body of known length, as a server sends one it buffered: one without a length
        # is streamed (tooltap never holds a body whose end only its close says).
        headers = (*headers, ("content-length", str(len(response_body))))
    resp = tutils.tresp(
        status_code=200,
        headers=tuple((k.encode(), v.encode()) for k, v in headers),
        content=response_body,
    )
    flow = tflow.tflow(req=req, resp=resp)
    return flow


def lines(stream: Any) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def socket_flow(path: str, host: str = "api.openai.com") -> http.HTTPFlow:
    """A WebSocket flow as mitmproxy has it after the upgrade: no message yet."""
    flow = tflow.twebsocketflow()
    flow.websocket.messages = []
    flow.websocket.closed_by_client = None
    flow.request.host = host
    flow.request.path = path
    flow.request.headers["authorization"] = "Bearer sk-proj-socket-credential-0123456789"
    flow.websocket.close_code = None
    return flow


def relay(addon: Any, flow: http.HTTPFlow, messages: list[tuple[bool, bytes | str]]) -> None:
    """Messages as mitmproxy relays them: each appended, then the websocket_message hook."""
    from mitmproxy.websocket import WebSocketMessage
    from wsproto.frame_protocol import Opcode

    for from_client, content in messages:
        kind = Opcode.TEXT if isinstance(content, str) else Opcode.BINARY
        data = content.encode() if isinstance(content, str) else content
        flow.websocket.messages.append(WebSocketMessage(kind, from_client, data))
        addon.websocket_message(flow)


# An MCP server's answer to tools/list: one tool, t0, with an input and an output schema.
MCP_LIST = {
    "jsonrpc": "2.0",
    "id": 2,
    "result": {
        "tools": [
            {
                "name": "t0",
                "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
                "outputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}},
            }
        ]
    },
}
