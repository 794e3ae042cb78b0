"""The client function calls in one recorded Gemini exchange, read without tooltap.

Deliberately plain, sharing no code with tooltap: the corpus test compares tooltap's calls with
what this reader finds. A response is one JSON object, an SSE stream of them (`alt=sse`), or a
JSON array of them; the calls are the functionCall parts of the first candidate, in order. A
call is (id, or `functionCall[i]` when it has none; name; its args as compact JSON).
"""

from __future__ import annotations

import itertools
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


def _set(args: dict[str, Any], piece: dict[str, Any], going_on: set[str]) -> None:
    """A partialArg (Vertex AI's streamed arguments): its value at its path ($.a.b[0])."""
    path = piece["jsonPath"]
    steps = [n or int(i) for n, i in re.findall(r"\.(\w+)|\[(\d+)\]", path)]
    kind = next(k for k in ("stringValue", "numberValue", "boolValue", "nullValue") if k in piece)
    value = None if kind == "nullValue" else piece[kind]
    holder: Any = args
    for step, after in itertools.pairwise(steps):
        if isinstance(holder, list):
            holder.extend([None] * (step + 1 - len(holder)))
            holder[step] = holder[step] or ([] if isinstance(after, int) else {})
        else:
            holder.setdefault(step, [] if isinstance(after, int) else {})
        holder = holder[step]
    last = steps[-1]
    if isinstance(holder, list):
        holder.extend([None] * (last + 1 - len(holder)))
    if path in going_on:
        value = holder[last] + value
    holder[last] = value
    (going_on.add if piece.get("willContinue") else going_on.discard)(path)


def expected_calls(record: dict[str, Any]) -> list[Call]:
    calls: list[Call] = []
    streamed: dict[str, Any] | None = None  # the call whose partialArgs are still coming
    going_on: set[str] = set()
    for chunk in chunks(record.get("response_body") or ""):
        for candidate in (chunk.get("candidates") or [])[:1]:
            for part in (candidate.get("content") or {}).get("parts") or []:
                call = part.get("functionCall") or part.get("function_call")
                if call is None:
                    continue
                if "args" not in call and (call.get("willContinue") or "partialArgs" in call):
                    if streamed is None and call.get("name"):
                        streamed = {"id": call.get("id"), "name": call["name"], "args": {}}
                        calls.append(("", "", ""))  # its place, filled in below
                    if streamed is not None:
                        for piece in call.get("partialArgs") or []:
                            _set(streamed["args"], piece, going_on)
                        name = streamed["id"] or f"functionCall[{len(calls) - 1}]"
                        calls[-1] = (name, streamed["name"], compact(streamed["args"]))
                        if not call.get("willContinue"):
                            streamed = None
                elif call.get("name"):
                    name = call.get("id") or f"functionCall[{len(calls)}]"
                    calls.append((name, call["name"], compact(call.get("args", {}))))
                elif streamed is not None:  # an empty functionCall ends a streamed one
                    streamed = None
    return calls


def error_message(record: dict[str, Any]) -> str | None:
    """The error's message, sent as JSON, a JSON array or an SSE event."""
    found = chunks(record.get("response_body") or "null")
    return ((found[0] if found else None) or {}).get("error", {}).get("message")
