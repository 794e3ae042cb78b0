"""What the rules found in one exchange: the Verdict, whose fields are the log's contract."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, SkipValidation

from .built import builder, maker
from .definitions import ToolDefinitions
from .errors import ApiError
from .exchange import Transport
from .records import Call, HiddenText, LoopError, ToolChange, ToolResult
from .served import ToolServer
from .turn import Api

Outcome = Literal[
    "inspected", "skipped", "unparseable", "upstream_error", "client_gone", "not_read"
]
Scope = Literal["turn", "session", "tool"]


class ToolTime(BaseModel):
    """How long one answered call took: from the end of the response that issued it to the
    arrival of its result; and, when its run was seen (an MCP tools/call through tooltap),
    how long it ran, and where."""

    call_id: str
    """The call answered."""
    name: str | None = None
    """Its tool."""
    waited_ms: float
    """From the end of the response that issued the call to the arrival of its result."""
    ran_ms: float | None = None
    """How long its tools/call ran on its server, when tooltap saw it run."""
    server: str | None = None
    """The MCP server it ran on ("name version"), when seen."""
    late: bool = False
    """Answered past tooltap_tool_deadline."""
    issued_at: float | None = Field(default=None, exclude=True)
    """When the response that issued it ended (epoch seconds). Not logged, so None in a
    verdict read back from its JSON (the annotations tooltap web keeps on a flow)."""
    answered_at: float | None = Field(default=None, exclude=True)
    """When its result arrived; None likewise."""


class Rejected(BaseModel):
    """The API refused the request (4xx): its own words, and the local blockers."""

    status: int
    """The HTTP status the API answered with; for MCP, the JSON-RPC error code (-32602)."""
    type: str
    """The API's error type (invalid_request_error, invalid_params, ...), or "" when it gave
    none."""
    message: str
    """The API's own error message, as sent."""
    blockers: list[str] = Field(default_factory=list)
    """What in the declared strict tools or format the provider's strict subset refuses."""


class Verdict(BaseModel):
    """Everything the rules found in one exchange. Its fields are the log's contract."""

    api: Api | None
    """responses, chat or messages (the `api` label); None for an upstream refused at connect."""
    outcome: Outcome
    """inspected, skipped, unparseable, upstream_error, client_gone (the client hung up before
    any answer came) or not_read (an exchange whose body no dialect reads: an API tooltap knows
    and does not read, a path it does not read at all, or a model family with no tool calls
    tooltap reads; the reason says which): what became of the flow."""
    transport: Transport = "http"
    """http, or websocket for a turn of a Responses WebSocket or a Realtime session."""
    scope: Scope = "turn"
    """turn: one exchange or socket turn. session: what a Realtime session said outside its
    turns (an error that refused nothing, the calls still owed when it closed); no turn.
    tool: an exchange with a tool server (MCP): its calls and their results; no model turn."""
    reason: str | None = None
    """Why the outcome is not a plain inspected turn, or what was unusual about it."""
    status: int | None = None
    """The response's HTTP status; None when there was no response."""
    stream: bool = False
    """The response was an SSE stream."""
    model: str | None = None
    """The model the response names, else the one the request asked for."""
    request_model: str | None = None
    """The model the request asked for."""
    finish_reasons: list[str] = Field(default_factory=list)
    """Why the model stopped: finish_reason per choice, stop_reason, or the response's status."""
    usage: dict[str, int] = Field(default_factory=dict)
    """The tokens the response counts: input_tokens, output_tokens, and cached_input_tokens
    (Cohere), where it says."""
    response_id: str | None = None
    """The response's id (resp_..., chatcmpl-..., msg_...)."""
    state: str | None = None
    """The parallel/strict state; None when the exchange is not a finished turn."""
    detail: str | None = None
    """The state's explanation, with the call names."""
    format_state: str | None = None
    """The output-format state (advisory-schema, enforced, free-text, ...)."""
    format_detail: str | None = None
    """The format state's explanation."""
    calls: list[Call] = Field(default_factory=list)
    """Every client tool call in the response, with its raw arguments and their diagnostics;
    then the calls the provider ran inside the turn (hosted: true), checked the same way."""
    duplicates: dict[str, int] = Field(default_factory=dict)
    """Tool names called more than once in this turn, with how often."""
    loop_errors: list[LoopError] = Field(default_factory=list)
    """Tool-loop findings in the new part of the request's history."""
    tool_results: list[ToolResult] = Field(default_factory=list)
    """The tool results the request sent back, then those of the response's hosted calls; each
    ok or error (a tool failure)."""
    repairs: list[str] = Field(default_factory=list)
    """What to change, one line each, for the findings of this turn."""
    rejected: Rejected | None = None
    """Set when the API refused the request (4xx)."""
    output_types: list[str] = Field(default_factory=list)
    """The types of the response's output items or content blocks, in order."""
    stream_errors: list[ApiError] = Field(default_factory=list)
    """Errors inside a 200 stream: the API's own, or malformed_event for unreadable events."""
    session_errors: list[ApiError] = Field(default_factory=list)
    """Errors a Realtime session sent that refused no request (type: the error's code)."""
    awaiting: list[str] = Field(default_factory=list)
    """The call ids the client must answer in its next request."""
    duration_ms: float | None = None
    """From the request's first byte at the proxy to the response's last byte; None where the
    exchange carries no times."""
    first_token_ms: float | None = None
    """A stream's: from the request's end to the first event carrying model output (text,
    reasoning, or a call's name or arguments); None when the response was not streamed, or
    carried no output, or no times."""
    tool_wait_ms: float | None = None
    """On a request that answers calls: the longest wait among them (ToolTime.waited_ms)."""
    tool_times: list[ToolTime] = Field(default_factory=list)
    """Each call this request answers, timed (logged as tool_time lines). Set by the caller,
    which remembers when each call was issued."""
    more_calls: int = 0
    """Calls past the first MAX_CALLS: counted, not validated nor listed one by one."""
    unchecked: list[str] = Field(default_factory=list)
    """What was left unchecked to bound the work on one exchange, or unknown to it, and why."""
    server: str | None = None
    """A tool server's name and version, as its session's initialize said (scope tool)."""
    session: str | None = None
    """A tool server's session (Mcp-Session-Id), as a SHA-256 prefix: never the id itself."""
    rpc: list[str] = Field(default_factory=list)
    """The JSON-RPC methods the request sent to a tool server (tools/call, tools/list, ...)."""
    listed_tools: list[str] = Field(default_factory=list)
    """The tools a tools/list page named."""
    hidden_text: list[HiddenText] = Field(default_factory=list)
    """Characters no reader sees, where they do nothing visible, in a tool definition the
    exchange carried or in a tool result it sent back (the ASCII that tag characters spell)."""
    tool_changes: list[ToolChange] = Field(default_factory=list)
    """Tool definitions that differ from their pin (first seen, or the tools lock), and tools
    that appeared in or disappeared from a server's list: what changed, by path. Set by the
    caller, which keeps the pins."""
    definitions: SkipValidation[ToolDefinitions | None] = Field(default=None, exclude=True)
    """The tool definitions the exchange carried, for the caller's pins. Not logged."""
    tool_server: ToolServer | None = Field(default=None, exclude=True)
    """What the session knows of its tool server after this exchange, for the caller to keep
    and pass to the session's next exchange. Not logged."""

    @property
    def call_count(self) -> int:
        """Every client call the response made, listed or not."""
        return sum(1 for c in self.calls if not c.hosted) + self.more_calls

    @property
    def hosted_count(self) -> int:
        """The calls the provider ran inside the turn (hosted MCP)."""
        return sum(1 for c in self.calls if c.hosted)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


# A Verdict from the values inspect() typed itself: not validated again (core/built.py).
build_verdict = builder(Verdict)
verdict_of = maker(Verdict)  # the same, from a dict of the fields (no keywords to gather)
make_tool_time = maker(ToolTime)  # from the clock's own floats and ids, likewise
