"""The tooltap mitmproxy addon: watch tool-calling traffic, never touch it.

Hooks do only cheap bookkeeping: pick the flows to inspect, tap streamed
bodies, and hand finished exchanges over without waiting: to a child process
by default, or to a thread (tooltap_inspector). There, tooltap.core.inspect
and the sinks run (addon/inspection/). Every hook and the tap catch
everything and count it in tooltap_internal_errors_total: tooltap must never
be the reason a call fails.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any

from mitmproxy import ctx, exceptions, http
from mitmproxy.connection import ConnectionState
from mitmproxy.proxy.mode_specs import ProxyMode, ReverseMode
from mitmproxy.proxy.server_hooks import ServerConnectionHookData
from mitmproxy.utils import asyncio_utils

from tooltap.core import Api
from tooltap.core.dialects import Routes, path_of
from tooltap.core.wire import detect_socket, streamed_path

from .. import options
from ..handover.budget import Budget, MiB, return_freed_memory
from ..handover.counts import DirectCounts
from ..handover.record import Record
from ..handover.supervisor import Supervisor
from ..handover.workers import ThreadWorker
from ..inspection.inspector import Inspector
from ..inspection.state import open_state
from ..options import BY_NAME
from ..sinks.log import LogSink
from ..sinks.metrics import Metrics
from ..sinks.redaction import hash_key_problem
from .calls import CallWatch
from .channel import ChannelTap
from .flows import (
    Framing,
    HookOptions,
    answered_on_stream,
    mcp_host,
    mcp_server,
    mcp_stream,
    socket_upgrade,
    unbounded,
    watched,
)
from .health import Health
from .listener import REFUSED, ListenerTLS
from .sockets import SocketTap
from .tap import StreamTap

logger = logging.getLogger("tooltap")

MAX_TRACKED = 100_000  # flows in flight; past it the oldest is forgotten and counted as dropped
MAX_SOCKETS = 10_000  # WebSockets followed at once; past it the oldest is let go
MAX_CHANNELS = 10_000  # MCP servers' GET streams followed at once; past it the oldest is let go
MAX_HOSTS = 10_000  # host decisions remembered (regular mode)
GIVE_BACK_AFTER = 64 * MiB  # of bodies gone by before freed memory is worth giving back
# What mitmproxy's error hook says when the client, not the upstream, ended an
# exchange. (Its HTTP/2 layer says "stream reset by client" for a reset from
# either peer; the message is kept in the logged reason either way.)
CLIENT_GONE = ("Client disconnected.", "stream reset by client")

OVER_BUDGET = "tooltap_memory_budget was full: passed through uninspected"
Fault = Callable[[str], None]
"""A test seam: called where a fault may be injected ("hook", "tap", "worker"); raise to inject."""


@dataclass(slots=True)
class _Pending:
    api: Api | None  # None: no path names the API (a shared path's body will, or nothing does)
    client: str = ""  # the client connection's id
    tap: StreamTap | None = None
    too_large: bool = False
    counted: bool = False  # no dialect reads it: followed to be counted as not read, no body kept


@dataclass
class Inspection:
    """Where finished exchanges go: a worker, the counts only the proxy makes, and what it owns."""

    worker: ThreadWorker | Supervisor
    counts: DirectCounts | Supervisor
    url: str  # of its /metrics endpoint
    metrics: Metrics | None = None  # thread mode: the metrics this process serves
    log_file: IO[str] | None = None  # thread mode with tooltap_log_file
    inspector: Inspector | None = None  # thread mode: its trace export is closed here

    def detach(self) -> None:
        """Stop using the event loop (before close() runs in a thread)."""
        if isinstance(self.worker, Supervisor):
            self.worker.detach()

    def close(self) -> Counter[str]:
        """Hand over what is queued (briefly), stop the worker, release the rest. Blocks for
        a few seconds at most; returns the exchanges never inspected, by api."""
        left = self.worker.stop()
        if self.inspector is not None:
            self.inspector.close()
        if self.metrics is not None:
            self.metrics.close()
        self.counts.close()
        if self.log_file is not None:
            self.log_file.close()
        return left


def _upstream_failed(flow: http.HTTPFlow) -> bool:
    """The error hook fired because the upstream (not the client) broke off the exchange."""
    if flow.error is None:
        return False
    if flow.response is not None and flow.response.timestamp_end is not None:
        return False  # the whole response had arrived; what failed came after
    if flow.error.msg.startswith(CLIENT_GONE):
        return False
    return flow.client_conn.state == ConnectionState.OPEN


def _storing_streams() -> bool:
    """mitmproxy's store_streamed_bodies (an option of its proxy server: absent elsewhere)."""
    return bool(getattr(ctx.options, "store_streamed_bodies", False))


def _recorded(flow: http.HTTPFlow, passed: Sequence[bytes | bytearray]) -> None:
    """A streamed body the client hung up on is kept in the flow as it passed, when the user
    stores streamed bodies: mitmproxy keeps its own copy only for a stream that ended well, and
    SDK clients close a stream as soon as they have its answer (or their session). The flow's
    record only: what went over the wire is done by now."""
    response = flow.response
    if (
        flow.error is not None
        and response is not None
        and not response.raw_content
        and _storing_streams()
    ):
        response.raw_content = b"".join(passed) or response.raw_content


def _guarded(hook: Callable[..., None]) -> Callable[..., None]:
    """Count, log, never raise: an exception in a hook must not reach mitmproxy's flow."""

    @functools.wraps(hook)
    def guarded(self: Tooltap, *args: Any) -> None:
        try:
            if self._fault is not None:
                self._fault("hook")
            hook(self, *args)
        except Exception:  # noqa: BLE001 - counted and logged, the flow goes on
            self._hook_error()

    return guarded


class Tooltap:
    name = "tooltap"

    def __init__(self, log_stream: IO[str] | None = None, fault: Fault | None = None) -> None:
        self._log_stream = log_stream  # thread mode only; the child writes to its stdout
        self._fault = fault
        self.inspection: Inspection | None = None
        self.restarting: asyncio.Task[None] | None = None  # a settings change being applied
        self._settings: dict[str, Any] | None = None  # those inspection runs with
        self._flows: OrderedDict[str, _Pending] = OrderedDict()
        self._sockets: OrderedDict[str, SocketTap] = OrderedDict()
        self._channels: OrderedDict[str, ChannelTap] = OrderedDict()  # MCP servers' GET streams
        self._hosts: OrderedDict[str, bool] = OrderedDict()
        self._routes = Routes()  # what the dialect table said of each path
        self._options = HookOptions.defaults()  # the hooks' options, copied at each configure
        self._missed: Counter[str] = Counter()  # flows that arrived while inspection restarted
        self.budget = Budget(BY_NAME["tooltap_memory_budget"].default)
        self._bodies = 0  # bytes of bodies that went by, for giving memory back after a burst
        self._giving_back: asyncio.Task[None] | None = None
        self._calls = CallWatch()  # MCP tools/calls not answered yet
        self._watching: asyncio.Task[None] | None = None
        # Sub-addons (mitmproxy calls their hooks after this one's): the proxy's own health
        # endpoint, and TLS for the reverse listeners' clients.
        self.health = Health(self)
        self.addons = [self.health, ListenerTLS()]

    # --- lifecycle ---------------------------------------------------------

    def load(self, loader: Any) -> None:
        options.add_options(loader)

    def configure(self, updated: set[str]) -> None:
        for problem in options.problems(ctx.options, updated):
            raise exceptions.OptionsError(problem)
        if self._settings is None and (no_key := hash_key_problem()) is not None:
            raise exceptions.OptionsError(no_key)
        if "tooltap_hosts" in updated:
            self._hosts.clear()
        self._options = HookOptions.of(ctx.options)
        self.budget.limit = ctx.options.tooltap_memory_budget
        wanted = options.settings(ctx.options)
        if self._settings is None:
            # A thread starts at once (mitmproxy's test helpers never call
            # running); a process starts in running, where a failure stops mitmdump.
            if wanted["tooltap_inspector"] == "thread":
                self._start(wanted)
        elif wanted != self._settings:
            # Restarting waits on a process and a port: off the event loop, as
            # mitmproxy's proxyserver applies a changed mode.
            self._settings = wanted
            self.restarting = asyncio_utils.create_task(
                self._restart(self.restarting),
                name="tooltap: restart the inspection",
                keep_ref=True,
            )

    def running(self) -> None:
        if self._settings is None:
            self._start(options.settings(ctx.options))
        if self.inspection is not None and isinstance(self.inspection.worker, Supervisor):
            self.inspection.worker.watch()
        if self._giving_back is None:
            self._giving_back = asyncio_utils.create_task(
                self._give_back(), name="tooltap: give freed memory back", keep_ref=True
            )
        if self._watching is None:
            self._watching = asyncio_utils.create_task(
                self._watch_calls(), name="tooltap: watch tool calls", keep_ref=True
            )

    async def _give_back(self) -> None:
        """Once a burst of large bodies has passed, hand the freed heap back to the system.

        mitmproxy reads a body in pieces small enough to come from the heap, which
        glibc keeps at its peak; malloc_trim gives the free pages back (a few ms).
        The pieces a burst handed over are freed once the inspector took them, so
        this waits until nothing waits for it.
        """
        trimmed_at = seen = self._bodies
        while True:
            await asyncio.sleep(1.0)
            quiet = self._bodies - seen < MiB
            seen = self._bodies
            if self.inspection is not None and self.inspection.worker.waiting:
                continue  # still handing the burst over
            if quiet and self._bodies - trimmed_at >= GIVE_BACK_AFTER:
                trimmed_at = self._bodies
                await asyncio.to_thread(return_freed_memory)

    async def _watch_calls(self) -> None:
        """Once a second: MCP tools/calls still running past tooltap_tool_deadline (calls.py)."""
        while True:
            await asyncio.sleep(1.0)
            try:
                self._calls.overdue(
                    time.time(), ctx.options.tooltap_tool_deadline, self._hand_over_overdue
                )
            except Exception:  # noqa: BLE001 - a watch must not end the proxy's loop
                self._hook_error()

    def _hand_over_overdue(self, record: Record) -> None:
        """No room, or the hand-over full: this one goes unsaid; traffic never waits for it."""
        if self.budget.take(len(record.request_body)):
            record.held = len(record.request_body)
            if self.inspection is None or not self.inspection.worker.submit(record):
                self._release(record)

    def _open(self, settings: dict[str, Any]) -> Inspection:
        """Start inspection with these settings. Blocks; raises OSError or RuntimeError."""
        size = settings["tooltap_queue_size"]
        if settings["tooltap_inspector"] == "process":
            supervisor = Supervisor(settings, size, self.budget)
            port = supervisor.start()
            return Inspection(supervisor, supervisor, self._metrics_url(settings, port))
        metrics = Metrics(settings["tooltap_model_labels"])
        host, port = settings["tooltap_metrics_host"], settings["tooltap_metrics_port"]
        try:
            port = metrics.serve(host, port)
        except OSError as exc:  # the words the child process uses too
            raise RuntimeError(f"cannot serve metrics on {host}:{port}: {exc}") from exc
        stream, log_file = self._log_stream, None
        if settings["tooltap_log_file"] and stream is None:
            stream = log_file = open(settings["tooltap_log_file"], "a", encoding="utf-8")  # noqa: SIM115 - closed by Inspection.close
        sink = LogSink(settings["tooltap_log_format"], settings["tooltap_log_arguments"], stream)
        metrics.watch_budget(self.budget)
        state = open_state(settings, metrics.state_error)
        inspector = Inspector.of(settings, sink, metrics, state, self._fault)
        worker = ThreadWorker(
            inspector.handle, self._worker_error, size, self._release, inspector.tick
        )
        worker.start()
        url = self._metrics_url(settings, port)
        return Inspection(worker, DirectCounts(metrics), url, metrics, log_file, inspector)

    @staticmethod
    def _metrics_url(settings: dict[str, Any], port: int) -> str:
        return f"http://{settings['tooltap_metrics_host']}:{port}/metrics"

    def _start(self, settings: dict[str, Any]) -> None:
        try:
            self.inspection = self._open(settings)
        except (OSError, RuntimeError) as exc:
            # An error at startup makes mitmdump exit: a proxy nobody can
            # watch is a misconfiguration worth stopping for.
            logger.error(f"tooltap: cannot start: {exc}")
            return
        self._settings = settings
        logger.info(f"tooltap metrics at {self.inspection.url}")

    async def _restart(self, before: asyncio.Task[None] | None) -> None:
        """Apply the latest settings, after any restart still under way (one at a time)."""
        if before is not None:
            await asyncio.wait({before})  # its outcome is its own; only its end matters here
        settings = self._settings
        if settings is None:  # tooltap stopped meanwhile
            return
        old, self.inspection = self.inspection, None
        if old is not None:
            old.detach()
            self._missed.update(await asyncio.to_thread(old.close))  # it may hold the port
        try:
            new = await asyncio.to_thread(self._open, settings)
        except (OSError, RuntimeError) as exc:
            logger.error(f"tooltap: cannot restart inspection: {exc}; traffic flows uninspected")
            return
        if self._settings is None:  # tooltap stopped while this one opened
            await asyncio.to_thread(new.close)
            return
        for api, missed in self._missed.items():
            new.counts.dropped(api, missed)
        self._missed.clear()
        self.inspection = new
        if isinstance(new.worker, Supervisor):
            new.worker.watch()
        logger.info(f"tooltap restarted with new settings; metrics at {new.url}")

    def done(self) -> None:
        for task in (self._giving_back, self._watching):
            if task is not None:
                task.cancel()
        self._giving_back = self._watching = None
        if self.inspection is not None:
            left = self.inspection.close().total()
            if left:
                logger.warning(
                    f"tooltap: {left} exchange(s) were not inspected: tooltap stopped first"
                )
        self.inspection = self._settings = None

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every exchange handed over so far is inspected (thread) or handed to the child."""
        return self.inspection is not None and self.inspection.worker.wait_idle(timeout)

    # --- hooks: cheap, and never raising -----------------------------------

    @_guarded
    def request(self, flow: http.HTTPFlow) -> None:
        # Every exchange on a watched host is accounted for: read by its dialect, or counted
        # as not read (with why). On an MCP host MCP wins over any path (the legacy transport
        # POSTs to .../messages). A path several dialects share is read whole: its body says
        # which dialect it speaks. A WebSocket's turns are its socket hooks'; an MCP server's
        # traffic besides its JSON-RPC POSTs (its GET stream, a DELETE) is MCP's to read.
        if REFUSED in flow.metadata:
            return  # answered by tooltap itself (cleartext to a TLS listener): not traffic
        request = flow.request
        mcp_hosts = self._options.mcp_hosts
        counted = False
        api: Api | None = "mcp" if mcp_server(request, mcp_hosts) else None
        if api is None:
            path = path_of(request.path)
            on, by_path = (None, None) if path is None else self._routes.route(request.method, path)
            shared = on is not None
            api = None if shared else by_path
            mode = flow.client_conn.proxy_mode  # a reverse proxy's: its Host is not looked up
            if not isinstance(mode, ReverseMode) and not self._watched(
                mode, request.pretty_host, request.port
            ):
                return
            counted = api is None and not shared
            if counted and (socket_upgrade(request) or mcp_host(request, mcp_hosts)):
                return
        self._flows[flow.id] = _Pending(api, flow.client_conn.id, counted=counted)
        if api == "mcp":
            self._calls.started(flow)  # watched for the deadline until it is answered
        if len(self._flows) > MAX_TRACKED:
            _, forgotten = self._flows.popitem(last=False)
            if forgotten.tap is not None:
                forgotten.tap.release()
            self._dropped(forgotten.api)

    @_guarded
    def responseheaders(self, flow: http.HTTPFlow) -> None:
        response = flow.response
        if response is None:
            return
        pending = self._flows.get(flow.id)
        if pending is None:
            if not response.stream and mcp_stream(flow, self._options.mcp_hosts):
                # The session's channel: read piece by piece while it stays open.
                keep = self._options.max_body if _storing_streams() else 0
                tap = ChannelTap(flow, self._hand_over_part, self.budget, self._tap_error, keep)
                self._channels[flow.id] = response.stream = tap
                if len(self._channels) > MAX_CHANNELS:
                    _, oldest = self._channels.popitem(last=False)
                    oldest.end()  # followed no further: what it owes is said now
            # Not inspected, still never held: a stream flows event by event (I1).
            elif not response.stream and unbounded(flow):
                response.stream = True
            return
        framing = Framing.of(response)
        if pending.counted:
            # Not read: kept for its count only, and never held either.
            if not response.stream and unbounded(flow, framing):
                response.stream = True
            return
        limit = self._options.max_body
        length = framing.length or b""
        if length.isdigit() and int(length) > limit:
            # Too big to inspect: let mitmproxy stream it rather than buffer it.
            pending.too_large = True
            if not callable(response.stream):
                response.stream = True
        elif not callable(response.stream) and (
            response.stream is True
            or unbounded(flow, framing)
            or (pending.api is not None and streamed_path(pending.api, flow.request.path))
        ):
            # A stream (SSE, AWS's event stream, NDJSON, any body of unknown length) must flow
            # as it comes; a body mitmproxy already chose to stream (stream_large_bodies) is
            # tapped, not lost.
            pending.tap = StreamTap(limit, self._tap_error, self._fault, self.budget)
            response.stream = pending.tap

    @_guarded
    def response(self, flow: http.HTTPFlow) -> None:
        self._finish(flow)
        self._end_channel(flow)

    @_guarded
    def error(self, flow: http.HTTPFlow) -> None:
        # Clients often hang up right after the last event: finish here too.
        self._finish(flow)
        self._end_channel(flow)
        if flow.id in self._sockets:
            self.websocket_end(flow)

    @_guarded
    def websocket_start(self, flow: http.HTTPFlow) -> None:
        api = detect_socket(flow.request.path)
        request = flow.request
        if api is None or not self._watched(
            flow.client_conn.proxy_mode, request.pretty_host, request.port
        ):
            return
        self._sockets[flow.id] = SocketTap(api, flow)
        if len(self._sockets) > MAX_SOCKETS:
            # Let the oldest go: what it holds is inspected, the rest of it is not followed.
            _, oldest = self._sockets.popitem(last=False)
            why = f"tooltap stopped following the socket: more than {MAX_SOCKETS} were open"
            self._hand_over_batch(oldest, oldest.batch(let_go=why))

    @_guarded
    def websocket_message(self, flow: http.HTTPFlow) -> None:
        tap = self._sockets.get(flow.id)
        if tap is not None and tap.take(self.budget):
            self._hand_over_batch(tap, tap.batch())

    @_guarded
    def websocket_end(self, flow: http.HTTPFlow) -> None:
        tap = self._sockets.pop(flow.id, None)
        if tap is not None:
            self._hand_over_batch(tap, tap.batch(ended=True))

    def _end_channel(self, flow: http.HTTPFlow) -> None:
        tap = self._channels.pop(flow.id, None)
        if tap is not None:
            tap.end()
            _recorded(flow, [tap.copy])

    def _hand_over_part(self, record: Record) -> bool:
        """A piece of an MCP server's GET stream; it counts as no flow of its own."""
        self._bodies += record.held
        if self.inspection is None or not self.inspection.worker.submit(record):
            self._release(record)
            return False
        return True

    def _hand_over_batch(self, tap: SocketTap, record: Record) -> None:
        self._bodies += record.held
        if not self._hand_over(record):
            tap.refused(record)
            batch = record.socket
            if batch is not None and (batch.ended or batch.let_go is not None):
                self._dropped(record.api)  # the socket's last batch: nothing comes after it

    def _finish(self, flow: http.HTTPFlow) -> None:
        # References only: the inspection side builds everything else.
        self._calls.ended(flow)
        pending = self._flows.pop(flow.id, None)
        if pending is None:
            return
        if pending.tap is not None and pending.tap.failed:
            pending.tap.release()
            return
        request, response = flow.request, flow.response
        error = flow.error.msg if flow.error is not None else None
        failed = _upstream_failed(flow)
        record = Record.of(
            pending.api,
            request,
            flow=flow.id,
            failure=error if failed else None,
            note=None if failed else error,
            ended=(response.timestamp_end if response is not None else None)
            or (flow.error.timestamp if flow.error is not None else 0.0),
            request_ended=request.timestamp_end or 0.0,
        )
        if response is not None:
            record.status = response.status_code
            record.response_headers = response.headers.fields
        if pending.counted:  # not read: its path says so, no body is needed
            self._hand_over(record)
            return
        self._bodies += len(request.raw_content or b"") + (
            pending.tap.size
            if pending.tap is not None
            else len(response.raw_content or b"")
            if response is not None
            else 0
        )
        limit = self._options.max_body
        record.request_body = request.raw_content or b""
        if request.raw_content is None:
            record.skipped = "request body streamed by mitmproxy, not inspected"
        elif len(request.raw_content) > limit:
            record.skipped = "request body above tooltap_max_body"
        if response is not None:
            if pending.tap is not None and pending.tap.over_budget:
                record.skipped = OVER_BUDGET
            elif pending.too_large or (pending.tap is not None and pending.tap.overflow):
                record.skipped = "response body above tooltap_max_body"
            elif pending.tap is not None:
                record.chunks, record.arrived, record.held = pending.tap.hand_over()
                _recorded(flow, record.chunks)
            elif response.raw_content is None and answered_on_stream(pending.api, response):
                pass  # the call's answer comes on the session's stream: its 202 says nothing
            elif response.raw_content is None:
                # Never kept: the exchange broke off before the body was
                # complete, or mitmproxy switched to streaming after our
                # hook (stream_large_bodies on a body of unknown length).
                record.skipped = (
                    f"response body incomplete: {error}"
                    if error
                    else "response body streamed by mitmproxy (stream_large_bodies), not inspected"
                )
            elif len(response.raw_content) > limit:
                record.skipped = "response body above tooltap_max_body"
            else:
                record.response_body = response.raw_content
        # The bodies are kept alive for the inspector: they count against the budget.
        bodies = len(record.request_body) + len(record.response_body)
        if record.skipped is None and not self.budget.take(bodies):
            record.skipped = OVER_BUDGET
        elif record.skipped is None:
            record.held += bodies
        if record.skipped is not None:
            self._release(record)
            record.request_body = record.response_body = b""  # not needed: do not carry them
            record.chunks = []
        self._hand_over(record)

    @_guarded
    def server_connect_error(self, data: ServerConnectionHookData) -> None:
        # In reverse mode mitmproxy connects upstream as soon as a client
        # connects (connection_strategy=eager). When that fails, the client is
        # dropped before it sends a request, and no flow hook ever fires: count
        # it here, or an unreachable upstream looks like no traffic at all.
        client, server = data.client, data.server
        if any(p.client == client.id for p in self._flows.values()):
            return  # a flow waits on this connection: its error hook counts it
        host, port = server.address or ("", 0)
        if not self._watched(client.proxy_mode, host, port):
            return
        record = Record(
            None,
            host=host,
            port=port,
            failure=f"cannot connect to {host}:{port}: {server.error}",
        )
        self._hand_over(record)

    def _watched(self, mode: ProxyMode, host: str, port: int) -> bool:
        if isinstance(mode, ReverseMode):
            return True
        address = f"{host}:{port}"
        decision = self._hosts.get(address)
        if decision is None:
            decision = watched(mode, host, self._options.hosts, port)
            self._hosts[address] = decision
            if len(self._hosts) > MAX_HOSTS:
                self._hosts.popitem(last=False)
        return decision

    # --- handing over, and errors ---------------------------------------------

    def _hand_over(self, record: Record) -> bool:
        if self.inspection is None or not self.inspection.worker.submit(record):
            self._release(record)
            if record.socket is None:  # a socket's batch is counted by its messages
                self._dropped(record.api)
            return False
        return True

    def _release(self, record: Record) -> None:
        """The record's bodies are no longer held for inspection."""
        self.budget.give(record.held)
        record.held = 0

    def _dropped(self, api: Api | None) -> None:
        if self.inspection is not None:
            self.inspection.counts.dropped(api or "none")
        elif self._settings is not None:
            self._missed[api or "none"] += 1  # restarting: counted once it is back

    def _hook_error(self) -> None:
        if self.inspection is not None:
            self.inspection.counts.error("hook")
        logger.exception("tooltap: error in a hook (the flow was not affected)")

    def _tap_error(self, _exc: BaseException) -> None:
        if self.inspection is not None:
            self.inspection.counts.error("tap")

    def _worker_error(self, exc: BaseException) -> None:
        if self.inspection is not None:
            self.inspection.counts.error("worker")
        logger.error(f"tooltap: error while inspecting a flow: {exc!r}", exc_info=exc)
