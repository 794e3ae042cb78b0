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

WIRE = Path(__file__).parent / "corpus" / "wire"

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
