"""An error an API sent, in any of the shapes the APIs send it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from .shapes import as_dict


class ApiError(BaseModel):
    """An error the API sent (or, as malformed_event, what could not be read of a stream)."""

    model_config = ConfigDict(frozen=True)

    type: str
    """The error's type or code (overloaded_error, insufficient_quota, ...), or ""."""
    message: str
    """The API's own words."""


def api_error(value: Any) -> ApiError:
    """An error object in any of the shapes the APIs send. Pure.

    Accepts {"error": {...}} (OpenAI, Anthropic, the live Responses `error`
    event, Google's with its `status`), the flat {"type": "error", "code",
    "message"} of the spec, and a bare message.
    """
    if isinstance(value, str):
        return ApiError(type="", message=value)
    if isinstance(value, list) and value:  # Gemini's array stream: the error is its element
        value = value[0]
    body = as_dict(value)
    inner = body.get("error")
    if isinstance(inner, dict):
        body = inner
    elif isinstance(inner, str):
        return ApiError(type=str(body.get("type") or body.get("code") or ""), message=inner)
    kind = body.get("type") if body.get("type") not in (None, "error") else None
    if kind is None:  # Google names the error in `status` (INVALID_ARGUMENT) beside its code
        kind = body.get("status") if isinstance(body.get("status"), str) else body.get("code")
    message = body.get("message") or body.get("detail") or ""
    return ApiError(
        type=str(kind or ""), message=message if isinstance(message, str) else str(message)
    )
