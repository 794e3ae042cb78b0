"""What one recorded Ollama exchange holds, read without tooltap.

Deliberately plain, sharing no code with tooltap: the corpus test compares tooltap's reading
with this one. A response is one JSON object, or newline-delimited JSON objects (a stream, typed
application/x-ndjson by a local server and application/json by ollama.com). A call is (its id,
or `tool_calls[i]` when it has none; its name; its arguments as compact JSON).
"""

from __future__ import annotations

import json
from typing import Any

from support.realworld_reader import Call, compact


def lines(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The JSON objects the response body holds, in order."""
    return [json.loads(line) for line in record["response_body"].split("\n") if line.strip()]


def streamed(record: dict[str, Any]) -> bool:
    """Did the request ask for a stream? Ollama streams unless told `"stream": false`."""
    return json.loads(record["request_body"]).get("stream", True) is not False


def text(record: dict[str, Any], key: str) -> str:
    """The whole of a streamed field (message.content, response, ...) over every line."""
    out = []
    for line in lines(record):
        holder = line.get("message", {}) if key.startswith("message.") else line
        out.append(holder.get(key.removeprefix("message."), "") or "")
    return "".join(out)


def expected_calls(record: dict[str, Any]) -> list[Call]:
    calls: list[Call] = []
    for line in lines(record):
        for call in (line.get("message") or line).get("tool_calls") or []:
            function = call["function"]
            call_id = call.get("id") or f"tool_calls[{len(calls)}]"
            calls.append((call_id, function["name"], compact(function.get("arguments"))))
    return calls


def error_message(record: dict[str, Any]) -> str:
    return json.loads(record["response_body"])["error"]
