"""Streamed responses reassembled into the object the same call returns unstreamed.

Sans-I/O: `StreamReader.feed(chunk)` takes raw (still content-encoded) bytes
cut anywhere and returns the JSON events completed so far; `close()` returns a
`StreamResult` whose `response` has the non-streaming shape of the dialect, so
the wire layer reads one shape and a streamed turn gets the same Verdict as
the same turn unstreamed. Dispatch is on the JSON `type`, never on `event:`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .encoding import DEFAULT_MAX_DECODED, DecodeError, Decoder
from .jsontext import loads, loads_lenient
from .shapes import as_dict, as_int, as_list
from .sse import SSEDecoder


class ApiError(BaseModel):
    """An error the API sent (or, as malformed_event, what could not be read of a stream)."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    type: str
    """The error's type or code (overloaded_error, insufficient_quota, ...), or ""."""
    message: str
    """The API's own words."""


def api_error(value: Any) -> ApiError:
    """An error object in any of the shapes the APIs send. Pure.

    Accepts {"error": {...}} (OpenAI, Anthropic, the live Responses `error`
    event), the flat {"type": "error", "code", "message"} of the spec, and a
    bare message.
    """
    if isinstance(value, str):
        return ApiError(type="", message=value)
    body = as_dict(value)
    inner = body.get("error")
    if isinstance(inner, dict):
        body = inner
    elif isinstance(inner, str):
        return ApiError(type=str(body.get("type") or body.get("code") or ""), message=inner)
    kind = body.get("type") if body.get("type") not in (None, "error") else body.get("code")
    message = body.get("message") or body.get("detail") or ""
    return ApiError(
        type=str(kind or ""), message=message if isinstance(message, str) else str(message)
    )


class ResponsesAssembler:
    """OpenAI Responses events: the final `response` object, or one rebuilt.

    response.completed / .incomplete / .failed carry the whole response. When
    the stream is cut before any of them, the output is rebuilt from
    output_item.added/.done and the argument deltas, keyed by item_id.
    """

    FINAL: tuple[str, ...] = ("response.completed", "response.incomplete", "response.failed")
    START: tuple[str, ...] = ("response.created", "response.in_progress", "response.queued")

    def __init__(self) -> None:
        self.final: Mapping[str, Any] | None = None
        self.base: Mapping[str, Any] = {}
        self.items: dict[int, dict[str, Any]] = {}
        self.index_of: dict[str, int] = {}
        self.deltas: dict[str, list[str]] = {}
        self.done_text: dict[str, str] = {}
        self.errors: list[ApiError] = []

    @property
    def complete(self) -> bool:
        return self.final is not None

    def event(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if kind in self.FINAL and isinstance(event.get("response"), dict):
            self.final = event["response"]
        elif kind in self.START and isinstance(event.get("response"), dict):
            self.base = event["response"]
        elif kind in ("response.output_item.added", "response.output_item.done"):
            item = event.get("item")
            if isinstance(item, dict):
                index = as_int(event.get("output_index"), len(self.items))
                self.items[index] = dict(item)
                if isinstance(item.get("id"), str):
                    self.index_of[item["id"]] = index
        elif kind in (
            "response.function_call_arguments.delta",
            "response.custom_tool_call_input.delta",
        ):
            if isinstance(event.get("delta"), str):
                self.deltas.setdefault(str(event.get("item_id")), []).append(event["delta"])
        elif kind == "response.function_call_arguments.done":
            if isinstance(event.get("arguments"), str):
                self.done_text[str(event.get("item_id"))] = event["arguments"]
        elif kind == "response.custom_tool_call_input.done":
            if isinstance(event.get("input"), str):
                self.done_text[str(event.get("item_id"))] = event["input"]
        elif kind == "error":
            self.errors.append(api_error(event))

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


class RealtimeAssembler(ResponsesAssembler):
    """Realtime server events: the Responses events' names and items, one final event.

    response.done carries the whole response (its status says completed,
    cancelled, failed or incomplete); response.created opens it.
    """

    FINAL = ("response.done",)
    START = ("response.created",)


class ChatAssembler:
    """Chat Completions chunks: tool calls accumulate by index within a choice.

    Never by id: some servers send a new id on every fragment. Azure's leading
    chunk has empty id and model, and the usage chunk has no choices.
    """

    def __init__(self) -> None:
        self.head: dict[str, Any] = {}
        self.usage: Any = None
        self.choices: dict[int, dict[str, Any]] = {}
        self.errors: list[ApiError] = []
        self.done = False

    @property
    def complete(self) -> bool:
        # Some compatible servers (HF router, Perplexity) end after the last
        # finish_reason, with no [DONE]: every choice finished is a whole turn.
        return self.done or (
            bool(self.choices) and all(slot["finish"] for slot in self.choices.values())
        )

    def event(self, chunk: Mapping[str, Any]) -> None:
        if chunk.get("error"):
            self.errors.append(api_error(chunk))
            return
        for key in ("id", "model", "created", "system_fingerprint"):
            if chunk.get(key) and key not in self.head:
                self.head[key] = chunk[key]
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        choices = chunk.get("choices")
        for choice in choices if isinstance(choices, list) else []:
            if isinstance(choice, dict):
                self._choice(choice)

    def _choice(self, choice: Mapping[str, Any]) -> None:
        index = as_int(choice.get("index"))
        slot = self.choices.setdefault(
            index, {"role": None, "content": [], "refusal": [], "calls": {}, "finish": None}
        )
        if choice.get("finish_reason"):
            slot["finish"] = choice["finish_reason"]
        delta = as_dict(choice.get("delta"))
        if isinstance(delta.get("role"), str):
            slot["role"] = delta["role"]
        for key in ("content", "refusal"):
            if isinstance(delta.get(key), str):
                slot[key].append(delta[key])
        fragments = delta.get("tool_calls")
        for fragment in fragments if isinstance(fragments, list) else []:
            if not isinstance(fragment, dict):
                continue
            calls: dict[int, dict[str, Any]] = slot["calls"]
            call = calls.setdefault(
                as_int(fragment.get("index"), len(calls)),
                {"id": None, "type": None, "name": None, "arguments": None},
            )
            for key in ("id", "type"):
                if fragment.get(key) and call[key] is None:
                    call[key] = fragment[key]
            function = as_dict(fragment.get("function"))
            if function.get("name") and call["name"] is None:
                call["name"] = function["name"]
            if isinstance(function.get("arguments"), str):
                if call["arguments"] is None:
                    call["arguments"] = []
                call["arguments"].append(function["arguments"])

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
                        | (
                            {}
                            if call["arguments"] is None
                            else {"arguments": "".join(call["arguments"])}
                        ),
                    }
                    for _, call in sorted(slot["calls"].items())
                ]
            choices.append({"index": index, "message": message, "finish_reason": slot["finish"]})
        response: dict[str, Any] = {"object": "chat.completion", **self.head, "choices": choices}
        if self.usage is not None:
            response["usage"] = self.usage
        return response


class MessagesAssembler:
    """Anthropic Messages events: content blocks accumulate by index.

    input_json_delta fragments concatenate; "" means {}; a tool input that does
    not parse (a stream cut by max_tokens) stays the raw partial text, so the
    argument check reports it with the text kept. A block may arrive whole: a
    tool_use called from code execution (`caller` set) carries its input in
    content_block_start, or sits in message_start's content, with no delta.
    """

    def __init__(self) -> None:
        self.message: dict[str, Any] = {}
        self.blocks: dict[int, dict[str, Any]] = {}
        self.parts: dict[int, list[str]] = {}
        self.errors: list[ApiError] = []
        self.done = False

    @property
    def complete(self) -> bool:
        return self.done

    def event(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if kind == "message_start":
            self.message = dict(as_dict(event.get("message")))
            for index, block in enumerate(as_list(self.message.get("content"))):
                if isinstance(block, dict):
                    self.blocks[index] = dict(block)
                    self.parts[index] = []
        elif kind == "content_block_start" and isinstance(event.get("content_block"), dict):
            index = as_int(event.get("index"), len(self.blocks))
            self.blocks[index] = dict(event["content_block"])
            self.parts[index] = []
        elif kind == "content_block_delta":
            self._delta(as_int(event.get("index")), as_dict(event.get("delta")))
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
            self.errors.append(api_error(event))

    def _delta(self, index: int, delta: Mapping[str, Any]) -> None:
        if index not in self.blocks:
            return
        for key in ("partial_json", "text", "thinking"):
            if isinstance(delta.get(key), str):
                self.parts[index].append(delta[key])

    def result(self) -> dict[str, Any]:
        content = []
        for index, started in sorted(self.blocks.items()):
            block = dict(started)
            text = "".join(self.parts[index])
            if block.get("type") in ("tool_use", "server_tool_use", "mcp_tool_use"):
                if not text.strip():  # no delta: the input the block started with, else {}
                    started_with = block.get("input")
                    block["input"] = started_with if isinstance(started_with, dict) else {}
                else:
                    value, error = loads(text)
                    block["input"] = text if error else value
            elif block.get("type") in ("text", "thinking"):
                key = str(block["type"])
                block[key] = str(block.get(key) or "") + text
            content.append(block)
        return {**self.message, "content": content}


Assembler = ResponsesAssembler | ChatAssembler | MessagesAssembler

ASSEMBLERS: dict[str, type[Assembler]] = {
    "responses": ResponsesAssembler,
    "realtime": RealtimeAssembler,
    "chat": ChatAssembler,
    "messages": MessagesAssembler,
}


class StreamResult(BaseModel):
    """What a finished stream said: the response object, and how it ended."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    response: dict[str, Any]
    """The response in the dialect's non-streaming shape."""
    events: int
    """JSON events read."""
    complete: bool
    """The stream reached its final event."""
    errors: list[ApiError] = Field(default_factory=list)
    """Errors the API sent inside the stream."""
    bad_events: int = 0
    """Events that were not JSON objects even when read leniently: dropped."""
    repaired_events: int = 0
    """Events read only leniently (invalid UTF-8, raw control characters)."""
    decode_error: str | None = None
    """Why the content-encoding could not be undone, if it could not."""


class StreamReader:
    """Content-encoding, SSE framing and one dialect's reassembly, fed chunk by chunk."""

    def __init__(
        self, api: str, content_encoding: str | None = None, max_decoded: int = DEFAULT_MAX_DECODED
    ) -> None:
        self._assembler = ASSEMBLERS[api]()
        self._sse = SSEDecoder()
        self._events = 0
        self._bad = 0
        self._repaired = 0
        self._error: str | None = None
        self._decoder: Decoder | None = None
        try:
            self._decoder = Decoder(content_encoding, max_decoded)
        except DecodeError as exc:
            self._error = str(exc)

    def feed(self, chunk: bytes) -> list[Any]:
        if self._decoder is None:
            return []
        try:
            data = self._decoder.feed(chunk)
        except DecodeError as exc:
            self._fail(str(exc))
            return []
        return self._events_of(self._sse.feed(data))

    def close(self) -> StreamResult:
        if self._decoder is not None:
            try:
                self._decoder.close()
            except DecodeError as exc:
                self._error = str(exc)
            # A last event the stream did not terminate was cut off, not malformed:
            # "ended before its final event" already says so.
            self._events_of(self._sse.close(), cut=True)
        assembler = self._assembler
        return StreamResult(
            response=assembler.result(),
            events=self._events,
            complete=assembler.complete,
            errors=assembler.errors,
            bad_events=self._bad,
            repaired_events=self._repaired,
            decode_error=self._error,
        )

    def _fail(self, reason: str) -> None:
        self._error = reason
        self._decoder = None

    def _events_of(self, events: list[Any], cut: bool = False) -> list[Any]:
        out = []
        for event in events:
            if event.data == "[DONE]":
                if isinstance(self._assembler, ChatAssembler):
                    self._assembler.done = True
                continue
            value, error = loads(event.data)
            lenient = event.lossy
            if error is not None:
                value, error, lenient = loads_lenient(event.data)
            if error is not None or not isinstance(value, dict):
                self._bad += not cut
                continue
            self._repaired += lenient
            self._events += 1
            self._assembler.event(value)
            out.append(value)
        return out
