"""A real MCP server for the tests: the official SDK's MCPServer and low-level Server over
Streamable HTTP on loopback, answering in both of its modes.

    python mcp_server.py PORT

serves, on 127.0.0.1:PORT,
- /sse/mcp and /json/mcp: MCPServer "weather-tools" answering with SSE, or with plain JSON;
  its tools declare input and output schemas (from their type hints), and `flagged` returns
  isError; `chatty` sends a log message and a progress notification, then its result half a
  second later;
- /lo/mcp: a low-level Server "paged-tools", answering with JSON, listing three tools over two
  pages (nextCursor):
  t0 returns structuredContent that breaks its outputSchema, t1 returns none though it declares
  one, t2 is right; an unknown tool is a JSON-RPC -32602 error;
- /stateless/mcp: MCPServer without sessions, JSON answers: the same bytes for the same request;
- /roots/mcp: the weather tools and `where`, which needs the client's roots (protocol
  2026-07-28: answered input_required first);
- /asks/mcp: a low-level Server "asking-tools" (protocol 2026-07-28) whose one tool, `pick`,
  asks for the client's roots twice (input_required, each time with a new requestState), then
  answers structuredContent that breaks its outputSchema;
- /legacy/sse: MCPServer "weather-tools" on the legacy HTTP+SSE transport (2024-11-05): GET
  /legacy/sse names /legacy/messages/?session_id=... to POST to, answered 202, the responses on
  the GET stream.

`running()` starts it in a child process for a test module.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Annotated

import anyio
import httpx
import mcp_types as types
import uvicorn
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import Context, ListRoots, MCPServer, Resolve
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel
from starlette.applications import Starlette

from tooltap.addon.commands.demo_mcp import mounted

CHATTY_PAUSE = 0.5  # between chatty's notifications and its result


class Weather(BaseModel):
    city: str
    temperature: float
    conditions: str


def workspace() -> ListRoots:
    """A resolver that asks the client for its roots (module level: the tool's annotation
    names it, and annotations are evaluated in the module's namespace)."""
    return ListRoots()


def weather_tools(roots: bool = False) -> MCPServer:
    app = MCPServer("weather-tools", version="1.4.0")

    if roots:

        @app.tool()
        async def where(folders: Annotated[types.ListRootsResult, Resolve(workspace)]) -> str:
            """The client's first root: on protocol 2026-07-28 the server answers
            input_required first, and the client calls again with its roots."""
            return str(folders.roots[0].uri) if folders.roots else "none"

    @app.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @app.tool()
    def weather(city: str) -> Weather:
        """The weather in a city."""
        return Weather(city=city, temperature=21.5, conditions="sunny")

    @app.tool()
    def flagged() -> types.CallToolResult:
        """A tool that reports its own failure."""
        return types.CallToolResult(
            content=[types.TextContent(type="text", text="upstream 503")], is_error=True
        )

    @app.tool()
    async def chatty(n: int, ctx: Context) -> str:
        """Says what it does, waits half a second, then answers."""
        await ctx.info("working")
        await ctx.report_progress(1, 2, "half")
        await anyio.sleep(CHATTY_PAUSE)
        return f"done {n}"

    return app


PAGED = [
    types.Tool(
        name=f"t{i}",
        description=f"tool {i}",
        input_schema={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
        output_schema={
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "required": ["n"],
        },
    )
    for i in range(3)
]


async def list_paged(
    ctx: object, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    if params is None or params.cursor is None:
        return types.ListToolsResult(tools=PAGED[:2], next_cursor="page2")
    return types.ListToolsResult(tools=PAGED[2:])


async def call_paged(ctx: object, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name == "t0":
        return types.CallToolResult(
            content=[types.TextContent(type="text", text='{"n": "three"}')],
            structured_content={"n": "three"},
        )
    if params.name == "t1":
        return types.CallToolResult(content=[types.TextContent(type="text", text="n is 3")])
    if params.name == "t2":
        return types.CallToolResult(
            content=[types.TextContent(type="text", text='{"n": 3}')], structured_content={"n": 3}
        )
    raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}")


ASKING = types.Tool(
    name="pick",
    description="asks for the client's roots, twice, then answers off its outputSchema",
    input_schema={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
    output_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
)
ASK_ROUNDS = {None: "round-1", "round-1": "round-2"}  # the requestState each round answers with


async def list_asking(
    ctx: object, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[ASKING])


async def call_asking(
    ctx: object, params: types.CallToolRequestParams
) -> types.CallToolResult | types.InputRequiredResult:
    state = params.request_state
    if state in ASK_ROUNDS:
        return types.InputRequiredResult(
            input_requests={"roots": types.ListRootsRequest()}, request_state=ASK_ROUNDS[state]
        )
    return types.CallToolResult(
        content=[types.TextContent(type="text", text='{"n": "three"}')],
        structured_content={"n": "three"},
    )


def app() -> Starlette:
    paged = Server(
        "paged-tools", version="9.9.9", on_list_tools=list_paged, on_call_tool=call_paged
    )
    mounts = {
        "/sse": weather_tools().streamable_http_app(streamable_http_path="/mcp"),
        "/json": weather_tools().streamable_http_app(
            streamable_http_path="/mcp", json_response=True
        ),
        # JSON answers: a recording of it holds initialize's whole answer whatever the timing
        # (the SDK's client hangs up on an event stream as soon as it has its message).
        "/lo": paged.streamable_http_app(streamable_http_path="/mcp", json_response=True),
        "/stateless": weather_tools().streamable_http_app(
            streamable_http_path="/mcp", json_response=True, stateless_http=True
        ),
        "/legacy": weather_tools().sse_app(),
        "/roots": weather_tools(roots=True).streamable_http_app(streamable_http_path="/mcp"),
        "/asks": Server(
            "asking-tools", version="1.0.0", on_list_tools=list_asking, on_call_tool=call_asking
        ).streamable_http_app(streamable_http_path="/mcp", json_response=True),
    }

    return mounted(mounts)


@contextlib.contextmanager
def running(script: str = __file__) -> Iterator[str]:
    """A server script (this one by default) in a child process on a free loopback port, until
    the block ends: its URL."""
    from tooltap.addon.harness.launch import free_port

    port = free_port()
    process = subprocess.Popen(
        [sys.executable, script, str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the MCP server did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(10)


if __name__ == "__main__":
    uvicorn.run(app(), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
