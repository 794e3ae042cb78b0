"""mitmproxy flows read as exchanges: for the audit of a flow file and for the mitmweb view."""

from __future__ import annotations

from typing import Any

from tooltap.core import REQUEST_HEADERS, Exchange
from tooltap.core.dialects import socket_reader, socket_reading
from tooltap.core.sockets import SocketClose, SocketTurn
from tooltap.core.wire import detect_socket

from ..options import BY_NAME
from .sockets import ending


def flow_exchange(flow: Any) -> Exchange:
    """An HTTP flow's request and response (if any) as recorded, still encoded."""
    request, response = flow.request, flow.response
    return Exchange(
        method=request.method,
        url=request.url,
        request_body=request.raw_content or b"",
        request_headers={name: request.headers.get(name, "") for name in REQUEST_HEADERS},
        status=response.status_code if response is not None else None,
        response_headers=dict(response.headers.items()) if response is not None else {},
        response_body=(response.raw_content or b"") if response is not None else b"",
        # mitmproxy's own stamps; a flow file keeps no streamed piece's time.
        request_start=request.timestamp_start,
        request_end=request.timestamp_end,
        response_end=response.timestamp_end if response is not None else None,
    )


def socket_ending(flow: Any) -> tuple[str | None, str | None]:
    """How a WebSocket flow ended, as (note, failure)."""
    ws = flow.websocket
    error = flow.error.msg if flow.error is not None else None
    return ending(ws.closed_by_client, ws.close_code, ws.close_reason or "", error)


def socket_close(flow: Any) -> SocketClose | None:
    """A WebSocket flow's close, as mitmproxy recorded it; None while it is open."""
    ws = flow.websocket
    if ws is None or ws.closed_by_client is None:
        return None
    return SocketClose(ws.close_code, ws.close_reason or "", ws.closed_by_client)


def socket_turns(flow: Any) -> list[SocketTurn]:
    """A recorded WebSocket's turns, read from its messages as the live proxy reads them."""
    api = detect_socket(flow.request.path)
    if api is None:
        return []
    ws = flow.websocket
    # The live proxy's default bound on a turn, so that both skip the same turns.
    reader = socket_reader(api, flow.request.url, BY_NAME["tooltap_max_body"].default)
    reading = socket_reading(api)
    turns: list[SocketTurn] = []
    for message in ws.messages:
        if reading.wanted(message.content, message.is_text):
            turns += reader.feed(message.content, message.from_client, message.timestamp)
    if ws.timestamp_end is None:  # saved while open: what was in flight had not ended
        turns += reader.lost("the socket was still open when the flow was saved")
    else:
        turns += reader.close(socket_close(flow))
    return turns
