"""One Turn for every API: which API an exchange speaks, and its Turn, through the dialects.

The readers themselves live in tooltap.core.dialects, one module per API; the Turn they read
into is tooltap.core.turn. This module is where the rest of tooltap asks for either.
"""

from __future__ import annotations

from typing import Any

from .dialects import detect_api, detect_socket, dialect, streamed_path
from .dialects.base import Prior
from .dialects.responses import UNFINISHED, is_retrieval
from .dialects.responses_items import (
    CLIENT_CALL_TYPES,
    RESULT_TYPES,
    client_call_id,
    result_call_ids,
)
from .loop import LoopReport
from .shapes import as_dict, as_str
from .turn import APIS, Api, Tool, ToolCall, Turn, callable_names

__all__ = [
    "APIS",
    "CLIENT_CALL_TYPES",
    "RESULT_TYPES",
    "UNFINISHED",
    "Api",
    "Tool",
    "ToolCall",
    "Turn",
    "callable_names",
    "check_loop",
    "client_call_id",
    "detect_api",
    "detect_socket",
    "is_retrieval",
    "read_turn",
    "result_call_ids",
    "streamed_path",
]


def read_turn(api: Api, request: Any, response: Any) -> Turn:
    """The Turn of one exchange from its parsed bodies. Pure; junk reads as absent."""
    request, response = as_dict(request), as_dict(response)
    reading = dialect(api)
    turn = reading.read_turn(request, response)
    turn.request_model = as_str(request.get("model")) or None
    turn.finish_reasons = reading.finish_reasons(response)
    turn.usage = reading.usage(response)
    return turn


def check_loop(api: Api, request: Any, prior: Prior = None) -> LoopReport:
    """Tool-loop findings and tool results for one request body, by its dialect's reading. Pure."""
    return dialect(api).check_loop(as_dict(request), prior)
