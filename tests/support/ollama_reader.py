"""What one recorded Ollama exchange holds, read without tooltap.

Deliberately plain, sharing no code with tooltap: the corpus test compares tooltap's reading
with this one. A response is one JSON object, or newline-delimited JSON objects (a stream, typed
application/x-ndjson by a local server and application/json by ollama.com). A call is (its id,
or `tool_calls[i]` when it has none; its name; its arguments as compact JSON).
"""

from __future__ import annotations

import json
from typing import Any

from support.realworld_reader import ollama_calls
from support.realworld_reader import ollama_lines as lines


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


expected_calls = ollama_calls  # read as the real-world corpus reads Ollama's lines


def error_message(record: dict[str, Any]) -> str:
    return json.loads(record["response_body"])["error"]
