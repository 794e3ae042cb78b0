"""Which flows tooltap follows, what API each speaks, and how a response's body is framed:
what the proxy's hooks decide per flow, from its mode, host, path and headers."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any, NamedTuple

from mitmproxy import http
from mitmproxy.net.http.http1.read import expected_http_body_size
from mitmproxy.proxy.mode_specs import ProxyMode, ReverseMode

from tooltap.core import Api, detect_api
from tooltap.core.dialects import shared_path
from tooltap.core.dialects.mcp import looks_like_jsonrpc
from tooltap.core.dialects.mcp_streams import ANSWERED_ON_STREAM
from tooltap.core.wire import detect_socket

from ..options import BY_NAME

STREAMED = (b"text/event-stream", b"application/vnd.amazon.eventstream", b"application/x-ndjson")
HOOK_OPTIONS = ("tooltap_max_body", "tooltap_mcp_hosts", "tooltap_hosts")


class HookOptions(NamedTuple):
    """The options the per-flow hooks read, copied at each configure: mitmproxy copies an
    option's value on every read (a deep copy, for a list)."""

    max_body: int
    mcp_hosts: tuple[str, ...]
    hosts: tuple[str, ...]

    @classmethod
    def of(cls, options: Any) -> HookOptions:
        return cls(
            options.tooltap_max_body, tuple(options.tooltap_mcp_hosts), tuple(options.tooltap_hosts)
        )

    @classmethod
    def defaults(cls) -> HookOptions:
        """Before mitmproxy first configures the addon."""
        return cls.of(SimpleNamespace(**{name: BY_NAME[name].default for name in HOOK_OPTIONS}))


class Framing(NamedTuple):
    """What a response's headers say of its body, read in one pass over them (a header
    looked up by name costs a pass each)."""

    content_type: bytes  # its values, joined
    length: bytes | None  # the one Content-Length; b"" when there are several
    encoded: bool  # a Transfer-Encoding is present

    @classmethod
    def of(cls, response: http.Response) -> Framing:
        content_type, length, encoded = b"", None, False
        for raw, value in response.headers.fields:
            name = raw.lower()
            if name == b"content-type":
                content_type = content_type + b", " + value if content_type else value
            elif name == b"content-length":
                length = value if length is None else b""
            elif name == b"transfer-encoding":
                encoded = True
        return cls(content_type, length, encoded)


def unbounded(flow: http.HTTPFlow, framing: Framing | None = None) -> bool:
    """Is a response a stream, or a body whose end only its close says (chunked, no
    Content-Length, HTTP/2 without a length)? Such a body must flow as it comes: buffered, a
    server's event stream would reach the client only when it closes. mitmproxy's own reading
    of the headers decides; framing it finds invalid is left to mitmproxy."""
    response = flow.response
    if response is None:
        return False
    framing = framing or Framing.of(response)
    if any(kind in framing.content_type for kind in STREAMED):
        return True
    if framing.length is not None and framing.length.isdigit() and not framing.encoded:
        return False  # one Content-Length and no Transfer-Encoding: mitmproxy reads that many
    try:
        return expected_http_body_size(flow.request, response) in (None, -1)
    except ValueError:
        return False


def watched(mode: ProxyMode, host: str, hosts: Sequence[str], port: int = 0) -> bool:
    """Is a flow followed: every flow of a reverse proxy, and on other modes those to these hosts
    (a pattern names a host, or a host:port: a user's own Ollama is localhost:11434)."""
    address = f"{host}:{port}"
    return isinstance(mode, ReverseMode) or any(
        fnmatch.fnmatch(host, p) or fnmatch.fnmatch(address, p) for p in hosts
    )


def mcp_host(request: http.Request, hosts: Sequence[str]) -> bool:
    """Is a request to a host (or host:port) named as an MCP server?"""
    host, address = request.pretty_host, f"{request.pretty_host}:{request.port}"
    return any(fnmatch.fnmatch(host, p) or fnmatch.fnmatch(address, p) for p in hosts)


def mcp_server(request: http.Request, hosts: Sequence[str]) -> bool:
    """Is a request MCP: a POST with a JSON-RPC body (or an Mcp-Method header, protocol
    2026-07-28), to a host in hosts? No path says MCP, and on those hosts MCP wins over any
    path (the legacy transport POSTs to .../messages). The body is looked at only there."""
    if not hosts or request.method != "POST" or not mcp_host(request, hosts):
        return False
    return "mcp-method" in request.headers or looks_like_jsonrpc(request.raw_content or b"")


def mcp_stream(flow: http.HTTPFlow, hosts: Sequence[str]) -> bool:
    """Is a response an MCP server's GET stream: the legacy transport's session channel, or
    the server's own messages on Streamable HTTP?"""
    response = flow.response
    return (
        response is not None
        and response.status_code == 200
        and flow.request.method == "GET"
        and "text/event-stream" in response.headers.get("content-type", "")
        and bool(hosts)
        and mcp_host(flow.request, hosts)
    )


def answered_on_stream(api: Api | None, response: http.Response) -> bool:
    """Is a response an MCP server's 202 to a POST of the legacy transport, whose answer comes
    on the session's GET stream? Its own body is not needed, even cut short."""
    return api == "mcp" and response.status_code == ANSWERED_ON_STREAM


def socket_upgrade(request: http.Request) -> bool:
    """Is a request the upgrade of a WebSocket tooltap follows (by its socket hooks)?"""
    upgrade = request.headers.get("upgrade", "").lower() == "websocket"
    return upgrade and detect_socket(request.path) is not None


def flow_api(flow: http.HTTPFlow, hosts: Sequence[str], mcp_hosts: Sequence[str]) -> Api | None:
    """The API a flow speaks, if tooltap follows it: a model API's path on a watched host
    (every host of a reverse proxy; on a shared path, as its body says), or MCP on an MCP
    host."""
    request = flow.request
    if mcp_server(request, mcp_hosts):
        return "mcp"
    shared = shared_path(request.method, request.path) is not None
    api = detect_api(request.method, request.path, (request.raw_content or b"") if shared else None)
    if api is not None:
        mode = flow.client_conn.proxy_mode
        return api if watched(mode, request.pretty_host, hosts, request.port) else None
    return None
