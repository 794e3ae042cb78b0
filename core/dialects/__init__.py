"""The dialects tooltap reads, one module each, and the table that lists them.

A dialect module holds one API's reading: how its requests are recognised, how its bodies
become a Turn, its stream assembler, its tool-loop reading, its strict subset and its repairs
(tooltap.core.dialects.base says what each states). The rules (parallel, schema, arguments,
findings, inspection) never name a dialect: they ask this table. Adding a dialect is a module
and a row.

Some paths serve several dialects' bodies (Bedrock's InvokeModel serves each model family's
own): a shared path's module says which dialect reads an exchange there, from the model its path
names or the body's own shape, or why none does (tooltap.core.dialects.base.SharedPath).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from ..jsontext import loads
from ..sockets import SocketReader, SocketReading
from ..turn import Api
from . import (
    chat,
    cohere,
    converse,
    gemini,
    gemini_live,
    invoke,
    mcp,
    messages,
    ollama,
    realtime,
    responses,
)
from .base import Dialect, Reading, SharedPath

__all__ = [
    "DIALECTS",
    "SHARED",
    "Dialect",
    "Reading",
    "Routes",
    "SharedPath",
    "detect_api",
    "detect_on",
    "detect_routed",
    "detect_socket",
    "dialect",
    "path_of",
    "route",
    "shared_on",
    "shared_path",
    "socket_reader",
    "socket_reading",
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
        gemini_live.DIALECT,
        cohere.DIALECT,
    )
}


SHARED: tuple[SharedPath, ...] = (invoke.SHARED,)


def dialect(api: str) -> Dialect:
    """The reading of an API tooltap knows (KeyError for any other)."""
    return DIALECTS[api]


def path_of(url: str) -> str | None:
    """A URL's path without its trailing slash; None for a URL that does not parse. Pure."""
    try:
        return urlsplit(url).path.rstrip("/")
    except ValueError:
        return None


def shared_path(method: str, url: str) -> SharedPath | None:
    """The path several dialects share that a request is on (Bedrock InvokeModel), if any.
    Pure."""
    path = path_of(url)
    return None if path is None else shared_on(method, path)


def shared_on(method: str, path: str) -> SharedPath | None:
    """shared_path, given the URL's path (path_of). Pure."""
    return next((shared for shared in SHARED if shared.recognise(method, path)), None)


def route(method: str, path: str) -> tuple[SharedPath | None, Api | None]:
    """The shared path a request is on, and the dialect that recognises its path, by the
    table alone (no body read). Pure."""
    by_path = next((d.api for d in DIALECTS.values() if d.recognise(method, path)), None)
    return shared_on(method, path), by_path


ROUTES_KEPT = 1024
ROUTE_PATH_KEPT = 512  # characters


class Routes:
    """What the table said of each method and path, kept for the next request on it: an
    application calls a few paths over and over. At most ROUTES_KEPT paths of up to
    ROUTE_PATH_KEPT characters (when full, all are forgotten at once). The caller owns it (the
    proxy keeps one per worker), so core holds no global state; the answers are route()'s."""

    def __init__(self) -> None:
        self._kept: dict[tuple[str, str], tuple[SharedPath | None, Api | None]] = {}

    def __len__(self) -> int:
        return len(self._kept)

    def route(self, method: str, path: str) -> tuple[SharedPath | None, Api | None]:
        key = (method, path)
        found = self._kept.get(key)
        if found is None:
            found = route(method, path)
            if len(path) <= ROUTE_PATH_KEPT:
                if len(self._kept) >= ROUTES_KEPT:
                    self._kept.clear()
                self._kept[key] = found
        return found


def detect_api(method: str, url: str, body: bytes | None = None) -> Api | None:
    """Which API a request speaks, from its method and path; on a shared path, from the model
    the path names or (given the body) the body's shape; else (given its body) from the body of
    a request no path names (MCP's JSON-RPC). Pure."""
    path = path_of(url)
    return None if path is None else detect_on(method, path, body)


def detect_on(method: str, path: str, body: bytes | None = None) -> Api | None:
    """detect_api, given the URL's path (path_of): inspect parses the URL once. Pure."""
    shared, by_path = route(method, path)
    return detect_routed(method, path, body, shared, by_path)


def detect_routed(
    method: str, path: str, body: bytes | None, shared: SharedPath | None, by_path: Api | None
) -> Api | None:
    """detect_on, given what route() said of the method and path. Pure."""
    if (
        by_path is not None
        and body is not None
        and body.find(b'"jsonrpc"', 0, mcp.JSONRPC_WITHIN) >= 0  # mcp.is_jsonrpc's first look
        and mcp.is_jsonrpc(method, body)
    ):
        return "mcp"  # JSON-RPC is MCP's wherever it is POSTed (the legacy /messages/)
    if by_path is not None:
        return by_path
    if shared is not None:
        request = loads(body)[0] if body else None
        return shared.reading(path, request if isinstance(request, dict) else None).api
    if body is None:
        return None
    return next(
        (d.api for d in DIALECTS.values() if d.recognise_body and d.recognise_body(method, body)),
        None,
    )


def detect_socket(url: str) -> Api | None:
    """Which API a WebSocket speaks, from its upgrade request's path. Pure.

    .../responses is the Responses WebSocket mode (OpenAI, Azure, compatible
    hosts); .../realtime is the Realtime API (Azure's too); ...BidiGenerateContent is
    the Gemini Live API (Vertex AI's too).
    """
    path = path_of(url)
    if path is None:
        return None
    return next(
        (d.api for d in DIALECTS.values() if d.socket and path.endswith(d.socket.path)),
        None,
    )


def socket_reading(api: Api) -> SocketReading:
    """How an API's WebSocket is read (KeyError for one that speaks over none)."""
    reading = DIALECTS[api].socket
    if reading is None:
        raise KeyError(api)
    return reading


def socket_reader(api: Api, url: str, max_turn: int, late: bool = False) -> SocketReader:
    """A new reader for one socket that speaks this API. Pure."""
    return socket_reading(api).reader(url, max_turn, late)


def streamed_path(api: Api, url: str) -> bool:
    """Does the request ask for a stream by its path, whatever the response's content type says
    (Gemini's :streamGenerateContent, a JSON array sent piece by piece)? Pure."""
    streams = dialect(api).streams
    return streams is not None and streams(path_of(url) or "")
