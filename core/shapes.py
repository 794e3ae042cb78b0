"""Reading untrusted input defensively: a JSON value of the expected shape, or its empty
stand-in; an HTTP header, whatever the case of its name.

Real traffic carries junk (nulls, wrong types, unknown items). Every reader in
core goes through these, so one bad value reads as absent instead of raising.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def as_dict(value: Any) -> Mapping[str, Any]:
    """The value if it is a JSON object, else an empty one. Pure."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """The value if it is a JSON array, else an empty one. Pure."""
    return value if isinstance(value, list) else []


def as_str(value: Any) -> str:
    """The value if it is a string, else "". Pure."""
    return value if isinstance(value, str) else ""


def as_bool(value: Any) -> bool | None:
    """The value if it is a boolean, else None (absent). Pure."""
    return value if isinstance(value, bool) else None


def as_int(value: Any, default: int = 0) -> int:
    """The value if it is an integer (not a boolean), else the default. Pure."""
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def header(headers: Mapping[str, str], name: str) -> str:
    """An HTTP header's value, whatever the case of its name; "" when absent. Pure."""
    value = headers.get(name)  # the proxy names the headers it keeps in lower case
    if value is not None:
        return value
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return ""
