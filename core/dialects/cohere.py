"""Cohere's v2 chat: `POST .../v2/chat` (api.cohere.com, api.cohere.ai, and servers that serve
the same API), as the `cohere` SDK's ClientV2, LangChain's ChatCohere and the Vercel AI SDK speak
it. Cohere's v1 chat (`/v1/chat`: `message`, `chat_history`, `tool_results`) is another body,
which tooltap does not read.

What Cohere documents (its API reference and guides, the SDK's v2 types) and does (recordings
of its API), and what is read from it:
- `tools[]` are `{type: "function", function: {name, description, parameters}}`. A call is
  `message.tool_calls[]{id, type, function: {name, arguments}}`, its arguments a JSON string,
  kept as sent; `message.tool_plan` is the model's plan before its calls, and `content[]` holds
  `text` and `thinking` blocks. A response names no model: the request's is the turn's.
- `strict_tools: true` holds the calls of every tool to its schema (Structured Outputs for
  tools). Cohere documents no conflict between it and several calls in one turn, so a fan-out
  voids nothing here (a finding Cohere does not document would be false). `tool_choice` is
  `REQUIRED` (a tool must be called: every tool stays callable) or `NONE` (none may be).
- `response_format: {type: "json_object"}` is JSON mode. With a schema, the output is held to
  it: the API reference and the SDK call the field `json_schema`, Cohere's own guide and
  LangChain send `schema`; either is read as the schema (reading one as no schema would say
  `no-schema` of a turn Cohere may well hold to its schema).
- The stream is SSE whose `event:` names repeat the JSON's `type`, read on the type as the SDK
  does: `message-start`, `content-start`/`-delta`/`-end`, `tool-plan-delta`, `tool-call-start`
  (one call, whole but for its arguments), `tool-call-delta` (argument pieces), `tool-call-end`,
  `citation-start`/`-end`, `message-end` (`finish_reason`, `usage`), then a bare
  `data: [DONE]`. A `message-end` whose finish_reason is `ERROR` or `TIMEOUT` is the API's
  error under a 200: its `error` and `error_type` (`INVALID_TOOL_GENERATION`).
- `usage.tokens` counts what the model read and wrote: the turn's input and output tokens.
  `usage.billed_units` counts what was billed (the prompt Cohere adds around tools and
  documents is not), and `cached_tokens` the prompt tokens read from cache.
- The loop: the guides send one `tool` message per call, naming it by `tool_call_id`, its
  content a string or a list of `text` and `document` blocks. The API's own rules for a history
  are not documented, so only what is certain is reported: a result for no call made before it
  is an orphan, a second result for a call a duplicate, an empty result empty; a call is
  unanswered only when other calls of its turn were answered (a turn answered not at all may
  have been declined on purpose).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from ..assembly import Blocks, StreamAssembler
from ..errors import ApiError
from ..jsontext import dumps
from ..loop import Checker, LoopReport, error_payload, is_empty, last_index
from ..records import Limits
from ..schema import SEED_LIMITS
from ..shapes import as_dict, as_int, as_list, as_str
from ..turn import Tool, ToolCall, Turn, make_call, tokens
from .base import Dialect, Prior, fanout_repairs, role_text

FAILED = ("ERROR", "TIMEOUT")  # finish reasons that end a turn the API could not give


def recognise(method: str, path: str) -> bool:
    """POST .../v2/chat (behind a path prefix too). Pure."""
    return method.upper() == "POST" and path.endswith("/v2/chat")


# --- the turn --------------------------------------------------------------------------------


def _tools(request: Mapping[str, Any]) -> list[Tool]:
    """Every named function; strict_tools is one switch for all of them."""
    strict = {"strict": request.get("strict_tools")}
    functions = (as_dict(as_dict(tool).get("function")) for tool in as_list(request.get("tools")))
    return [
        Tool.declared(name, "function", {**function, **strict})
        for function in functions
        if (name := as_str(function.get("name")).strip())
    ]


def _output_format(request: Mapping[str, Any]) -> dict[str, Any]:
    declared = as_dict(request.get("response_format"))
    if declared.get("type") != "json_object":
        return dict(declared)
    given = (declared.get("json_schema"), declared.get("schema"))
    schema = next((value for value in given if isinstance(value, dict)), None)
    if schema is not None:  # Cohere holds the output to the schema: no strict to say
        return {"type": "json_schema", "schema": schema, "strict": True}
    return {"type": "json_object"}


def _callable(request: Mapping[str, Any]) -> list[str] | None:
    """NONE leaves no tool callable; REQUIRED (or nothing) narrows nothing."""
    return [] if as_str(request.get("tool_choice")).upper() == "NONE" else None


def usage(response: Mapping[str, Any]) -> dict[str, int]:
    """`usage.tokens`: what the model read (cache hits among it) and wrote; `cached_tokens`: the
    prompt tokens read from cache. `billed_units` is what was billed, not what was read. Pure."""
    counted = as_dict(response.get("usage"))
    used = as_dict(counted.get("tokens"))
    return tokens(used.get("input_tokens"), used.get("output_tokens"), counted.get("cached_tokens"))


def read_turn(request: Mapping[str, Any], response: Mapping[str, Any]) -> Turn:
    message = as_dict(response.get("message"))
    calls: list[ToolCall] = []
    for call in map(as_dict, as_list(message.get("tool_calls"))):
        function = as_dict(call.get("function"))
        name = as_str(function.get("name")).strip()
        if name:
            calls.append(
                make_call(as_str(call.get("id")), name, "function_call", function, "arguments")
            )
    types = [as_str(as_dict(block).get("type")) for block in as_list(message.get("content"))]
    types += [key for key in ("tool_plan", "tool_calls") if message.get(key)]
    return Turn(
        api="cohere",
        model=as_str(request.get("model")) or None,
        response_id=as_str(response.get("id")) or None,
        tools=_tools(request),
        output_format=_output_format(request),
        calls=calls,
        awaiting=[c.call_id for c in calls if c.call_id],
        output_types=[kind for kind in types if kind],
        callable_names=_callable(request),
    )


def finish_reasons(response: Mapping[str, Any]) -> list[str]:
    """finish_reason: COMPLETE, STOP_SEQUENCE, MAX_TOKENS, TOOL_CALL, ERROR, TIMEOUT. Pure."""
    reason = as_str(response.get("finish_reason"))
    return [reason] if reason else []


# --- the stream --------------------------------------------------------------------------------


class Assembler(StreamAssembler):
    """Cohere's stream events, assembled into the response the same call returns unstreamed:
    content blocks and tool calls by their `index`, each piece appended to what its start
    gave; the plan's pieces joined; `message-end` ends the stream, and `[DONE]` after it says
    nothing more. A `message-end` whose finish_reason is ERROR or TIMEOUT is the API's error."""

    def __init__(self) -> None:
        super().__init__()
        self.top: dict[str, Any] = {}  # id, finish_reason, usage
        self.content = Blocks()
        self.plan: list[str] = []
        self.calls = Blocks()
        self.citations: list[Any] = []

    def event(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        delta = as_dict(event.get("delta"))
        message = as_dict(delta.get("message"))
        if isinstance(event.get("id"), str):
            self.top.setdefault("id", event["id"])
        if kind == "content-start":
            self.content.open(
                as_int(event.get("index"), len(self.content)), as_dict(message.get("content"))
            )
        elif kind == "content-delta":
            index, said = as_int(event.get("index")), as_dict(message.get("content"))
            for key in ("text", "thinking"):
                self.content.add(index, said.get(key))
                self.said |= bool(said.get(key))
        elif kind == "tool-plan-delta" and isinstance(message.get("tool_plan"), str):
            self.plan.append(message["tool_plan"])
            self.said |= bool(message["tool_plan"])  # the model's plan is its first output
        elif kind == "tool-call-start":
            started = message.get("tool_calls")
            if isinstance(started, list):  # Cohere sends one object; a list is read whole
                first = len(self.calls)
                for offset, call in enumerate(started):
                    self._start(first + offset, as_dict(call))
            else:
                self._start(as_int(event.get("index"), len(self.calls)), as_dict(started))
        elif kind == "tool-call-delta":
            piece = as_dict(as_dict(message.get("tool_calls")).get("function")).get("arguments")
            self.calls.add(as_int(event.get("index")), piece)
            self.said |= bool(piece)
        elif kind == "citation-start":
            cited = message.get("citations")
            self.citations += cited if isinstance(cited, list) else [cited]
        elif kind == "message-end":
            self._end(delta)

    def _start(self, index: int, call: Mapping[str, Any]) -> None:
        function = as_dict(call.get("function"))
        self.calls.open(index, {
            "id": as_str(call.get("id")),
            "type": as_str(call.get("type")) or "function",
            "name": as_str(function.get("name")),
        })  # fmt: skip
        self.calls.add(index, function.get("arguments"))  # "" as Cohere starts a call
        self.said |= bool(function.get("name"))  # a call's name comes with its start

    def _end(self, delta: Mapping[str, Any]) -> None:
        self.done = True
        reason = delta.get("finish_reason")
        if isinstance(reason, str):
            self.top["finish_reason"] = reason
        if isinstance(delta.get("usage"), dict):
            self.top["usage"] = delta["usage"]
        if reason in FAILED or delta.get("error"):
            kind = as_str(delta.get("error_type")) or as_str(reason)
            self.errors.append(ApiError(type=kind, message=as_str(delta.get("error"))))

    def result(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant"}  # the only role a response has
        content = []
        for _, started, text in self.content:
            block = dict(started)
            key = "thinking" if block.get("type") == "thinking" else "text"
            block[key] = as_str(block.get(key)) + (text or "")
            content.append(block)
        if content:
            message["content"] = content
        if self.plan:
            message["tool_plan"] = "".join(self.plan)
        if self.calls:
            message["tool_calls"] = [
                # Nothing ever said the arguments: the key is missing, not empty.
                {"id": call["id"], "type": call["type"], "function": {"name": call["name"]}
                 | ({} if arguments is None else {"arguments": arguments})}
                for _, call, arguments in self.calls
            ]  # fmt: skip
        if self.citations:
            message["citations"] = self.citations
        return {**self.top, "message": message}


# --- the loop --------------------------------------------------------------------------------


def _role(message: Mapping[str, Any]) -> str:
    return as_str(message.get("role")).lower()


def _failed(content: Any) -> bool:
    """Does a result say its tool failed: its text, or a document's data, an error payload?"""
    if isinstance(content, str):
        return error_payload(content)
    for block in map(as_dict, as_list(content)):
        data = as_dict(block.get("document")).get("data")
        said = data if isinstance(data, str) else dumps(data) if isinstance(data, dict) else ""
        if error_payload(as_str(block.get("text")) or said):
            return True
    return False


def check_loop(request: Mapping[str, Any], prior: Prior = None) -> LoopReport:
    """The tool loop of a v2 chat request, as far as it is certain. Pure."""
    messages = [as_dict(m) for m in as_list(request.get("messages"))]
    new_from = last_index(messages, lambda m: _role(m) == "assistant")
    check = Checker("tool_call_id", "messages", new_from)
    made: set[str] = set()  # the calls made so far
    answered: set[str] = set()
    for index, message in enumerate(messages):
        if _role(message) == "assistant":
            for call in map(as_dict, as_list(message.get("tool_calls"))):
                made.add(as_str(call.get("id")))
                answered.discard(as_str(call.get("id")))  # an id made again is owed again
            continue
        if _role(message) != "tool":
            continue
        call_id, content = as_str(message.get("tool_call_id")), message.get("content")
        if is_empty(content):
            check.error("empty-result", [call_id], index)
        if not call_id:
            continue
        check.result(call_id, index, _failed(content), check.where(index), content)
        if call_id in answered:
            check.error("duplicate-result", [call_id], index)
        elif call_id in made:
            answered.add(call_id)
        else:
            check.error("orphan-result", [call_id], index)
    turn = messages[new_from] if messages and _role(messages[new_from]) == "assistant" else {}
    newest = [as_str(as_dict(call).get("id")) for call in as_list(turn.get("tool_calls"))]
    newest = [call_id for call_id in newest if call_id]
    left = [call_id for call_id in newest if call_id not in answered]
    if left and len(left) < len(newest):
        check.error("unanswered-call", left, new_from)
    return check.report


# --- the strict subset and the repairs ---------------------------------------------------------

COHERE = "Cohere Structured Outputs (docs.cohere.com, Structured Outputs: schema constraints)"
# What the guide lists as unsupported ("Unsupported schema features"), the numeric ranges with
# their exclusive forms.
UNSUPPORTED = (
    "allOf", "oneOf", "not", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "minItems", "maxItems", "minLength", "maxLength", "uniqueItems",
)  # fmt: skip
FORMATS = frozenset({"date-time", "uuid", "date", "time"})
ANCHORS = re.compile(r"\^|\$|\?=|\?!")  # the regular expression features it does not support
MAX_NODES = 10_000  # schema nodes walked; the work on one is bounded


def _objects(schema: Any) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every sub-schema, with where it is, breadth first and bounded."""
    queue: list[tuple[str, Any]] = [("$", schema)]
    for path, node in queue:
        if len(queue) > MAX_NODES:
            return
        if not isinstance(node, dict):
            continue
        yield path, node
        for key in ("properties", "$defs", "definitions"):
            queue += [(f"{path}.{key}.{k}", v) for k, v in as_dict(node.get(key)).items()]
        for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
            queue += [(f"{path}.{key}[{i}]", v) for i, v in enumerate(as_list(node.get(key)))]
        queue += [(f"{path}.{key}", node.get(key)) for key in ("items", "additionalProperties")]


def cohere_blockers(schema: Any) -> list[str]:
    """What a schema says outside the subset Cohere's Structured Outputs support, by the
    guide's own list: the same for a tool's parameters and for a format. Pure."""
    if not isinstance(schema, dict):
        return ["$: not a schema object"]
    found = [] if schema.get("type") == "object" else ["$: the top level must have type object"]
    for path, node in _objects(schema):
        declared = node.get("type")
        kinds: list[Any] = declared if isinstance(declared, list) else [declared]
        if "object" in kinds and not as_list(node.get("required")):
            found.append(f"{path}: an object needs at least one required property")
        found += [f"{path}.{key}: not supported" for key in UNSUPPORTED if key in node]
        pattern = node.get("pattern")
        if isinstance(pattern, str) and ANCHORS.search(pattern):
            found.append(f"{path}.pattern: ^, $, ?= and ?! are not supported")
        if "format" in node and not (isinstance(node["format"], str) and node["format"] in FORMATS):
            found.append(f"{path}.format: only date-time, uuid, date and time are supported")
    return found


def blockers(value: Any, limits: Limits = SEED_LIMITS, *, tool: bool = True) -> list[str]:
    """Cohere's own subset, never OpenAI's: a 400 from one provider is not explained with
    another's rules. Pure."""
    return cohere_blockers(value)


def format_repairs(
    response: Mapping[str, Any], state: Any, loose: list[tuple[str, Any]], limits: Limits
) -> list[str]:
    """The repairs for an output-format state, in Cohere's terms. Pure."""
    lines = []
    if state == "no-schema":
        lines.append(
            "give response_format a json_schema beside type json_object: JSON mode holds the "
            "output to JSON, and to no shape."
        )
    if state == "advisory-tools":
        lines.append(
            "set strict_tools: true, or validate tool arguments in your own handler: the "
            "format holds the text, never a tool call's arguments."
        )
        for name, parameters in loose:
            if found := cohere_blockers(parameters):
                lines.append(f"strict_tools on tool {name} needs these fixed first:")
                lines += [f"  {line}" for line in found]
    if state in ("enforced", "advisory-tools"):
        schema = as_dict(as_dict(response.get("text")).get("format")).get("schema")
        if found := cohere_blockers(schema):
            lines.append(
                "check these in your own code: they are outside the subset Cohere's "
                f"Structured Outputs support: {'; '.join(found[:20])}"
                + (f" (and {len(found) - 20} more)" if len(found) > 20 else "")
            )
    return lines


def instructions(request: Mapping[str, Any]) -> str:
    """The system messages' text. Pure."""
    return role_text(request.get("messages"), ("system",))


DIALECT = Dialect.from_names(
    globals(),
    api="cohere",
    state_repairs=fanout_repairs(
        "set strict_tools: true (Cohere documents no conflict between strict tools and "
        "several calls in one turn)."
    ),
    parallel_voids_strict=False,
    argument_repair=(
        "answer {calls} with a tool message (its tool_call_id set) saying what was wrong "
        "rather than dropping the call, and keep the raw arguments for the post-mortem: "
        "Cohere's tool use sends one tool message for each call."
    ),
)
