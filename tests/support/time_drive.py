"""One agent run of a real Python runtime, as its users write it, for the tests of time in the
loop: a model behind an OpenAI-compatible base URL and one MCP server's tools.

    python time_drive.py RUNTIME MODEL_BASE_URL MCP_URL

RUNTIME is `pydantic-ai` (an Agent with an MCPToolset, Chat Completions, streamed with
run_stream_events), `agents` (the OpenAI Agents SDK's Agent with MCPServerStreamableHttp,
the Responses API, streamed with Runner.run_streamed) or `loop` (the openai client's streamed
Chat Completions, each call then made in turn with the `mcp` SDK's ClientSession), run with
the interpreter of a venv that has it. The model is named after the runtime. It prints one
JSON line: the run's final text, and the MCP tools it was offered.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

PROMPT = "Tomorrow's forecast for Oslo, Lima and Pune?"
KEY = "sk-test-TIME-0123456789"


async def pydantic_ai(base_url: str, mcp_url: str) -> dict[str, Any]:
    from pydantic_ai import Agent
    from pydantic_ai.mcp import MCPToolset
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from pydantic_ai.run import AgentRunResultEvent

    provider = OpenAIProvider(base_url=base_url, api_key=KEY)
    toolset = MCPToolset(mcp_url)
    agent = Agent(OpenAIChatModel("scripted-pydantic-ai", provider=provider), toolsets=[toolset])
    async with agent:
        tools = sorted(t.name for t in await toolset.client.list_tools())
        output = None
        async with agent.run_stream_events(PROMPT) as events:
            async for event in events:
                if isinstance(event, AgentRunResultEvent):
                    output = event.result.output
    return {"output": output, "tools": tools}


async def agents(base_url: str, mcp_url: str) -> dict[str, Any]:
    from agents import (
        Agent,
        OpenAIResponsesModel,
        Runner,
        set_tracing_disabled,
    )
    from agents.mcp import MCPServerStreamableHttp
    from openai import AsyncOpenAI

    set_tracing_disabled(True)  # no trace export: the network is the test's loopback only
    client = AsyncOpenAI(base_url=base_url, api_key=KEY, max_retries=0)
    model = OpenAIResponsesModel(model="scripted-agents", openai_client=client)
    async with MCPServerStreamableHttp({"url": mcp_url}, name="timed") as server:
        tools = sorted(t.name for t in await server.list_tools())
        agent = Agent(name="forecaster", model=model, mcp_servers=[server])
        result = Runner.run_streamed(agent, PROMPT)
        async for _ in result.stream_events():
            pass
    return {"output": result.final_output, "tools": tools}


async def loop(base_url: str, mcp_url: str) -> dict[str, Any]:
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=base_url, api_key=KEY, max_retries=0)
    async with (
        streamable_http_client(mcp_url) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        listed = (await session.list_tools()).tools
        tools = [
            {"type": "function", "function": {"name": t.name, "description": t.description or "",
                                              "parameters": t.input_schema}}
            for t in listed
        ]  # fmt: skip
        messages: list[dict[str, Any]] = [{"role": "user", "content": PROMPT}]
        while True:
            text, calls = await _streamed_turn(client, messages, tools)
            if not calls:
                return {"output": text, "tools": sorted(t.name for t in listed)}
            messages.append({"role": "assistant", "content": text or None, "tool_calls": calls})
            for call in calls:  # one after another: each waits for the one before it
                function = call["function"]
                result = await session.call_tool(
                    function["name"], json.loads(function["arguments"])
                )
                content = "".join(getattr(part, "text", "") for part in result.content)
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})


async def _streamed_turn(
    client: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> tuple[str, list[dict[str, Any]]]:
    """One streamed Chat Completions turn: its text and its calls, put together from the chunks."""
    stream = await client.chat.completions.create(
        model="scripted-loop", messages=messages, tools=tools, stream=True,
        stream_options={"include_usage": True},
    )  # fmt: skip
    text, calls = "", {}
    async for chunk in stream:
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for part in choice.delta.tool_calls or []:
                call = calls.setdefault(part.index, {"id": "", "type": "function",
                                                     "function": {"name": "", "arguments": ""}})  # fmt: skip
                call["id"] = part.id or call["id"]
                if part.function is not None:
                    call["function"]["name"] += part.function.name or ""
                    call["function"]["arguments"] += part.function.arguments or ""
    return text, [calls[index] for index in sorted(calls)]


RUNTIMES = {"pydantic-ai": pydantic_ai, "agents": agents, "loop": loop}

if __name__ == "__main__":
    runtime, base_url, mcp_url = sys.argv[1:4]
    print(json.dumps(asyncio.run(asyncio.wait_for(RUNTIMES[runtime](base_url, mcp_url), 60))))
