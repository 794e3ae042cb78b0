"""The demo's steps, in the order it runs them, and the upstream's routes to their replies.

Between them the steps produce every kind of finding tooltap reports. A step's client sends
`x-demo-step` so the upstream knows which reply to play; each API's steps, and the shapes of its
replies, are in a module of their own (demo_openai, demo_anthropic, demo_converse, demo_gemini,
demo_live, demo_ollama, demo_cohere, demo_mcp).
"""

from __future__ import annotations

from tooltap.core.wire import detect_socket

from ..harness.replay import Reply, Seen
from ..harness.sockets import Step as SocketStep
from . import (
    demo_anthropic,
    demo_cohere,
    demo_converse,
    demo_gemini,
    demo_live,
    demo_mcp,
    demo_ollama,
    demo_openai,
)
from .demo_agent import WEATHER, Clients, Step, client_errors, json_reply, status_of

__all__ = ["STEPS", "Clients", "client_errors", "route", "socket_route", "status_of"]

SOCKET_STEPS = {
    "responses-websocket": demo_openai.SOCKET_SCRIPT,
    "gemini-live": demo_live.SCRIPT,
}

STEPS: list[Step] = [
    *demo_openai.STEPS,
    *demo_anthropic.STEPS,
    *demo_converse.STEPS,
    *demo_gemini.STEPS,
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
        lambda c: demo_ollama.chat(c.base_url, c.headers, demo_openai.chat_tools(strict=False)),
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
