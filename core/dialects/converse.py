"""Amazon Bedrock Converse: `POST /model/{model}/converse` and `/converse-stream`.

One request shape for every model on Bedrock (Strands, LangChain's ChatBedrockConverse and
pydantic-ai speak it): `toolConfig.tools[].toolSpec` (`name`, `inputSchema.json`, `strict`),
`toolChoice`, `toolUse` and `toolResult` blocks. The body names no model: the path does. The
stream is AWS's event stream, whose events tooltap.core.stream hands over as
`{event type: payload}`, the way botocore does.

What AWS documents, and what is read from it:
- Strict tools and the structured-output format (`outputConfig.textFormat`) have their own JSON
  Schema subset (the Bedrock user guide, "Get validated JSON results from models"): its listed
  exclusions are the blockers here. It does not say that `required` must list every property,
  so that is not asked.
- AWS says nothing of strict tools and parallel calls together: a fan-out never voids strict
  here (a finding AWS does not document would be a false one). Claude's
  `disable_parallel_tool_use`, passed in `additionalModelRequestFields.tool_choice`, turns
  parallel calls off.
- The loop as Bedrock refuses it: a call is answered by a `toolResult` in the very next
  message ("Expected toolResult blocks at messages.N.content for the following Ids"), and a
  result there names a call of the turn before ("The number of toolResult blocks ... exceeds
  the number of toolUse blocks of previous turn"). Text beside the results is accepted
  (LangChain sends it before them). An empty result is refused only with `status: "error"`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from ..assembly import Blocks, StreamAssembler, json_or_text
from ..jsontext import dumps, loads
from ..loop import Checker, LoopReport, error_payload, is_empty
from ..records import Limits
from ..schema import SEED_LIMITS
from ..shapes import as_bool, as_dict, as_int, as_list, as_str
from ..turn import Tool, ToolCall, Turn, make_call, plus, tokens
from .base import Dialect, Prior, advisory_tools_repairs, fanout_repairs, text_of

_PATH = re.compile(r"/model/(?P<model>[^/]+)/(?:converse|converse-stream)$")


def model_in_path(path: str) -> str | None:
    """The model id (or inference profile, or ARN) the path names. Pure."""
    found = _PATH.search(path)
    return unquote(found["model"]) if found else None


def recognise(method: str, path: str) -> bool:
    """POST /model/{model}/converse and /converse-stream. Pure."""
    return method.upper() == "POST" and model_in_path(path) is not None


# --- the turn --------------------------------------------------------------------------------


def _tools(request: Mapping[str, Any]) -> list[Tool]:
    out: list[Tool] = []
    for entry in map(as_dict, as_list(as_dict(request.get("toolConfig")).get("tools"))):
        spec = as_dict(entry.get("toolSpec"))
        name = as_str(spec.get("name")).strip()
        if name:  # a cachePoint or a systemTool (Nova's own) is no client tool
            out.append(
                Tool(
                    name=name,
                    strict=as_bool(spec.get("strict")),
                    parameters=as_dict(spec.get("inputSchema")).get("json"),
                    description=spec.get("description"),
                )
            )
    return out


def _callable(request: Mapping[str, Any]) -> list[str] | None:
    """toolChoice {tool: {name}} leaves that tool; auto and any leave them all."""
    forced = as_str(
        as_dict(as_dict(as_dict(request.get("toolConfig")).get("toolChoice")).get("tool")).get(
            "name"
        )
    )
    return [forced] if forced else None


def _serial(request: Mapping[str, Any]) -> bool:
    """Claude's disable_parallel_tool_use, passed through additionalModelRequestFields."""
    extra = as_dict(as_dict(request.get("additionalModelRequestFields")).get("tool_choice"))
    return extra.get("disable_parallel_tool_use") is True


def _output_format(request: Mapping[str, Any]) -> dict[str, Any]:
    """outputConfig.textFormat: a JSON schema (sent as a string) the output is held to."""
    fmt = as_dict(as_dict(request.get("outputConfig")).get("textFormat"))
    if fmt.get("type") != "json_schema":
        return {}
    declared = as_dict(as_dict(fmt.get("structure")).get("jsonSchema"))
    schema = declared.get("schema")
    value = loads(schema)[0] if isinstance(schema, str) else schema
    # Bedrock validates the output against it: always strict.
    return {"type": "json_schema", "name": declared.get("name"), "schema": value, "strict": True}


def _client_call(block: Mapping[str, Any]) -> Mapping[str, Any]:
    """A block's toolUse when the client must run it (Nova's server tools run on Bedrock)."""
    use = as_dict(block.get("toolUse"))
    return {} if use.get("type") == "server_tool_use" else use


def read_turn(request: Mapping[str, Any], response: Mapping[str, Any]) -> Turn:
    content = [
        as_dict(b)
        for b in as_list(as_dict(as_dict(response.get("output")).get("message")).get("content"))
    ]
    calls: list[ToolCall] = []
    for block in content:
        use = _client_call(block)
        name = as_str(use.get("name")).strip()
        if name:
            calls.append(make_call(as_str(use.get("toolUseId")), name, "tool_use", use, "input"))
    return Turn(
        api="converse",
        model=as_str(request.get("model")) or None,
        tools=_tools(request),
        parallel_tool_calls=False if _serial(request) else None,
        output_format=_output_format(request),
        calls=calls,
        awaiting=[c.call_id for c in calls if c.call_id],
        output_types=[next(iter(block), "") for block in content],
        callable_names=_callable(request),
    )


def finish_reasons(response: Mapping[str, Any]) -> list[str]:
    """The stopReason. Pure."""
    reason = as_str(response.get("stopReason"))
    return [reason] if reason else []


# --- the stream --------------------------------------------------------------------------------


class Assembler(StreamAssembler):
    """Converse stream events, `{event type: payload}`: blocks by contentBlockIndex.

    A toolUse block opens with its id and name; its input comes as partial JSON text in
    deltas (read as in the unstreamed response: parsed, or kept raw when it does not parse).
    A text block has no start: its first delta opens it. messageStop is the final event;
    metadata (usage) follows it.
    """

    def __init__(self) -> None:
        super().__init__()
        self.blocks = Blocks()
        self.stop_reason: str | None = None
        self.usage: Any = None

    def event(self, event: Mapping[str, Any]) -> None:
        for kind, payload in event.items():
            body = as_dict(payload)
            index = as_int(body.get("contentBlockIndex"))
            if kind == "contentBlockStart":
                use = as_dict(as_dict(body.get("start")).get("toolUse"))
                if use:
                    self.blocks.open(index, {"toolUse": dict(use)})
                    self.said = True  # a call's name
            elif kind == "contentBlockDelta":
                self.said = True  # text, reasoning or a call's input
                self._delta(index, as_dict(body.get("delta")))
            elif kind == "messageStop":
                self.stop_reason = as_str(body.get("stopReason")) or None
                self.done = True
            elif kind == "metadata":
                self.usage = body.get("usage")

    def _delta(self, index: int, delta: Mapping[str, Any]) -> None:
        block = self.blocks.get(index)
        if "toolUse" in delta:
            if block is not None and "toolUse" in block:
                self.blocks.add(index, as_dict(delta.get("toolUse")).get("input"))
        elif isinstance(delta.get("text"), str):
            if block is None:
                block = self.blocks.open(index, {"text": ""})
            if "text" in block:
                self.blocks.add(index, delta["text"])

    def result(self) -> dict[str, Any]:
        content = []
        for _, started, text in self.blocks:
            block = dict(started)
            if "toolUse" in block:
                block["toolUse"] = {**block["toolUse"], "input": json_or_text(text)}
            elif "text" in block:
                block["text"] = text or ""
            content.append(block)
        response: dict[str, Any] = {
            "output": {"message": {"role": "assistant", "content": content}}
        }
        if self.stop_reason is not None:
            response["stopReason"] = self.stop_reason
        if self.usage is not None:
            response["usage"] = self.usage
        return response


# --- the loop --------------------------------------------------------------------------------


def _calls(message: Mapping[str, Any]) -> list[str]:
    blocks = map(as_dict, as_list(message.get("content")))
    return [
        as_str(_client_call(b).get("toolUseId")) for b in blocks if _client_call(b).get("toolUseId")
    ]


def _result_text(result: Mapping[str, Any]) -> str:
    """A toolResult's content as the text the model reads: text parts, and JSON parts."""
    parts = []
    for part in map(as_dict, as_list(result.get("content"))):
        if isinstance(part.get("text"), str):
            parts.append(part["text"])
        elif "json" in part:
            parts.append(dumps(part["json"]))
    return "".join(parts)


def check_loop(request: Mapping[str, Any], prior: Prior = None) -> LoopReport:
    """The tool loop of a Converse request: each call answered in the very next message. Pure."""
    messages = [as_dict(m) for m in as_list(request.get("messages"))]
    newest = next(
        (i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "assistant"), 0
    )
    check = Checker("toolUseId", "messages", newest)
    pending: dict[str, int] = {}
    answered: set[str] = set()
    for index in range(newest, len(messages)):
        message = messages[index]
        if message.get("role") == "assistant":
            check.unanswered(pending)
            pending, answered = dict.fromkeys(_calls(message), index), set()
            continue
        blocks = [as_dict(b) for b in as_list(message.get("content"))]
        for position, block in enumerate(blocks):
            result = as_dict(block.get("toolResult"))
            if not result:
                continue
            where = check.where(index, position)
            call_id = as_str(result.get("toolUseId"))
            failed = result.get("status") == "error"
            if failed and is_empty(result.get("content")):
                check.error("empty-result", [call_id], index, where)
            check.result(
                call_id,
                index,
                failed or error_payload(_result_text(result)),
                where,
                result.get("content"),
            )
            if call_id in pending:
                del pending[call_id]
                answered.add(call_id)
            elif call_id in answered:
                check.error("duplicate-result", [call_id], index, where)
            else:
                check.error("orphan-result", [call_id], index, where)
        # Only the very next message may answer: what it left open stays unanswered.
        check.unanswered(pending)
        pending = {}
    check.unanswered(pending)
    return check.report


# --- the strict subset ---------------------------------------------------------------------------

BEDROCK = "Bedrock structured outputs (the Bedrock user guide)"
FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"}
)
UNSUPPORTED = ("minimum", "maximum", "multipleOf", "minLength", "maxLength")


def converse_blockers(root: Any) -> list[str]:
    """What AWS lists as outside its strict subset, found in a schema. Pure.

    Only the exclusions the guide names: a keyword it neither lists nor excludes is not called
    a blocker.
    """
    problems: list[str] = []
    edges: dict[str, set[str]] = {}  # where a $ref sits ("#" or "#/$defs/name") -> its targets
    stack: list[tuple[Any, str, str]] = [(root, "$", "#")]
    while stack:
        node, path, owner = stack.pop()
        if not isinstance(node, dict):
            continue
        problems.extend(
            f"{path}: {k} is not supported ({BEDROCK})" for k in UNSUPPORTED if k in node
        )
        if "additionalProperties" in node and node["additionalProperties"] is not False:
            problems.append(f"{path}: additionalProperties must be false when given ({BEDROCK})")
        fmt = node.get("format")
        if isinstance(fmt, str) and fmt not in FORMATS:
            problems.append(f"{path}: format {fmt!r} is not supported ({BEDROCK})")
        items = node.get("minItems")
        if isinstance(items, int) and not isinstance(items, bool) and items > 1:
            problems.append(f"{path}: minItems above 1 is not supported ({BEDROCK})")
        ref = node.get("$ref")
        if isinstance(ref, str) and not ref.startswith("#"):
            problems.append(f"{path}: an external $ref is not supported ({BEDROCK})")
        elif isinstance(ref, str):
            edges.setdefault(owner, set()).add(ref)
        below = [
            (sub, f"{path}.{name}", owner) for name, sub in as_dict(node.get("properties")).items()
        ]
        for key in ("$defs", "definitions"):
            below += [
                (sub, f"{path}.{key}.{n}", f"#/{key}/{n}")
                for n, sub in as_dict(node.get(key)).items()
            ]
        below += [
            (node[k], f"{path}.{k}", owner)
            for k in ("items", "additionalProperties")
            if isinstance(node.get(k), dict)
        ]
        for key in ("anyOf", "allOf"):
            below += [
                (sub, f"{path}.{key}[{i}]", owner) for i, sub in enumerate(as_list(node.get(key)))
            ]
        stack.extend(reversed(below))
    if _cycle(edges):
        problems.append(f"$: a recursive schema is not supported ({BEDROCK})")
    return problems


def _cycle(edges: Mapping[str, set[str]]) -> bool:
    """Does a chain of $refs come back to where it started?"""
    for start in edges:
        seen, todo = set(), list(edges[start])
        while todo:
            at = todo.pop()
            if at == start:
                return True
            if at not in seen:
                seen.add(at)
                todo.extend(edges.get(at, ()))
    return False


def blockers(value: Any, limits: Limits = SEED_LIMITS, *, tool: bool = True) -> list[str]:
    """Bedrock's own subset, never OpenAI's nor Anthropic's. Pure."""
    return converse_blockers(value)


def usage(response: Mapping[str, Any]) -> dict[str, int]:
    """Bedrock's usage: inputTokens without the cache's reads and writes, which it counts
    apart. Pure."""
    counted = as_dict(response.get("usage"))
    read = counted.get("cacheReadInputTokens")
    return tokens(
        plus(counted.get("inputTokens"), read, counted.get("cacheWriteInputTokens")),
        counted.get("outputTokens"),
        read,
    )


def instructions(request: Mapping[str, Any]) -> str:
    """`system`: a list of text blocks. Pure."""
    return text_of(request.get("system"))


DIALECT = Dialect.from_names(
    globals(),
    api="converse",
    state_repairs=fanout_repairs(
        "set strict: true on the toolSpec (for models Bedrock supports it on)."
    ),
    format_repairs=advisory_tools_repairs(
        "Set strict: true on every toolSpec beside the validated output format.",
        converse_blockers,
    ),
    parallel_voids_strict=False,
)
