"""OpenAI Responses items: which output items are calls the client must answer, and which
input items answer them, each by the key that holds its call id. Read over HTTP
(tooltap.core.dialects.responses) and over the Responses WebSocket (.responses_socket) alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..shapes import as_dict, as_str

# Responses output items the client must answer, and the key that ids them.
CLIENT_CALL_TYPES = {
    "function_call": "call_id",
    "custom_tool_call": "call_id",
    "computer_call": "call_id",
    "local_shell_call": "call_id",
    "shell_call": "call_id",
    "apply_patch_call": "call_id",
    "mcp_approval_request": "id",
    "tool_search_call": "call_id",  # only with execution: "client"
}
# Items that answer a call, and the key that holds the call id. A
# local_shell_call_output carries it in `id` (openai-python LocalShellCallOutput).
RESULT_TYPES = {
    "function_call_output": "call_id",
    "custom_tool_call_output": "call_id",
    "computer_call_output": "call_id",
    "local_shell_call_output": "call_id",
    "shell_call_output": "call_id",
    "apply_patch_call_output": "call_id",
    "tool_search_output": "call_id",
    "mcp_approval_response": "approval_request_id",
}


def client_call_id(item: Mapping[str, Any]) -> str:
    """The id a Responses item must be answered with, or "" when nothing answers it. Pure.

    A tool search the server ran, and a shell call run in a hosted container,
    are answered by the provider, not the client.
    """
    kind = as_str(item.get("type"))
    if kind not in CLIENT_CALL_TYPES:
        return ""
    if kind == "tool_search_call" and item.get("execution") != "client":
        return ""
    if kind == "shell_call" and as_dict(item.get("environment")).get("type") not in (None, "local"):
        return ""
    return as_str(item.get(CLIENT_CALL_TYPES[kind]))


def result_call_ids(item: Mapping[str, Any]) -> list[str]:
    """The call ids a Responses result item may be answering, most likely first. Pure."""
    kind = as_str(item.get("type"))
    if kind not in RESULT_TYPES or item.get("execution") == "server":
        return []
    ids = [as_str(item.get(RESULT_TYPES[kind]))]
    if kind == "local_shell_call_output":
        ids.append(as_str(item.get("id")))
    return [i for i in dict.fromkeys(ids) if i]
