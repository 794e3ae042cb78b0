"""The client tool calls in one recorded Bedrock or Vertex AI exchange, read without tooltap.

Deliberately plain, sharing no code with tooltap: the corpus test compares tooltap's calls with
what this reader finds. The AWS event stream is read by botocore's own parser, as boto3 reads
it for its users. A call is (call_id, name, arguments_raw).
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any
from urllib.parse import urlsplit

from botocore.eventstream import EventStreamBuffer

from support.realworld_reader import (
    Call,
    chat_body,
    chat_stream,
    compact,
    messages_body,
    messages_stream,
    sse_events,
)

BEDROCK = re.compile(
    r"/model/([^/]+)/(invoke|invoke-with-response-stream|converse|converse-stream)$"
)
VERTEX = re.compile(r"/publishers/anthropic/models/([^/:]+):(rawPredict|streamRawPredict)$")


def operation(url: str) -> str | None:
    """invoke, invoke-with-response-stream, converse, converse-stream, rawPredict or
    streamRawPredict; None for anything else (Gemini, MCP)."""
    path = urlsplit(url).path
    found = BEDROCK.search(path) or VERTEX.search(path)
    return found.group(2) if found else None


def body(record: dict[str, Any]) -> bytes:
    if "response_body_base64" in record:
        return base64.b64decode(record["response_body_base64"])
    return (record.get("response_body") or "").encode()


def aws_events(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    """(event type, payload) of each event-stream message, as botocore parses them; an
    exception's type for an exception."""
    buffer = EventStreamBuffer()
    buffer.add_data(raw)
    return [
        (m.headers.get(":event-type") or m.headers[":exception-type"], json.loads(m.payload))
        for m in buffer
    ]


def converse_body(value: dict[str, Any]) -> list[Call]:
    calls = []
    for block in value["output"]["message"]["content"]:
        use = block.get("toolUse")
        if use and use.get("type") != "server_tool_use":
            calls.append((use["toolUseId"], use["name"], compact(use.get("input"))))
    return calls


def converse_stream(events: list[tuple[str, dict[str, Any]]]) -> list[Call]:
    blocks: dict[int, dict[str, str]] = {}
    for kind, payload in events:
        index = payload.get("contentBlockIndex")
        use = payload.get("start", {}).get("toolUse") if kind == "contentBlockStart" else None
        if use and use.get("type") != "server_tool_use":  # Nova runs its own tools
            blocks[index] = {"id": use["toolUseId"], "name": use["name"], "text": ""}
        elif kind == "contentBlockDelta" and index in blocks:
            blocks[index]["text"] += payload["delta"].get("toolUse", {}).get("input", "")
    calls = []
    for _, block in sorted(blocks.items()):
        text = block["text"]
        arguments = compact(json.loads(text)) if text.strip() else "{}"
        calls.append((block["id"], block["name"], arguments))
    return calls


def expected_calls(record: dict[str, Any]) -> list[Call]:
    """The client tool calls in this exchange's 2xx response, in order. InvokeModel carries each
    model family's own body: read here by the response's own shape (Messages, Converse as Nova
    sends it, Chat Completions); any other family's has no calls to read."""
    op, raw = operation(record["url"]), body(record)
    if op == "converse":
        return converse_body(json.loads(raw))
    if op == "converse-stream":
        return converse_stream(aws_events(raw))
    if op == "invoke-with-response-stream":
        chunks = [
            json.loads(base64.b64decode(payload["bytes"]))
            for kind, payload in aws_events(raw)
            if kind == "chunk"
        ]
        if any("choices" in c for c in chunks):
            return chat_stream(chunks, [])
        if any(key in c for c in chunks for key in ("messageStart", "contentBlockDelta")):
            return converse_stream([kind for c in chunks for kind in c.items()])
        return _with_whole_inputs(chunks) if any("type" in c for c in chunks) else []
    if op == "streamRawPredict":
        return _with_whole_inputs(sse_events(raw.decode()))
    value = json.loads(raw)
    if "choices" in value:
        return chat_body(value)
    if "output" in value:
        return converse_body(value)
    return messages_body(value)


def _with_whole_inputs(events: list[Any]) -> list[Call]:
    """A Messages stream's calls; a tool_use that arrives whole (no delta) keeps its input."""
    calls = messages_stream(events)
    whole = {
        e["content_block"]["id"]: e["content_block"].get("input")
        for e in events
        if e.get("type") == "content_block_start"
        and e["content_block"].get("type") == "tool_use"
        and e["content_block"].get("input")
    }
    return [(i, n, compact(whole[i]) if a == "{}" and i in whole else a) for i, n, a in calls]


def error_message(record: dict[str, Any]) -> str | None:
    """The API's own words in a 4xx body ({"message"} on Bedrock, {"error": {"message"}})."""
    try:
        value = json.loads(body(record))
    except json.JSONDecodeError:
        return None
    error = value.get("error")
    if isinstance(error, dict):
        return error.get("message")
    return value.get("message") or value.get("Message")
