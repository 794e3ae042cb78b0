"""Under mitmweb, each finished turn's verdict goes back onto its flow.

The flow gets a mark per severity (red: a finding that fails an audit; yellow:
one that is only reported), a comment with the findings (`~comment strict-void`
finds them) and, on a line of its own, the times (the model's, its first token,
its tokens, the wait of the calls it answers), and the verdicts the tooltap view
shows, in its metadata. Marks, comments and metadata are mitmproxy's, never traffic.

The turns are inspected here, in the proxy process, on one worker thread with
its own session: mitmweb is interactive and its rates are low, and this keeps
`tooltap run` (mitmdump, where this addon stays idle) free of the cost. The
thread hands each result back to the event loop, which alone touches flows.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from mitmproxy import ctx, hooks, http

from tooltap.core import Api, Exchange, Verdict
from tooltap.core.dialects import socket_reader, socket_reading
from tooltap.core.sockets import SocketClose, SocketReader
from tooltap.core.wire import detect_socket

from ..inspection.applications import Applications
from ..inspection.flows import flow_exchange, socket_close, socket_ending
from ..inspection.scrub import scrub
from ..inspection.session import Session
from ..inspection.sockets import MAX_SOCKETS, socket_verdict
from ..options import BY_NAME
from ..proxy.flows import flow_api, watched
from ..proxy.tap import StreamTap
from ..sinks.redaction import ArgumentPolicy
from ..sinks.timing import time_line
from .view import KEY, TooltapContentview, headline, request_credentials, severity

logger = logging.getLogger("tooltap")

MARKS = {"error": ":red_circle:", "warning": ":yellow_circle:"}  # the worst first
MAX_WAITING = 1_000  # HTTP flows waiting for the worker; past it, a flow is left unannotated
MAX_SEEN = 10_000  # flow ids already sent to the worker (so `error` after `response` is not)
PREFIX = "tooltap: "  # the comment's line that tooltap writes; the user's lines stay
TIME_PREFIX = "tooltap time: "  # ... and its line of times
NOT_KEPT = (
    "the streamed body was not kept: tooltap's copy stops at tooltap_max_body and at the "
    "memory budget, and mitmproxy keeps a stream only with store_streamed_bodies=true and "
    "only to its end"
)


class WebAnnotations:
    """Verdicts onto flows, when the master is mitmweb."""

    def __init__(self) -> None:
        self.view = TooltapContentview()
        self.active = False
        self.session = Session()
        self.readers: dict[str, SocketReader] = {}
        self.credentials: dict[str, tuple[str, ...]] = {}  # by socket, read once
        self.policy = ArgumentPolicy(BY_NAME["tooltap_log_arguments"].default)
        self.applications = Applications()  # who declared a model request's tools
        self.waiting = 0  # exchanges and socket messages sent to the worker, not back yet
        self.behind = 0  # exchanges left unannotated because the worker was behind
        self._lagging: set[str] = set()  # sockets whose messages went by unread: lost()
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._worker: ThreadPoolExecutor | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def load(self, loader: Any) -> None:
        from mitmproxy import contentviews  # noqa: PLC0415 - the registry is process-wide

        contentviews.add(self.view)

    def configure(self, updated: set[str]) -> None:
        if "tooltap_log_arguments" in updated:
            # One policy (one hash key) for every flow, as in the log.
            self.policy = ArgumentPolicy(ctx.options.tooltap_log_arguments)
            self.view.arguments = ctx.options.tooltap_log_arguments
        if "tooltap_app_header" in updated:
            self.applications = Applications(ctx.options.tooltap_app_header)
        if "tooltap_tool_deadline" in updated:  # an answer past it is late, as in the log
            self.session.clock.deadline = ctx.options.tooltap_tool_deadline

    def running(self) -> None:
        self.active = ctx.master.addons.get("webaddon") is not None
        if self.active and self._worker is None:
            self._loop = asyncio.get_running_loop()
            self._worker = ThreadPoolExecutor(1, thread_name_prefix="tooltap-web")

    def done(self) -> None:
        if self._worker is not None:
            self._worker.shutdown(wait=False, cancel_futures=True)
            self._worker = None
        # The view stays registered: mitmproxy 12's registry has no removal (its `remove` is a
        # deprecated no-op), and a reload's `add` replaces it by name.

    # --- hooks: bookkeeping, then the worker ---------------------------------

    def response(self, flow: http.HTTPFlow) -> None:
        if flow.websocket is None and self._followed(flow, http_api=True):
            self._exchange(flow)

    def error(self, flow: http.HTTPFlow) -> None:
        # A client that hangs up mid-stream gives `error` instead of `response`.
        if flow.websocket is None and flow.id not in self._seen and self._followed(flow, True):
            self._exchange(flow)

    def websocket_start(self, flow: http.HTTPFlow) -> None:
        api = detect_socket(flow.request.path)
        if api is None or len(self.readers) >= MAX_SOCKETS:
            return
        if self._followed(flow, http_api=False):
            _forget(flow)  # a flow loaded from a file is read anew
            limit = ctx.options.tooltap_max_body
            self.readers[flow.id] = socket_reader(api, flow.request.url, limit)
            self.credentials[flow.id] = request_credentials(flow)

    def websocket_message(self, flow: http.HTTPFlow) -> None:
        reader = self.readers.get(flow.id)
        if reader is None or flow.websocket is None:
            return
        message = flow.websocket.messages[-1]
        content = message.content
        if not socket_reading(reader.api).wanted(content, message.is_text):
            return
        if self.waiting >= MAX_WAITING:  # the worker is behind: this turn goes unread
            self._lagging.add(flow.id)
            return
        credentials = self.credentials[flow.id]
        if flow.id in self._lagging:
            self._lagging.discard(flow.id)
            self._submit(flow, self._lost, message.timestamp, credentials, reader)
        args = (reader, content, message.from_client, message.timestamp)
        self._submit(flow, self._feed, message.timestamp, credentials, *args)

    def websocket_end(self, flow: http.HTTPFlow) -> None:
        reader = self.readers.pop(flow.id, None)
        credentials = self.credentials.pop(flow.id, ())
        self._lagging.discard(flow.id)
        if reader is not None and flow.websocket is not None:
            messages = flow.websocket.messages
            last = messages[-1].timestamp if messages else None
            ending = socket_ending(flow)
            close = socket_close(flow)
            self._submit(flow, self._close, last, credentials, reader, close, *ending)

    def _exchange(self, flow: http.HTTPFlow) -> None:
        self._seen[flow.id] = None
        if len(self._seen) > MAX_SEEN:
            self._seen.popitem(last=False)
        if self.waiting >= MAX_WAITING:
            self.behind += 1
            if self.behind == 1:
                logger.warning(
                    "tooltap: mitmweb's flows arrive faster than tooltap can annotate them; "
                    "past %d waiting, flows are left without a verdict",
                    MAX_WAITING,
                )
            return
        api = flow_api(flow, ctx.options.tooltap_hosts, ctx.options.tooltap_mcp_hosts)
        # References only, taken here on the loop, which alone touches flows.
        kept = flow.response is None or flow.response.raw_content is not None
        exchange = flow_exchange(flow) if kept else _tapped(flow)
        if exchange is not None:
            exchange = exchange.model_copy(update={"api": api})  # MCP: no path says it
        application = self.applications.of(flow.request.headers.items(), flow.request.url)
        args = (exchange, api, application)
        self._submit(flow, self._inspect, None, request_credentials(flow), *args)

    def _followed(self, flow: http.HTTPFlow, http_api: bool) -> bool:
        if not self.active:
            return False
        hosts = ctx.options.tooltap_hosts
        if http_api:
            return flow_api(flow, hosts, ctx.options.tooltap_mcp_hosts) is not None
        request = flow.request
        return watched(flow.client_conn.proxy_mode, request.pretty_host, hosts, request.port)

    def _submit(
        self,
        flow: http.HTTPFlow,
        work: Callable[..., list[Verdict]],
        at: float | None,
        credentials: tuple[str, ...],
        *args: Any,
    ) -> None:
        """Run work(*args) on the worker; its verdicts go onto the flow. at: the timestamp of
        the socket message that ended the turns, where the view shows them."""
        if self._worker is None or self._loop is None:
            return
        self.waiting += 1
        policy, loop = self.policy, self._loop

        def run() -> None:
            verdicts: list[Verdict] = []
            try:
                verdicts = work(*args)
                verdicts = [policy.verdict(scrub(v, credentials)) for v in verdicts]
            except Exception:
                logger.exception("tooltap: could not annotate a flow in mitmweb")
                verdicts = []
            loop.call_soon_threadsafe(self._landed, flow, verdicts, policy.mode, at)

        self._worker.submit(run)

    # --- on the worker thread -------------------------------------------------

    def _inspect(
        self, exchange: Exchange | None, api: Api | None, application: str | None = None
    ) -> list[Verdict]:
        if exchange is None:
            return [Verdict(api=api, outcome="skipped", reason=NOT_KEPT)]
        return [self.session.inspect(exchange, application=application)]

    def _feed(
        self, reader: SocketReader, content: bytes, from_client: bool, at: float
    ) -> list[Verdict]:
        turns = reader.feed(content, from_client, at)
        return [socket_verdict(self.session, turn) for turn in turns]

    def _lost(self, reader: SocketReader) -> list[Verdict]:
        return [socket_verdict(self.session, turn) for turn in reader.lost()]

    def _close(
        self, reader: SocketReader, close: SocketClose | None, note: str | None, failure: str | None
    ) -> list[Verdict]:
        return [socket_verdict(self.session, t, note, failure) for t in reader.close(close)]

    # --- back on the event loop -----------------------------------------------

    def _landed(
        self, flow: http.HTTPFlow, verdicts: list[Verdict], arguments: str, at: float | None
    ) -> None:
        self.waiting -= 1
        if flow.websocket is None:
            _forget(flow)  # an exchange replayed or loaded again: its verdict anew
        if verdicts:
            self._annotate(flow, verdicts, arguments, at)

    def _annotate(
        self, flow: http.HTTPFlow, verdicts: list[Verdict], arguments: str, at: float | None
    ) -> None:
        stored = flow.metadata.get(KEY) or {"arguments": arguments, "verdicts": [], "ends": []}
        stored["verdicts"] += [v.model_dump(mode="json") for v in verdicts]  # a socket's add up
        stored["ends"] += [at] * len(verdicts)
        flow.metadata[KEY] = stored
        # A socket's later turns add to what its earlier ones marked and said.
        levels = {severity(verdicts)} | {k for k, mark in MARKS.items() if flow.marked == mark}
        level = next((k for k in MARKS if k in levels), None)
        flow.marked = MARKS[level] if level else flow.marked
        lines, said, timed = [], [], []
        for line in flow.comment.splitlines():
            if line.startswith(PREFIX):
                said.append(line.removeprefix(PREFIX))
            elif line.startswith(TIME_PREFIX):
                timed.append(line.removeprefix(TIME_PREFIX))
            else:
                lines.append(line)
        said += (headline(v) for v in verdicts)
        timed += filter(None, map(time_line, verdicts))
        times = [TIME_PREFIX + "; ".join(timed)] if timed else []
        flow.comment = "\n".join([*lines, PREFIX + "; ".join(said), *times])
        ctx.master.addons.trigger(hooks.UpdateHook([flow]))


def _forget(flow: http.HTTPFlow) -> None:
    """What tooltap said of the flow before: its verdicts, its mark and its comment line."""
    flow.metadata.pop(KEY, None)
    if flow.marked in MARKS.values():
        flow.marked = ""
    flow.comment = "\n".join(
        c for c in flow.comment.splitlines() if not c.startswith((PREFIX, TIME_PREFIX))
    )


def _tapped(flow: http.HTTPFlow) -> Exchange | None:
    """A streamed flow whose client hung up before the stream's end (as clients often do
    right after the last event): mitmproxy keeps no body for it, but tooltap's own tap holds
    a copy until the proxy addon's `error` hook hands it over, which runs after this one."""
    tap = flow.response.stream if flow.response is not None else None
    if not isinstance(tap, StreamTap) or tap.overflow or tap.failed:
        return None
    return flow_exchange(flow).model_copy(update={"response_body": b"".join(tap.chunks)})
