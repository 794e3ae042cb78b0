"""Total JSON reading: a value or the reason there is none, never an exception.

orjson is used because it is fast and refuses nesting deeper than 1,024 levels
with a JSONDecodeError instead of exhausting the interpreter's stack.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from .records import ParseError


def loads(text: bytes | str) -> tuple[Any, ParseError | None]:
    """Parse JSON. Pure. Returns (value, None) or (None, ParseError)."""
    try:
        return orjson.loads(text), None
    except orjson.JSONDecodeError as exc:
        return None, ParseError(type="JSONDecodeError", message=exc.msg, position=exc.pos)
    except (TypeError, ValueError, RecursionError) as exc:
        return None, ParseError(type=type(exc).__name__, message=str(exc))


def loads_lenient(text: bytes | str) -> tuple[Any, ParseError | None, bool]:
    """Parse JSON, falling back to a lenient read. Pure.

    Returns (value, None, lenient) or (None, ParseError, False). The lenient
    read replaces invalid UTF-8 and accepts raw control characters (a NUL)
    inside strings: what can be kept is kept, and lenient says it was needed.
    """
    value, error = loads(text)
    if error is None:
        return value, None, False
    raw = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    try:
        return json.loads(raw, strict=False), None, True
    except (ValueError, RecursionError):
        return None, error, False


def dumps(value: Any) -> str:
    """Compact JSON text of a parsed value, key order kept. Pure."""
    try:
        return orjson.dumps(value).decode()
    except (TypeError, ValueError, orjson.JSONEncodeError):
        return ""
