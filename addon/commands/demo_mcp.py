"""The demo's MCP tool server, and the session its agent holds with it through the proxy.

The server is the official SDK's low-level Server (hand-written schemas, as servers outside
Python declare them; MCPServer checks its own results against its return type, so it cannot
send one off its outputSchema) over Streamable HTTP, run by uvicorn on loopback in a thread.
The demo's upstream relays /mcp to it, so the proxy reaches it on the same port as the model
APIs; `tooltap_mcp_hosts` names that port, so the proxy reads those POSTs as MCP.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Any

import httpx

from ..harness.replay import Reply, Route, Seen

PATH = "/mcp"
SERVER = ("forecast-tools", "0.3.1")
FORECAST = {
    "name": "get_forecast",
    "description": "Tomorrow's forecast for a city",
    "inputSchema": {
        "type": "object",
        "additionalProperties": False,
        "required": ["city", "units"],
        "properties": {"city": {"type": "string"}, "units": {"type": "string", "enum": ["c", "f"]}},
    },
    "outputSchema": {
        "type": "object",
        "required": ["city", "high", "low"],
        "properties": {
            "city": {"type": "string"},
            "high": {"type": "number"},
            "low": {"type": "number"},
        },
    },
}
QUOTE = {
    "name": "get_quote",
    "description": "The last price of a stock",
    "inputSchema": {
        "type": "object",
        "required": ["ticker"],
        "properties": {"ticker": {"type": "string"}},
    },
    "outputSchema": {
        "type": "object",
        "required": ["price", "currency"],
        "properties": {"price": {"type": "number"}, "currency": {"type": "string"}},
    },
}
# What the agent sends: a good call, one off the inputSchema, one whose result breaks the
# outputSchema (the price comes back as a string), and one to a tool the server never listed.
CALLS = [
    ("get_forecast", {"city": "Oslo", "units": "c"}),
    ("get_forecast", {"city": "Oslo", "units": "kelvin"}),
    ("get_quote", {"ticker": "MC"}),
    ("get_news", {"topic": "weather"}),
]
# The session's POSTs: initialize, notifications/initialized, tools/list and each call.
EXCHANGES = 3 + len(CALLS)


def tool_server() -> Any:
    """The low-level Server: two tools with input and output schemas."""
    import mcp_types as types  # noqa: PLC0415 - the SDK is the demo extra
    from mcp.server.lowlevel.server import Server  # noqa: PLC0415
    from mcp.shared.exceptions import MCPError  # noqa: PLC0415

    async def list_tools(_ctx: object, _params: object) -> Any:
        return types.ListToolsResult(
            tools=[types.Tool.model_validate(t) for t in (FORECAST, QUOTE)]
        )

    async def call_tool(_ctx: object, params: Any) -> Any:
        arguments = params.arguments or {}
        if params.name == "get_forecast":
            if arguments.get("units") not in ("c", "f"):
                return _result("units must be c or f", None, error=True)
            return _result("Oslo: 14 / 8", {"city": arguments.get("city"), "high": 14, "low": 8})
        if params.name == "get_quote":
            return _result("712.40 EUR", {"price": "712.40", "currency": "EUR"})
        raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}")

    def _result(text: str, structured: dict[str, Any] | None, error: bool = False) -> Any:
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content=structured,
            is_error=error,
        )

    name, version = SERVER
    return Server(name, version=version, on_list_tools=list_tools, on_call_tool=call_tool)


class ToolServer:
    """The tool server on a loopback port of its own, in a thread; stopped on exit."""

    def __init__(self) -> None:
        import uvicorn  # noqa: PLC0415

        # Bound and listening before uvicorn starts: a client that comes first waits in the backlog.
        self._socket = socket.create_server(("127.0.0.1", 0))
        app = tool_server().streamable_http_app(streamable_http_path=PATH)
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, name="mcp", daemon=True
        )
        self._client = httpx.Client(timeout=30)
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}{PATH}"

    def relaying(self, route: Route) -> Route:
        """route, with /mcp sent on to the tool server."""

        def relayed(seen: Seen) -> Reply:
            return self.relay(seen) if seen.path.startswith(PATH) else route(seen)

        return relayed

    def relay(self, seen: Seen) -> Reply:
        """A request to the tool server and its answer, whole (each POST's SSE stream ends with
        its response). No GET stream for the server's own messages: this server sends none."""
        if seen.method != "POST":
            return Reply(status=405, headers=[("allow", "POST")], chunks=[b""])
        passed = ("accept", "content-type", "mcp-session-id", "mcp-protocol-version")
        answer = self._client.post(
            self.url,
            content=seen.body,
            headers={k: v for k, v in seen.headers.items() if k in passed},
        )
        headers = [
            (k, v) for k, v in answer.headers.items() if k == "content-type" or k.startswith("mcp-")
        ]
        return Reply(status=answer.status_code, headers=headers, chunks=[answer.content])

    def __enter__(self) -> ToolServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._client.close()  # first: uvicorn waits for open connections
        self._server.should_exit = True
        self._thread.join(30)
        self._socket.close()


def session(url: str, headers: dict[str, str]) -> None:
    """The agent's session with the tool server at url, with the SDK's own client: it lists the
    tools, then makes CALLS. The client refuses the result off its schema and the unlisted
    tool's error, as an agent would; the proxy has read both by then."""
    import anyio  # noqa: PLC0415
    from mcp.client.session import ClientSession  # noqa: PLC0415
    from mcp.client.streamable_http import streamable_http_client  # noqa: PLC0415
    from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: PLC0415
    from mcp.shared.exceptions import MCPError  # noqa: PLC0415

    async def talk() -> None:
        async with (
            create_mcp_http_client(headers=headers) as http,
            # The demo's upstream takes no DELETE: the session ends when the server stops.
            streamable_http_client(url, http_client=http, terminate_on_close=False) as streams,
            ClientSession(*streams) as client,
        ):
            await client.initialize()
            await client.list_tools()
            for name, arguments in CALLS:
                with contextlib.suppress(RuntimeError, MCPError):
                    await client.call_tool(name, arguments)

    anyio.run(talk)
