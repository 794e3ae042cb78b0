"""One MCP session of a public Python client, as its users write it, for the ecosystem tests.

    python mcp_drive.py CLIENT URL SCENARIO

CLIENT is `mcp` (the official SDK's ClientSession, 1.x or 2.x, protocol 2025-11-25), `modern`
(the SDK 2.x's Client, which speaks 2026-07-28 to a server that does) or `fastmcp` (2.x or 4.x),
run with the interpreter of a venv that has it. A URL ending in /sse is the legacy HTTP+SSE
transport. It prints one JSON line: each tools/call it made, with its outcome (ok, error for a
result flagged isError, or the exception the client raised), in order; and (the `mcp` client)
the data of each log message the server sent it (notifications/message) while the session was
open. The everything server logs "Roots updated" on the session's stream once it has the
client's roots: the `everything` session waits for it (10 s at most) before it closes.

SCENARIO: `tools` (tests/support/mcp_eco_server.py and mcp_server.py's weather tools: add,
a bad add, weather, flagged), `task` (tools, then fastmcp's slow_add as a background task),
`roots` (tools, then mcp_server.py's `where`, which needs the client's roots: input_required
on 2026-07-28), `everything` (the everything server's echo, get-sum, a bad get-sum,
get-structured-content, get-roots-list; then, with the SDK 1.x, simulate-research-query as a
task: created, polled with tasks/get until it ends, its result fetched with tasks/result, by
the SDK's own `session.experimental` helpers. The SDK 2.x has no tasks: its client refuses a
CreateTaskResult as a tools/call's answer).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from typing import Any

BAD = {"a": "x", "b": 1}  # a is no integer: the client sends it, the server refuses it
TOOLS = [("add", {"a": 2, "b": 3}), ("add", BAD), ("weather", {"city": "Oslo"}), ("flagged", {})]
EVERYTHING = [
    ("echo", {"message": "hello"}),
    ("get-sum", {"a": 2, "b": 3}),
    ("get-sum", {"a": "x", "b": 3}),
    ("get-structured-content", {"location": "New York"}),
    ("get-roots-list", {}),  # the server asks the client for its roots, on a stream
]


async def outcome(call: Any) -> str:
    try:
        result = await call
    except Exception as exc:  # noqa: BLE001 - the client's refusal is the outcome
        return type(exc).__name__
    failed = getattr(result, "isError", None)
    failed = getattr(result, "is_error", False) if failed is None else failed
    return "error" if failed else "ok"


LOGGED: list[Any] = []  # the server's log messages, as the client got them
ROOTS_LOGGED = asyncio.Event()


async def _logged(params: Any) -> None:
    LOGGED.append(params.data)
    if str(params.data).startswith("Roots updated"):
        ROOTS_LOGGED.set()


async def official(url: str, scenario: str) -> list[tuple[str, str]]:
    from mcp import ClientSession

    if url.endswith("/sse"):
        from mcp.client.sse import sse_client as connect
    else:
        from mcp.client.streamable_http import streamable_http_client as connect

    async with (
        connect(url) as streams,
        ClientSession(
            streams[0], streams[1], list_roots_callback=_roots, logging_callback=_logged
        ) as session,
    ):
        await session.initialize()
        await session.list_tools()
        done = [(n, await outcome(session.call_tool(n, a))) for n, a in _calls(scenario)]
        if scenario == "everything" and hasattr(session, "experimental"):
            done.append(("simulate-research-query", await outcome(_task(session))))
        if scenario == "everything":
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(ROOTS_LOGGED.wait(), 10)
        return done


async def _task(session: Any) -> Any:
    """simulate-research-query as a task, as the SDK 1.x's helpers run one (2025-11-25)."""
    from mcp import types

    tasks = session.experimental
    made = await tasks.call_tool_as_task("simulate-research-query", {"topic": "tool loops"})
    async for _status in tasks.poll_task(made.task.taskId):  # tasks/get until it ends
        pass
    return await tasks.get_task_result(made.task.taskId, types.CallToolResult)


async def modern(url: str, scenario: str) -> list[tuple[str, str]]:
    from mcp.client import Client

    async with Client(url, list_roots_callback=_roots) as client:
        await client.list_tools()
        return [(n, await outcome(client.call_tool(n, a))) for n, a in _calls(scenario)]


async def fastmcp(url: str, scenario: str) -> list[tuple[str, str]]:
    from fastmcp import Client

    async with Client(url) as client:
        await client.list_tools()
        done = [
            (n, await outcome(client.call_tool(n, a, raise_on_error=False)))
            for n, a in _calls(scenario)
        ]
        if scenario == "task":
            task = await client.call_tool("slow_add", {"a": 1, "b": 2}, task=True)
            done.append(("slow_add", await outcome(task.result())))
        return done


def _calls(scenario: str) -> list[tuple[str, dict[str, Any]]]:
    return {"roots": [*TOOLS, ("where", {})], "everything": EVERYTHING}.get(scenario, TOOLS)


async def _roots(_context: Any) -> Any:
    from mcp import types

    return types.ListRootsResult(roots=[types.Root(uri="file:///work", name="work")])


CLIENTS = {"mcp": official, "modern": modern, "fastmcp": fastmcp}

if __name__ == "__main__":
    client, url, scenario = sys.argv[1:4]
    calls = asyncio.run(asyncio.wait_for(CLIENTS[client](url, scenario), 60))
    print(json.dumps({"calls": calls, "logged": LOGGED}))
