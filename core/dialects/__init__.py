"""The dialects tooltap reads, one module each, and the table that lists them.

A dialect module holds one API's reading: how its requests are recognised, how its bodies
become a Turn, its stream assembler, its tool-loop reading, its strict subset and its repairs
(tooltap.core.dialects.base says what each states). The rules (parallel, schema, arguments,
findings, inspection) never name a dialect: they ask this table. Adding a dialect is a module
and a row.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from ..turn import Api
from . import chat, converse, gemini, mcp, messages, ollama, realtime, responses
from .base import Dialect

__all__ = [
    "DIALECTS",
    "Dialect",
    "detect_api",
    "detect_socket",
    "dialect",
    "path_of",
    "streamed_path",
]

DIALECTS: dict[str, Dialect] = {
    d.api: d
    for d in (
        responses.DIALECT,
        chat.DIALECT,
        messages.DIALECT,
        realtime.DIALECT,
        converse.DIALECT,
        gemini.DIALECT,
        mcp.DIALECT,
        ollama.DIALECT,
    )
}


def dialect(api: str) -> Dialect:
    """The reading of an API tooltap knows (KeyError for any other)."""
    return DIALECTS[api]


def path_of(url: str) -> str | None:
    """A URL's path without its trailing slash; None for a URL that does not parse. Pure."""
    try:
        return urlsplit(url).path.rstrip("/")
    except ValueError:
        return None


def detect_api(method: str, url: str, body: bytes | None = None) -> Api | None:
    """Which API a request speaks, from its method and path, else (given its body) from the
    body of a request no path names (MCP's JSON-RPC). Pure."""
    path = path_of(url)
    if path is None:
        return None
    by_path = next((d.api for d in DIALECTS.values() if d.recognise(method, path)), None)
    if body is not None and by_path is not None and mcp.is_jsonrpc(method, body):
        return "mcp"  # JSON-RPC is MCP's wherever it is POSTed (the legacy /messages/)
    if by_path is not None or body is None:
        return by_path
    return next(
        (d.api for d in DIALECTS.values() if d.recognise_body and d.recognise_body(method, body)),
        None,
    )


def detect_socket(url: str) -> Api | None:
    """Which API a WebSocket speaks, from its upgrade request's path. Pure.

    .../responses is the Responses WebSocket mode (OpenAI, Azure, compatible
    hosts); .../realtime is the Realtime API (Azure's too).
    """
    path = path_of(url)
    if path is None:
        return None
    return next(
        (d.api for d in DIALECTS.values() if d.socket_path and path.endswith(d.socket_path)),
        None,
    )


def streamed_path(api: Api, url: str) -> bool:
    """Does the request ask for a stream by its path, whatever the response's content type says
    (Gemini's :streamGenerateContent, a JSON array sent piece by piece)? Pure."""
    streams = dialect(api).streams
    return streams is not None and streams(path_of(url) or "")
