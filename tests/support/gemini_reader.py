"""The client function calls in one recorded Gemini exchange, read without tooltap.

Deliberately plain, sharing no code with tooltap: the corpus test compares tooltap's calls with
what this reader finds. A response is one JSON object, an SSE stream of them (`alt=sse`), or a
JSON array of them; the calls are the functionCall parts of the first candidate, in order. A
call is (id, or `functionCall[i]` when it has none; name; its args as compact JSON).
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlsplit

from support.realworld_reader import Call, compact

OPERATION = re.compile(r":(generateContent|streamGenerateContent)$")


def operation(url: str) -> str | None:
    found = OPERATION.search(urlsplit(url).path)
    return found.group(1) if found else None


def chunks(raw: str) -> list[dict[str, Any]]:
    """The GenerateContentResponse objects a body holds."""
    text = raw.strip()
    if text.startswith("data:") or "\ndata:" in text[:200]:
        return [
            json.loads(line[5:])
            for line in text.replace("\r\n", "\n").split("\n")
            if line.startswith("data:") and line[5:].strip()
        ]
    value = json.loads(text)
    return value if isinstance(value, list) else [value]


def expected_calls(record: dict[str, Any]) -> list[Call]:
    calls: list[Call] = []
    for chunk in chunks(record.get("response_body") or ""):
        for candidate in (chunk.get("candidates") or [])[:1]:
            for part in (candidate.get("content") or {}).get("parts") or []:
                call = part.get("functionCall") or part.get("function_call")
                if call and call.get("name"):
                    name = call.get("id") or f"functionCall[{len(calls)}]"
                    calls.append((name, call["name"], compact(call.get("args", {}))))
    return calls


def error_message(record: dict[str, Any]) -> str | None:
    value = json.loads(record.get("response_body") or "null")
    value = value[0] if isinstance(value, list) and value else value
    return ((value or {}).get("error") or {}).get("message")
