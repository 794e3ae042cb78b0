"""OpenAI Chat Completions: `POST .../chat/completions` (Azure and compatible servers too).

Chat responses do not echo tools: tools and settings come from the request. `n > 1` gives
alternative completions, not parallel calls, so choice 0 is read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..assembly import Blocks, StreamAssembler
from ..loop import Checker, LoopReport, error_payload, is_empty, last_index
from ..shapes import as_bool, as_dict, as_int, as_list, as_str
from ..turn import Tool, ToolCall, Turn, callable_names, make_call
from .base import Dialect, Prior, role_text

# xAI's Grok models, asked directly or through a gateway (OpenRouter's x-ai/...): xAI holds every
# tool call and a json_schema format to its schema, `strict` or not ("the strict flag is
# implicitly always true", its Structured Outputs guide), and documents no conflict with
# parallel calls.
_XAI = ("grok-", "x-ai/grok-")
# Servers that sample under a grammar built from a json_schema format's schema, `strict` or
# not, named by the system_fingerprint they answer with: Ollama's OpenAI-compatible API
# ("fp_ollama") and llama.cpp's server (its build, "b5379-360a9c98").
_OLLAMA = "fp_ollama"
_LLAMA_CPP = re.compile(r"b\d+-[0-9a-f]+")


def recognise(method: str, path: str) -> bool:
    """POST .../chat/completions, Azure's deployments and compatible servers included. Pure."""
    return method.upper() == "POST" and path.endswith("/chat/completions")


def _typed(entry: Any) -> tuple[str, Mapping[str, Any], str] | None:
    """A declared tool or a message's call: its kind (function or custom), the object under that
    key, and the name it holds; None for any other entry, or one with no name. Pure."""
    # The shapes read inline (as_dict, as_str): every tool and call of every exchange comes here.
    if not isinstance(entry, dict):
        return None
    kind = entry.get("type")
    kind = kind if isinstance(kind, str) and kind else "function"
    if kind not in {"function", "custom"}:
        return None
    inner = entry.get(kind)
    inner = inner if isinstance(inner, dict) else {}
    name = inner.get("name")
    name = name.strip() if isinstance(name, str) else ""
    return (kind, inner, name) if name else None


def _tools(request: Mapping[str, Any]) -> list[Tool]:
    out: list[Tool] = []
    tools = request.get("tools")
    for tool in tools if isinstance(tools, list) else ():
        if (typed := _typed(tool)) is not None:
            kind, inner, name = typed
            out.append(Tool.declared(name, kind, inner))
    for legacy in map(as_dict, as_list(request.get("functions"))):
        name = as_str(legacy.get("name")).strip()
        if name:
            out.append(Tool.declared(name, "function", legacy))
    return out


# A message's output types, each by the key that holds it, in order (then function_call).
OUTPUT_TYPES = (("content", "text"), ("refusal", "refusal"), ("tool_calls", "tool_calls"))


def read_turn(request: Mapping[str, Any], response: Mapping[str, Any]) -> Turn:
    # n > 1 gives alternative completions, not parallel calls: read choice 0.
    choices = [c for c in as_list(response.get("choices")) if isinstance(c, dict)]
    first: Mapping[str, Any] = choices[0] if choices else {}
    for choice in choices:
        if choice.get("index", 0) == 0:
            first = choice
            break
    message = as_dict(first.get("message"))
    calls: list[ToolCall] = []
    made = message.get("tool_calls")
    for call in made if isinstance(made, list) else ():
        if (typed := _typed(call)) is None:
            continue
        kind, inner, name = typed
        if kind == "function":
            calls.append(
                make_call(as_str(call.get("id")), name, "function_call", inner, "arguments")
            )
        else:
            calls.append(
                make_call(as_str(call.get("id")), name, "custom_tool_call", inner, "input")
            )
    legacy = as_dict(message.get("function_call"))
    if as_str(legacy.get("name")).strip():
        calls.append(
            make_call("", as_str(legacy.get("name")).strip(), "function_call", legacy, "arguments")
        )
    types = [kind for key, kind in OUTPUT_TYPES if message.get(key)]
    if legacy:
        types.append("function_call")
    model = as_str(response.get("model")) or as_str(request.get("model"))
    xai = model.startswith(_XAI)
    fingerprint = as_str(response.get("system_fingerprint"))
    grammar = fingerprint == _OLLAMA or (
        fingerprint[:1] == "b" and _LLAMA_CPP.fullmatch(fingerprint) is not None
    )
    return Turn(
        api="chat",
        model=model or None,
        response_id=as_str(response.get("id")) or None,
        tools=_tools(request),
        parallel_tool_calls=as_bool(request.get("parallel_tool_calls")),
        output_format=dict(as_dict(request.get("response_format"))),
        calls=calls,
        awaiting=[c.call_id for c in calls if c.call_id],
        output_types=types,
        # Most requests choose nothing: then every tool is callable (None).
        callable_names=(
            callable_names(_tool_choice(request))
            if "tool_choice" in request or "function_call" in request
            else None
        ),
        calls_held=xai,
        format_held=xai or grammar,
    )


def _tool_choice(request: Mapping[str, Any]) -> Any:
    """tool_choice, or the legacy function_call ("none", or {"name"} to force one)."""
    if "tool_choice" in request or "function_call" not in request:
        return request.get("tool_choice")
    legacy = request["function_call"]
    return {"type": "function", **legacy} if isinstance(legacy, dict) else legacy


HEAD = ("id", "model", "created", "system_fingerprint")  # a stream's, from its first chunks
# What in a delta is model output: text, a refusal, reasoning (compatible servers'
# reasoning_content), a call.
OUTPUT = ("content", "refusal", "reasoning_content", "reasoning", "tool_calls")


class Assembler(StreamAssembler):
    """Chat Completions chunks: tool calls accumulate by index within a choice.

    Never by id: some servers send a new id on every fragment. Azure's leading
    chunk has empty id and model, and the usage chunk has no choices.
    """

    def __init__(self) -> None:
        super().__init__()
        self.head: dict[str, Any] = {}
        self.usage: Any = None
        self.choices: dict[int, dict[str, Any]] = {}

    def done_marker(self) -> None:
        self.done = True

    @property
    def complete(self) -> bool:
        # Some compatible servers (HF router, Perplexity) end after the last
        # finish_reason, with no [DONE]: every choice finished is a whole turn.
        return self.done or (
            bool(self.choices) and all(slot["finish"] for slot in self.choices.values())
        )

    def event(self, chunk: Mapping[str, Any]) -> None:
        # The tokens spent are said even beside an error (OpenRouter's last chunk has both).
        usage, groq = chunk.get("usage"), chunk.get("x_groq")
        if usage:
            self.usage = usage
        elif isinstance(groq, dict) and groq.get("usage"):  # Groq's last chunk says it there
            self.usage = groq["usage"]
        if chunk.get("error"):
            self.error(chunk)
            return
        if len(self.head) < len(HEAD):  # each is kept from the first chunk that says it
            for key in HEAD:
                if chunk.get(key) and key not in self.head:
                    self.head[key] = chunk[key]
        choices = chunk.get("choices")
        for choice in choices if isinstance(choices, list) else []:
            if isinstance(choice, dict):
                self._choice(choice)

    def _choice(self, choice: Mapping[str, Any]) -> None:
        # One call a chunk: the shapes read inline (as_int, as_dict), as every chunk comes here.
        index = choice.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            index = 0
        slot = self.choices.get(index)
        if slot is None:
            slot = self.choices[index] = {
                "role": None, "content": [], "refusal": [], "calls": Blocks(), "finish": None
            }  # fmt: skip
        if choice.get("finish_reason"):
            slot["finish"] = choice["finish_reason"]
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            delta = {}
        if isinstance(delta.get("role"), str):
            slot["role"] = delta["role"]
        content, refusal = delta.get("content"), delta.get("refusal")
        if isinstance(content, str):
            slot["content"].append(content)
        if isinstance(refusal, str):
            slot["refusal"].append(refusal)
        # Output: text, a refusal, reasoning (compatible servers' reasoning_content), a call.
        if not self.said:
            self.said = any(delta.get(k) for k in OUTPUT)
        fragments = delta.get("tool_calls")
        for fragment in fragments if isinstance(fragments, list) else []:
            if not isinstance(fragment, dict):
                continue
            calls: Blocks = slot["calls"]
            index = as_int(fragment.get("index"), len(calls))
            call = calls.get(index) or calls.open(index, {"id": None, "type": None, "name": None})
            function = as_dict(fragment.get("function"))
            if None in call.values():  # the first fragment that says each is kept
                for key, value in (("id", fragment), ("type", fragment), ("name", function)):
                    if value.get(key) and call[key] is None:
                        call[key] = value[key]
            calls.add(index, function.get("arguments"))

    def result(self) -> dict[str, Any]:
        choices = []
        for index, slot in sorted(self.choices.items()):
            message: dict[str, Any] = {
                "role": slot["role"] or "assistant",
                "content": "".join(slot["content"]) if slot["content"] else None,
            }
            if slot["refusal"]:
                message["refusal"] = "".join(slot["refusal"])
            if slot["calls"]:
                message["tool_calls"] = [
                    {
                        "id": call["id"] or "",
                        "type": call["type"] or "function",
                        # No fragment with arguments: the key was missing, not empty.
                        "function": {"name": call["name"] or ""}
                        | ({} if arguments is None else {"arguments": arguments}),
                    }
                    for _, call, arguments in slot["calls"]
                ]
            choices.append({"index": index, "message": message, "finish_reason": slot["finish"]})
        response: dict[str, Any] = {"object": "chat.completion", **self.head, "choices": choices}
        if self.usage is not None:
            response["usage"] = self.usage
        return response


def check_loop(request: Mapping[str, Any], prior: Prior = None) -> LoopReport:
    """The tool loop of a Chat request: results answer the assistant message right before them.
    Pure."""
    messages = as_list(request.get("messages"))
    new_from = last_index(messages, lambda m: m.get("role") == "assistant")
    check = Checker("tool_call_id", "messages", new_from)
    pending: dict[str, int] = {}
    answered: set[str] = set()
    # Results answer only the assistant message right before them, so the
    # history before the newest one cannot change what is reported.
    for index in range(new_from, len(messages)):
        message = as_dict(messages[index])
        role = message.get("role")
        if role != "tool":
            # Results must directly follow their assistant message: anything
            # else closes the window.
            check.unanswered(pending)
            pending, answered = {}, set()
            if role == "assistant":
                for call in as_list(message.get("tool_calls")):
                    call_id = as_str(as_dict(call).get("id"))
                    if call_id:
                        pending[call_id] = index
            continue
        call_id = as_str(message.get("tool_call_id"))
        content = message.get("content")
        if is_empty(content):
            check.error("empty-result", [call_id], index)
        if not call_id:
            continue
        check.result(call_id, index, error_payload(content), check.where(index), content)
        if call_id in pending:
            del pending[call_id]
            answered.add(call_id)
        elif call_id in answered:
            check.error("duplicate-result", [call_id], index)
        else:
            check.error("orphan-result", [call_id], index)
    check.unanswered(pending)
    return check.report


def finish_reasons(response: Mapping[str, Any]) -> list[str]:
    """Each choice's finish_reason. Pure."""
    choices = response.get("choices")
    return [
        reason
        for choice in (choices if isinstance(choices, list) else ())
        if isinstance(choice, dict) and isinstance(reason := choice.get("finish_reason"), str)
        and reason
    ]  # fmt: skip


def instructions(request: Mapping[str, Any]) -> str:
    """The system and developer messages' text. Pure."""
    return role_text(request.get("messages"))


DIALECT = Dialect.from_names(
    globals(),
    api="chat",
)
