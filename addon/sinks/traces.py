"""Each verdict as an OpenTelemetry span, inside the trace of the application that made the call.

Off unless `tooltap_otlp` names an OTLP/HTTP collector or OTEL_EXPORTER_OTLP_ENDPOINT (or
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set: sinks/otlp.py decides, and only then imports this
module and OpenTelemetry. One CLIENT span per model call, named
`chat {model}`, with the GenAI semantic conventions' attributes and tooltap's findings under
`tooltap.`; an event per tool call, loop error and tool failure. When the request carries W3C
`traceparent`, the span is its child. Its start and end are the exchange's own timestamps.
Each call the request answers is an `execute_tool {name}` span in the same trace, from the end
of the response that issued it to the arrival of its result.

Spans are batched on a thread of their own with a bounded queue: a slow or absent collector
drops spans (counted in tooltap_spans_total{outcome="dropped"}), never slows inspection. Each
span is counted once, exported or dropped.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv.attributes import error_attributes, server_attributes
from opentelemetry.trace import (
    INVALID_SPAN_CONTEXT,
    SpanKind,
    Status,
    StatusCode,
    get_current_span,
    set_span_in_context,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from tooltap.core import Call, ToolTime, Verdict
from tooltap.core.findings import findings

from .redaction import ArgumentPolicy

# The batching, unless the SDK's standard variables (OTEL_BSP_*) say otherwise:
MAX_QUEUE = 2048  # spans waiting for the collector; past it, the oldest are dropped
BATCH = 512  # spans per export at most
DELAY = 1.0  # seconds a batch that is not full waits for more spans
TIMEOUT = 5.0  # seconds per export, unless OTEL_EXPORTER_OTLP_TIMEOUT says otherwise
Provider = gen_ai.GenAiProviderNameValues


def provider_name(api: str | None, host: str) -> str:
    """gen_ai.provider.name: who serves the model, read from the host, else from the API."""
    if host.endswith(".openai.azure.com"):
        return Provider.AZURE_AI_OPENAI.value
    if host.startswith("bedrock-") and host.endswith((".api.aws", ".amazonaws.com")):
        return Provider.AWS_BEDROCK.value
    if host.endswith("aiplatform.googleapis.com") or (
        host.startswith("aiplatform.") and host.endswith(".rep.googleapis.com")
    ):
        return Provider.GCP_VERTEX_AI.value
    if host == "generativelanguage.googleapis.com" or api in ("gemini", "gemini_live"):
        return Provider.GCP_GEMINI.value
    if api == "messages":
        return Provider.ANTHROPIC.value
    if api == "cohere":
        return Provider.COHERE.value
    if api == "ollama":  # no well-known value; the convention allows the provider's own name
        return "ollama"
    return Provider.OPENAI.value


class _Batches(SpanProcessor):
    """Ended spans to the exporter in batches, on a thread of its own, through a bounded queue.

    The queue is this class's own, and one lock guards every change to it: a span that pushes
    the oldest out of a full queue, a batch taken for export, what close leaves behind. So each
    span is counted once, exported or dropped, whatever the threads do. (The SDK's batch
    processor drops silently, and a look at its queue from outside races its export thread.)
    on_end only appends under the lock, so the thread that ends a span never waits for the
    collector.
    """

    def __init__(self, exporter: SpanExporter, count: Callable[[str, int], None]) -> None:
        self.exporter = exporter
        self.count = count
        self.size = int(_positive("OTEL_BSP_MAX_QUEUE_SIZE") or MAX_QUEUE)
        self.batch = min(int(_positive("OTEL_BSP_MAX_EXPORT_BATCH_SIZE") or BATCH), self.size)
        delay_ms = _positive("OTEL_BSP_SCHEDULE_DELAY")
        self.delay = delay_ms / 1000 if delay_ms is not None else DELAY
        self.queue: deque[ReadableSpan] = deque()
        self.changed = threading.Condition()
        self.sending = False  # a batch is with the exporter
        self.flushing = 0  # force_flush calls waiting
        self.closing = False
        self.thread = threading.Thread(target=self._run, name="tooltap-spans", daemon=True)
        self.thread.start()

    def on_end(self, span: ReadableSpan) -> None:
        if not (span.context and span.context.trace_flags.sampled):
            return  # the caller's trace is not being recorded
        with self.changed:
            dropped = self.closing or len(self.queue) == self.size
            if not self.closing:
                if dropped:
                    self.queue.popleft()  # the oldest goes
                self.queue.append(span)
                if len(self.queue) >= self.batch:
                    self.changed.notify_all()
        if dropped:
            self.count("dropped", 1)

    def _due(self) -> bool:
        """A batch is full, or what is queued is wanted now (a flush, or close)."""
        return len(self.queue) >= self.batch or bool(self.queue and self.flushing) or self.closing

    def _run(self) -> None:
        while True:
            with self.changed:
                self.changed.wait_for(self._due, self.delay)
                batch = [self.queue.popleft() for _ in range(min(self.batch, len(self.queue)))]
                if not batch:
                    if self.closing:
                        return
                    continue
                self.sending = True
            self._send(batch)
            with self.changed:
                self.sending = False
                self.changed.notify_all()

    def _send(self, batch: list[ReadableSpan]) -> None:
        try:
            result = self.exporter.export(batch)
        except Exception:  # noqa: BLE001 - an exporter error is a dropped batch, nothing more
            result = SpanExportResult.FAILURE
        self.count("exported" if result is SpanExportResult.SUCCESS else "dropped", len(batch))

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Wait until every span ended so far has been exported or dropped; False on timeout."""
        with self.changed:
            self.flushing += 1
            self.changed.notify_all()
            done = self.changed.wait_for(
                lambda: not self.queue and not self.sending, timeout_millis / 1000
            )
            self.flushing -= 1
        return done

    def shutdown(self, timeout: float = 30.0) -> None:
        """Send what is queued, for `timeout` seconds at most; what is still queued is dropped.

        A batch still with the exporter then is counted when the exporter gives it back
        (shutting the exporter down cuts it short)."""
        with self.changed:
            if self.closing:
                return
            self.closing = True
            self.changed.notify_all()
        self.thread.join(timeout)
        with self.changed:
            left = len(self.queue)
            self.queue.clear()
        if left:
            self.count("dropped", left)
        self.exporter.shutdown()


class TraceSink:
    """Verdicts out as spans, through the OTLP/HTTP exporter."""

    def __init__(
        self,
        where: str,
        arguments: str,
        count: Callable[[str, int], None],
        exporter: SpanExporter | None = None,
    ) -> None:
        self.policy = ArgumentPolicy(arguments)
        if exporter is None:
            timeout = _positive("OTEL_EXPORTER_OTLP_TIMEOUT") or TIMEOUT  # seconds, as Python's
            exporter = OTLPSpanExporter(endpoint=where or None, timeout=timeout)
        self.provider = TracerProvider(
            resource=Resource.create({SERVICE_NAME: "tooltap"}),
            shutdown_on_exit=False,  # close() does it, bounded: a restart leaves none behind
        )
        self.spans = _Batches(exporter, count)
        self.provider.add_span_processor(self.spans)
        self.tracer = self.provider.get_tracer("tooltap")
        self.propagator = TraceContextTextMapPropagator()

    def emit(
        self,
        verdict: Verdict,
        host: str,
        headers: Sequence[tuple[bytes, bytes]],
        started: float,
        ended: float,
    ) -> None:
        """One span for one model call (or a WebSocket turn), in the caller's trace if named;
        for a tool server's exchange (MCP), one `execute_tool` span per call."""
        if verdict.scope == "session" or verdict.outcome == "not_read":
            return  # a session's findings outside its turns, or a body not read: no call known
        carrier = {
            key.decode("latin-1").lower(): value.decode("latin-1")
            for key, value in headers
            if key.lower() in (b"traceparent", b"tracestate")
        }
        parent = self.propagator.extract(carrier) if carrier else None
        now = time.time()
        start = int((started or now) * 1e9)
        end = max(start, int((ended or now) * 1e9))
        verdict = self.policy.verdict(verdict)
        if verdict.scope == "tool":
            for call in verdict.calls:
                self._tool_span(verdict, call, host, parent, (start, end))
            self._list_span(verdict, host, parent, (start, end))
            return
        model = verdict.request_model or verdict.model or ""
        span = self.tracer.start_span(
            f"chat {model}".strip(),
            context=parent,
            kind=SpanKind.CLIENT,
            start_time=start,
            attributes=self._attributes(verdict, host),
        )
        for name, attributes in self._events(verdict):
            span.add_event(name, attributes, timestamp=end)
        failure = _error_type(verdict)
        if failure is not None:
            span.set_attribute(error_attributes.ERROR_TYPE, failure)
            span.set_status(Status(StatusCode.ERROR, verdict.reason or failure))
        span.end(end_time=end)
        if verdict.tool_times:
            # Beside the turn under the caller's span when the request names one, as the GenAI
            # conventions lay out an agent's trace; else under the turn's span, in its trace.
            caller = (
                get_current_span(parent).get_span_context()
                if parent is not None
                else INVALID_SPAN_CONTEXT
            )
            around = parent if caller.is_valid else set_span_in_context(span)
            for timed in verdict.tool_times:
                self._wait_span(verdict, timed, around)

    def _tool_span(
        self, v: Verdict, call: Call, host: str, parent: Any, times: tuple[int, int]
    ) -> None:
        """One call a tool server ran, as the GenAI conventions' execute_tool span."""
        results = [r for r in v.tool_results if r.call_id == call.call_id]
        own = v.model_copy(
            update={
                "calls": [call],
                "tool_results": results,
                "loop_errors": [e for e in v.loop_errors if call.call_id in e.ids],
                "tool_changes": [],
                "hidden_text": [
                    h for h in v.hidden_text if h.part == "result" and h.tool == call.call_id
                ],
            }
        )
        attributes: dict[str, Any] = {
            gen_ai.GEN_AI_OPERATION_NAME: gen_ai.GenAiOperationNameValues.EXECUTE_TOOL.value,
            gen_ai.GEN_AI_TOOL_NAME: call.name,
            gen_ai.GEN_AI_TOOL_CALL_ID: call.call_id,
            server_attributes.SERVER_ADDRESS: host,
            "tooltap.api": v.api or "none",
            "tooltap.findings": findings(own),
        }
        attributes.update(_served(v))
        failure = _error_type(v) or (
            "tool_error" if any(r.outcome == "error" for r in results) else None
        )
        self._served_span(
            f"execute_tool {call.name}".strip(), attributes, own, parent, times, failure=failure
        )

    def _wait_span(self, v: Verdict, timed: ToolTime, context: Any) -> None:
        """One call the application ran between two turns, from the end of the response that
        issued it to the arrival of its result: the GenAI conventions' execute_tool span."""
        if timed.issued_at is None or timed.answered_at is None:
            return  # a verdict read back from its JSON: no times
        attributes: dict[str, Any] = {
            gen_ai.GEN_AI_OPERATION_NAME: gen_ai.GenAiOperationNameValues.EXECUTE_TOOL.value,
            gen_ai.GEN_AI_TOOL_CALL_ID: timed.call_id,
            "tooltap.api": v.api or "none",
            "tooltap.late": timed.late,
        }
        said = {
            gen_ai.GEN_AI_TOOL_NAME: timed.name,
            "tooltap.ran_ms": timed.ran_ms,
            "tooltap.server": timed.server,
        }
        attributes.update((k, value) for k, value in said.items() if value is not None)
        start = int(timed.issued_at * 1e9)
        span = self.tracer.start_span(
            f"execute_tool {timed.name or ''}".strip(),
            context=context,
            kind=SpanKind.INTERNAL,
            start_time=start,
            attributes=attributes,
        )
        span.end(end_time=max(start, int(timed.answered_at * 1e9)))

    def _served_span(
        self,
        name: str,
        attributes: dict[str, Any],
        own: Verdict,
        parent: Any,
        times: tuple[int, int],
        *,
        failure: str | None = None,
    ) -> None:
        """A span of a tool server's exchange, with the events of what `own` holds."""
        start, end = times
        span = self.tracer.start_span(
            name, context=parent, kind=SpanKind.CLIENT, start_time=start, attributes=attributes
        )
        for event, said in self._events(own):
            span.add_event(event, said, timestamp=end)
        if failure is not None:
            span.set_attribute(error_attributes.ERROR_TYPE, failure)
            span.set_status(Status(StatusCode.ERROR, failure))
        span.end(end_time=end)

    def _list_span(self, v: Verdict, host: str, parent: Any, times: tuple[int, int]) -> None:
        """A tool server's list whose definitions changed or hide text: a span of its own (a
        list runs no tool), `list_tools` with the server and session."""
        own = v.model_copy(
            update={
                "calls": [],
                "tool_results": [],
                "loop_errors": [],
                "rejected": None,
                "hidden_text": [h for h in v.hidden_text if h.part == "definition"],
            }
        )
        if not own.tool_changes and not own.hidden_text:
            return
        attributes: dict[str, Any] = {
            server_attributes.SERVER_ADDRESS: host,
            "tooltap.api": v.api or "none",
            "tooltap.findings": findings(own),
            "tooltap.listed_tools": v.listed_tools,
        }
        attributes.update(_served(v))
        self._served_span(f"list_tools {v.server or ''}".strip(), attributes, own, parent, times)

    def _attributes(self, v: Verdict, host: str) -> dict[str, Any]:
        names = findings(v)
        attributes: dict[str, Any] = {
            gen_ai.GEN_AI_OPERATION_NAME: gen_ai.GenAiOperationNameValues.CHAT.value,
            gen_ai.GEN_AI_PROVIDER_NAME: provider_name(v.api, host),
            server_attributes.SERVER_ADDRESS: host,
            "tooltap.api": v.api or "none",
            "tooltap.transport": v.transport,
            "tooltap.outcome": v.outcome,
            "tooltap.calls": v.call_count,
            "tooltap.findings": names,
            "tooltap.strict_void": v.state == "strict-void",
            "tooltap.at_risk": v.state in ("strict-void", "strict-at-risk"),
            "tooltap.fanout": v.state in ("strict-void", "fanout-no-strict"),
            "tooltap.loop_errors": [e.rule for e in v.loop_errors],
            "tooltap.argument_errors.parse": sum(1 for c in v.calls if c.parse_error),
            "tooltap.argument_errors.schema": sum(1 for c in v.calls if c.schema_errors),
            "tooltap.tool_failures": sum(1 for r in v.tool_results if r.outcome == "error"),
        }
        optional = {
            gen_ai.GEN_AI_REQUEST_MODEL: v.request_model,
            gen_ai.GEN_AI_RESPONSE_MODEL: v.model,
            gen_ai.GEN_AI_RESPONSE_ID: v.response_id,
            gen_ai.GEN_AI_RESPONSE_FINISH_REASONS: v.finish_reasons or None,
            gen_ai.GEN_AI_USAGE_INPUT_TOKENS: v.usage.get("input_tokens"),
            gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS: v.usage.get("output_tokens"),
            gen_ai.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: v.usage.get("cached_input_tokens"),
            gen_ai.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: v.usage.get("reasoning_tokens"),
            gen_ai.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: (
                v.first_token_ms / 1000 if v.first_token_ms is not None else None
            ),
            "tooltap.tool_wait_ms": v.tool_wait_ms,
            "tooltap.state": v.state,
            "tooltap.format_state": v.format_state,
            "tooltap.reason": v.reason,
        }
        attributes.update((k, value) for k, value in optional.items() if value is not None)
        return attributes

    def _events(self, v: Verdict) -> list[tuple[str, dict[str, Any]]]:
        events: list[tuple[str, dict[str, Any]]] = []
        for call in v.calls:
            attributes: dict[str, Any] = {
                gen_ai.GEN_AI_TOOL_CALL_ID: call.call_id,
                gen_ai.GEN_AI_TOOL_NAME: call.name,
                "tooltap.schema_errors": [f"{e.path}: {e.message}" for e in call.schema_errors],
            }
            if self.policy.mode != "omit":
                attributes[gen_ai.GEN_AI_TOOL_CALL_ARGUMENTS] = call.arguments_raw
            if call.parse_error is not None:
                attributes["tooltap.parse_error"] = (
                    f"{call.parse_error.type}: {call.parse_error.message}"
                )
            events.append(("tooltap.tool_call", attributes))
        for error in v.loop_errors:
            events.append(
                (
                    "tooltap.loop_error",
                    {
                        "tooltap.rule": error.rule,
                        "tooltap.ids": error.ids,
                        "tooltap.where": error.where,
                        "tooltap.repair": error.repair,
                    },
                )
            )
        for result in v.tool_results:
            if result.schema_errors:
                events.append(
                    (
                        "tooltap.result_schema_error",
                        {
                            gen_ai.GEN_AI_TOOL_CALL_ID: result.call_id,
                            "tooltap.schema_errors": [
                                f"{e.path}: {e.message}" for e in result.schema_errors
                            ],
                        },
                    )
                )
            if result.outcome == "error":
                events.append(
                    (
                        "tooltap.tool_failure",
                        {gen_ai.GEN_AI_TOOL_CALL_ID: result.call_id, "tooltap.where": result.where},
                    )
                )
        for change in v.tool_changes:
            said = {
                gen_ai.GEN_AI_TOOL_NAME: change.tool,
                "tooltap.source": change.source,
                "tooltap.change": change.change,
                "tooltap.against": change.against,
                "tooltap.announced": change.announced,
                "tooltap.details": change.details,
            }
            said.update(
                (f"tooltap.{k}", getattr(change, k))
                for k in ("before", "after")
                if getattr(change, k)
            )
            events.append(("tooltap.tool_changed", said))
        for hidden in v.hidden_text:
            said = {
                "tooltap.part": hidden.part,
                "tooltap.tool": hidden.tool,
                "tooltap.where": hidden.where,
                "tooltap.kind": hidden.kind,
                "tooltap.count": hidden.count,
                "tooltap.chars": hidden.chars,
            }
            if hidden.spelled is not None:
                said["tooltap.spelled"] = hidden.spelled
            events.append(("tooltap.hidden_text", said))
        return events

    def close(self, timeout: float = 3.0) -> None:
        """Send what is queued, for a few seconds at most (a collector may be down), then stop."""
        self.spans.shutdown(timeout)


def _positive(name: str) -> float | None:
    """The SDK's variable `name` as a positive number, or None when it is unset or not one."""
    try:
        value = float(os.environ.get(name, ""))
    except ValueError:
        return None
    return value if value > 0 else None


def _served(v: Verdict) -> dict[str, str]:
    """A tool server's name and session, where the exchange says them."""
    said = (("tooltap.server", v.server), ("tooltap.session", v.session))
    return {key: value for key, value in said if value is not None}


def _error_type(v: Verdict) -> str | None:
    if v.rejected is not None:
        return v.rejected.type or str(v.rejected.status)
    if v.outcome == "upstream_error":
        return str(v.status) if v.status else "upstream_error"
    return None
