"""Ollama's own API: `POST /api/chat` and `/api/generate` (a local server on :11434, ollama.com),
as ollama-python, ollama-js, LangChain's ChatOllama and LlamaIndex speak it; not its
OpenAI-compatible /v1, which the Chat dialect reads.

A stream is newline-delimited JSON (`application/x-ndjson`; ollama.com sends it as
`application/json`): every line a partial response, text in pieces, each tool call whole in one
line, the last line `done: true` with `done_reason` and the counts. `stream` is true unless the
request says false.

What Ollama documents and does (docs/api.md, api/types.go, server/routes.go, the clients'
source), and what is read from it:
- `/api/chat` declares `tools` as OpenAI-style functions; `/api/generate` carries none (its
  request has no such field), though a model with a built-in parser may still call tools there:
  those calls are read against no declared tool.
- A call is `{id?, function: {index?, name, arguments}}` with `arguments` an object (a string
  from some servers, kept as sent). Servers since 2025 give each call an `id` (`call_` and 8
  characters); a call without one is named by its place, `tool_calls[i]`.
- No tool declares strict: Ollama's server drops a `strict` key (api.ToolFunction has none) and
  parses calls out of free model output, so no tool call's arguments are held to a schema. It
  has no tool_choice and no switch for parallel calls, and documents no conflict between them
  and anything: a fan-out voids nothing here (a finding Ollama does not document would be
  false).
- `format`: "json" is JSON mode (no-schema); a JSON schema is read as enforced. Ollama
  documents that "the model will generate a response that matches the schema", and its engine
  holds sampling to a grammar built from it (llama.cpp's json-schema-to-grammar, through
  llm/llama_server.go; a schema it cannot turn into a grammar is an error). Reading it as
  advisory would raise a false alarm on every such turn. What that grammar does not hold is
  said as a repair: the JSON Schema keywords its converter never reads (multipleOf,
  uniqueItems, not, ...), bounds on a number that may be fractional, and string formats it has no
  rule for (email, uri, ...). docs/apis.md says where the format is not held at all, which
  the request does not show: Ollama's MLX engine passes none to its runner, and a recorded
  ollama.com answer in JSON mode came back fenced in Markdown.
- The loop has no ids to go by in most traffic: ollama-python (and so LangChain's ChatOllama)
  drops a call's `id` and a result's `tool_call_id` before sending, and a result names its call
  by `tool_name` if at all. Ollama refuses no history, so only what is certain is reported:
  the `tool` messages right after an assistant message answer its calls, by `tool_call_id`
  where both carry one, else by `tool_name`, else by position (as the model reads them);
  a result that answers no call is an orphan, one that answers a call already answered a
  duplicate, and a call is unanswered only when other results of its turn came (a turn
  answered not at all was stopped on purpose, or declined). An empty result is not reported:
  Ollama takes it, and a tool may return nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ..arguments import unnamed_call
from ..assembly import StreamAssembler
from ..jsontext import dumps
from ..loop import Checker, LoopReport, error_payload, last_index
from ..records import Limits
from ..schema import SEED_LIMITS
from ..shapes import as_dict, as_list, as_str
from ..turn import Tool, ToolCall, Turn, make_call, placeholder, tokens
from .base import Dialect, Prior, fanout_repairs, role_text

PATHS = ("/api/chat", "/api/generate")
_STREAMED = ("message", "response", "thinking", "tool_calls")  # what a stream line adds to


def recognise(method: str, path: str) -> bool:
    """POST .../api/chat and .../api/generate (behind a path prefix too, as Open WebUI
    serves Ollama). Pure."""
    return method.upper() == "POST" and path.endswith(PATHS)


def streams(path: str) -> bool:
    """Does a request to the path stream? Unless its body says `"stream": false`, and ollama.com
    sends its streams as application/json: any of its answers may be one. Pure."""
    return path.endswith(PATHS)


# --- the turn --------------------------------------------------------------------------------


def _tools(request: Mapping[str, Any]) -> list[Tool]:
    out = []
    for tool in map(as_dict, as_list(request.get("tools"))):
        function = as_dict(tool.get("function"))
        name = as_str(function.get("name")).strip()
        if name:  # of any type: Ollama's server renders every tool to the model as a function
            out.append(
                Tool(
                    name=name,
                    strict=False,
                    parameters=function.get("parameters"),
                    description=function.get("description"),
                )
            )
    return out


def _output_format(request: Mapping[str, Any]) -> dict[str, Any]:
    """`format`: JSON mode, a schema the output is sampled under, nothing, or what Ollama
    refuses ("invalid format")."""
    declared = request.get("format")
    if declared is None or declared == "":
        return {}
    if declared == "json":
        return {"type": "json_object"}
    if isinstance(declared, dict):
        return {"type": "json_schema", "schema": declared, "strict": True}
    return {"type": dumps(declared)}


def _calls(holder: Mapping[str, Any]) -> list[ToolCall]:
    calls = []
    for index, call in enumerate(map(as_dict, as_list(holder.get("tool_calls")))):
        function = as_dict(call.get("function"))
        name = as_str(function.get("name")).strip()
        if name:
            call_id = as_str(call.get("id")) or placeholder("tool_calls", index)
            calls.append(make_call(call_id, name, "function_call", function, "arguments"))
    return calls


def read_turn(request: Mapping[str, Any], response: Mapping[str, Any]) -> Turn:
    generate = "prompt" in request  # /api/generate: a prompt, no messages and no tools
    message = response if generate else as_dict(response.get("message"))
    text = response.get("response") if generate else message.get("content")
    types = [
        kind
        for kind, present in (
            ("thinking", message.get("thinking")),
            ("text", text),
            ("tool_calls", message.get("tool_calls")),
        )
        if present
    ]
    return Turn(
        api="ollama",
        model=as_str(response.get("model")) or as_str(request.get("model")) or None,
        tools=[] if generate else _tools(request),
        output_format=_output_format(request),
        calls=_calls(message),
        output_types=types,
    )


def usage(response: Mapping[str, Any]) -> dict[str, int]:
    """prompt_eval_count and eval_count, on the last line. Pure."""
    return tokens(response.get("prompt_eval_count"), response.get("eval_count"))


def finish_reasons(response: Mapping[str, Any]) -> list[str]:
    """done_reason: stop, length, load, unload. Pure."""
    reason = as_str(response.get("done_reason"))
    return [reason] if reason else []


# --- the stream --------------------------------------------------------------------------------


class Assembler(StreamAssembler):
    """NDJSON lines, each a partial response: text and thinking joined in order, tool calls
    appended (each arrives whole), the other fields as the last line says them. A line with
    `done: true` ends the stream; a line `{"error": ...}` is the server's error, sent once the
    answer had begun (its status was already 200)."""

    def __init__(self) -> None:
        super().__init__()
        self.top: dict[str, Any] = {}
        self.message: dict[str, Any] | None = None  # /api/chat's, once a line had one
        self.pieces: dict[str, list[str]] = {}  # response, thinking, message.content, ...
        self.calls: dict[str, list[Any]] = {}  # where the calls sit -> the calls

    def event(self, event: Mapping[str, Any]) -> None:
        if "error" in event:
            self.error(event)
            return
        self.top.update((k, v) for k, v in event.items() if k not in _STREAMED)
        self._add("", event)
        if "message" in event:
            message = as_dict(event["message"])
            if self.message is None:
                self.message = {}
            self.message.update((k, v) for k, v in message.items() if k not in _STREAMED)
            self._add("message.", message)
        if event.get("done") is True:
            self.done = True

    def _add(self, where: str, part: Mapping[str, Any]) -> None:
        for key in ("response", "thinking", "content"):
            if isinstance(part.get(key), str):
                self.pieces.setdefault(where + key, []).append(part[key])
                self.said |= bool(part[key])
        if isinstance(part.get("tool_calls"), list):
            self.calls.setdefault(where, []).extend(part["tool_calls"])
            self.said |= bool(part["tool_calls"])

    def result(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.top)
        for where, pieces in self.pieces.items():
            if not where.startswith("message."):
                out[where] = "".join(pieces)
        if "" in self.calls:
            out["tool_calls"] = self.calls[""]
        if self.message is not None:
            message = dict(self.message)
            for key in ("content", "thinking"):
                if "message." + key in self.pieces:
                    message[key] = "".join(self.pieces["message." + key])
            if "message." in self.calls:
                message["tool_calls"] = self.calls["message."]
            out["message"] = message
        return out


# --- the loop --------------------------------------------------------------------------------


def _role(message: Mapping[str, Any]) -> str:
    return as_str(message.get("role")).lower()  # Ollama's server lowercases roles


def _label(call: Mapping[str, Any], where: str) -> str:
    """How a call of the history is named in a finding: its id, else its name."""
    return as_str(call.get("id")) or as_str(as_dict(call.get("function")).get("name")) or where


def check_loop(request: Mapping[str, Any], prior: Prior = None) -> LoopReport:
    """The tool loop of an /api/chat request, as far as it is certain. Pure."""
    messages = [as_dict(m) for m in as_list(request.get("messages"))]
    new_from = last_index(messages, lambda m: _role(m) == "assistant")
    check = Checker("tool_name", "messages", new_from)
    turn: _Turn | None = None
    for index in range(new_from, len(messages)):
        message = messages[index]
        if _role(message) == "tool":
            if turn is None:  # it follows no call
                named = _result_name(message)
                said = message.get("content")
                check.result(named, index, _failed(message), check.where(index), said)
                check.error("orphan-result", [named] if named else [], index)
            else:
                turn.answer(message, index)
            continue
        if turn is not None:
            turn.close()
        calls = as_list(message.get("tool_calls")) if _role(message) == "assistant" else []
        turn = _Turn(check, index, calls) if calls else None
    if turn is not None:
        turn.close()
    return check.report


def _result_name(message: Mapping[str, Any]) -> str:
    return as_str(message.get("tool_call_id")) or as_str(message.get("tool_name"))


def _failed(message: Mapping[str, Any]) -> bool:
    return error_payload(message.get("content"))


class _Turn:
    """An assistant message's calls, and the tool messages right after it."""

    def __init__(self, check: Checker, index: int, calls: list[Any]) -> None:
        self.check = check
        self.index = index
        # (id, name, label, arguments) of each call; open until a result answers it
        self.open = [
            (
                as_str(as_dict(call).get("id")),
                as_str(as_dict(as_dict(call).get("function")).get("name")),
                _label(as_dict(call), f"messages.{index}.tool_calls.{j}"),
                as_dict(as_dict(call).get("function")).get("arguments"),
            )
            for j, call in enumerate(calls)
        ]
        self.answered: list[tuple[str, str, str, Any]] = []

    def answer(self, message: Mapping[str, Any], index: int) -> None:
        result_id = as_str(message.get("tool_call_id"))
        name = as_str(message.get("tool_name"))
        where = self.check.where(index)
        match = (
            next((c for c in self.open if result_id and c[0] == result_id), None)
            or next((c for c in self.open if name and c[1] == name), None)
            or (self.open[0] if self.open and not name else None)
        )
        if match is not None:
            self.open.remove(match)
            self.answered.append(match)
            # A call with no id is known by its name and arguments, to time its answer by.
            unnamed = None if match[0] else unnamed_call(match[1], match[3])
            content = message.get("content")
            self.check.result(match[2], index, _failed(message), where, content, unnamed=unnamed)
            return
        own = result_id or name
        self.check.result(own, index, _failed(message), where, message.get("content"))
        again = any((result_id and c[0] == result_id) or (name and c[1] == name)
                    for c in self.answered)  # fmt: skip
        rule = "duplicate-result" if again else "orphan-result"
        self.check.error(rule, [own] if own else [], index)

    def close(self) -> None:
        """Calls left open, when other results of the turn came."""
        if self.answered and self.open:
            self.check.error("unanswered-call", [c[2] for c in self.open], self.index)


# --- the repairs -------------------------------------------------------------------------------

# JSON Schema keywords that llama.cpp's json-schema-to-grammar never reads: a format schema's
# grammar does not hold them. (It reads $ref, anyOf, oneOf, allOf, type, const, enum,
# properties, required, additionalProperties, items, prefixItems, minItems, maxItems, pattern,
# minLength, maxLength, minimum and maximum on an integer, and the string formats below; the
# same in the llama.cpp Ollama vendored from v0.9 to v0.24.)
UNHELD = frozenset(
    {
        "multipleOf", "uniqueItems", "contains", "minContains", "maxContains",
        "minProperties", "maxProperties", "patternProperties", "propertyNames",
        "dependentRequired", "dependentSchemas", "dependencies", "not", "if", "then", "else",
        "unevaluatedProperties", "unevaluatedItems",
    }
)  # fmt: skip
HELD_FORMATS = frozenset({"date", "time", "date-time", "uuid", *(f"uuid{n}" for n in range(1, 6))})
_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_MAPS = ("properties", "$defs", "definitions")
MAX_NODES = 10_000  # schema nodes walked; the work on one is bounded


def unheld(schema: Any) -> list[str]:
    """Where a format schema says what the grammar Ollama samples under does not hold: a
    keyword its converter never reads, a bound on a number that may be fractional, a string
    format it has no rule for. Pure."""
    found: list[str] = []
    for path, node in _nodes(schema):
        kind = node.get("type")
        kinds = kind if isinstance(kind, list) else [kind]
        found += [f"{path}.{key}" for key in node if key in UNHELD]
        if "number" in kinds:
            found += [f"{path}.{key}" for key in _BOUNDS if key in node]
        if isinstance(node.get("format"), str) and node["format"] not in HELD_FORMATS:
            found.append(f"{path}.format")
    return found


def _nodes(schema: Any) -> Iterator[tuple[str, Mapping[str, Any]]]:
    stack: list[tuple[str, Any]] = [("$", schema)]
    walked = 0
    while stack and walked < MAX_NODES:
        path, node = stack.pop()
        if not isinstance(node, dict):
            continue
        walked += 1
        yield path, node
        children: list[tuple[str, Any]] = []
        for key in _MAPS:
            children += [(f"{path}.{key}.{k}", v) for k, v in as_dict(node.get(key)).items()]
        for key in _LISTS:
            children += [(f"{path}.{key}[{i}]", v) for i, v in enumerate(as_list(node.get(key)))]
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), dict):
                children.append((f"{path}.{key}", node[key]))
        stack.extend(reversed(children))


def blockers(value: Any, limits: Limits = SEED_LIMITS, *, tool: bool = True) -> list[str]:
    """No strict subset refuses a schema here: Ollama has no strict tools, and its format takes
    any schema its grammar converter reads. Pure."""
    return []


def format_repairs(
    response: Mapping[str, Any], state: Any, loose: list[tuple[str, Any]], limits: Limits
) -> list[str]:
    """The repairs for an output-format state, in Ollama's terms. Pure."""
    lines = []
    if state == "no-schema":
        lines.append(
            'give format a JSON schema rather than "json": JSON mode holds the output to JSON, '
            "and to no shape."
        )
    if state == "advisory-tools":
        lines.append(
            "validate tool arguments in your own handler: Ollama holds the format output to its "
            "schema, never a tool call's arguments (it has no strict tools)."
        )
    if state in ("enforced", "advisory-tools"):
        schema = as_dict(as_dict(response.get("text")).get("format")).get("schema")
        found = unheld(schema)
        if found:
            lines.append(
                "check these in your own code: the grammar Ollama samples the format under "
                f"does not hold them: {', '.join(found[:20])}"
                + (f" (and {len(found) - 20} more)" if len(found) > 20 else "")
            )
    return lines


def instructions(request: Mapping[str, Any]) -> str:
    """The system messages' text (/api/generate: `system`). Pure."""
    return "\n".join(
        filter(None, (as_str(request.get("system")), role_text(request.get("messages"))))
    )


DIALECT = Dialect.from_names(
    globals(),
    api="ollama",
    state_repairs=fanout_repairs(
        "where one answer is wanted, ask for it with format (a JSON schema Ollama holds the "
        "output to) rather than with tools."
    ),
    parallel_voids_strict=False,
    argument_repair=(
        "answer {calls} with a tool message (tool_name set) saying what was wrong rather than "
        "dropping the call, and keep the raw arguments for the post-mortem: Ollama takes a "
        "history with a call left unanswered, and the model reads it as never run."
    ),
    framing="ndjson",
)
