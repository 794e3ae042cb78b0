"""Anthropic Messages: `POST .../messages`, wherever Anthropic serves it: on Vertex AI
(`.../publishers/anthropic/models/{model}:rawPredict` and `:streamRawPredict`), where the body
names no model and the path does, and on Bedrock's InvokeModel, whose module
(tooltap.core.dialects.invoke) hands Claude's Messages bodies here, the stream in AWS's event
stream.

Messages responses do not echo tools: tools and settings come from the request.
`tool_choice.disable_parallel_tool_use: true` is the analogue of `parallel_tool_calls: false`,
and Anthropic documents no conflict between strict tools and parallel calls, so a fan-out does
not void strict here. Its strict subset is the one anthropic-sdk-python's `transform_schema`
(`lib/_parse/_transform.py`) keeps: `required` as given (optional properties are allowed),
`allOf` kept, a fixed set of string formats, `additionalProperties: false` set on every object,
and everything else moved out of the schema into its description.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from ..assembly import Blocks, StreamAssembler, json_or_text
from ..loop import Checker, LoopReport, is_empty
from ..records import Limits
from ..schema import SEED_LIMITS
from ..shapes import as_bool, as_dict, as_int, as_list, as_str
from ..turn import HostedResult, Tool, ToolCall, Turn, callable_names, make_call, plus, tokens
from .base import Dialect, Prior, advisory_tools_repairs, fanout_repairs, text_of

# Anthropic on Vertex AI, the model in the path.
_VERTEX = re.compile(
    r"/publishers/anthropic/models/(?P<model>[^/:]+):(?:rawPredict|streamRawPredict)$"
)


def model_in_path(path: str) -> str | None:
    """The model a Vertex AI path names, for a body that names none. Pure."""
    found = _VERTEX.search(path)
    return None if found is None or found["model"] == "count-tokens" else unquote(found["model"])


def recognise(method: str, path: str) -> bool:
    """POST .../messages (`?beta=true` too), and Anthropic on Vertex AI; not OpenAI's
    Assistants .../threads/{id}/messages. Pure."""
    if method.upper() != "POST":
        return False
    if path.endswith("/messages"):
        return "/threads/" not in path
    return model_in_path(path) is not None


def _tools(request: Mapping[str, Any]) -> list[Tool]:
    out: list[Tool] = []
    for tool in map(as_dict, as_list(request.get("tools"))):
        name = as_str(tool.get("name")).strip()
        kind = as_str(tool.get("type")) or "custom"
        if not name:
            continue
        if kind == "custom" or "input_schema" in tool:
            out.append(Tool.declared(name, "function", tool, "input_schema"))
        else:
            # Versioned tools (bash_20250124, web_search_20250305, ...) accept strict too.
            out.append(Tool(name=name, type=kind, strict=as_bool(tool.get("strict"))))
    return out


def _output_format(request: Mapping[str, Any]) -> dict[str, Any]:
    fmt = as_dict(as_dict(request.get("output_config")).get("format")) or as_dict(
        request.get("output_format")
    )
    if fmt.get("type") == "json_schema":
        # Anthropic's structured outputs are constrained decoding: always strict.
        return {"type": "json_schema", "schema": fmt.get("schema"), "strict": True}
    return dict(fmt)


def read_turn(request: Mapping[str, Any], response: Mapping[str, Any]) -> Turn:
    calls: list[ToolCall] = []
    types: list[str] = []
    # The MCP connector's calls, run by the API: it never sends the server's list, so their
    # arguments are parsed and not checked against a schema.
    hosted: list[ToolCall] = []
    results: list[HostedResult] = []
    for index, block in enumerate(map(as_dict, as_list(response.get("content")))):
        kind = as_str(block.get("type"))
        types.append(kind)
        name = as_str(block.get("name")).strip()
        if kind in ("tool_use", "mcp_tool_use") and name:
            server = as_str(block.get("server_name")) or None
            call = make_call(as_str(block.get("id")), name, kind, block, "input", server=server)
            (calls if kind == "tool_use" else hosted).append(call)
        elif kind == "mcp_tool_result":
            results.append(
                HostedResult(
                    call_id=as_str(block.get("tool_use_id")),
                    where=f"content.{index}",
                    failed=block.get("is_error") is True,
                )
            )
    choice = as_dict(request.get("tool_choice"))
    serial = choice.get("disable_parallel_tool_use") is True
    return Turn(
        api="messages",
        model=as_str(response.get("model")) or as_str(request.get("model")) or None,
        response_id=as_str(response.get("id")) or None,
        tools=_tools(request),
        # disable_parallel_tool_use is Anthropic's parallel_tool_calls: false.
        parallel_tool_calls=False if serial else None,
        output_format=_output_format(request),
        calls=calls,
        awaiting=[c.call_id for c in calls if c.call_id],
        output_types=types,
        callable_names=callable_names(choice),
        hosted_calls=hosted,
        hosted_results=results,
    )


class Assembler(StreamAssembler):
    """Anthropic Messages events: content blocks accumulate by index.

    input_json_delta fragments concatenate; "" means {}; a tool input that does
    not parse (a stream cut by max_tokens) stays the raw partial text, so the
    argument check reports it with the text kept. A block may arrive whole: a
    tool_use called from code execution (`caller` set) carries its input in
    content_block_start, or sits in message_start's content, with no delta.
    """

    def __init__(self) -> None:
        super().__init__()
        self.message: dict[str, Any] = {}
        self.blocks = Blocks()

    def event(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if kind == "message_start":
            self.message = dict(as_dict(event.get("message")))
            for index, block in enumerate(as_list(self.message.get("content"))):
                if isinstance(block, dict):
                    self.blocks.open(index, block)
            self.said |= bool(self.blocks)  # a message that starts with its content
        elif kind == "content_block_start" and isinstance(event.get("content_block"), dict):
            block = self.blocks.open(
                as_int(event.get("index"), len(self.blocks)), event["content_block"]
            )
            self.said |= bool(block.get("name"))  # a call's name comes with its block
        elif kind == "content_block_delta":
            index, delta = as_int(event.get("index")), as_dict(event.get("delta"))
            for key in ("partial_json", "text", "thinking"):
                piece = delta.get(key)
                if piece is not None:  # what add() would drop, and no output
                    self.blocks.add(index, piece)
                    self.said |= bool(piece)
        elif kind == "message_delta":
            delta = as_dict(event.get("delta"))
            for key in ("stop_reason", "stop_sequence"):
                if key in delta:
                    self.message[key] = delta[key]
            if isinstance(event.get("usage"), dict):
                self.message["usage"] = {**as_dict(self.message.get("usage")), **event["usage"]}
        elif kind == "message_stop":
            self.done = True
        elif kind == "error":
            self.error(event)

    def result(self) -> dict[str, Any]:
        content = []
        for _, started, text in self.blocks:
            block = dict(started)
            if block.get("type") in ("tool_use", "server_tool_use", "mcp_tool_use"):
                # no delta: the input the block started with, else {}
                block["input"] = json_or_text(text, block.get("input"))
            elif block.get("type") in ("text", "thinking"):
                key = str(block["type"])
                block[key] = str(block.get(key) or "") + (text or "")
            content.append(block)
        return {**self.message, "content": content}


def _blocks(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [as_dict(block) for block in as_list(message.get("content"))]


def _runs(messages: list[Mapping[str, Any]]) -> list[tuple[Any, list[int]]]:
    """Consecutive messages of one role, as (role, their indices).

    The Messages API combines them into one turn (anthropic-sdk-python,
    MessageCreateParams): assistant [A], assistant [B], user [A, B results] is valid.
    """
    runs: list[tuple[Any, list[int]]] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if runs and runs[-1][0] == role:
            runs[-1][1].append(index)
        else:
            runs.append((role, [index]))
    return runs


def check_loop(request: Mapping[str, Any], prior: Prior = None) -> LoopReport:
    """The tool loop of a Messages request: results in the single next user turn, first. Pure."""
    messages = [as_dict(m) for m in as_list(request.get("messages"))]
    runs = _runs(messages)
    newest = next((n for n in range(len(runs) - 1, -1, -1) if runs[n][0] == "assistant"), 0)
    # Results answer only the assistant turn right before them, so the history
    # before the newest one cannot change what is reported.
    runs = runs[newest:]
    check = Checker("tool_use_id", "messages", 0)  # the walk starts at the newest turn
    pending: dict[str, int] = {}
    answered: set[str] = set()
    result_runs: list[list[int]] = []  # the user turns holding results for the open calls

    def close_turn() -> None:
        check.unanswered(pending)
        if len(result_runs) > 1:
            where = ", ".join(check.where(i) for run in result_runs for i in run)
            check.error("split-results", sorted(answered), result_runs[0][0], where)

    for role, indices in runs:
        if role == "assistant":
            close_turn()
            pending, answered, result_runs = {}, set(), []
            for index in indices:
                for block in _blocks(messages[index]):
                    # server_tool_use runs on Anthropic's side and needs no result.
                    if block.get("type") == "tool_use" and as_str(block.get("id")):
                        pending[as_str(block.get("id"))] = index
            continue
        if role != "user":
            continue
        holds_results = False
        for index in indices:
            # Results first is checked per message as sent: whether the API also
            # applies it across messages it merges is not documented, so it is
            # not reported there.
            other_first = False
            for position, block in enumerate(_blocks(messages[index])):
                if block.get("type") != "tool_result":
                    other_first = True
                    continue
                where = check.where(index, position)
                call_id = as_str(block.get("tool_use_id"))
                if other_first:
                    check.error("results-not-first", [call_id], index, where)
                    other_first = False
                if is_empty(block.get("content")):
                    check.error("empty-result", [call_id], index, where)
                check.result(
                    call_id, index, block.get("is_error") is True, where, block.get("content")
                )
                if call_id in pending:
                    del pending[call_id]
                    answered.add(call_id)
                    holds_results = True
                elif call_id in answered:
                    check.error("duplicate-result", [call_id], index, where)
                else:
                    check.error("orphan-result", [call_id], index, where)
        if holds_results:
            result_runs.append(indices)
    close_turn()
    return check.report


def finish_reasons(response: Mapping[str, Any]) -> list[str]:
    """The stop_reason. Pure."""
    reason = as_str(response.get("stop_reason"))
    return [reason] if reason else []


ANTHROPIC = "Anthropic structured outputs (anthropic-sdk-python transform_schema)"

# What transform_schema keeps. `definitions` is the older spelling of $defs,
# accepted locally by the API; oneOf is rewritten to anyOf by the SDK.
ANTHROPIC_KEYWORDS = frozenset(
    {"type", "enum", "const", "anyOf", "allOf", "$defs", "definitions", "$ref", "description",
     "title", "properties", "additionalProperties", "required", "format", "items", "minItems"}
)  # fmt: skip
ANTHROPIC_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"}
)
_TYPED = ("type", "anyOf", "oneOf", "allOf", "enum", "const", "$ref")


def _primitive(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _anthropic_node(node: Mapping[str, Any], path: str) -> list[str]:
    """The rules one node breaks under Anthropic's subset, not counting its children."""
    problems: list[str] = []
    raw = node.get("type")
    kinds = raw if isinstance(raw, list) else [raw]
    if not any(key in node for key in _TYPED):
        problems.append(f"{path}: needs a type (or anyOf, allOf, enum, const or $ref)")
    if "object" in kinds and node.get("additionalProperties") is not False:
        problems.append(f"{path}: needs additionalProperties: false")
    outside = sorted(key for key in node if key not in ANTHROPIC_KEYWORDS)
    if "oneOf" in outside:
        problems.append(f"{path}: oneOf is not in the subset; use anyOf")
        outside.remove("oneOf")
    if outside:
        problems.append(
            f"{path}: {', '.join(outside)} are not in the subset; the SDK moves them into "
            "the description, where nothing enforces them"
        )
    fmt = node.get("format")
    if (
        "format" in node
        and "string" in kinds
        and not (isinstance(fmt, str) and fmt in ANTHROPIC_FORMATS)
    ):
        problems.append(f"{path}: format {fmt!r} is not one of the supported string formats")
    if "minItems" in node and node.get("minItems") not in (0, 1):
        problems.append(f"{path}: minItems can only be 0 or 1")
    enum = node.get("enum")
    if isinstance(enum, list) and not all(_primitive(value) for value in enum):
        problems.append(f"{path}: enum values must be strings, numbers, booleans or null")
    return problems


def anthropic_blockers(root: Any, *, tool: bool = True) -> list[str]:
    """Every reason Anthropic's strict mode would refuse or loosen this schema. Pure.

    A tool's input_schema must also be an object at its root. Iterative, so no
    nesting depth can exhaust the stack.
    """
    if not isinstance(root, dict):
        return ["$: not a schema object"]
    problems: list[str] = []
    if tool and root.get("type") != "object":
        problems.append("$: a tool's input_schema must have type object at its root")
    stack: list[tuple[Mapping[str, Any], str]] = [(root, "$")]
    while stack:
        node, path = stack.pop()
        problems.extend(_anthropic_node(node, path))
        below: list[tuple[Any, str]] = []
        properties = node.get("properties")
        if isinstance(properties, dict):
            below.extend((properties[name], f"{path}.{name}") for name in sorted(properties))
        below.append((node.get("items"), f"{path}[]"))
        for group in ("anyOf", "oneOf", "allOf"):
            branches = node.get(group)
            if isinstance(branches, list):
                below.extend((b, f"{path}.{group}[{i}]") for i, b in enumerate(branches))
        for defs in ("$defs", "definitions"):
            if isinstance(node.get(defs), dict):
                below.extend((sub, f"{path}.{defs}.{name}") for name, sub in node[defs].items())
        below.reverse()  # not reversed(): mypyc fails on it over tuples holding Any
        stack.extend(pair for pair in below if isinstance(pair[0], dict))
    return problems


def blockers(value: Any, limits: Limits = SEED_LIMITS, *, tool: bool = True) -> list[str]:
    """Anthropic's own strict subset, never OpenAI's: a 400 from one provider is not explained
    with the other's rules. Pure."""
    return anthropic_blockers(value, tool=tool)


def usage(response: Mapping[str, Any]) -> dict[str, int]:
    """Anthropic's usage: input_tokens counts only what the cache did not hold, so the input
    is it with the cache's reads and writes. Pure."""
    counted = as_dict(response.get("usage"))
    read = counted.get("cache_read_input_tokens")
    return tokens(
        plus(counted.get("input_tokens"), read, counted.get("cache_creation_input_tokens")),
        counted.get("output_tokens"),
        read,
    )


def instructions(request: Mapping[str, Any]) -> str:
    """`system`: a string or text blocks. Pure."""
    return text_of(request.get("system"))


DIALECT = Dialect.from_names(
    globals(),
    api="messages",
    state_repairs=fanout_repairs(
        "declare strict: true on the tools (Anthropic documents no conflict between strict "
        "tools and parallel calls)."
    ),
    format_repairs=advisory_tools_repairs(
        "Set strict: true on every tool beside the strict output format. Anthropic's strict "
        "subset keeps optional properties, and needs additionalProperties: false on every object.",
        anthropic_blockers,
    ),
    parallel_voids_strict=False,
)
