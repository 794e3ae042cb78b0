"""A tool server's side of the loop: what one session listed, and what one exchange with it said.

A model turn is read from one request and its response; a tool server's call is checked against
what the same session said before (the server's name, the tools and their schemas). The caller
keeps a ToolServer per session and passes it in; the reading gives back the next one. Pure data.
"""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import parse_qs, urlsplit

from pydantic import BaseModel, ConfigDict, Field

from .errors import ApiError
from .records import Call, LoopError, ToolResult

# The header that ties a tool server's session together (MCP's Streamable HTTP; the server sets
# it in its answer to initialize).
SESSION_HEADER = "mcp-session-id"
SESSION_PARAMETERS = ("session_id", "sessionId")  # the legacy transport's, in the POST's query


def query_session(url: str) -> str:
    """The legacy HTTP+SSE session a POST names in its query: `session_id` (the Python SDK) or
    `sessionId` (the TypeScript SDK); "" when it names none. Pure."""
    try:
        query = parse_qs(urlsplit(url).query)
    except ValueError:
        return ""
    return next((query[name][0] for name in SESSION_PARAMETERS if query.get(name)), "")


def session_tag(session_id: str) -> str | None:
    """A session id's stand-in for logs: its SHA-256, shortened. The id itself lets whoever
    holds it speak in the session, so it is never logged. Pure."""
    if not session_id:
        return None
    return hashlib.sha256(session_id.encode("utf-8", "replace")).hexdigest()[:16]


class ListedTool(BaseModel):
    """A tool a server listed, with the schemas its calls and results are checked against."""

    model_config = ConfigDict(frozen=True)

    name: str
    input_schema: Any = None
    output_schema: Any = None


class OpenCall(BaseModel):
    """A tools/call whose answer comes in a later request: one answered with a task (its result
    comes with tasks/result, or a tasks/get that carries it), or input_required (protocol
    2026-07-28: the client calls again, and the retry's answer is the call's). Whichever request
    brings its result, the result is logged under the call's own id: one id from the call's
    first request to its last, which is what times it. Ids only."""

    model_config = ConfigDict(frozen=True)

    name: str  # the tool
    # The JSON-RPC id of the tools/call that made it (a retry that could not be tied to its
    # call stands for it, under its own id).
    call_id: str
    fetched: bool = False  # its result was checked: fetched again, it is not counted again


class ToolServer(BaseModel):
    """What a session has said about its server so far: ids and schemas, never arguments."""

    model_config = ConfigDict(frozen=True)

    server: str | None = None  # "name version", as initialize or server/discover named it
    name: str | None = None  # the name alone: what its tools' pins are kept under
    tools: dict[str, ListedTool] = Field(default_factory=dict)
    complete: bool = False  # the whole list was seen, from its first page to its last
    fixed: bool = False  # initialize said the list does not change during the session
    next_cursor: str | None = None  # the page a list seen from its start continues with
    # Calls whose answer comes in a later request, oldest first: by task id (a fetched one
    # stays, so that its result fetched again is not counted again), and by what the retry after
    # an input_required answer will carry (None: more than one call waits under it).
    tasks: dict[str, OpenCall] = Field(default_factory=dict)
    retries: dict[str, OpenCall | None] = Field(default_factory=dict)
    announced: bool = False  # notifications/tools/list_changed came, and no whole list since


class Served(BaseModel):
    """What one exchange with a tool server said, checked against its session."""

    methods: list[str] = Field(default_factory=list)  # the JSON-RPC methods the request sent
    calls: list[Call] = Field(default_factory=list)
    results: list[ToolResult] = Field(default_factory=list)
    loop_errors: list[LoopError] = Field(default_factory=list)
    error: tuple[int, ApiError] | None = None  # the first JSON-RPC error, with its code
    listed: list[str] = Field(default_factory=list)  # the tools this exchange listed
    unchecked: list[str] = Field(default_factory=list)
    repairs: list[str] = Field(default_factory=list)
    server: ToolServer = Field(default_factory=ToolServer)  # the session after this exchange
    known: bool = False  # something of the session was remembered before this exchange
    definitions: list[dict[str, Any]] = Field(default_factory=list)  # the tools listed, as sent
    announced: bool = False  # the list was read after the server said it changed
