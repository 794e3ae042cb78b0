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

Api = Literal["responses", "chat", "messages"]
APIS: tuple[Api, ...] = ("responses", "chat", "messages")

# Responses output items the client must answer, and the key that ids them.
CLIENT_CALL_TYPES = {
    "function_call": "call_id",
    "custom_tool_call": "call_id",
    "computer_call": "call_id",
    "local_shell_call": "call_id",
    "shell_call": "call_id",
    "apply_patch_call": "call_id",
    "mcp_approval_request": "id",
}


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def detect_api(method: str, url: str) -> Api | None:
    """Which API a request speaks, from its method and path. Pure."""
    if method.upper() != "POST":
        return None
    try:
        path = urlsplit(url).path.rstrip("/")
    except ValueError:
        return None
    if path.endswith("/chat/completions"):
        return "chat"
    if path.endswith("/responses"):
        return "responses"
    # OpenAI's Assistants API also has .../threads/{id}/messages.
    if path.endswith("/messages") and "/threads/" not in path:
        return "messages"
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

    def tool(self, call: ToolCall) -> Tool | None:
        for tool in self.tools:
            if tool.name == call.name and tool.namespace == call.namespace:
                return tool
        return None

    def as_response(self) -> dict[str, Any]:
        """This turn in the Responses-API shape that the seed rules read."""
        response: dict[str, Any] = {
            "tools": [
                {"type": t.type, "name": t.name, "strict": t.strict, "parameters": t.parameters}
                for t in self.tools
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


# --- OpenAI Responses -------------------------------------------------------


def _responses_tools(tools: Any, namespace: str | None = None) -> list[Tool]:
    out: list[Tool] = []
    for tool in map(_dict, _list(tools)):
        kind = _str(tool.get("type")) or "function"
        name = _str(tool.get("name")).strip()
        if kind == "namespace" and namespace is None:
            out.extend(_responses_tools(tool.get("tools"), name or None))
        elif kind in ("function", "custom") and name:
            out.append(
                Tool(
                    name=name,
                    type=kind,
                    strict=_bool(tool.get("strict")) if kind == "function" else None,
                    parameters=tool.get("parameters") if kind == "function" else None,
                    namespace=namespace,
                )
            )
    return out


def _responses_turn(request: Mapping[str, Any], response: Mapping[str, Any]) -> Turn:
    def setting(key: str) -> Any:
        return response[key] if key in response else request.get(key)

    calls: list[ToolCall] = []
    awaiting: list[str] = []
    types: list[str] = []
    for item in map(_dict, _list(response.get("output"))):
        kind = _str(item.get("type"))
        types.append(kind)
        if kind in CLIENT_CALL_TYPES and _str(item.get(CLIENT_CALL_TYPES[kind])):
            awaiting.append(_str(item.get(CLIENT_CALL_TYPES[kind])))
        if kind in ("function_call", "custom_tool_call") and _str(item.get("name")).strip():
            calls.append(
                ToolCall(
                    call_id=_str(item.get("call_id")),
                    name=_str(item.get("name")).strip(),
                    type=kind,
                    arguments_raw=_raw(
                        item.get("input" if kind == "custom_tool_call" else "arguments")
                    ),
                    namespace=_str(item.get("namespace")) or None,
                )
            )
    return Turn(
        api="responses",
        model=_str(response.get("model")) or _str(request.get("model")) or None,
        response_id=_str(response.get("id")) or None,
        tools=_responses_tools(setting("tools")),
        parallel_tool_calls=_bool(setting("parallel_tool_calls")),
        output_format=dict(_dict(_dict(setting("text")).get("format"))),
        calls=calls,
        awaiting=awaiting,
        output_types=types,
    )


# --- OpenAI Chat Completions ------------------------------------------------


def _chat_tools(request: Mapping[str, Any]) -> list[Tool]:
    out: list[Tool] = []
    for tool in map(_dict, _list(request.get("tools"))):
        kind = _str(tool.get("type")) or "function"
        inner = _dict(tool.get(kind))
        name = _str(inner.get("name")).strip()
        if kind in ("function", "custom") and name:
            out.append(
                Tool(
                    name=name,
                    type=kind,
                    strict=_bool(inner.get("strict")) if kind == "function" else None,
                    parameters=inner.get("parameters") if kind == "function" else None,
                )
            )
    for legacy in map(_dict, _list(request.get("functions"))):
        name = _str(legacy.get("name")).strip()
        if name:
            out.append(
                Tool(
                    name=name,
                    strict=_bool(legacy.get("strict")),
                    parameters=legacy.get("parameters"),
                )
            )
    return out


def _chat_turn(request: Mapping[str, Any], response: Mapping[str, Any]) -> Turn:
    # n > 1 gives alternative completions, not parallel calls: read choice 0.
    choices = [c for c in _list(response.get("choices")) if isinstance(c, dict)]
    first = next((c for c in choices if c.get("index", 0) == 0), choices[0] if choices else {})
    message = _dict(first.get("message"))
    calls: list[ToolCall] = []
    for call in map(_dict, _list(message.get("tool_calls"))):
        kind = _str(call.get("type")) or "function"
        inner = _dict(call.get(kind))
        name = _str(inner.get("name")).strip()
        if kind in ("function", "custom") and name:
            calls.append(
                ToolCall(
                    call_id=_str(call.get("id")),
                    name=name,
                    type="custom_tool_call" if kind == "custom" else "function_call",
                    arguments_raw=_raw(inner.get("input" if kind == "custom" else "arguments")),
                )
            )
    legacy = _dict(message.get("function_call"))
    if _str(legacy.get("name")).strip():
        calls.append(
            ToolCall(
                call_id="",
                name=_str(legacy.get("name")).strip(),
                type="function_call",
                arguments_raw=_raw(legacy.get("arguments")),
            )
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
        model=_str(response.get("model")) or _str(request.get("model")) or None,
        response_id=_str(response.get("id")) or None,
        tools=_chat_tools(request),
        parallel_tool_calls=_bool(request.get("parallel_tool_calls")),
        output_format=dict(_dict(request.get("response_format"))),
        calls=calls,
        awaiting=[c.call_id for c in calls if c.call_id],
        output_types=types,
    )


# --- Anthropic Messages -----------------------------------------------------


def _messages_tools(request: Mapping[str, Any]) -> list[Tool]:
    out: list[Tool] = []
    for tool in map(_dict, _list(request.get("tools"))):
        name = _str(tool.get("name")).strip()
        kind = _str(tool.get("type")) or "custom"
        if not name:
            continue
        if kind == "custom" or "input_schema" in tool:
            out.append(
                Tool(
                    name=name, strict=_bool(tool.get("strict")), parameters=tool.get("input_schema")
                )
            )
        else:
            # Versioned provider tools (bash_20250124, web_search_20250305, ...).
            out.append(Tool(name=name, type=kind))
    return out


def _messages_format(request: Mapping[str, Any]) -> dict[str, Any]:
    fmt = _dict(_dict(request.get("output_config")).get("format")) or _dict(
        request.get("output_format")
    )
    if fmt.get("type") == "json_schema":
        # Anthropic's structured outputs are constrained decoding: always strict.
        return {"type": "json_schema", "schema": fmt.get("schema"), "strict": True}
    return dict(fmt)


def _messages_turn(request: Mapping[str, Any], response: Mapping[str, Any]) -> Turn:
    calls: list[ToolCall] = []
    types: list[str] = []
    for block in map(_dict, _list(response.get("content"))):
        kind = _str(block.get("type"))
        types.append(kind)
        if kind == "tool_use" and _str(block.get("name")).strip():
            calls.append(
                ToolCall(
                    call_id=_str(block.get("id")),
                    name=_str(block.get("name")).strip(),
                    type="tool_use",
                    arguments_raw=_raw(block.get("input")),
                )
            )
    choice = _dict(request.get("tool_choice"))
    serial = choice.get("disable_parallel_tool_use") is True
    return Turn(
        api="messages",
        model=_str(response.get("model")) or _str(request.get("model")) or None,
        response_id=_str(response.get("id")) or None,
        tools=_messages_tools(request),
        # disable_parallel_tool_use is Anthropic's parallel_tool_calls: false.
        parallel_tool_calls=False if serial else None,
        output_format=_messages_format(request),
        calls=calls,
        awaiting=[c.call_id for c in calls if c.call_id],
        output_types=types,
    )


_READERS = {"responses": _responses_turn, "chat": _chat_turn, "messages": _messages_turn}


def read_turn(api: Api, request: Any, response: Any) -> Turn:
    """The Turn of one exchange from its parsed bodies. Pure; junk reads as absent."""
    return _READERS[api](_dict(request), _dict(response))
