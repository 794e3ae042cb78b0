"""A real OTLP/HTTP trace receiver on loopback: it decodes each export with opentelemetry-proto."""

from __future__ import annotations

import gzip
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        if self.server.delay:
            time.sleep(self.server.delay)
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        with self.server.lock:
            self.server.raw.append(body)
            self.server.requests.append(request)
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)


class Receiver(ThreadingHTTPServer):
    """Collects every export; `delay` makes it a slow collector."""

    daemon_threads = True

    def __init__(self, delay: float = 0.0) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.delay = delay
        self.raw: list[bytes] = []
        self.requests: list[ExportTraceServiceRequest] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1/traces"

    def spans(self) -> list[Any]:
        with self.lock:
            return [
                span
                for request in self.requests
                for resource in request.resource_spans
                for scope in resource.scope_spans
                for span in scope.spans
            ]

    def wait_spans(self, count: int, timeout: float = 15.0) -> list[Any]:
        deadline = time.monotonic() + timeout
        while len(self.spans()) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.spans()

    def __enter__(self) -> Receiver:
        threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()


def attributes(items: Any) -> dict[str, Any]:
    """OTLP KeyValues as a plain dict (arrays as lists)."""

    def value(v: Any) -> Any:
        kind = v.WhichOneof("value")
        if kind == "array_value":
            return [value(x) for x in v.array_value.values]
        return getattr(v, kind) if kind else None

    return {item.key: value(item.value) for item in items}
