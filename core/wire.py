"""One Turn for every API: OpenAI Responses, OpenAI Chat Completions, Anthropic Messages.

The readers walk raw JSON defensively rather than through strict models:
real traffic carries junk (nulls, wrong types, unknown items) and one bad item
must not hide the good ones. What they find lands in pydantic models.

Tools and settings come from the request; for the Responses API the
response's echo wins, because an absent `strict` resolves on the server.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

from .jsontext import dumps
from .shapes import as_bool, as_dict, as_list, as_str

Api = Literal["responses", "chat", "messages", "realtime"]
APIS: tuple[Api, ...] = ("responses", "chat", "messages", "realtime")

# Responses output items the client must answer, and the key that ids them.
CLIENT_CALL_TYPES = {
    "function_call": "call_id",
    "custom_tool_call": "call_id",
    "computer_call": "call_id",
    "local_shell_call": "call_id",
    "shell_call": "call_id",
    "apply_patch_call": "call_id",
    "mcp_approval_request": "id",
    "tool_search_call": "call_id",  # only with execution: "client"
}
# Items that answer a call, and the key that holds the call id. A
# local_shell_call_output carries it in `id` (openai-python LocalShellCallOutput).
RESULT_TYPES = {
    "function_call_output": "call_id",
    "custom_tool_call_output": "call_id",
    "computer_call_output": "call_id",
    "local_shell_call_output": "call_id",
    "shell_call_output": "call_id",
    "apply_patch_call_output": "call_id",
    "tool_search_output": "call_id",
    "mcp_approval_response": "approval_request_id",
}
# A Responses object in one of these has not finished: it is not a turn yet.
UNFINISHED = ("queued", "in_progress")


def client_call_id(item: Mapping[str, Any]) -> str:
    """The id a Responses item must be answered with, or "" when nothing answers it. Pure.

    A tool search the server ran, and a shell call run in a hosted container,
    are answered by the provider, not the client.
    """
    kind = as_str(item.get("type"))
    if kind not in CLIENT_CALL_TYPES:
        return ""
    if kind == "tool_search_call" and item.get("execution") != "client":
        return ""
    if kind == "shell_call" and as_dict(item.get("environment")).get("type") not in (None, "local"):
        return ""
    return as_str(item.get(CLIENT_CALL_TYPES[kind]))


def result_call_ids(item: Mapping[str, Any]) -> list[str]:
    """The call ids a Responses result item may be answering, most likely first. Pure."""
    kind = as_str(item.get("type"))
    if kind not in RESULT_TYPES or item.get("execution") == "server":
        return []
    ids = [as_str(item.get(RESULT_TYPES[kind]))]
    if kind == "local_shell_call_output":
        ids.append(as_str(item.get("id")))
    return [i for i in dict.fromkeys(ids) if i]


def is_retrieval(method: str, path: str) -> bool:
    """GET .../responses/{id}: a stored or background response read back (or resumed). Pure."""
    head, _, last = path.rstrip("/").rpartition("/")
    return method.upper() == "GET" and head.endswith("/responses") and bool(last)


def detect_api(method: str, url: str) -> Api | None:
    """Which API a request speaks, from its method and path. Pure."""
    try:
        path = urlsplit(url).path.rstrip("/")
    except ValueError:
        return None
    if is_retrieval(method, path):
        return "responses"
    if method.upper() != "POST":
        return None
    if path.endswith("/chat/completions"):
        return "chat"
    if path.endswith("/responses"):
        return "responses"
    # OpenAI's Assistants API also has .../threads/{id}/messages.
    if path.endswith("/messages") and "/threads/" not in path:
        return "messages"
    return None


def detect_socket(url: str) -> Api | None:
    """Which API a WebSocket speaks, from its upgrade request's path. Pure.

    .../responses is the Responses WebSocket mode (OpenAI, Azure, compatible
    hosts); .../realtime is the Realtime API (Azure's too).
    """
    try:
        path = urlsplit(url).path.rstrip("/")
    except ValueError:
        return None
    if path.endswith("/responses"):
        return "responses"
    if path.endswith("/realtime"):
        return "realtime"
    return None


class Tool(BaseModel):
    """A tool the client declared. type is function, custom, or a provider's own."""

    model_config = ConfigDict(frozen=True)

    name: str
    type: str = "function"
    strict: bool | None = None
    parameters: Any = None
    namespace: str | None = None


class ToolCall(BaseModel):
    """A call the model made that the client executes. arguments_raw is as received."""

    model_config = ConfigDict(frozen=True)

    call_id: str
    name: str
    type: str
    arguments_raw: str
    namespace: str | None = None
    arguments_missing: bool = False  # the call had no arguments key at all


class Turn(BaseModel):
    """One request/response pair, whatever the dialect."""

    api: Api
    model: str | None = None
    response_id: str | None = None
    tools: list[Tool] = Field(default_factory=list)
    parallel_tool_calls: bool | None = None
    output_format: dict[str, Any] = Field(default_factory=dict)
    calls: list[ToolCall] = Field(default_factory=list)
    awaiting: list[str] = Field(default_factory=list)
    output_types: list[str] = Field(default_factory=list)
    # The tools tool_choice leaves callable, by name: None is all of them.
    callable_names: list[str] | None = None
    status: str | None = None  # Responses only: queued, in_progress, completed, ...
    request_model: str | None = None  # the model the request asked for
    finish_reasons: list[str] = Field(default_factory=list)  # why the model stopped, per choice
    usage: dict[str, int] = Field(default_factory=dict)  # input_tokens, output_tokens

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

    def callable_tools(self) -> list[Tool]:
        if self.callable_names is None:
            return self.tools
        return [t for t in self.tools if t.name in self.callable_names]

    def as_response(self) -> dict[str, Any]:
        """This turn in the Responses-API shape that the seed rules read.

        Only the tools tool_choice left callable are shown: a tool that cannot be
        called cannot put a turn at risk.
        """
        response: dict[str, Any] = {
            "tools": [
                {"type": t.type, "name": t.name, "strict": t.strict, "parameters": t.parameters}
                for t in self.callable_tools()
            ],
            "output": [
                {
                    "type": "custom_tool_call" if c.type == "custom_tool_call" else "function_call",
                    "name": c.name,
                    "call_id": c.call_id,
                }
                for c in self.calls
            ],
        }
        if self.parallel_tool_calls is not None:
            response["parallel_tool_calls"] = self.parallel_tool_calls
        if self.output_format:
            response["text"] = {"format": self.output_format}
        return response


def _raw(value: Any) -> str:
    """Arguments as text: strings as received, anything else as compact JSON."""
    if isinstance(value, str):
        return value
    return "" if value is None else dumps(value)


def _call(
    call_id: str, name: str, kind: str, holder: Mapping[str, Any], key: str, **extra: Any
) -> ToolCall:
    return ToolCall(
        call_id=call_id,
        name=name,
        type=kind,
        arguments_raw=_raw(holder.get(key)),
        arguments_missing=key not in holder,
        **extra,
    )


def _choice_name(choice: Mapping[str, Any]) -> str:
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
        return [name for name in map(_choice_name, map(as_dict, as_list(listed))) if name]
    if kind in ("function", "custom", "tool"):
        return [_choice_name(choice)] if _choice_name(choice) else None
    return None


# --- OpenAI Responses -------------------------------------------------------


def _responses_tools(tools: Any, namespace: str | None = None) -> list[Tool]:
    out: list[Tool] = []
    for tool in map(as_dict, as_list(tools)):
        kind = as_str(tool.get("type")) or "function"
        name = as_str(tool.get("name")).strip()
        if kind == "namespace" and namespace is None:
            out.extend(_responses_tools(tool.get("tools"), name or None))
        elif kind in ("function", "custom") and name:
            out.append(
                Tool(
                    name=name,
                    type=kind,
                    strict=as_bool(tool.get("strict")) if kind == "function" else None,
                    parameters=tool.get("parameters") if kind == "function" else None,
                    namespace=namespace,
                )
            )
    return out


def _delivered_tools(items: list[Any]) -> list[Any]:
    """Tool definitions that arrive as items: additional_tools, and tool search results."""
    found: list[Any] = []
    for item in map(as_dict, items):
        if item.get("type") in ("additional_tools", "tool_search_output"):
            found.extend(as_list(item.get("tools")))
    return found


def _unique(tools: list[Tool]) -> list[Tool]:
    seen: set[tuple[str | None, str]] = set()
    out = []
    for tool in tools:
        if (tool.namespace, tool.name) not in seen:
            seen.add((tool.namespace, tool.name))
            out.append(tool)
    return out


def _responses_turn(request: Mapping[str, Any], response: Mapping[str, Any]) -> Turn:
    def setting(key: str) -> Any:
        return response[key] if key in response else request.get(key)

    output = [as_dict(item) for item in as_list(response.get("output"))]
    # A hosted call (a shell in a container) comes back with its output beside it.
    answered_here = {i for item in output for i in result_call_ids(item)}
    calls: list[ToolCall] = []
    awaiting: list[str] = []
    for item in output:
        kind = as_str(item.get("type"))
        call_id = client_call_id(item)
        if call_id and call_id not in answered_here:
            awaiting.append(call_id)
        name = as_str(item.get("name")).strip()
        if kind in ("function_call", "custom_tool_call") and name:
            key = "input" if kind == "custom_tool_call" else "arguments"
            namespace = as_str(item.get("namespace")) or None
            calls.append(
                _call(as_str(item.get("call_id")), name, kind, item, key, namespace=namespace)
            )
    # Tools can also arrive in the conversation: items the client appends
    # (additional_tools, a client tool search's output) and a server tool
    # search's output in this response.
    delivered = _delivered_tools(as_list(request.get("input"))) + _delivered_tools(output)
    return Turn(
        api="responses",
        model=as_str(response.get("model")) or as_str(request.get("model")) or None,
        response_id=as_str(response.get("id")) or None,
        tools=_unique(_responses_tools(setting("tools")) + _responses_tools(delivered)),
        parallel_tool_calls=as_bool(setting("parallel_tool_calls")),
        output_format=dict(as_dict(as_dict(setting("text")).get("format"))),
        calls=calls,
        awaiting=awaiting,
        output_types=[as_str(item.get("type")) for item in output],
        callable_names=callable_names(setting("tool_choice")),
        status=as_str(response.get("status")) or None,
    )


# --- OpenAI Chat Completions ------------------------------------------------


def _chat_tools(request: Mapping[str, Any]) -> list[Tool]:
    out: list[Tool] = []
    for tool in map(as_dict, as_list(request.get("tools"))):
        kind = as_str(tool.get("type")) or "function"
        inner = as_dict(tool.get(kind))
        name = as_str(inner.get("name")).strip()
        if kind in ("function", "custom") and name:
            out.append(
                Tool(
                    name=name,
                    type=kind,
                    strict=as_bool(inner.get("strict")) if kind == "function" else None,
                    parameters=inner.get("parameters") if kind == "function" else None,
                )
            )
    for legacy in map(as_dict, as_list(request.get("functions"))):
        name = as_str(legacy.get("name")).strip()
        if name:
            out.append(
                Tool(
                    name=name,
                    strict=as_bool(legacy.get("strict")),
                    parameters=legacy.get("parameters"),
                )
            )
    return out


def _chat_turn(request: Mapping[str, Any], response: Mapping[str, Any]) -> Turn:
    # n > 1 gives alternative completions, not parallel calls: read choice 0.
    choices = [c for c in as_list(response.get("choices")) if isinstance(c, dict)]
    first = next((c for c in choices if c.get("index", 0) == 0), choices[0] if choices else {})
    message = as_dict(first.get("message"))
    calls: list[ToolCall] = []
    for call in map(as_dict, as_list(message.get("tool_calls"))):
        kind = as_str(call.get("type")) or "function"
        inner = as_dict(call.get(kind))
        name = as_str(inner.get("name")).strip()
        if kind == "function" and name:
            calls.append(_call(as_str(call.get("id")), name, "function_call", inner, "arguments"))
        elif kind == "custom" and name:
            calls.append(_call(as_str(call.get("id")), name, "custom_tool_call", inner, "input"))
    legacy = as_dict(message.get("function_call"))
    if as_str(legacy.get("name")).strip():
        calls.append(
            _call("", as_str(legacy.get("name")).strip(), "function_call", legacy, "arguments")
        )
    types = [
        kind
        for kind, present in (
            ("text", message.get("content")),
            ("refusal", message.get("refusal")),
            ("tool_calls", message.get("tool_calls")),
            ("function_call", legacy),
        )
        if present
    ]
    return Turn(
        api="chat",
        model=as_str(response.get("model")) or as_str(request.get("model")) or None,
        response_id=as_str(response.get("id")) or None,
        tools=_chat_tools(request),
        parallel_tool_calls=as_bool(request.get("parallel_tool_calls")),
        output_format=dict(as_dict(request.get("response_format"))),
        calls=calls,
        awaiting=[c.call_id for c in calls if c.call_id],
        output_types=types,
        callable_names=callable_names(_chat_choice(request)),
    )


def _chat_choice(request: Mapping[str, Any]) -> Any:
    """tool_choice, or the legacy function_call ("none", or {"name"} to force one)."""
    if "tool_choice" in request or "function_call" not in request:
        return request.get("tool_choice")
    legacy = request["function_call"]
    return {"type": "function", **legacy} if isinstance(legacy, dict) else legacy


# --- Anthropic Messages -----------------------------------------------------


def _messages_tools(request: Mapping[str, Any]) -> list[Tool]:
    out: list[Tool] = []
    for tool in map(as_dict, as_list(request.get("tools"))):
        name = as_str(tool.get("name")).strip()
        kind = as_str(tool.get("type")) or "custom"
        if not name:
            continue
        if kind == "custom" or "input_schema" in tool:
            out.append(
                Tool(
                    name=name,
                    strict=as_bool(tool.get("strict")),
                    parameters=tool.get("input_schema"),
                )
            )
        else:
            # Versioned tools (bash_20250124, web_search_20250305, ...) accept strict too.
            out.append(Tool(name=name, type=kind, strict=as_bool(tool.get("strict"))))
    return out


def _messages_format(request: Mapping[str, Any]) -> dict[str, Any]:
    fmt = as_dict(as_dict(request.get("output_config")).get("format")) or as_dict(
        request.get("output_format")
    )
    if fmt.get("type") == "json_schema":
        # Anthropic's structured outputs are constrained decoding: always strict.
        return {"type": "json_schema", "schema": fmt.get("schema"), "strict": True}
    return dict(fmt)


def _messages_turn(request: Mapping[str, Any], response: Mapping[str, Any]) -> Turn:
    calls: list[ToolCall] = []
    types: list[str] = []
    for block in map(as_dict, as_list(response.get("content"))):
        kind = as_str(block.get("type"))
        types.append(kind)
        name = as_str(block.get("name")).strip()
        if kind == "tool_use" and name:
            calls.append(_call(as_str(block.get("id")), name, "tool_use", block, "input"))
    choice = as_dict(request.get("tool_choice"))
    serial = choice.get("disable_parallel_tool_use") is True
    return Turn(
        api="messages",
        model=as_str(response.get("model")) or as_str(request.get("model")) or None,
        response_id=as_str(response.get("id")) or None,
        tools=_messages_tools(request),
        # disable_parallel_tool_use is Anthropic's parallel_tool_calls: false.
        parallel_tool_calls=False if serial else None,
        output_format=_messages_format(request),
        calls=calls,
        awaiting=[c.call_id for c in calls if c.call_id],
        output_types=types,
        callable_names=callable_names(choice),
    )


# --- OpenAI Realtime ---------------------------------------------------------


def _realtime_turn(request: Mapping[str, Any], response: Mapping[str, Any]) -> Turn:
    """A Realtime response, read as the Responses turn it mirrors (same items, same tools).

    The request is the session's tool settings as tooltap saw them. Realtime
    function tools have no strict mode: a `strict` key there is not honoured,
    so it is not read as one.
    """
    # A call cut off when the response was cancelled (the user spoke over it) never runs:
    # its partial arguments are not the model's answer.
    output = [
        item
        for item in as_list(response.get("output"))
        if not (
            as_dict(item).get("type") == "function_call"
            and as_dict(item).get("status") == "incomplete"
        )
    ]
    read = {k: v for k, v in response.items() if k != "tools"} | {"output": output}
    turn = _responses_turn(request, read)
    tools = [tool.model_copy(update={"strict": None}) for tool in turn.tools]
    return turn.model_copy(update={"api": "realtime", "tools": tools})


_READERS = {
    "responses": _responses_turn,
    "chat": _chat_turn,
    "messages": _messages_turn,
    "realtime": _realtime_turn,
}


def read_turn(api: Api, request: Any, response: Any) -> Turn:
    """The Turn of one exchange from its parsed bodies. Pure; junk reads as absent."""
    request, response = as_dict(request), as_dict(response)
    turn = _READERS[api](request, response)
    turn.request_model = as_str(request.get("model")) or None
    turn.finish_reasons = _finish_reasons(api, response)
    usage = as_dict(response.get("usage"))
    counted = {
        "input_tokens": usage.get("input_tokens", usage.get("prompt_tokens")),
        "output_tokens": usage.get("output_tokens", usage.get("completion_tokens")),
    }
    turn.usage = {
        k: v for k, v in counted.items() if isinstance(v, int) and not isinstance(v, bool)
    }
    return turn


def _finish_reasons(api: Api, response: Mapping[str, Any]) -> list[str]:
    """Why the model stopped: each choice's finish_reason, the stop_reason, or the status
    (with the reason an incomplete response gives). Pure."""
    if api == "chat":
        choices = map(as_dict, as_list(response.get("choices")))
        return [as_str(c.get("finish_reason")) for c in choices if as_str(c.get("finish_reason"))]
    if api == "messages":
        reason = as_str(response.get("stop_reason"))
        return [reason] if reason else []
    status = as_str(response.get("status"))
    incomplete = as_str(as_dict(response.get("incomplete_details")).get("reason"))
    reason = incomplete if status == "incomplete" and incomplete else status
    return [reason] if reason else []
