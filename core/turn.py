"""A turn, whatever the dialect: the tools declared, the calls made, and the settings that matter.

Every dialect (tooltap.core.dialects) reads its bodies into this one shape, and the rules read
only this shape. The readers walk raw JSON defensively rather than through strict models: real
traffic carries junk (nulls, wrong types, unknown items) and one bad item must not hide the good
ones.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .jsontext import dumps
from .records import Hidden
from .shapes import as_dict, as_list, as_str

Api = Literal[
    "responses",
    "chat",
    "messages",
    "realtime",
    "converse",
    "gemini",
    "mcp",
    "ollama",
    "gemini_live",
    "cohere",
]
APIS: tuple[Api, ...] = (
    "responses", "chat", "messages", "realtime", "converse", "gemini", "mcp", "ollama",
    "gemini_live", "cohere",
)  # fmt: skip


# The shapes a reading fills are plain data, not validated models: every turn makes several, and
# the readers give each field its type (tooltap.core.shapes). Read-only once made (not frozen:
# a frozen dataclass sets each field through object.__setattr__, three times the cost). Tool and
# ToolCall also take their fields by position: CPython 3.12 gathers a class call's keywords into
# a dict, and their makers (Tool.declared, make_call) run for every tool and call. Their
# __init__ is written out, not generated: compiled (setup.py), a dataclass's generated __init__
# stays interpreted.
@dataclass(slots=True, init=False)
class Tool:
    """A tool the client declared. type is function, custom, or a provider's own."""

    name: str
    type: str
    strict: bool | None
    parameters: Any
    namespace: str | None
    description: Any  # what the model reads of it, besides its name and parameters
    annotations: Any  # a hosted MCP server's hints (readOnlyHint, ...)

    def __init__(  # noqa: PLR0917 - by position, as the makers call it
        self,
        name: str,
        type: str = "function",
        strict: bool | None = None,
        parameters: Any = None,
        namespace: str | None = None,
        description: Any = None,
        annotations: Any = None,
    ) -> None:
        self.name = name
        self.type = type
        self.strict = strict
        self.parameters = parameters
        self.namespace = namespace
        self.description = description
        self.annotations = annotations

    @classmethod
    def declared(
        cls,
        name: str,
        kind: str,
        holder: Mapping[str, Any],
        schema: str = "parameters",
        *,
        namespace: str | None = None,
    ) -> Tool:
        """A tool as a request declares it, its fields in `holder`: a function's strict and
        schema (under `schema`) are read; a custom tool has neither. Pure."""
        description = holder.get("description")
        if kind == "function":
            strict = holder.get("strict")
            strict = strict if strict is True or strict is False else None
            return cls(name, kind, strict, holder.get(schema), namespace, description)
        return cls(name, kind, None, None, namespace, description)


@dataclass(slots=True, init=False)
class ToolCall:
    """A call the model made that the client executes. arguments_raw is as received."""

    call_id: str
    name: str
    type: str
    arguments_raw: str
    namespace: str | None
    arguments_missing: bool  # the call had no arguments key at all
    server: str | None  # a hosted MCP call's server (its label or name)

    def __init__(  # noqa: PLR0917 - by position, as make_call calls it
        self,
        call_id: str,
        name: str,
        type: str,
        arguments_raw: str,
        namespace: str | None = None,
        arguments_missing: bool = False,
        server: str | None = None,
    ) -> None:
        self.call_id = call_id
        self.name = name
        self.type = type
        self.arguments_raw = arguments_raw
        self.namespace = namespace
        self.arguments_missing = arguments_missing
        self.server = server


@dataclass(slots=True, kw_only=True)
class HostedResult:
    """How a call the provider ran inside the turn ended, as the response says."""

    call_id: str
    where: str  # where in the response
    failed: bool
    hidden: list[Hidden] = field(default_factory=list)  # hidden characters in its output


@dataclass(slots=True, init=False)
class Turn:
    """One request/response pair, whatever the dialect."""

    api: Api
    model: str | None
    response_id: str | None
    tools: list[Tool]
    parallel_tool_calls: bool | None
    output_format: dict[str, Any]
    calls: list[ToolCall]
    awaiting: list[str]
    output_types: list[str]
    # The tools tool_choice leaves callable, by name: None is all of them.
    callable_names: list[str] | None
    status: str | None  # Responses only: queued, in_progress, completed, ...
    request_model: str | None  # the model the request asked for
    finish_reasons: list[str]  # why the model stopped, per choice
    usage: dict[str, int]  # input_tokens, output_tokens
    # Calls the provider ran inside the turn (hosted MCP): checked and counted, but no client
    # answers them, so they take no part in the state, the loop or awaiting.
    hosted_calls: list[ToolCall]
    # The tools hosted servers listed (namespace: the server), for those calls' arguments.
    hosted_tools: list[Tool]
    hosted_results: list[HostedResult]
    # The provider holds every call to its tool's schema, `strict` or not, and documents no
    # conflict with parallel calls (xAI's Grok models).
    calls_held: bool
    # The server holds a json_schema format to its schema, `strict` or not (xAI's; Ollama's
    # and llama.cpp's, which sample under a grammar built from it).
    format_held: bool

    # Written out, not generated, as Tool's: every exchange makes a Turn.
    def __init__(
        self,
        *,
        api: Api,
        model: str | None = None,
        response_id: str | None = None,
        tools: list[Tool] | None = None,
        parallel_tool_calls: bool | None = None,
        output_format: dict[str, Any] | None = None,
        calls: list[ToolCall] | None = None,
        awaiting: list[str] | None = None,
        output_types: list[str] | None = None,
        callable_names: list[str] | None = None,
        status: str | None = None,
        request_model: str | None = None,
        finish_reasons: list[str] | None = None,
        usage: dict[str, int] | None = None,
        hosted_calls: list[ToolCall] | None = None,
        hosted_tools: list[Tool] | None = None,
        hosted_results: list[HostedResult] | None = None,
        calls_held: bool = False,
        format_held: bool = False,
    ) -> None:
        self.api = api
        self.model = model
        self.response_id = response_id
        self.tools = [] if tools is None else tools
        self.parallel_tool_calls = parallel_tool_calls
        self.output_format = {} if output_format is None else output_format
        self.calls = [] if calls is None else calls
        self.awaiting = [] if awaiting is None else awaiting
        self.output_types = [] if output_types is None else output_types
        self.callable_names = callable_names
        self.status = status
        self.request_model = request_model
        self.finish_reasons = [] if finish_reasons is None else finish_reasons
        self.usage = {} if usage is None else usage
        self.hosted_calls = [] if hosted_calls is None else hosted_calls
        self.hosted_tools = [] if hosted_tools is None else hosted_tools
        self.hosted_results = [] if hosted_results is None else hosted_results
        self.calls_held = calls_held
        self.format_held = format_held

    def tool(self, call: ToolCall) -> Tool | None:
        """The declared tool a call is for: by namespace and name, else by name alone.

        Tools loaded by tool search are called with a namespace equal to their own
        name while tools[] lists them flat.
        """
        by_name = None
        for tool in self.tools:
            if tool.name == call.name:
                if tool.namespace == call.namespace:
                    return tool
                by_name = by_name or tool
        return by_name

    def hosted_tool(self, call: ToolCall) -> Tool | None:
        """The tool a hosted call's server listed under its name, if the turn holds that list."""
        for tool in self.hosted_tools:
            if tool.namespace == call.server and tool.name == call.name:
                return tool
        return None

    def callable_tools(self) -> list[Tool]:
        if self.callable_names is None:
            return self.tools
        return [t for t in self.tools if t.name in self.callable_names]

    def applied_format(self) -> dict[str, Any]:
        """The output format as the server applies it: one a server holds to its schema reads
        as strict."""
        return _held(self.output_format) if self.format_held else self.output_format

    def loose_tools(self) -> list[str]:
        """The callable function tools not held to their schemas, by name (schema.judge)."""
        if self.calls_held:
            return []
        return [
            t.name or "unnamed"
            for t in self.callable_tools()
            if (t.type or "function") == "function" and t.strict is not True
        ]


def _held(output_format: dict[str, Any]) -> dict[str, Any]:
    """A Chat json_schema format as a server that holds it to its schema applies it: strict.
    Only where Chat nests it (under json_schema): a schema beside it is read by none. Pure."""
    nested = output_format.get("json_schema")
    if output_format.get("type") != "json_schema" or not isinstance(nested, dict):
        return output_format
    return {**output_format, "json_schema": {**nested, "strict": True}}


_PLACEHOLDER = re.compile(r"\w+\[\d+\]\Z")


def placeholder(where: str, index: int) -> str:
    """The id a call is logged under when its API gave it none: where it sat
    (`functionCall[0]`). Pure."""
    return f"{where}[{index}]"


def given_id(call_id: str) -> bool:
    """Is this an id the API gave the call (not none, not a placeholder)? Only such an id ties
    a call to its answer across exchanges. Pure."""
    # A placeholder ends in "]": any other id is told at once (most ids are the API's own).
    return bool(call_id) and (call_id[-1] != "]" or _PLACEHOLDER.match(call_id) is None)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def tokens(
    input: Any = None, output: Any = None, cached: Any = None, reasoning: Any = None
) -> dict[str, int]:
    """The token counts a response states, by the names the log uses (input_tokens,
    output_tokens, cached_input_tokens, reasoning_tokens): input counts cached tokens and
    output reasoning tokens, as OpenTelemetry's GenAI conventions have them. A count the API
    did not give, or gave as no whole number, is left out: never 0 for unknown. Pure."""
    # Spelled out rather than looped: every turn comes here. type() is int: JSON's whole
    # numbers, never a boolean.
    counted = {}
    if type(input) is int and input >= 0:
        counted["input_tokens"] = input
    if type(output) is int and output >= 0:
        counted["output_tokens"] = output
    if type(cached) is int and cached >= 0:
        counted["cached_input_tokens"] = cached
    if type(reasoning) is int and reasoning >= 0:
        counted["reasoning_tokens"] = reasoning
    return counted


def plus(base: Any, *more: Any) -> int | None:
    """base with the counts beside it that the API keeps apart (cache reads and writes,
    thoughts) added; None when base is not given. Pure."""
    if _count(base) is None:
        return None
    return int(base) + sum(n for n in map(_count, more) if n is not None)


def raw_arguments(value: Any) -> str:
    """Arguments as text: strings as received, anything else as compact JSON."""
    if isinstance(value, str):
        return value
    return "" if value is None else dumps(value)


def make_call(
    call_id: str,
    name: str,
    kind: str,
    holder: Mapping[str, Any],
    key: str,
    *,
    namespace: str | None = None,
    server: str | None = None,
) -> ToolCall:
    """A call whose arguments sit under `key` in `holder`: kept as received, absent noted."""
    value = holder.get(key)
    raw = value if isinstance(value, str) else raw_arguments(value)
    return ToolCall(
        call_id, name, kind, raw, namespace, value is None and key not in holder, server
    )


def choice_name(choice: Mapping[str, Any]) -> str:
    """The tool name in a tool_choice entry: flat, or nested under its type."""
    kind = as_str(choice.get("type"))
    return as_str(choice.get("name")) or as_str(as_dict(choice.get(kind)).get("name"))


def callable_names(tool_choice: Any) -> list[str] | None:
    """Which tools tool_choice leaves callable, by name; None when it narrows nothing. Pure.

    "none" leaves no tool; allowed_tools (flat on Responses, nested on Chat)
    leaves those listed; a forced function, custom tool or Anthropic `tool`
    leaves that one. Hosted tools in the list have no name and count for nothing.
    """
    if tool_choice == "none":
        return []
    choice = as_dict(tool_choice)
    kind = choice.get("type")
    if kind == "none":
        return []
    if kind == "allowed_tools":
        listed = choice.get("tools", as_dict(choice.get("allowed_tools")).get("tools"))
        return [name for name in map(choice_name, map(as_dict, as_list(listed))) if name]
    if kind in ("function", "custom", "tool"):
        return [choice_name(choice)] if choice_name(choice) else None
    return None
