"""One tool server, as each public Python library writes it, for the ecosystem tests.

    python mcp_eco_server.py LIBRARY PORT

LIBRARY is `mcp1` (the official SDK 1.x's FastMCP), `fastmcp2` or `fastmcp4` (jlowin's fastmcp),
run with the interpreter of a side venv that has it (tests/support/sidevenv.py). Each serves on
127.0.0.1:PORT, Streamable HTTP at /mcp and the legacy HTTP+SSE transport at /sse, the same
tools, declared from type hints as users write them:
- add(a: int, b: int) -> int; weather(city) -> a structured result; flagged() fails (isError);
- fastmcp2 only: slow_add, a background task (`task=True`, protocol 2025-11-25 tasks).
"""

from __future__ import annotations

import sys

from pydantic import BaseModel


class Weather(BaseModel):
    city: str
    temperature: float


def tools(app, error) -> None:
    @app.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @app.tool()
    def weather(city: str) -> Weather:
        """The weather in a city."""
        return Weather(city=city, temperature=21.5)

    @app.tool()
    def flagged() -> str:
        """A tool that fails."""
        raise error("upstream 503")


def main(library: str, port: int) -> None:
    import contextlib

    import uvicorn
    from starlette.applications import Starlette
    from starlette.routing import Mount

    if library == "mcp1":
        from mcp.server.fastmcp import FastMCP
        from mcp.server.fastmcp.exceptions import ToolError

        streamable, legacy = FastMCP("mcp1-tools"), FastMCP("mcp1-tools")
        for app in (streamable, legacy):
            tools(app, ToolError)
        http, sse = streamable.streamable_http_app(), legacy.sse_app()
    else:
        from fastmcp import FastMCP
        from fastmcp.exceptions import ToolError

        app = FastMCP(f"{library}-tools")
        tools(app, ToolError)
        if library == "fastmcp2":

            @app.tool(task=True)
            async def slow_add(a: int, b: int) -> int:
                """Add two integers, in the background."""
                return a + b

        http = app.http_app(path="/mcp")
        sse = app.http_app(path="/sse", transport="sse")

    @contextlib.asynccontextmanager
    async def lifespan(_app):
        async with http.router.lifespan_context(http):
            yield

    # Streamable HTTP at /mcp, the legacy transport at /sse (posting to /messages/).
    root = Starlette(routes=[Mount("/", app=_Split(http, sse))], lifespan=lifespan)
    uvicorn.run(root, host="127.0.0.1", port=port, log_level="warning")


class _Split:
    """ASGI: /mcp to the Streamable HTTP app, anything else to the SSE app."""

    def __init__(self, http, sse) -> None:
        self.http, self.sse = http, sse

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/mcp"):
            await self.http(scope, receive, send)
        else:
            await self.sse(scope, receive, send)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
