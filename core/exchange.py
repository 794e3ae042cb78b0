"""An exchange as it crossed the wire: what every reading of tooltap starts from.

The proxy, audit, demo and the socket readers build one; `inspect()` reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .served import SESSION_HEADER
from .turn import Api

Transport = Literal["http", "websocket"]

# The response headers inspect() reads: the body's type and encoding, the header AWS names
# an error in ("ValidationException:<namespace>"), and the one an MCP server names its session in.
RESPONSE_HEADERS = ("content-type", "content-encoding", "x-amzn-errortype", SESSION_HEADER)
# The request headers it reads: the body's encoding, and the MCP session the request is in.
REQUEST_HEADERS = ("content-encoding", SESSION_HEADER)


class Exchange(BaseModel):
    """One request/response pair as it crossed the wire."""

    model_config = ConfigDict(frozen=True)

    method: str
    """The request method: POST, or GET for a Responses retrieval."""
    url: str
    """The full request URL; only its path decides the API."""
    request_body: bytes = b""
    """The request body as sent, possibly content-encoded."""
    status: int | None = None
    """The response status; None when no response came (the upstream failed)."""
    response_headers: Mapping[str, str] = Field(default_factory=dict)
    """Response headers; those in RESPONSE_HEADERS are read."""
    response_body: bytes = b""
    """The response body as sent: JSON or an SSE stream, possibly content-encoded."""
    request_headers: Mapping[str, str] = Field(default_factory=dict)
    """Request headers; those in REQUEST_HEADERS are read."""
    api: Api | None = None
    """The API, set for a turn read off a WebSocket and for an MCP server's exchange (no path
    says MCP); else the URL's path says it."""
    transport: Transport = "http"
    """websocket: one turn of a socket, its server events framed as the SSE stream they mirror."""
    request_start: float | None = None
    """When the request's first byte reached the proxy (epoch seconds; a socket turn: the
    message that started it); None where the recording keeps no time (JSONL, cassettes)."""
    request_end: float | None = None
    """When the request's last byte reached the proxy."""
    response_end: float | None = None
    """When the response's last byte reached the proxy (a socket turn: the message that
    ended it)."""
    arrivals: tuple[tuple[int, float], ...] = ()
    """A streamed response body's pieces as they arrived: (the offset in response_body each
    piece ends at, when it arrived), in order. Empty where no one watched them come."""
    flow: str = ""
    """The proxy's id of the flow it crossed in (mitmproxy's), carried so that the log can join
    the lines of one exchange, also one answered later on another flow; no rule reads it."""
