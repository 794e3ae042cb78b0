"""The records core reports: a call and its argument errors, a tool result, a loop rule broken,
hidden text, a changed definition and where a definition came from; and the ceilings a strict
schema is held to. Their fields are the structured log's contract (the Verdict,
tooltap.core.verdict, holds them).

They are pydantic models, or read by one, kept apart from the code that reads them off the wire
(arguments, loop, definitions, jsontext, hidden, schema) so that code can be compiled: mypyc
compiles no pydantic model, nor a module that defines one, and pydantic cannot read a compiled
class (setup.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# What a run of hidden characters is, by its first (tooltap.core.hidden).
Kind = Literal["tag", "variation-selector", "bidi", "zero-width", "format"]


class Hidden(BaseModel):
    """A run of characters no reader sees, where they do nothing visible."""

    model_config = ConfigDict(frozen=True)

    where: str
    """Where the text is: a JSON path in the definition or result ($.description, ...)."""
    kind: Kind
    """tag, variation-selector, bidi, zero-width or format (the run's first, in that order)."""
    at: int
    """The run's offset in its text, in characters."""
    count: int
    """How many hidden characters the run holds."""
    chars: list[str]
    """The distinct code points of the run, in order (U+200B, ...)."""
    spelled: str | None = None
    """What the run spells: the ASCII of tag characters, or the bytes a run of variation
    selectors encodes (UTF-8); None when it spells nothing."""


class Limits(BaseModel):
    """The documented ceilings for a strict schema. None switches a check off."""

    model_config = ConfigDict(frozen=True)

    max_depth: int = 5
    """Levels of nesting."""
    max_properties: int = 5000
    """Properties in the whole schema."""
    max_enum_values: int = 1000
    """Values in one enum."""
    max_total_string_chars: int | None = None
    """Characters in all property names and enum values together."""
    large_enum_values: int = 250
    """A string enum with more values than this is a large one..."""
    max_large_enum_chars: int | None = None
    """...and its values may total at most this many characters."""


class ParseError(BaseModel):
    """Why a JSON text did not parse: the exception type, message and offset."""

    model_config = ConfigDict(frozen=True)

    type: str
    """JSONDecodeError, MissingArguments (no arguments key) or StreamError (lost in the stream)."""
    message: str
    """What the parser said."""
    position: int | None = None
    """The character offset where parsing stopped, when known."""


class SchemaError(BaseModel):
    """One way the arguments break the tool's declared JSON Schema."""

    path: str
    """Where in the arguments, as $.a.b[0]."""
    message: str
    """The validator's message (it may quote the value)."""


class Call(BaseModel):
    """One tool call and what went wrong with its arguments."""

    call_id: str
    """The id its result must carry (call_id, tool_call id or tool_use id); "" if none."""
    name: str
    """The tool's name."""
    type: str
    """function_call, custom_tool_call (free-form input), tool_use, or a hosted call's
    mcp_call (Responses) or mcp_tool_use (Messages)."""
    arguments_raw: str
    """The arguments exactly as received (Anthropic's input object as compact JSON)."""
    parse_error: ParseError | None = None
    """Why the arguments are not JSON; None when they parse."""
    schema_errors: list[SchemaError] = Field(default_factory=list)
    """Every violation of the tool's declared schema, by path (at most 20, then a note)."""
    schema_problem: str | None = None
    """Why the declared schema itself could not be applied."""
    hosted: bool = False
    """The provider ran it inside the turn (a hosted MCP call): no client answers it, and it
    takes no part in the turn's state."""
    server: str | None = None
    """A hosted MCP call's server: its server_label (Responses) or server_name (Messages)."""


class LoopError(BaseModel):
    """A tool-loop rule the request broke."""

    rule: str
    """One of RULES: unanswered-call, orphan-result, duplicate-result, ..."""
    ids: list[str]
    """The call ids involved."""
    where: str
    """Where in the request: input.3, messages.2.content.1, or previous_response_id ..."""
    repair: str
    """What to change in the application's loop."""


class ToolResult(BaseModel):
    """A tool result the request sent back."""

    call_id: str
    """The call it answers."""
    where: str
    """Where in the request."""
    outcome: Literal["ok", "error"]
    """error: flagged as a failure (is_error, or an error payload such as {"ok": false})."""
    schema_errors: list[SchemaError] = Field(default_factory=list)
    """A tool server's result (MCP) against the tool's outputSchema: every way its
    structuredContent breaks it, by path, or that it declared one and sent none."""
    schema_problem: str | None = None
    """Why the outputSchema itself could not be applied."""
    name: str | None = None
    """The tool, when no call of the same exchange names it (an MCP task's result, fetched
    after the call that made the task)."""
    hidden: list[Hidden] = Field(default_factory=list, exclude=True)
    """Hidden characters in what the result says (logged as the verdict's hidden_text)."""
    unnamed: str | None = Field(default=None, exclude=True)
    """The call it answers, when its API gave that call no id: its tool and arguments, as
    arguments.unnamed_call makes them (for the caller's tool times). Not logged."""


class ToolChange(BaseModel):
    """A definition that differs from its pin, or a tool that appeared or disappeared."""

    model_config = ConfigDict(frozen=True)

    source: str
    """Where the tool comes from: `mcp <name> at <endpoint>`, `mcp <label> hosted for app
    <app>`, or `app <label or key hash>`."""
    server: str | None = None
    """The MCP server's name (a hosted server's label); None for an application's tools."""
    tool: str
    """The tool's name."""
    change: Literal["changed", "appeared", "disappeared"]
    """changed: its definition differs; appeared or disappeared: from the server's list."""
    against: Literal["first-seen", "lock"]
    """What it was compared with: the definition first seen (trust on first use), or the
    tools lock."""
    before: str | None = None
    """The pinned definition's fingerprint (SHA-256, first 16 hex digits)."""
    after: str | None = None
    """The new definition's fingerprint (first 16 hex digits)."""
    announced: bool = False
    """The server said its list changed (notifications/tools/list_changed) before listing it."""
    details: list[str] = Field(default_factory=list)
    """What changed, a line each: a JSON path and the values before and after."""


class HiddenText(Hidden):
    """Hidden characters in a tool's definition or in a tool's result."""

    part: Literal["definition", "result"]
    """definition: in what a tool's definition says; result: in what a tool returned."""
    tool: str
    """The tool's name; for a result, the call id when the tool is unknown."""


# Plain data, but read by pydantic (a tools lock's entry names its source), which cannot read the
# annotations of a compiled class: kept here, interpreted.
@dataclass(frozen=True, slots=True)
class Origin:
    """Where a definition came from, as far as the exchange says.

    kind: mcp (an MCP server listed it, direct or hosted by a model API) or app (the
    application declared it in a model request). server: an MCP server's name for itself
    (initialize's serverInfo.name), or a hosted server's label. endpoint: where it was read,
    an MCP server's endpoint or the model API endpoint an application sent it to (the URL
    without query); None for a hosted server. agent: an application's agent, the SHA-256 of
    the request's instructions (system and developer text), 16 hex digits: one application's
    agents may each declare one tool name their own way, as may a provider's schema rules.
    """

    kind: Literal["mcp", "app"]
    server: str | None = None
    endpoint: str | None = None
    agent: str | None = None
