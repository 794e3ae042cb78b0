"""The real captures in tests/corpus/wire/ (see its sources.txt), as Exchanges.

Formats: *.sse is exact wire text; *.jsonl is one event per line (framed here
the way each API frames it); anthropic_*.json and *.yaml (VCR cassettes) hold
request/response pairs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tooltap.core import Exchange

WIRE = Path(__file__).parent.parent / "corpus" / "wire"

SSE = {"content-type": "text/event-stream; charset=utf-8"}
JSON = {"content-type": "application/json"}

URLS = {
    "responses": "https://api.openai.com/v1/responses",
    "chat": "https://api.openai.com/v1/chat/completions",
    "messages": "https://api.anthropic.com/v1/messages",
}


@dataclass
class Pair:
    """One recorded interaction: the parsed request, and the response as sent."""

    url: str
    request: dict[str, Any]
    status: int
    headers: dict[str, str]
    body: bytes

    def exchange(self, **changes: Any) -> Exchange:
        fields: dict[str, Any] = {
            "method": "POST",
            "url": self.url,
            "request_body": json.dumps(self.request).encode(),
            "status": self.status,
            "response_headers": self.headers,
            "response_body": self.body,
        }
        fields.update(changes)
        return Exchange(**fields)


def text(name: str) -> str:
    return (WIRE / name).read_text(encoding="utf-8")


def frame_jsonl(name: str, with_event_lines: bool = True) -> bytes:
    """A .jsonl event file as SSE wire text: `event:` + `data:` per event."""
    out = []
    for line in text(name).splitlines():
        if not line.strip():
            continue
        kind = json.loads(line).get("type", "message")
        out.append((f"event: {kind}\n" if with_event_lines else "") + f"data: {line}\n\n")
    return "".join(out).encode()


def stream_bytes(name: str) -> bytes:
    """The exact SSE bytes of a stream capture."""
    if name.endswith(".jsonl"):
        return frame_jsonl(name)
    if name.endswith(".txt"):
        # The spec example omits the data: prefixes (sources.txt says so).
        lines = [f"data: {line}\n\n" for line in text(name).splitlines() if line.strip()]
        return "".join(lines).encode()
    return (WIRE / name).read_bytes()


def _headers(raw: Any) -> dict[str, str]:
    return {
        str(k).lower(): (v[0] if isinstance(v, list) else str(v)) for k, v in (raw or {}).items()
    }


def _body(value: Any) -> bytes:
    if isinstance(value, str):
        return value.encode()
    return json.dumps(value).encode()


def pairs(name: str) -> list[Pair]:
    """Every request/response pair of a recorded round-trip file."""
    if name.endswith(".json"):
        data = json.loads(text(name))
        return [
            Pair(
                url=item["request"]["url"],
                request=item["request"]["body"],
                status=item["response"]["status_code"],
                headers=_headers(item["response"]["headers"]),
                body=_body(item["response"]["body"]),
            )
            for item in data
        ]
    data = yaml.safe_load(text(name))
    out = []
    for item in data["interactions"]:
        response = item["response"]
        if "parsed_body" in response:
            body = _body(response["parsed_body"])
        else:
            body = response["body"]["string"].encode()
        out.append(
            Pair(
                url=item["request"]["uri"],
                request=item["request"]["parsed_body"],
                status=response["status"]["code"],
                headers=_headers(response.get("headers")),
                body=body,
            )
        )
    return out


def spec_pair(request_file: str, response_file: str, api: str) -> Pair:
    """An OpenAPI example request/response pair."""
    return Pair(
        url=URLS[api],
        request=json.loads(text(request_file)),
        status=200,
        headers=JSON,
        body=(WIRE / response_file).read_bytes(),
    )


def stream_exchange(
    name: str, api: str, request: dict[str, Any] | None = None, **changes: Any
) -> Exchange:
    fields: dict[str, Any] = {
        "method": "POST",
        "url": URLS[api],
        "request_body": json.dumps(request or {"model": "m", "stream": True}).encode(),
        "status": 200,
        "response_headers": SSE,
        "response_body": stream_bytes(name),
    }
    fields.update(changes)
    return Exchange(**fields)


def _event(body: dict[str, Any], named: bool = True) -> str:
    line = f"data: {json.dumps(body)}\n\n"
    return f"event: {body['type']}\n{line}" if named else line


def sse(api: str, response: dict[str, Any]) -> bytes:
    """A non-streaming response object as the SSE stream its API sends for it.

    Arguments arrive in small pieces, as on the wire; a chat call without an
    `arguments` key streams none.
    """
    if api == "responses":
        start = {**response, "status": "in_progress", "output": []}
        events = [{"type": "response.created", "response": start, "sequence_number": 0}]
        for index, item in enumerate(response.get("output", [])):
            events.append(
                {"type": "response.output_item.added", "output_index": index, "item": item}
            )
            events.append(
                {"type": "response.output_item.done", "output_index": index, "item": item}
            )
        events.append({"type": "response.completed", "response": response})
        return "".join(_event(e) for e in events).encode()
    if api == "chat":
        head = {k: response[k] for k in ("id", "model") if k in response}
        message = response["choices"][0]["message"]
        chunks = [{"index": 0, "delta": {"role": "assistant", "content": message.get("content")}}]
        for index, call in enumerate(message.get("tool_calls", [])):
            function = call["function"]
            start = {"index": index, "id": call["id"], "type": "function"}
            chunks.append(
                {
                    "index": 0,
                    "delta": {"tool_calls": [start | {"function": {"name": function["name"]}}]},
                }
            )
            arguments = function.get("arguments")
            for at in range(0, len(arguments or ""), 5) if arguments is not None else ():
                piece = {"index": index, "function": {"arguments": arguments[at : at + 5]}}
                chunks.append({"index": 0, "delta": {"tool_calls": [piece]}})
        chunks.append({"index": 0, "delta": {}, "finish_reason": "tool_calls"})
        lines = [f"data: {json.dumps(head | {'choices': [c]})}\n\n" for c in chunks]
        return ("".join(lines) + "data: [DONE]\n\n").encode()
    message = {**response, "content": [], "stop_reason": None}
    events = [{"type": "message_start", "message": message}]
    for index, block in enumerate(response["content"]):
        if block["type"] == "tool_use":
            start = {**block, "input": {}}
            raw = json.dumps(block["input"])
            deltas = [
                {"type": "input_json_delta", "partial_json": raw[at : at + 6]}
                for at in range(0, len(raw), 6)
            ]
        else:
            start, deltas = (
                {"type": "text", "text": ""},
                [{"type": "text_delta", "text": block["text"]}],
            )
        events.append({"type": "content_block_start", "index": index, "content_block": start})
        events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": index})
    events.append({"type": "message_delta", "delta": {"stop_reason": response.get("stop_reason")}})
    events.append({"type": "message_stop"})
    return "".join(_event(e) for e in events).encode()


def exchange_of(
    api: str,
    request: dict[str, Any],
    response: dict[str, Any],
    stream: bool = False,
    **changes: Any,
) -> Exchange:
    """An exchange of one request and one response object, streamed or not."""
    fields: dict[str, Any] = {
        "method": "POST",
        "url": URLS[api],
        "request_body": json.dumps(request).encode(),
        "status": 200,
        "response_headers": SSE if stream else JSON,
        "response_body": sse(api, response) if stream else json.dumps(response).encode(),
    }
    fields.update(changes)
    return Exchange(**fields)
