"""The inspection side: one finished exchange in, a log and metrics out.

`Inspector.handle(record)` runs tooltap.core.inspect and feeds the sinks. The
addon runs it in a child process (`tooltap_inspector=process`, the default) or
in a thread of its own (`thread`). CPython runs one thread at a time, so
inspection inside the proxy's interpreter takes turns with forwarding; in a
process of its own it runs on another core and forwarding never waits for it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from tooltap.core import Exchange, Verdict, detect_api, served_session
from tooltap.core.definitions import endpoint
from tooltap.core.jsontext import loads
from tooltap.core.shapes import as_dict, as_str
from tooltap.core.timing import milliseconds

from ..handover.record import Record
from ..options import BY_NAME
from ..sinks.log import ExchangeIds, LogSink
from ..sinks.metrics import Metrics
from ..sinks.otlp import traces
from ..sinks.redaction import REDACTED
from .applications import Applications
from .pins import Pins, open_pins
from .scrub import scrub
from .session import DEADLINE, Session, with_ending
from .sockets import Sockets, socket_verdict
from .state import State

if TYPE_CHECKING:
    from ..sinks.traces import TraceSink

MAX_TURN = BY_NAME["tooltap_max_body"].default
BUDGET = BY_NAME["tooltap_memory_budget"].default


class Inspector:
    """inspect() and the sinks, for one record at a time, in one session."""

    def __init__(
        self,
        sink: LogSink,
        metrics: Metrics,
        fault: Callable[[str], None] | None = None,
        *,
        max_turn: int = MAX_TURN,
        budget: int = BUDGET,
        traces: TraceSink | None = None,
        state: State | None = None,
        pins: Pins | None = None,
        applications: Applications | None = None,
        deadline: float = DEADLINE,
    ) -> None:
        self.sink = sink
        self.metrics = metrics
        self.traces = traces
        self.session = Session(state=state, pins=pins, deadline=deadline)
        self.deadline = deadline
        self.applications = applications or Applications()
        self.sockets = Sockets(max_turn, budget)
        self._fault = fault  # a test seam: raises to inject a fault

    @classmethod
    def of(
        cls,
        settings: dict[str, Any],
        sink: LogSink,
        metrics: Metrics,
        state: State,
        fault: Callable[[str], None] | None = None,
    ) -> Inspector:
        """An inspector as the inspection settings say (options.settings)."""
        return cls(
            sink,
            metrics,
            fault,
            max_turn=settings["tooltap_max_body"],
            budget=settings["tooltap_memory_budget"],
            traces=traces(settings, metrics.span),
            state=state,
            pins=open_pins(settings, state),
            applications=Applications(settings["tooltap_app_header"]),
            deadline=settings["tooltap_tool_deadline"],
        )

    def handle(self, record: Record) -> None:
        if self._fault is not None:
            self._fault("worker")
        if record.socket is not None:
            self._socket(record)
            return
        if record.overdue:
            self._overdue(record)
            return
        started = time.perf_counter()
        if record.part is not None:
            part = record.part
            paired = self.session.stream(
                part.key, record.exchange(), ended=part.ended, lost=part.lost
            )
            self._emit_all(record, paired, started)
            return
        ids = ExchangeIds.of_flow(record.flow)
        if record.connection_refused:
            verdict = Verdict(api=None, outcome="upstream_error", reason=record.failure)
        elif record.skipped is not None and record.failure is None:
            # A shared path's API is its body's to say: its label here is what the path says.
            api = record.api or detect_api(record.method, record.url)
            verdict = Verdict(
                api=api, outcome="skipped", reason=record.skipped, status=record.status
            )
        else:
            exchange = record.exchange()
            paired = self.session.read(exchange, self._application(record))
            if len(paired) != 1 or paired[0][0] is not exchange:  # it waits, or completes others
                self._emit_all(record, paired, started)
                return
            verdict = with_ending(paired[0][1], record.note, record.failure)
        self._emit(record, verdict, started, ids)

    def _emit_all(
        self, record: Record, paired: list[tuple[Exchange, Verdict]], started: float
    ) -> None:
        """Exchanges completed by this record (MCP's legacy transport): each logged under the
        POST it was (its path, its exchange id), with this record's credentials scrubbed."""
        for exchange, verdict in paired:
            parts = urlsplit(exchange.url)
            path = f"{parts.path}?{parts.query}" if parts.query else parts.path
            posted = replace(record, method=exchange.method, path=path)
            self._emit(posted, verdict, started, ExchangeIds.of_flow(exchange.flow))
            started = time.perf_counter()

    def _socket(self, record: Record) -> None:
        """A batch of one socket's messages: the turns it finished, one by one."""
        batch = record.socket
        if batch is None or record.api is None:
            return
        started = time.perf_counter()
        for reason, count in batch.skipped.items():
            self.metrics.socket_skipped(record.api, reason, count)
        turns = self.sockets.read(record.api, record.url, batch, record.chunks, record.arrived)
        for (api, reason), count in self.sockets.skipped.items():
            self.metrics.socket_skipped(api, reason, count)
        self.sockets.skipped.clear()
        application = self._application(record)
        for key, number, turn in turns:
            verdict = socket_verdict(self.session, turn, record.note, record.failure, application)
            self._emit(record, verdict, started, ExchangeIds.of_socket(key, number))
            started = time.perf_counter()

    def tick(self, now: float) -> None:
        """Once in a while (now: the wall clock, epoch seconds): the calls open sockets owe past
        the deadline, said once each."""
        for key, reader, found in self.sockets.overdue(now, self.deadline):
            self._said_overdue(
                ExchangeIds.of_socket(key, None), reader.api, found.call_id, found.name,
                found.waited, transport="websocket", path=urlsplit(reader.url).path,
                response_id=found.response_id or None,
            )  # fmt: skip

    def _overdue(self, record: Record) -> None:
        """An MCP tools/call the proxy still waits on past the deadline: each call it holds."""
        exchange = record.exchange()
        value, error = loads(exchange.request_body)
        messages = value if isinstance(value, list) else [value]
        session = served_session(exchange)
        known = self.session.tool_servers.get((endpoint(exchange.url), session))
        for message in map(as_dict, messages if error is None else []):
            if message.get("method") != "tools/call":
                continue
            rpc = message.get("id")
            self._said_overdue(
                ExchangeIds.of_flow(record.flow), "mcp", str(rpc) if isinstance(rpc, str | int) and not isinstance(rpc, bool) else "",
                as_str(as_dict(message.get("params")).get("name")),
                record.ended - record.started, transport="http", path=record.logged_path(),
                server=known.server if known is not None else None, session=session,
            )  # fmt: skip

    def _said_overdue(
        self, ids: ExchangeIds, api: str, call_id: str, name: str, waited: float, **where: Any
    ) -> None:
        self.sink.tool_overdue(
            ids,
            api=api, call_id=call_id, name=name, waited_ms=milliseconds(waited),
            deadline_s=self.deadline, **where,
        )  # fmt: skip
        self.metrics.overdue(api)

    def _application(self, record: Record) -> str | None:
        headers = ((k.decode("latin-1"), v.decode("latin-1")) for k, v in record.request_headers)
        return self.applications.of(headers, record.path)

    def _emit(self, record: Record, verdict: Verdict, started: float, ids: ExchangeIds) -> None:
        path = record.logged_path()
        credentials = record.credentials()
        if credentials:
            verdict = scrub(verdict, credentials)
            for credential in credentials:
                path = path.replace(credential, REDACTED)
        host = record.logged_host()
        self.sink.emit(verdict, host, path, (time.perf_counter() - started) * 1000, ids)
        self.metrics.record(verdict, time.perf_counter() - started)
        if self.traces is not None:
            self.traces.emit(
                verdict, record.host, record.request_headers, record.started, record.ended
            )

    def close(self) -> None:
        self.session.state.close()
        if self.traces is not None:
            self.traces.close()
