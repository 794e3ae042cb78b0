"""The proxy's own health, answered by the proxy process on mitmproxy's event loop.

- `/livez`: 200 whenever the event loop answers. A loop that is blocked answers nothing, and
  the probe's timeout says so: restart the process.
- `/readyz`: 200 once every listener mitmproxy was asked for is listening and each reverse
  listener has its upstream; 503 with why until then: send it no traffic.

The inspector is reported in both bodies and decides neither. Traffic flows while it is
restarted, so a probe on it would take a forwarding proxy out of service; its health is a
metric (`tooltap_inspector_restarts_total`, `up` of the /metrics it serves) and an alert.
Plain HTTP/1.1 on a port of its own (`tooltap_health`), one request per connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
from typing import Any

from mitmproxy import ctx
from mitmproxy.proxy.mode_specs import ReverseMode
from mitmproxy.utils import asyncio_utils

from ..handover.supervisor import Supervisor
from ..options import host_port

logger = logging.getLogger("tooltap")

PATHS = ("/livez", "/readyz")
READ_TIMEOUT = 5.0  # seconds a client has to send its request
MAX_REQUEST = 8192  # bytes of a request's head read; a probe sends a few hundred


def listeners() -> list[dict[str, Any]]:
    """Every listener mitmproxy was asked for: its mode, upstream and addresses, and whether it
    listens (with the error that stopped it, if one did)."""
    proxyserver = ctx.master.addons.get("proxyserver")
    if proxyserver is None:
        return []
    found = []
    for server in proxyserver.servers:
        mode = server.mode
        upstream = mode.data if isinstance(mode, ReverseMode) else None
        found.append(
            {
                "mode": mode.full_spec,
                "upstream": upstream,
                # An https listener listens on TCP and UDP (HTTP/3) at one address: said once.
                "listening": list(dict.fromkeys(f"{a[0]}:{a[1]}" for a in server.listen_addrs)),
                "running": server.is_running,
                "error": str(server.last_exception) if server.last_exception else None,
            }
        )
    return found


def readiness(found: list[dict[str, Any]]) -> str | None:
    """Why the proxy should get no traffic yet, or None when it is ready."""
    if not found:
        return "no listener yet"
    for listener in found:
        if not listener["running"]:
            why = f": {listener['error']}" if listener["error"] else ""
            return f"{listener['mode']} is not listening{why}"
        if listener["upstream"] == "":
            return f"{listener['mode']} has no upstream"
    return None


def inspector_state(tap: Any) -> dict[str, Any]:
    """What the tooltap addon's inspection is doing: up, restarting or stopped."""
    inspection = tap.inspection
    if inspection is None:  # a settings change being applied, or it could not start
        restarting = tap.restarting is not None and not tap.restarting.done()
        return {"state": "restarting" if restarting else "stopped"}
    worker = inspection.worker
    if isinstance(worker, Supervisor):
        state = "up" if worker.worker is not None else "restarting"
        return {"state": state, "where": "process", "restarts": worker.restarts}
    return {"state": "up", "where": "thread"}


class Health:
    """The health endpoint: a sub-addon of the tooltap addon (`tap`), whose inspection it
    reports."""

    name = "tooltap-health"

    def __init__(self, tap: Any) -> None:
        self._tap = tap
        self._server: asyncio.Server | None = None
        self._serving: asyncio.Task[None] | None = None
        self.url: str | None = None

    def configure(self, updated: set[str]) -> None:
        if "tooltap_health" in updated and self._serving is not None:
            self._close()
            self._open()

    def running(self) -> None:
        if self._server is None:
            self._open()

    def done(self) -> None:
        self._close()

    def _open(self) -> None:
        if not ctx.options.tooltap_health:
            return
        host, port = host_port(ctx.options.tooltap_health)
        try:
            # Bound here, before mitmproxy reports the startup done: a port in use stops
            # mitmdump with the reason, as for /metrics.
            sock = socket.create_server((host, port), family=_family(host), reuse_port=False)
        except OSError as exc:
            logger.error(f"tooltap: cannot serve health on {host}:{port}: {exc}")
            return
        sock.setblocking(False)
        bound = sock.getsockname()[1]
        self.url = f"http://{host}:{bound}/"
        self._serving = asyncio_utils.create_task(
            self._serve(sock), name="tooltap: health endpoint", keep_ref=True
        )
        logger.info(f"tooltap health at {self.url} (livez, readyz)")

    async def _serve(self, sock: socket.socket) -> None:
        self._server = await asyncio.start_server(self._answer, sock=sock, limit=MAX_REQUEST)
        await self._server.serve_forever()

    def _close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        if self._serving is not None:
            self._serving.cancel()
            self._serving = None
        self.url = None

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT)
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
                return
            method, path = _request_line(head)
            try:
                status, body = self.report(path)
            except Exception:  # said in the log and in the answer, never raised
                logger.exception("tooltap: the health endpoint could not answer")
                status, body = 500, {"error": "tooltap could not read its own state"}
            if method not in ("GET", "HEAD"):
                status, body = 405, {"error": "GET or HEAD only"}
            payload = json.dumps(body).encode() + b"\n"
            writer.write(
                f"HTTP/1.1 {status} {_REASONS[status]}\r\n"
                "Content-Type: application/json\r\n"
                f"Content-Length: {len(payload)}\r\n"
                "Cache-Control: no-store\r\n"
                "Connection: close\r\n\r\n".encode()
                + (payload if method != "HEAD" else b"")
            )
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    def report(self, path: str) -> tuple[int, dict[str, Any]]:
        """The status and body for a path."""
        path = path.partition("?")[0]
        if path not in PATHS:
            return 404, {"error": f"not found; try {' or '.join(PATHS)}"}
        found = listeners()
        body: dict[str, Any] = {"listeners": found, "inspector": inspector_state(self._tap)}
        if path == "/livez":
            return 200, {"status": "live", **body}
        why = readiness(found)
        if why is not None:
            return 503, {"status": "not ready", "reason": why, **body}
        return 200, {"status": "ready", **body}


_REASONS = {
    200: "OK",
    404: "Not Found",
    405: "Method Not Allowed",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _request_line(head: bytes) -> tuple[str, str]:
    line = head.split(b"\r\n", 1)[0].decode("latin-1")
    method, _, rest = line.partition(" ")
    return method, rest.partition(" ")[0]
