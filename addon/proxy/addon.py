"""The tooltap mitmproxy addon: watch tool-calling traffic, never touch it.

Hooks do only cheap bookkeeping: pick the flows to inspect, tap streamed
bodies, and hand finished exchanges over without waiting: to a child process
by default, or to a thread (tooltap_inspector). There, tooltap.core.inspect
and the sinks run (addon/inspection/). Every hook and the tap catch
everything and count it in tooltap_internal_errors_total: tooltap must never
be the reason a call fails.
"""

from __future__ import annotations

import fnmatch
import logging
import os
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any

from mitmproxy import ctx, exceptions, http
from mitmproxy.connection import ConnectionState
from mitmproxy.proxy.mode_specs import ProxyMode, ReverseMode
from mitmproxy.proxy.server_hooks import ServerConnectionHookData

from tooltap.core import Api, detect_api

from ..handover.counts import DirectCounts, SharedCounts
from ..handover.record import Record
from ..handover.workers import ProcessWorker, ThreadWorker
from ..inspection.inspector import Inspector
from ..sinks.log import ARGUMENT_MODES, LOG_FORMATS, LogSink
from ..sinks.metrics import Metrics
from .tap import StreamTap

logger = logging.getLogger("tooltap")

# The first-party places these APIs are served: OpenAI, Anthropic, Azure OpenAI,
# Anthropic on Azure AI Foundry, and Anthropic on AWS.
DEFAULT_HOSTS = [
    "api.openai.com",
    "api.anthropic.com",
    "*.openai.azure.com",
    "*.services.ai.azure.com",
    "aws-external-anthropic.*.api.aws",
    "bedrock-mantle.*.api.aws",
]
MAX_TRACKED = 100_000
INSPECTORS = ("process", "thread")
# What mitmproxy's error hook says when the client, not the upstream, ended an
# exchange. (Its HTTP/2 layer says "stream reset by client" for a reset from
# either peer; the message is kept in the logged reason either way.)
CLIENT_GONE = ("Client disconnected.", "stream reset by client")


@dataclass(slots=True)
class _Pending:
    api: Api
    client: str = ""  # the client connection's id
    tap: StreamTap | None = None
    too_large: bool = False


def _upstream_failed(flow: http.HTTPFlow) -> bool:
    """The error hook fired because the upstream (not the client) broke off the exchange."""
    if flow.error is None:
        return False
    if flow.response is not None and flow.response.timestamp_end is not None:
        return False  # the whole response had arrived; what failed came after
    if flow.error.msg.startswith(CLIENT_GONE):
        return False
    return flow.client_conn.state == ConnectionState.OPEN


class Tooltap:
    name = "tooltap"

    def __init__(self, log_stream: IO[str] | None = None) -> None:
        self._log_stream = log_stream  # thread mode only; the child writes to its stdout
        self.metrics: Metrics | None = None  # thread mode: the metrics this process serves
        self.worker: ThreadWorker | ProcessWorker | None = None
        self.counts: DirectCounts | SharedCounts | None = None
        self._flows: OrderedDict[str, _Pending] = OrderedDict()
        self._host_decisions: dict[str, bool] = {}
        self._faults: set[str] = set()
        self._started: tuple[Any, ...] | None = None
        self._log_file: IO[str] | None = None  # thread mode with tooltap_log_file

    # --- lifecycle ---------------------------------------------------------

    def load(self, loader: Any) -> None:
        loader.add_option(
            "tooltap_hosts",
            Sequence[str],
            DEFAULT_HOSTS,
            "Hosts whose traffic is inspected (fnmatch patterns; '*' for all). Reverse-mode traffic always is.",
        )
        loader.add_option(
            "tooltap_max_body",
            int,
            8 * 1024 * 1024,
            "Bodies larger than this many bytes pass through uninspected (counted as skipped).",
        )
        loader.add_option(
            "tooltap_metrics_host",
            str,
            "127.0.0.1",
            "Address of the Prometheus /metrics endpoint. Loopback by default: do not expose it publicly.",
        )
        loader.add_option(
            "tooltap_metrics_port", int, 9464, "Port of the /metrics endpoint (0: any free port)."
        )
        loader.add_option(
            "tooltap_log_format",
            str,
            "auto",
            "json, console, or auto (console on a terminal, JSON lines otherwise).",
            choices=LOG_FORMATS,
        )
        loader.add_option(
            "tooltap_log_file",
            str,
            "",
            "Append the log to this file instead of stdout (with plain mitmdump, stdout also carries mitmproxy's own lines).",
        )
        loader.add_option(
            "tooltap_log_arguments",
            str,
            "raw",
            "How tool arguments are logged: raw, redact (mask secret-looking keys), hash (keyed), omit.",
            choices=ARGUMENT_MODES,
        )
        loader.add_option(
            "tooltap_model_labels",
            int,
            50,
            "Distinct model label values kept in metrics; later models count as 'other'.",
        )
        loader.add_option(
            "tooltap_inspector",
            str,
            "process",
            "Where inspection runs: process (a child process, beside the proxy) or thread (inside it).",
            choices=INSPECTORS,
        )
        loader.add_option(
            "tooltap_queue_size",
            int,
            1000,
            "Exchanges waiting for inspection; when full, new ones are dropped and counted.",
        )
        # Test-only: comma-separated places (hook, tap, worker) that raise on purpose.
        self._faults = {f for f in os.environ.get("TOOLTAP_INJECT_FAULT", "").split(",") if f}

    def configure(self, updated: set[str]) -> None:
        o = ctx.options
        for name in ("tooltap_max_body", "tooltap_queue_size"):
            if name in updated and getattr(o, name) <= 0:
                raise exceptions.OptionsError(f"{name} must be positive, not {getattr(o, name)}")
        if "tooltap_model_labels" in updated and o.tooltap_model_labels < 0:
            raise exceptions.OptionsError("tooltap_model_labels must be 0 or more")
        if "tooltap_metrics_port" in updated and not 0 <= o.tooltap_metrics_port <= 65535:
            raise exceptions.OptionsError(
                f"tooltap_metrics_port {o.tooltap_metrics_port} is not a port"
            )
        for name, allowed in (
            ("tooltap_log_format", LOG_FORMATS),
            ("tooltap_log_arguments", ARGUMENT_MODES),
            ("tooltap_inspector", INSPECTORS),
        ):
            if name in updated and getattr(o, name) not in allowed:
                raise exceptions.OptionsError(f"{name} must be one of {', '.join(allowed)}")
        if "tooltap_hosts" in updated:
            self._host_decisions = {}
        # A thread starts at once (mitmproxy's test helpers never call running);
        # a process starts in running. Either restarts when its settings change.
        if self._settings() != self._started and (o.tooltap_inspector == "thread" or self._started):
            self._start()

    def running(self) -> None:
        if self._started is None:
            self._start()

    def _settings(self) -> tuple[Any, ...]:
        o = ctx.options
        return (
            o.tooltap_inspector, o.tooltap_metrics_host, o.tooltap_metrics_port, o.tooltap_log_format,
            o.tooltap_log_file, o.tooltap_log_arguments, o.tooltap_model_labels, o.tooltap_queue_size,
        )  # fmt: skip

    def _start(self) -> None:
        self.done()
        settings = self._settings()
        mode, host, port, log_format, log_file, log_arguments, model_labels, size = settings
        try:
            if mode == "thread":
                self.metrics = Metrics(model_labels)
                try:
                    port = self.metrics.serve(host, port)
                except OSError as exc:  # the words the child process uses too
                    raise RuntimeError(f"cannot serve metrics on {host}:{port}: {exc}") from exc
                self.counts = DirectCounts(self.metrics)
                stream = self._log_stream
                if log_file and stream is None:
                    stream = self._log_file = open(log_file, "a", encoding="utf-8")  # noqa: SIM115 - closed in done
                sink = LogSink(log_format, log_arguments, stream)
                inspector = Inspector(sink, self.metrics, self._faults)
                self.worker = ThreadWorker(inspector.handle, self._worker_error, size)
                self.worker.start()
            else:
                self.counts = SharedCounts()
                options = [
                    "--metrics-host", host, "--metrics-port", str(port), "--log-format", log_format,
                    "--log-file", log_file, "--log-arguments", log_arguments, "--model-labels", str(model_labels),
                ]  # fmt: skip
                self.worker = ProcessWorker(options, size, self.counts)
                port = self.worker.start()
        except (OSError, RuntimeError) as exc:
            # An error at startup makes mitmdump exit: a proxy nobody can
            # watch is a misconfiguration worth stopping for.
            logger.error(f"tooltap: cannot start: {exc}")
            return
        self._started = settings
        logger.info(f"tooltap metrics at http://{host}:{port}/metrics")

    def done(self) -> None:
        if self.worker is not None:
            self.worker.stop()
        if self.metrics is not None:
            self.metrics.close()
        if self.counts is not None:
            self.counts.close()
        if self._log_file is not None:
            self._log_file.close()
        self.worker = self.metrics = self.counts = self._log_file = None
        self._started = None

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every exchange handed over so far is inspected (thread) or handed to the child."""
        return self.worker is not None and self.worker.wait_idle(timeout)

    # --- hooks: cheap, and never raising -----------------------------------

    def request(self, flow: http.HTTPFlow) -> None:
        try:
            if "hook" in self._faults:
                raise RuntimeError("injected fault in a hook")
            api = detect_api(flow.request.method, flow.request.path)
            if api is not None and self._watched(
                flow.client_conn.proxy_mode, flow.request.pretty_host
            ):
                self._flows[flow.id] = _Pending(api, flow.client_conn.id)
                if len(self._flows) > MAX_TRACKED:
                    self._flows.popitem(last=False)
        except Exception:  # noqa: BLE001 - count it, never break the flow
            self._hook_error()

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        try:
            pending = self._flows.get(flow.id)
            if pending is None or flow.response is None:
                return
            response = flow.response
            limit = ctx.options.tooltap_max_body
            length = response.headers.get("content-length", "")
            if length.isdigit() and int(length) > limit:
                # Too big to inspect: let mitmproxy stream it rather than buffer it.
                pending.too_large = True
                if not callable(response.stream):
                    response.stream = True
            elif not callable(response.stream) and (
                response.stream is True
                or "text/event-stream" in response.headers.get("content-type", "")
            ):
                # SSE must flow event by event; a body mitmproxy already chose to
                # stream (stream_large_bodies) is tapped rather than lost.
                pending.tap = StreamTap(limit, self._tap_error, fault="tap" in self._faults)
                response.stream = pending.tap
        except Exception:  # noqa: BLE001 - counted and logged in _hook_error
            self._hook_error()

    def response(self, flow: http.HTTPFlow) -> None:
        self._finish(flow)

    def error(self, flow: http.HTTPFlow) -> None:
        # Clients often hang up right after the last event: finish here too.
        self._finish(flow)

    def _finish(self, flow: http.HTTPFlow) -> None:
        # References only: the inspection side builds everything else.
        try:
            pending = self._flows.pop(flow.id, None)
            if pending is None or (pending.tap is not None and pending.tap.failed):
                return
            request, response = flow.request, flow.response
            limit = ctx.options.tooltap_max_body
            error = flow.error.msg if flow.error is not None else None
            failed = _upstream_failed(flow)
            record = Record(
                pending.api,
                method=request.method,
                scheme=request.scheme,
                host=request.host,
                port=request.port,
                path=request.path,
                request_headers=request.headers.fields,
                request_body=request.raw_content or b"",
                failure=error if failed else None,
                note=None if failed else error,
            )
            if request.raw_content is None:
                record.skipped = "request body streamed by mitmproxy, not inspected"
            elif len(request.raw_content) > limit:
                record.skipped = "request body above tooltap_max_body"
            if response is not None:
                record.status = response.status_code
                record.response_headers = response.headers.fields
                if pending.too_large or (pending.tap is not None and pending.tap.overflow):
                    record.skipped = "response body above tooltap_max_body"
                elif pending.tap is not None:
                    record.chunks = pending.tap.chunks
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
            if record.skipped is not None:
                record.request_body = b""  # not needed: do not carry it
            self._hand_over(record)
        except Exception:  # noqa: BLE001 - counted and logged in _hook_error
            self._hook_error()

    def server_connect_error(self, data: ServerConnectionHookData) -> None:
        # In reverse mode mitmproxy connects upstream as soon as a client
        # connects (connection_strategy=eager). When that fails, the client is
        # dropped before it sends a request, and no flow hook ever fires: count
        # it here, or an unreachable upstream looks like no traffic at all.
        try:
            client, server = data.client, data.server
            if any(p.client == client.id for p in self._flows.values()):
                return  # a flow waits on this connection: its error hook counts it
            host, port = server.address or ("", 0)
            if not self._watched(client.proxy_mode, host):
                return
            record = Record(
                None,
                host=host,
                port=port,
                failure=f"cannot connect to {host}:{port}: {server.error}",
            )
            self._hand_over(record)
        except Exception:  # noqa: BLE001 - counted and logged in _hook_error
            self._hook_error()

    def _watched(self, mode: ProxyMode, host: str) -> bool:
        if isinstance(mode, ReverseMode):
            return True
        decision = self._host_decisions.get(host)
        if decision is None:
            patterns = ctx.options.tooltap_hosts
            decision = any(fnmatch.fnmatch(host, p) for p in patterns)
            self._host_decisions[host] = decision
        return decision

    # --- errors --------------------------------------------------------------

    def _hand_over(self, record: Record) -> None:
        if self.worker is None or self.counts is None:
            return  # not running (yet, or any more)
        if not self.worker.submit(record):
            self.counts.dropped(record.api or "none")

    def _hook_error(self) -> None:
        if self.counts is not None:
            self.counts.error("hook")
        logger.exception("tooltap: error in a hook (the flow was not affected)")

    def _tap_error(self, _exc: BaseException) -> None:
        if self.counts is not None:
            self.counts.error("tap")

    def _worker_error(self, exc: BaseException) -> None:
        if self.counts is not None:
            self.counts.error("worker")
        logger.error(f"tooltap: error while inspecting a flow: {exc!r}", exc_info=exc)
