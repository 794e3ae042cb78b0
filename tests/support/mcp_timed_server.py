"""A real MCP server whose tools take known time, for the tests of time in the loop: the
official SDK's MCPServer "timed-tools" over Streamable HTTP (SSE answers, its default) on
loopback.

    python mcp_timed_server.py PORT

serves, on 127.0.0.1:PORT,
- /mcp: `forecast(city)` answers after SLEEP. A client that runs its calls together has them
  all in flight before any answers: each call first waits, at most GATHER, for BATCH calls to
  be in flight at once. That makes the order a concurrent client's batch runs in certain,
  whatever the machine's load; a client that sends one call at a time waits GATHER out on each.
  `stall()` runs until POST /release (at most STALL), and says which ended it: a tool that hangs
  as long as a test needs.
- POST /release: ends the stall that is running.
- GET /order: the order forecast's calls really ran in since the last look, as the server saw
  it: ["start", city] and ["end", city], the sleep's own start and end.

`running(__file__)` (tests/support/mcp_server.py) starts it in a child process.
"""

from __future__ import annotations

import sys

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from tooltap.addon.commands.demo_mcp import mounted

SLEEP = 0.3  # what forecast takes once it runs
BATCH = 3  # the calls a concurrent client's batch has in flight at once
GATHER = 1.0  # how long a call waits for the rest of its batch
STALL = 60.0  # the longest a stall runs unreleased


class Gathering:
    """Calls in flight, and a moment when BATCH of them were (reset once none is)."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.full: anyio.Event | None = None  # made on the server's event loop

    async def wait(self) -> None:
        self.in_flight += 1
        full = self.full = self.full or anyio.Event()
        if self.in_flight >= BATCH:
            full.set()
        with anyio.move_on_after(GATHER):
            await full.wait()

    def done(self) -> None:
        self.in_flight -= 1
        if self.in_flight == 0:
            self.full = None


def timed_tools() -> tuple[MCPServer, list[anyio.Event], list[list[str]]]:
    app = MCPServer("timed-tools", version="2.0.1")
    gathering = Gathering()
    stalls: list[anyio.Event] = []
    order: list[list[str]] = []

    @app.tool()
    async def forecast(city: str) -> str:
        """Tomorrow's forecast for a city."""
        try:
            await gathering.wait()
            order.append(["start", city])
            await anyio.sleep(SLEEP)
            order.append(["end", city])
        finally:
            gathering.done()
        return f"{city}: 14C, showers"

    @app.tool()
    async def stall() -> str:
        """A lookup that hangs until it is released."""
        released = anyio.Event()
        stalls.append(released)
        with anyio.move_on_after(STALL):
            await released.wait()
        return "released" if released.is_set() else "never released"

    return app, stalls, order


def app() -> object:
    server, stalls, order = timed_tools()

    async def release(_: Request) -> PlainTextResponse:
        for waiting in stalls:
            waiting.set()
        stalls.clear()
        return PlainTextResponse("released")

    async def ran(_: Request) -> JSONResponse:
        seen = list(order)
        order.clear()
        return JSONResponse(seen)

    routes = (Route("/release", release, methods=["POST"]), Route("/order", ran))
    return mounted({"/": server.streamable_http_app(streamable_http_path="/mcp")}, routes)


if __name__ == "__main__":
    uvicorn.run(app(), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
