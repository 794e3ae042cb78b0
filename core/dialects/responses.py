"""OpenAI Responses: `POST .../responses`, a stored or background response read back, and the
same turns over the Responses WebSocket mode.

Tools and settings come from the response's echo when it has them (an absent `strict` resolves
on the server), else from the request. The loop check walks the whole input: outputs may answer
calls anywhere earlier, or in the response `previous_response_id` names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import loop
from ..assembly import StreamAssembler
from ..hidden import scan
from ..loop import Checker, LoopReport, error_payload, is_empty, last_index
from ..shapes import as_bool, as_dict, as_int, as_list, as_str
from ..turn import HostedResult, Tool, ToolCall, Turn, callable_names, make_call
from .base import Dialect, Prior, role_text
from .responses_items import (
    CLIENT_CALL_TYPES,
    RESULT_TYPES,
    client_call_id,
    result_call_ids,
)
from .responses_socket import SOCKET

# A Responses object in one of these has not finished: it is not a turn yet.
UNFINISHED = ("queued", "in_progress")


def is_retrieval(method: str, path: str) -> bool:
    """GET .../responses/{id}: a stored or background response read back (or resumed). Pure."""
    if method.upper() != "GET":  # the method first: most requests are POSTs
        return False
    head, _, last = path.rstrip("/").rpartition("/")
    return head.endswith("/responses") and bool(last)


def recognise(method: str, path: str) -> bool:
    """POST .../responses, and GET .../responses/{id} (a stored or background response read
    back, or resumed). Pure."""
    return is_retrieval(method, path) or (method.upper() == "POST" and path.endswith("/responses"))


def _tools(tools: Any, namespace: str | None = None) -> list[Tool]:
    out: list[Tool] = []
    for tool in map(as_dict, as_list(tools)):
        kind = as_str(tool.get("type")) or "function"
        name = as_str(tool.get("name")).strip()
        if kind == "namespace" and namespace is None:
            out.extend(_tools(tool.get("tools"), name or None))
        elif kind in ("function", "custom") and name:
            out.append(Tool.declared(name, kind, tool, namespace=namespace))
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


def _listed_mcp_tools(items: list[Mapping[str, Any]]) -> list[Tool]:
    """The tools mcp_list_tools items gave, by server label and name: a later list wins."""
    found: dict[tuple[str | None, str], Tool] = {}
    for item in items:
        if item.get("type") != "mcp_list_tools":
            continue
        label = as_str(item.get("server_label")) or None
        for tool in map(as_dict, as_list(item.get("tools"))):
            if name := as_str(tool.get("name")):
                found[label, name] = Tool(
                    name=name,
                    type="mcp",
                    parameters=tool.get("input_schema"),
                    namespace=label,
                    description=tool.get("description"),
                    annotations=tool.get("annotations"),
                )
    return list(found.values())


def _hosted(output: list[Mapping[str, Any]]) -> tuple[list[ToolCall], list[HostedResult]]:
    """The hosted mcp tool's calls (the API ran them), and how those that ended went."""
    calls: list[ToolCall] = []
    results: list[HostedResult] = []
    for index, item in enumerate(output):
        name = as_str(item.get("name")).strip()
        if item.get("type") != "mcp_call" or not name:
            continue
        call_id = as_str(item.get("id"))
        server = as_str(item.get("server_label")) or None
        calls.append(make_call(call_id, name, "mcp_call", item, "arguments", server=server))
        if item.get("error") is not None or item.get("output") is not None:
            failed = item.get("error") is not None
            hidden, _ = scan(item.get("output"))
            results.append(
                HostedResult(call_id=call_id, where=f"output.{index}", failed=failed, hidden=hidden)
            )
    return calls, results


def declared_tools(request: Mapping[str, Any]) -> list[Tool]:
    """The tools a request declares (its tools, and those its input delivers), as read_turn
    reads them from a response that restates none. Pure."""
    delivered = _delivered_tools(as_list(request.get("input")))
    return _unique(_tools(request.get("tools")) + _tools(delivered))


def read_turn(request: Mapping[str, Any], response: Mapping[str, Any]) -> Turn:
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
                make_call(as_str(item.get("call_id")), name, kind, item, key, namespace=namespace)
            )
    # Tools can also arrive in the conversation: items the client appends
    # (additional_tools, a client tool search's output) and a server tool
    # search's output in this response.
    history = [as_dict(item) for item in as_list(request.get("input"))]
    delivered = _delivered_tools(history) + _delivered_tools(output)
    # A hosted call's schema is its server's list: in this output, or in the re-sent history.
    hosted_calls, hosted_results = _hosted(output)
    return Turn(
        api="responses",
        model=as_str(response.get("model")) or as_str(request.get("model")) or None,
        response_id=as_str(response.get("id")) or None,
        tools=_unique(_tools(setting("tools")) + _tools(delivered)),
        parallel_tool_calls=as_bool(setting("parallel_tool_calls")),
        output_format=dict(as_dict(as_dict(setting("text")).get("format"))),
        calls=calls,
        awaiting=awaiting,
        output_types=[as_str(item.get("type")) for item in output],
        callable_names=callable_names(setting("tool_choice")),
        status=as_str(response.get("status")) or None,
        hosted_calls=hosted_calls,
        hosted_tools=_listed_mcp_tools(history + output),
        hosted_results=hosted_results,
    )


class Assembler(StreamAssembler):
    """OpenAI Responses events: the final `response` object, or one rebuilt.

    response.completed / .incomplete / .failed carry the whole response. When
    the stream is cut before any of them, the output is rebuilt from
    output_item.added/.done and the argument deltas, keyed by item_id.
    """

    FINAL: tuple[str, ...] = ("response.completed", "response.incomplete", "response.failed")
    START: tuple[str, ...] = ("response.created", "response.in_progress", "response.queued")

    def __init__(self) -> None:
        super().__init__()
        self.final: Mapping[str, Any] | None = None
        self.base: Mapping[str, Any] = {}
        self.items: dict[int, dict[str, Any]] = {}
        self.deltas: dict[str, list[str]] = {}
        self.done_text: dict[str, str] = {}

    @property
    def complete(self) -> bool:
        return self.final is not None

    def event(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        # Output: any delta (text, reasoning, audio, a call's arguments), a call's item (its
        # name), or a final response that holds output none of these announced.
        if not self.said:
            self.said = as_str(kind).endswith(".delta") and bool(event.get("delta"))
            named = bool(as_dict(event.get("item")).get("name"))
            self.said |= as_str(kind).startswith("response.output_item.") and named
        if kind in self.FINAL and isinstance(event.get("response"), dict):
            self.said |= bool(as_list(event["response"].get("output")))
            self.final = event["response"]
        elif kind in self.START and isinstance(event.get("response"), dict):
            self.base = event["response"]
        elif kind in ("response.output_item.added", "response.output_item.done"):
            item = event.get("item")
            if isinstance(item, dict):
                index = as_int(event.get("output_index"), len(self.items))
                self.items[index] = dict(item)
        elif kind in (
            "response.function_call_arguments.delta",
            "response.custom_tool_call_input.delta",
            "response.mcp_call_arguments.delta",
        ):
            if isinstance(event.get("delta"), str):
                self.deltas.setdefault(str(event.get("item_id")), []).append(event["delta"])
        elif kind in ("response.function_call_arguments.done", "response.mcp_call_arguments.done"):
            if isinstance(event.get("arguments"), str):
                self.done_text[str(event.get("item_id"))] = event["arguments"]
        elif kind == "response.custom_tool_call_input.done":
            if isinstance(event.get("input"), str):
                self.done_text[str(event.get("item_id"))] = event["input"]
        elif kind == "error":
            self.error(event)

    def result(self) -> dict[str, Any]:
        if self.final is not None:
            return dict(self.final)
        output = []
        for _, item in sorted(self.items.items()):
            key = "input" if item.get("type") == "custom_tool_call" else "arguments"
            if item.get("status") != "completed" or not item.get(key):
                item_id = str(item.get("id"))
                if item_id in self.done_text:
                    item[key] = self.done_text[item_id]
                elif item_id in self.deltas:
                    item[key] = "".join(self.deltas[item_id])
            output.append(item)
        response = dict(self.base)
        response["output"] = output
        response["status"] = "incomplete"
        return response


# Items the client writes into a Responses input. Anything else (an assistant
# message, reasoning, a call of any kind, a compaction) comes from the model,
# and the newest of those starts the part of the request that is new.
_CLIENT_ITEMS = {
    *RESULT_TYPES,
    "message",
    "item_reference",
    "additional_tools",
    "compaction_trigger",
    "configuration_update",
}
# Results whose content is what the model reads back; only these can be empty.
_TEXT_RESULTS = ("function_call_output", "custom_tool_call_output")


def _is_model_item(item: Mapping[str, Any]) -> bool:
    kind = item.get("type")
    if kind is None or kind == "message":
        return item.get("role") == "assistant"
    return isinstance(kind, str) and kind not in _CLIENT_ITEMS


def _is_reference(item: Mapping[str, Any]) -> bool:
    return item.get("type") == "item_reference" or (
        "type" not in item and "id" in item and "role" not in item
    )


def check_loop(
    request: Mapping[str, Any],
    prior: Prior,
    *,
    items_from: str = "input",
    owed_in_this_request: bool = True,
) -> LoopReport:
    """The tool loop of a Responses request. Pure.

    A Realtime turn is read the same way, with its own words for where items come from, and
    with the previous response's calls not owed by this request (owed_in_this_request False).
    """
    items = [as_dict(item) for item in as_list(request.get("input"))]
    previous = as_str(request.get("previous_response_id"))
    known_prior = prior.get(previous) if previous and prior is not None else None
    # Calls that live out of view (a conversation on the server, item
    # references, a previous response the proxy did not see, history folded
    # into a compaction item) make an unmatched output unprovable, so orphans
    # are only reported when every call is in view.
    # Outputs may answer calls anywhere earlier, so the whole history is walked,
    # up to MAX_HISTORY items: past that, the oldest are out of view.
    start = max(0, len(items) - loop.MAX_HISTORY)
    blind = (
        start > 0
        or bool(request.get("conversation"))
        or (bool(previous) and known_prior is None)
        or any(_is_reference(item) or item.get("type") == "compaction" for item in items)
    )
    # With previous_response_id, every input item is new. Otherwise the new part
    # starts at the newest model turn: its run of items (reasoning, calls, message).
    new_from = 0 if previous else last_index(items, _is_model_item)
    while new_from > 0 and _is_model_item(items[new_from - 1]):
        new_from -= 1
    check = Checker("call_id", items_from, new_from)
    # call id -> where calls awaiting a result are (a list: some servers reuse
    # call ids across turns, call_0, call_1); -1 is the previous response.
    pending: dict[str, list[int]] = {call_id: [-1] for call_id in known_prior or ()}
    # The previous response's calls, which some clients re-send in `input` beside
    # previous_response_id: the first copy is that same call, owed one result.
    resent = set(known_prior or ())
    # Calls the provider answers itself (a server tool search, a hosted shell):
    # a result for them is not an orphan, and none is owed.
    answerable: set[str] = set()
    answered: set[str] = set()
    if start:
        check.report.unchecked.append(
            f"the {start} oldest of {len(items)} input items were not checked (the last "
            f"{loop.MAX_HISTORY} were)"
        )
    for index in range(start, len(items)):
        item = items[index]
        kind = as_str(item.get("type"))
        if kind in CLIENT_CALL_TYPES or kind.endswith("_call"):
            call_id = client_call_id(item)
            if call_id in resent:
                resent.discard(call_id)
                waiting = pending.get(call_id)
                if waiting and waiting[0] == -1:
                    waiting[0] = index
            elif call_id:
                pending.setdefault(call_id, []).append(index)
            elif as_str(item.get("call_id")):
                answerable.add(as_str(item.get("call_id")))
            continue
        if kind not in RESULT_TYPES:
            continue
        ids = result_call_ids(item)
        call_id = next((i for i in ids if pending.get(i)), ids[0] if ids else "")
        output = item.get("output")
        if kind in _TEXT_RESULTS and is_empty(output):
            check.error("empty-result", [call_id], index)
        if not call_id:
            continue
        check.result(call_id, index, error_payload(output), check.where(index), output)
        if pending.get(call_id):
            pending[call_id].pop(0)
            answered.add(call_id)
        elif call_id in answerable:
            answerable.discard(call_id)
        elif call_id in answered:
            check.error("duplicate-result", [call_id], index)
        elif not blind:
            check.error("orphan-result", [call_id], index)
    leftover = {call_id: where[0] for call_id, where in pending.items() if where and where[0] >= 0}
    check.unanswered(leftover)
    unanswered_prior = [call_id for call_id, where in pending.items() if where and where[0] < 0]
    if unanswered_prior and owed_in_this_request:
        check.error("unanswered-call", unanswered_prior, 0, f"previous_response_id {previous}")
    return check.report


def finish_reasons(response: Mapping[str, Any]) -> list[str]:
    """The response's status, or the reason an incomplete one gives. Pure."""
    status = as_str(response.get("status"))
    incomplete = as_str(as_dict(response.get("incomplete_details")).get("reason"))
    reason = incomplete if status == "incomplete" and incomplete else status
    return [reason] if reason else []


def unfinished(method: str, request: Any, status: str | None, stream: bool, complete: bool) -> bool:
    """A Responses body that is not a turn yet: queued or in progress (background mode). Pure.

    A background response is read later (GET /responses/{id}) or resumed as a
    stream; a cut stream of one is resumable, so it is not a finished turn either.
    """
    if not stream:
        return status in UNFINISHED
    background = method.upper() == "GET" or (
        isinstance(request, dict) and request.get("background") is True
    )
    return background and not complete


def instructions(request: Mapping[str, Any]) -> str:
    """`instructions`, then the system and developer messages' text. Pure."""
    said = as_str(request.get("instructions"))
    return "\n".join(filter(None, (said, role_text(request.get("input")))))


DIALECT = Dialect.from_names(
    globals(),
    api="responses",
    socket=SOCKET,
)
