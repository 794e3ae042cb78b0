"""The client tool calls in one recorded exchange, read without tooltap; or the hosted MCP
calls the provider ran inside the turn (Responses `mcp_call`, Anthropic `mcp_tool_use`); and the
tokens the response says it used.
Chat Completions, Responses, Anthropic Messages, Cohere's v2 chat and Ollama's own API.

Deliberately small and plain: the real-world corpus test compares tooltap's
calls with what this reader finds, so this must not share any code with
tooltap. It reads only 2xx bodies; a call is (call_id, name, arguments_raw).
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlsplit

Call = tuple[str, str, str]
# The calls read, by item or block type: (the key of its id, the key of its arguments).
CLIENT = {"function_call": ("call_id", "arguments"), "custom_tool_call": ("call_id", "input")}
HOSTED = {"mcp_call": ("id", "arguments")}
RETRIEVED = re.compile(r"/responses/resp_[^/]+$")


def dialect(url: str, method: str = "POST") -> str | None:
    path = urlsplit(url).path.rstrip("/")
    for suffix, name in (
        ("/chat/completions", "chat"),
        ("/responses", "responses"),
        ("/messages", "messages"),
        ("/v2/chat", "cohere"),
    ):
        if path.endswith(suffix):
            return name

    if path.endswith(("/api/chat", "/api/generate")):
        return "ollama"
    if method == "GET" and RETRIEVED.search(path):
        return "responses"  # a stored response read back: the same body as the POST's
    return None


def is_stream(record: dict[str, Any]) -> bool:
    content_type = record["response_headers"].get("content-type") or ""
    return "text/event-stream" in content_type.lower()


def sse_events(text: str) -> list[Any]:
    """The JSON payload of every SSE event: data lines of one event joined by newlines."""
    events, data = [], []
    for line in [*re.split(r"\r\n|\r|\n", text), ""]:
        if line == "":
            payload = "\n".join(data).strip()
            data = []
            if payload and payload != "[DONE]":
                events.append(json.loads(payload))
        elif line.startswith("data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(" ") else value)
    return events


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def responses_calls(response: dict[str, Any], kinds: dict[str, tuple[str, str]]) -> list[Call]:
    calls = []
    for item in response.get("output") or []:
        if item.get("type") in kinds and item.get("name"):
            id_key, arguments_key = kinds[item["type"]]
            calls.append((item.get(id_key) or "", item["name"], item.get(arguments_key) or ""))
    return calls


def responses_stream(
    events: list[Any], notes: list[str], kinds: dict[str, tuple[str, str]]
) -> list[Call]:
    final = [
        e["response"]
        for e in events
        if e.get("type") in ("response.completed", "response.incomplete", "response.failed")
    ]
    if final:
        return responses_calls(final[-1], kinds)
    notes.append("no final response event: rebuilt from response.output_item.done")
    done = [e["item"] for e in events if e.get("type") == "response.output_item.done"]
    return responses_calls({"output": done}, kinds)


def chat_message_calls(message: dict[str, Any]) -> list[Call]:
    calls = []
    for call in message.get("tool_calls") or []:
        if call.get("type") == "custom":
            custom = call.get("custom") or {}
            calls.append((call.get("id") or "", custom.get("name") or "", custom.get("input", "")))
        else:
            function = call.get("function") or {}
            calls.append(
                (call.get("id") or "", function.get("name") or "", function.get("arguments", ""))
            )
    legacy = message.get("function_call")
    if legacy and legacy.get("name"):  # Snowflake sends an all-empty placeholder
        calls.append(("", legacy["name"], legacy.get("arguments", "")))
    return calls


def chat_body(body: dict[str, Any]) -> list[Call]:
    choices = body.get("choices") or []
    first = [c for c in choices if c.get("index") == 0] or choices[:1]
    return chat_message_calls(first[0].get("message") or {}) if first else []


def chat_stream(events: list[Any], notes: list[str]) -> list[Call]:
    calls: dict[int, dict[str, str]] = {}
    for event in events:
        for choice in event.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            for fragment in (choice.get("delta") or {}).get("tool_calls") or []:
                function = fragment.get("function") or {}
                index = fragment.get("index")
                if index is None:
                    # Mistral sends each call whole, in a chunk of its own, with no index.
                    named = bool(function.get("name"))
                    notes.append(
                        "a tool_calls fragment without index: "
                        + ("a new call (it names one)" if named else "part of the last call")
                    )
                    index = len(calls) if named or not calls else max(calls)
                call = calls.setdefault(index, {"id": "", "name": "", "args": ""})
                call["id"] = call["id"] or fragment.get("id") or ""
                call["name"] = call["name"] or function.get("name") or ""
                call["args"] += function.get("arguments") or ""
    return [(c["id"], c["name"], c["args"]) for _, c in sorted(calls.items())]


def messages_body(body: dict[str, Any], kind: str = "tool_use") -> list[Call]:
    return [
        (block.get("id") or "", block.get("name") or "", compact(block.get("input")))
        for block in body.get("content") or []
        if block.get("type") == kind
    ]


def messages_stream(events: list[Any], kind: str = "tool_use") -> list[Call]:
    blocks: dict[int, dict[str, str]] = {}
    for event in events:
        if event.get("type") == "content_block_start":
            block = event.get("content_block") or {}
            if block.get("type") == kind:
                blocks[event["index"]] = {"id": block["id"], "name": block["name"], "text": ""}
        elif event.get("type") == "content_block_delta" and event.get("index") in blocks:
            delta = event.get("delta") or {}
            if delta.get("type") == "input_json_delta":
                blocks[event["index"]]["text"] += delta.get("partial_json") or ""
    calls = []
    for block in blocks.values():
        text = block["text"]
        try:
            arguments = compact(json.loads(text)) if text.strip() else "{}"
        except json.JSONDecodeError:
            arguments = text
        calls.append((block["id"], block["name"], arguments))
    return calls


def cohere_body(body: dict[str, Any]) -> list[Call]:
    calls = (body.get("message") or {}).get("tool_calls") or []
    return [
        (c.get("id") or "", (c.get("function") or {}).get("name") or "",
         (c.get("function") or {}).get("arguments", ""))
        for c in calls
    ]  # fmt: skip


def cohere_stream(events: list[Any]) -> list[Call]:
    """tool-call-start opens a call (one object under delta.message.tool_calls), each
    tool-call-delta adds a piece of its arguments, by the event's index."""
    calls: dict[int, dict[str, str]] = {}
    for event in events:
        call = ((event.get("delta") or {}).get("message") or {}).get("tool_calls") or {}
        function = call.get("function") or {}
        if event.get("type") == "tool-call-start":
            calls[event["index"]] = {
                "id": call.get("id") or "",
                "name": function.get("name") or "",
                "args": function.get("arguments") or "",
            }
        elif event.get("type") == "tool-call-delta":
            calls[event["index"]]["args"] += function.get("arguments") or ""
    return [(c["id"], c["name"], c["args"]) for _, c in sorted(calls.items())]


def ollama_lines(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Ollama's answer: one JSON object, or one per line (a stream)."""
    return [json.loads(line) for line in record["response_body"].split("\n") if line.strip()]


def ollama_calls(record: dict[str, Any]) -> list[Call]:
    """Each call arrives whole on a line; one with no id is named by its place."""
    calls: list[Call] = []
    for line in ollama_lines(record):
        for call in (line.get("message") or line).get("tool_calls") or []:
            function = call["function"]
            call_id = call.get("id") or f"tool_calls[{len(calls)}]"
            calls.append((call_id, function["name"], compact(function.get("arguments"))))
    return calls


def expected_calls(
    record: dict[str, Any], notes: list[str] | None = None, hosted: bool = False
) -> list[Call]:
    """The client tool calls the model made in this exchange's response, in order; with hosted,
    the MCP calls the provider ran in it instead (Chat has none)."""
    notes = [] if notes is None else notes
    api = dialect(record["url"], record["method"])
    kinds, block = (HOSTED, "mcp_tool_use") if hosted else (CLIENT, "tool_use")
    if api is None:
        return []
    if api == "ollama":
        return [] if hosted else ollama_calls(record)
    if is_stream(record):
        events = sse_events(record["response_body"])
        if api == "responses":
            return responses_stream(events, notes, kinds)
        if api == "chat":
            return [] if hosted else chat_stream(events, notes)
        if api == "cohere":
            return [] if hosted else cohere_stream(events)
        return messages_stream(events, block) if api == "messages" else []
    body = json.loads(record["response_body"])
    if api == "responses":
        return responses_calls(body, kinds)
    if api == "chat":
        return [] if hosted else chat_body(body)
    if api == "cohere":
        return [] if hosted else cohere_body(body)
    return messages_body(body, block) if api == "messages" else []


def _count(value: Any) -> int | None:
    """A token count as the API gave it: a whole number, else none (never 0 for unknown)."""
    whole = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    return value if whole else None


def _tokens(*counts: Any) -> dict[str, int]:
    """Input, output, cached input and reasoning tokens, by the log's names, where given."""
    names = ("input_tokens", "output_tokens", "cached_input_tokens", "reasoning_tokens")
    return {name: n for name, n in zip(names, map(_count, counts), strict=False) if n is not None}


def _openai_tokens(usage: Any, spent: str, made: str) -> dict[str, int]:
    """Chat's prompt_tokens and completion_tokens, or Responses' input_tokens and
    output_tokens, each with its `_details`."""
    usage = usage or {}
    return _tokens(
        usage.get(spent),
        usage.get(made),
        (usage.get(f"{spent}_details") or {}).get("cached_tokens"),
        (usage.get(f"{made}_details") or {}).get("reasoning_tokens"),
    )


def _anthropic_tokens(usage: dict[str, Any]) -> dict[str, int]:
    """input_tokens counts only what the cache did not hold: the input is it with the cache's
    reads and writes."""
    read, written = usage.get("cache_read_input_tokens"), usage.get("cache_creation_input_tokens")
    spent = usage.get("input_tokens")
    if _count(spent) is not None:
        spent += sum(n for n in (read, written) if _count(n) is not None)
    return _tokens(spent, usage.get("output_tokens"), read)


def expected_usage(record: dict[str, Any]) -> dict[str, int]:
    """The tokens a 2xx response says it used: input (cached ones included), output (reasoning
    included), cached input and reasoning, each only where the response gives it. A stream says
    them in its last chunk with usage (Groq's under x_groq), its final response, Anthropic's
    message_start and message_delta, or Cohere's message-end."""
    api = dialect(record["url"], record["method"])
    if api == "ollama":
        last = ollama_lines(record)[-1]
        return _tokens(last.get("prompt_eval_count"), last.get("eval_count"))
    if api is None:
        return {}
    if not is_stream(record):
        body = json.loads(record["response_body"])
    elif api == "cohere":  # message-end says it
        ends = [e for e in sse_events(record["response_body"]) if e.get("type") == "message-end"]
        body = (ends[-1].get("delta") or {}) if ends else {}
    elif api == "chat":
        usage = None
        for chunk in sse_events(record["response_body"]):
            usage = chunk.get("usage") or (chunk.get("x_groq") or {}).get("usage") or usage
        body = {"usage": usage}
    elif api == "responses":
        final = [e["response"] for e in sse_events(record["response_body"])
                 if e.get("type") in ("response.completed", "response.incomplete",
                                      "response.failed")]  # fmt: skip
        body = final[-1] if final else {}
    else:
        usage = {}
        for event in sse_events(record["response_body"]):
            said = (event.get("message") or {}).get("usage") or event.get("usage") or {}
            usage |= {name: n for name, n in said.items() if n is not None}
        body = {"usage": usage}
    if api == "chat":
        return _openai_tokens(body.get("usage"), "prompt_tokens", "completion_tokens")
    if api == "responses":
        return _openai_tokens(body.get("usage"), "input_tokens", "output_tokens")
    if api == "cohere":  # tokens is what the model read and wrote; billed_units what was billed
        usage = body.get("usage") or {}
        used = usage.get("tokens") or {}
        return _tokens(
            used.get("input_tokens"), used.get("output_tokens"), usage.get("cached_tokens")
        )
    return _anthropic_tokens(body.get("usage") or {})


def error_message(record: dict[str, Any]) -> str | None:
    """The API's own words in a 4xx body: {"error": {"message"}}, {"error": "text"} or {"message"}."""
    try:
        body = json.loads(record["response_body"])
    except json.JSONDecodeError:
        return None
    if not isinstance(body, dict):
        return None
    error = body.get("error")
    if isinstance(error, dict):
        return error.get("message")
    if isinstance(error, str):
        return error
    return body.get("message")
