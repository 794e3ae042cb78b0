"""The official SDK's client (tooltap's own venv: `mcp` 2.x) for the MCP tests: one session."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client


def in_session(url: str, work: Callable[[ClientSession], Awaitable[Any]], **options: Any) -> Any:
    """Run work in one MCP session of the SDK's own client: over the legacy HTTP+SSE transport
    for a URL ending in /sse, else over Streamable HTTP. options: the ClientSession's."""
    connect = sse_client if url.endswith("/sse") else streamable_http_client

    async def run() -> Any:
        with anyio.fail_after(60):
            async with (
                connect(url) as (read, write),
                ClientSession(read, write, **options) as session,
            ):
                await session.initialize()
                return await work(session)

    return anyio.run(run)


async def attempt(call: Awaitable[types.CallToolResult]) -> bool | str:
    """A call's isError, or what the client raised (it validates structured results)."""
    try:
        return (await call).is_error
    except Exception as exc:  # noqa: BLE001 - the client's refusal is the outcome here
        return type(exc).__name__
