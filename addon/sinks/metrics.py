"""The Prometheus sink: every metric tooltap exports (docs/reference.md), one registry per
addon instance.

A registry per instance (never the global one) lets mitmproxy reload the
script without "Duplicated timeseries", and lets tests read exact values.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer
from prometheus_client.metrics_core import Metric

from tooltap.core import APIS, Verdict, parallel, schema
from tooltap.core.loop import RULES
from tooltap.core.sockets import READER_SKIPS

OUTCOMES = ("inspected", "skipped", "unparseable", "upstream_error", "client_gone", "dropped")
# An exchange whose body no dialect reads has no API to label it with: api="none".
NOT_READ = ("none", "not_read")
WHERE = ("hook", "tap", "worker")
SOCKET_APIS = ("responses", "realtime", "gemini_live")  # the APIs that have a WebSocket transport
# Why a WebSocket message went unused: in the proxy (binary frames, the budget or the queue
# full), then in the inspector's readers.
SOCKET_SKIPS = ("binary", "over_budget", "queue_full", *READER_SKIPS)
OTHER_MODEL = "other"
# What broke, per call: its arguments' JSON, their schema, or (from a tool server) its result's.
ARGUMENT_ERRORS = ("parse", "schema", "result_schema")
ERROR_TYPES = 50  # distinct session error codes kept as labels; later ones count as `other`
HIDDEN_WHERE = ("definition", "result")  # where hidden text was found
# The tokens a turn counts, by type: cached_input and reasoning only where the API says.
TOKEN_TYPES = {
    "input_tokens": "input",
    "output_tokens": "output",
    "cached_input_tokens": "cached_input",
    "reasoning_tokens": "reasoning",
}
# Seconds, for a model's answer, its first token, and a tool's wait and run.
MODEL_BUCKETS = (0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120, 300)
FIRST_TOKEN_BUCKETS = (0.05, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 4, 8, 15, 30)
TOOL_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
# Seconds between the /metrics server's checks for a stop: what closing it waits, at most
# (prometheus_client's own server checks every half second).
STOP_CHECK = 0.05


class Registry(CollectorRegistry):
    """A registry that leaves out the *_created series.

    They double the series count and no rule or panel reads them.
    prometheus_client's own switch (disable_created_metrics) is process-wide;
    this is per registry, so importing tooltap changes nothing for its host.
    """

    def collect(self) -> Iterator[Metric]:
        for metric in super().collect():
            metric.samples = [s for s in metric.samples if not s.name.endswith("_created")]
            yield metric


class Metrics:
    def __init__(self, model_labels: int = 50) -> None:
        self.registry = Registry()
        self.model_labels = model_labels
        self._models: set[str] = set()
        self._error_types: set[str] = set()
        self._servers: set[str] = set()  # tool servers named in tooltap_tool_changes_total
        self._pairs: set[tuple[str, str]] = set()
        self._children: dict[tuple[Any, ...], Any] = {}
        self._lock = threading.Lock()
        r = self.registry
        by_model = ["api", "model"]
        self.turns = Counter(
            "tooltap_turns_total",
            "Inspected turns by parallel/strict state.",
            [*by_model, "state"],
            registry=r,
        )
        self.formats = Counter(
            "tooltap_formats_total",
            "Inspected turns by output-format state.",
            [*by_model, "state"],
            registry=r,
        )
        self.tool_calls = Counter(
            "tooltap_tool_calls_total", "Tool calls the model returned.", by_model, registry=r
        )
        self.unguaranteed = Counter(
            "tooltap_unguaranteed_arguments_total",
            "Argument objects returned in strict-void turns: strict was declared and not held.",
            by_model,
            registry=r,
        )
        self.argument_errors = Counter(
            "tooltap_argument_errors_total",
            "Calls whose arguments did not parse or validate (kind parse, schema), or whose "
            "result broke the tool's outputSchema (result_schema, MCP).",
            [*by_model, "kind"],
            registry=r,
        )
        self.duplicates = Counter(
            "tooltap_duplicate_calls_total",
            "Turns that called one tool name more than once.",
            by_model,
            registry=r,
        )
        self.loop_errors = Counter(
            "tooltap_loop_errors_total",
            "Tool-loop integrity findings.",
            ["api", "rule"],
            registry=r,
        )
        self.tool_results = Counter(
            "tooltap_tool_results_total",
            "Tool results the application sent back.",
            ["api", "outcome"],
            registry=r,
        )
        self.rejected = Counter(
            "tooltap_rejected_requests_total",
            "Requests the API refused (4xx).",
            ["api", "status"],
            registry=r,
        )
        self.session_errors = Counter(
            "tooltap_session_errors_total",
            "Errors a Realtime or Gemini Live session sent that refused no request (and Gemini"
            " Live's goAway), by their code (the first 50 codes; later ones count as other).",
            ["api", "type"],
            registry=r,
        )
        self.calls_per_turn = Histogram(
            "tooltap_calls_per_turn",
            "Tool calls per inspected turn.",
            ["api"],
            buckets=(0, 1, 2, 3, 4, 5, 8, 13, 21),
            registry=r,
        )
        self.flows = Counter(
            "tooltap_flows_total",
            "Flows seen on watched hosts, by what became of them (not_read: no dialect reads "
            "the body; the log says why).",
            ["api", "outcome"],
            registry=r,
        )
        self.inspect_seconds = Histogram(
            "tooltap_inspect_seconds",
            "The proxy's own cost per flow: inspection and sinks, in the worker.",
            ["api"],
            buckets=(
                0.0001,
                0.00025,
                0.0005,
                0.001,
                0.0025,
                0.005,
                0.01,
                0.025,
                0.05,
                0.1,
                0.25,
                1.0,
            ),
            registry=r,
        )
        self.internal_errors = Counter(
            "tooltap_internal_errors_total",
            "Exceptions tooltap caught so that traffic was not disturbed.",
            ["where"],
            registry=r,
        )
        self.inspector_restarts = Counter(
            "tooltap_inspector_restarts_total",
            "Times the proxy restarted its inspection process (it died or stopped taking work).",
            registry=r,
        )
        self.socket_skips = Counter(
            "tooltap_websocket_messages_skipped_total",
            "WebSocket messages inspection needed and did not use, by why (binary, over_budget, "
            "queue_full, not_json, turn_too_large, ...).",
            ["api", "reason"],
            registry=r,
        )
        self.spans = Counter(
            "tooltap_spans_total",
            "OpenTelemetry spans (tooltap_otlp), by outcome: exported, or dropped (the collector "
            "was down, slow or refused them, the queue was full, or tooltap stopped first). "
            "Each span counts once.",
            ["outcome"],
            registry=r,
        )
        self.state_errors = Counter(
            "tooltap_state_errors_total",
            "Reads and writes of the shared state (tooltap_state) that Redis did not answer, or "
            "that were skipped while it was down: each used this replica's own memory instead.",
            registry=r,
        )
        self.tool_changes = Counter(
            "tooltap_tool_changes_total",
            "Tool definitions that differ from their pin (first seen, or the tools lock), and "
            "tools that appeared in or disappeared from a server's list, each change once; "
            "server: the MCP server's name (the first N, then other), empty for an "
            "application's declared tools.",
            ["api", "server"],
            registry=r,
        )
        self.hidden_text = Counter(
            "tooltap_hidden_text_total",
            "Runs of invisible characters where they do nothing visible, in a tool definition "
            "or in a tool result (where: definition, result).",
            ["api", "where"],
            registry=r,
        )
        self.model_duration = Histogram(
            "tooltap_model_duration_seconds",
            "A model's answer, from the request's first byte at the proxy to the response's "
            "last (finished turns).",
            by_model,
            buckets=MODEL_BUCKETS,
            registry=r,
        )
        self.first_token = Histogram(
            "tooltap_first_token_seconds",
            "A stream's first token: from the request's end to the first event carrying model "
            "output (text, reasoning, a call's name or arguments).",
            by_model,
            buckets=FIRST_TOKEN_BUCKETS,
            registry=r,
        )
        self.tokens = Counter(
            "tooltap_tokens_total",
            "Tokens the responses count, by type (input, output; cached_input and reasoning "
            "where the API says).",
            [*by_model, "type"],
            registry=r,
        )
        self.tool_wait = Histogram(
            "tooltap_tool_wait_seconds",
            "Per answered call: from the end of the response that issued it to the arrival of "
            "its result.",
            ["api"],
            buckets=TOOL_BUCKETS,
            registry=r,
        )
        self.tool_run = Histogram(
            "tooltap_tool_run_seconds",
            "An MCP tools/call a model's call was linked to: its run on the server.",
            ["server"],
            buckets=TOOL_BUCKETS,
            registry=r,
        )
        self.serial_batches = Counter(
            "tooltap_serial_batches_total",
            "Turns whose parallel calls ran one after another (each start and end seen).",
            ["api"],
            registry=r,
        )
        self.overdue_calls = Counter(
            "tooltap_overdue_calls_total",
            "Calls still unanswered past tooltap_tool_deadline while something waits for them.",
            ["api"],
            registry=r,
        )
        self.held = Gauge(
            "tooltap_held_bytes",
            "Bytes the proxy holds for inspection now (stream copies, bodies on their way).",
            registry=r,
        )
        self.held_peak = Gauge(
            "tooltap_held_peak_bytes",
            "The most bytes the proxy held for inspection at once (tooltap_memory_budget caps it).",
            registry=r,
        )
        # Known label sets start at 0, so rates and alerts exist before the first event.
        for api in APIS:
            for outcome in OUTCOMES:
                self.flows.labels(api, outcome)
            for rule in RULES:
                self.loop_errors.labels(api, rule)
            for result in ("ok", "error"):
                self.tool_results.labels(api, result)
            self.tool_changes.labels(api, "")
            for where in HIDDEN_WHERE:
                self.hidden_text.labels(api, where)
            for counter in (self.serial_batches, self.overdue_calls):
                counter.labels(api)
        self.flows.labels(*NOT_READ)
        for where in WHERE:
            self.internal_errors.labels(where)
        for outcome in ("exported", "dropped"):
            self.spans.labels(outcome)
        for socket_api in SOCKET_APIS:
            for reason in SOCKET_SKIPS:
                self.socket_skips.labels(socket_api, reason)
        self._serving: tuple[ThreadingWSGIServer, threading.Thread] | None = None

    def model(self, name: str | None) -> str:
        """The model label: the first N distinct names, then `other`."""
        return self._bounded(self._models, self.model_labels, name or "unknown")

    def _bounded(self, seen: set[str], limit: int, label: str) -> str:
        if label in seen:
            return label
        with self._lock:
            if len(seen) < limit:
                seen.add(label)
                return label
        return OTHER_MODEL

    def _child(self, metric: Any, *labels: str) -> Any:
        # labels() takes a lock and builds a key on every call; the children are cached here.
        key = (id(metric), *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def watch_budget(self, budget: Any) -> None:
        """Thread mode: the gauges read the proxy's budget (a Budget) when scraped."""
        self.held.set_function(lambda: budget.used)
        self.held_peak.set_function(lambda: budget.peak)

    def flow(self, api: str, outcome: str, count: int = 1) -> None:
        self._child(self.flows, api, outcome).inc(count)

    def socket_skipped(self, api: str, reason: str, count: int = 1) -> None:
        self._child(self.socket_skips, api, reason).inc(count)

    def span(self, outcome: str, count: int = 1) -> None:
        """Thread-safe: the span exporter's thread counts here."""
        self._child(self.spans, outcome).inc(count)

    def overdue(self, api: str) -> None:
        self._child(self.overdue_calls, api).inc()

    def state_error(self) -> None:
        self.state_errors.inc()

    def internal_error(self, where: str) -> None:
        self._child(self.internal_errors, where).inc()

    def record(self, verdict: Verdict, seconds: float) -> None:
        child = self._child
        api = verdict.api or "none"
        if verdict.scope != "session":  # what a session says outside its turns is no flow
            child(self.flows, api, verdict.outcome).inc()
            child(self.inspect_seconds, api).observe(seconds)
        for said in verdict.session_errors:
            kind = self._bounded(self._error_types, ERROR_TYPES, said.type or "unknown")
            child(self.session_errors, api, kind).inc()
        for error in verdict.loop_errors:
            child(self.loop_errors, api, error.rule).inc()
        for result in verdict.tool_results:
            child(self.tool_results, api, result.outcome).inc()
        if verdict.rejected is not None:
            child(self.rejected, api, str(verdict.rejected.status)).inc()
        for change in verdict.tool_changes:
            server = (
                self._bounded(self._servers, self.model_labels, change.server)
                if change.server
                else ""
            )
            child(self.tool_changes, api, server).inc()
        for hidden in verdict.hidden_text:
            child(self.hidden_text, api, hidden.part).inc()
        for timed in verdict.tool_times:
            child(self.tool_wait, api).observe(timed.waited_ms / 1000)
            if timed.ran_ms is not None:
                server = self._bounded(self._servers, self.model_labels, timed.server or "")
                child(self.tool_run, server).observe(timed.ran_ms / 1000)
        if any(e.rule == "serial-execution" for e in verdict.loop_errors):
            child(self.serial_batches, api).inc()
        tool, state = verdict.scope == "tool", verdict.state
        if state is None and not tool:
            return
        # A tool server's calls go under the server's name where a model's name would be.
        model = self.model(verdict.server if tool else verdict.model)
        if (api, model) not in self._pairs:
            self._start_at_zero(api, model, tool=tool)
        if state is None or tool:
            self._arguments(api, model, verdict)
            return
        calls = verdict.call_count
        child(self.turns, api, model, state).inc()
        if verdict.duration_ms is not None:
            child(self.model_duration, api, model).observe(verdict.duration_ms / 1000)
        if verdict.first_token_ms is not None:
            child(self.first_token, api, model).observe(verdict.first_token_ms / 1000)
        for key, count in verdict.usage.items():
            if key in TOKEN_TYPES:
                child(self.tokens, api, model, TOKEN_TYPES[key]).inc(count)
        if verdict.format_state is not None:
            child(self.formats, api, model, verdict.format_state).inc()
        child(self.calls_per_turn, api).observe(calls)
        if verdict.state == "strict-void":
            child(self.unguaranteed, api, model).inc(calls)
        if verdict.duplicates:
            child(self.duplicates, api, model).inc()
        self._arguments(api, model, verdict)

    def _arguments(self, api: str, model: str, verdict: Verdict) -> None:
        """The calls, and those whose arguments (or, from a tool server, results) broke."""
        child = self._child
        if verdict.call_count + verdict.hosted_count:
            child(self.tool_calls, api, model).inc(verdict.call_count + verdict.hosted_count)
        parse = sum(1 for c in verdict.calls if c.parse_error is not None)
        invalid = sum(1 for c in verdict.calls if c.schema_errors)
        results = sum(1 for r in verdict.tool_results if r.schema_errors)
        for kind, count in (("parse", parse), ("schema", invalid), ("result_schema", results)):
            if count:
                child(self.argument_errors, api, model, kind).inc(count)

    def _start_at_zero(self, api: str, model: str, *, tool: bool = False) -> None:
        """Create an (api, model)'s series at 0, so that rate() sees their first increment.
        tool: a tool server's (no turns, and results checked against their schemas)."""
        self._pairs.add((api, model))
        self.tool_calls.labels(api, model)
        for kind in ARGUMENT_ERRORS if tool else ARGUMENT_ERRORS[:2]:
            self.argument_errors.labels(api, model, kind)
        if tool:
            return
        for state in parallel.STATES:
            self.turns.labels(api, model, state)
        for state in schema.STATES:
            self.formats.labels(api, model, state)
        for counter in (self.unguaranteed, self.duplicates):
            counter.labels(api, model)
        for kind in ("input", "output"):
            self.tokens.labels(api, model, kind)

    def serve(self, host: str, port: int) -> int:
        """Start the /metrics endpoint; returns the bound port."""
        # prometheus_client's start_http_server, with a server whose stop is quick to notice.
        family, _, _, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]

        class Server(ThreadingWSGIServer):
            address_family = family

        server = make_server(
            str(address[0]), port, make_wsgi_app(self.registry), Server, handler_class=_Quiet
        )
        thread = threading.Thread(
            target=server.serve_forever, args=(STOP_CHECK,), name="tooltap: /metrics", daemon=True
        )
        thread.start()
        self._serving = (server, thread)
        return int(server.server_port)

    def close(self) -> None:
        if self._serving is not None:
            server, thread = self._serving
            self._serving = None
            server.shutdown()
            server.server_close()
            thread.join()  # its loop has returned: the thread ends at once


class _Quiet(WSGIRequestHandler):
    """No access line per scrape on stderr."""

    def log_message(self, format: str, *args: Any) -> None:
        pass
