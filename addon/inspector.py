"""The inspection side: one finished exchange in, a log and metrics out.

`Inspector.handle(record)` runs tooltap.core.inspect and feeds the sinks. The
addon runs it in a child process (`tooltap_inspector=process`, the default) or
in a thread of its own (`thread`). CPython runs one thread at a time, so
inspection inside the proxy's interpreter takes turns with forwarding; in a
process of its own it runs on another core and forwarding never waits for it.

The child is `python -m tooltap.addon.inspector`. It reads length-prefixed
pickled records from a pipe, serves /metrics, writes the log to the stdout it
inherits, and folds in the counts only the proxy can make (flows it dropped,
errors in its hooks and tap), which the proxy keeps in a small table of
shared memory.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import mmap
import os
import pickle
import select
import signal
import struct
import sys
import tempfile
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode

import orjson

from tooltap.core import APIS, Api, Exchange, Verdict

from .logsink import ARGUMENT_MODES, LOG_FORMATS, LogSink
from .metrics import Metrics
from .session import Session

logger = logging.getLogger("tooltap")

SCRUBBED = "[redacted]"
FRAME = struct.Struct(">I")  # a record on the pipe: its pickled length, then the pickle


# Request headers whose values are credentials. They are never logged, and
# neither is any echo of them: an API error that quotes the key, or a model
# that repeats it in an argument, is scrubbed before the sinks see it.
CREDENTIAL_HEADERS = frozenset(
    {b"authorization", b"proxy-authorization", b"api-key", b"x-api-key", b"x-goog-api-key",
     b"openai-organization", b"openai-project"}
)  # fmt: skip
MIN_CREDENTIAL = 8  # shorter values are not scrubbed: they would mangle ordinary text
# Query parameters worth keeping in the logged path; anything else might be a key.
SAFE_QUERY = ("api-version", "beta")

Fields = tuple[tuple[bytes, bytes], ...]


def _header(fields: Fields, name: bytes) -> str:
    for key, value in fields:
        if key.lower() == name:
            return value.decode("latin-1")
    return ""


@dataclass(slots=True)
class Record:
    """One finished exchange, as the proxy hands it over: only references it already holds.

    Everything derived from them (the Exchange, the logged host and path, the
    credentials to scrub) is built here, on the inspection side, off the proxy's
    event loop.
    """

    api: Api | None  # None: the upstream was unreachable before any request
    method: str = ""
    scheme: str = "http"
    host: str = ""
    port: int = 0
    path: str = ""
    request_headers: Fields = ()
    request_body: bytes = b""
    status: int | None = None  # None: no response
    response_headers: Fields = ()
    response_body: bytes = b""
    chunks: list[bytes] = field(default_factory=list)  # a tapped stream's body
    skipped: str | None = None
    failure: str | None = None  # the upstream broke the exchange off: mitmproxy's words
    note: str | None = None  # the client broke it off: mitmproxy's words

    def exchange(self) -> Exchange:
        return Exchange(
            method=self.method,
            url=f"{self.scheme}://{self.host}:{self.port}{self.path}",
            request_body=self.request_body,
            request_headers={
                "content-encoding": _header(self.request_headers, b"content-encoding")
            },
            status=self.status,
            response_headers={
                "content-type": _header(self.response_headers, b"content-type"),
                "content-encoding": _header(self.response_headers, b"content-encoding"),
            },
            response_body=b"".join(self.chunks) if self.chunks else self.response_body,
        )

    def logged_host(self) -> str:
        """The Host header without its port (as mitmproxy's pretty_host), else the address."""
        authority = _header(self.request_headers, b"host")
        if authority.startswith("["):
            return authority[1:].partition("]")[0]
        name, colon, port = authority.rpartition(":")
        return (name if colon and port.isdigit() else authority) or self.host

    def logged_path(self) -> str:
        base, _, query = self.path.partition("?")
        kept = [(k, v) for k, v in parse_qsl(query) if k in SAFE_QUERY]
        return base + ("?" + urlencode(kept) if kept else "")

    def credentials(self) -> tuple[str, ...]:
        """The credential header values, and for `Scheme token` the bare token, longest first."""
        found: set[str] = set()
        for key, raw in self.request_headers:
            if key.lower() in CREDENTIAL_HEADERS:
                value = raw.decode("latin-1").strip()
                found.update((value, value.partition(" ")[2].strip()))
        return tuple(sorted((v for v in found if len(v) >= MIN_CREDENTIAL), key=len, reverse=True))


def scrub(verdict: Verdict, credentials: tuple[str, ...]) -> Verdict:
    """The verdict with every occurrence of a credential replaced, in any string at any depth."""
    text = verdict.model_dump_json()
    if not any(orjson.dumps(c).decode()[1:-1] in text for c in credentials):
        return verdict

    def clean(value: str) -> str:
        for credential in credentials:
            value = value.replace(credential, SCRUBBED)
        return value

    root: list[Any] = [verdict.model_dump()]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        parent, key = stack.pop()
        node = parent[key]
        if isinstance(node, str):
            parent[key] = clean(node)
        elif isinstance(node, list):
            stack.extend((node, i) for i in range(len(node)))
        elif isinstance(node, dict):
            for name in list(node):
                new = clean(name) if isinstance(name, str) else name
                if new != name:
                    node[new] = node.pop(name)
                stack.append((node, new))
    return Verdict.model_validate(root[0])


class Inspector:
    """inspect() and the sinks, for one record at a time, in one session."""

    def __init__(self, sink: LogSink, metrics: Metrics, faults: Collection[str] = ()) -> None:
        self.sink = sink
        self.metrics = metrics
        self.session = Session()
        self._faults = faults  # test-only: TOOLTAP_INJECT_FAULT=worker

    def handle(self, record: Record) -> None:
        if "worker" in self._faults:
            raise RuntimeError("injected fault in the worker")
        started = time.perf_counter()
        if record.api is None:
            verdict = Verdict(api=None, outcome="upstream_error", reason=record.failure)
        elif record.skipped is not None and record.failure is None:
            verdict = Verdict(
                api=record.api, outcome="skipped", reason=record.skipped, status=record.status
            )
        else:
            verdict = self.session.inspect(record.exchange())
            if record.failure is not None:
                # What did arrive (a cut stream's calls, the request's loop) is
                # still reported; the flow counts as the upstream's failure.
                verdict.outcome = "upstream_error"
                verdict.reason = f"the upstream failed: {record.failure}"
            elif record.note is not None and verdict.reason is not None:
                verdict.reason = f"{verdict.reason} ({record.note})"
        path = record.logged_path()
        credentials = record.credentials()
        if credentials:
            verdict = scrub(verdict, credentials)
            for credential in credentials:
                path = path.replace(credential, SCRUBBED)
        self.sink.emit(verdict, record.logged_host(), path, (time.perf_counter() - started) * 1000)
        self.metrics.record(verdict, time.perf_counter() - started)


# --- the counts only the proxy can make ---------------------------------------

SLOTS = (
    *(("dropped", api) for api in (*APIS, "none")),
    *(("error", where) for where in ("hook", "tap", "worker")),
)
_SLOT = struct.Struct("<Q")


class DirectCounts:
    """Thread mode: the proxy counts into the metrics it serves itself."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def dropped(self, api: str) -> None:
        self.metrics.flow(api, "dropped")

    def error(self, where: str) -> None:
        self.metrics.internal_error(where)

    def close(self) -> None:
        pass


class SharedCounts:
    """Process mode: a table of counters in a shared, unlinked temporary file.

    Only the proxy's event-loop thread writes it; the child reads it and folds
    the increases into its metrics.
    """

    def __init__(self, fd: int | None = None) -> None:
        if fd is None:
            with tempfile.TemporaryFile() as handle:
                handle.truncate(_SLOT.size * len(SLOTS))
                fd = os.dup(handle.fileno())
        self.fd = fd
        self._map = mmap.mmap(fd, _SLOT.size * len(SLOTS))
        self._seen = [0] * len(SLOTS)

    def _add(self, slot: tuple[str, str]) -> None:
        offset = _SLOT.size * SLOTS.index(slot)
        _SLOT.pack_into(self._map, offset, _SLOT.unpack_from(self._map, offset)[0] + 1)

    def dropped(self, api: str) -> None:
        self._add(("dropped", api if api in APIS else "none"))

    def error(self, where: str) -> None:
        self._add(("error", where))

    def fold_into(self, metrics: Metrics) -> None:
        """Child side: carry what the proxy counted since the last call into the metrics."""
        for index, (kind, label) in enumerate(SLOTS):
            value = _SLOT.unpack_from(self._map, _SLOT.size * index)[0]
            if value > self._seen[index]:
                counter = (
                    metrics.flows.labels(label, "dropped")
                    if kind == "dropped"
                    else metrics.internal_errors.labels(label)
                )
                counter.inc(value - self._seen[index])
                self._seen[index] = value

    def close(self) -> None:
        self._map.close()
        with contextlib.suppress(OSError):
            os.close(self.fd)


# --- the child process ---------------------------------------------------------


def _frames(buffer: bytearray) -> list[Record]:
    """Take every complete record off the front of the buffer."""
    records = []
    while len(buffer) >= FRAME.size:
        (size,) = FRAME.unpack_from(buffer)
        if len(buffer) < FRAME.size + size:
            break
        records.append(pickle.loads(bytes(buffer[FRAME.size : FRAME.size + size])))  # noqa: S301 - our own pipe
        del buffer[: FRAME.size + size]
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tooltap.addon.inspector")
    parser.add_argument(
        "--records", type=int, required=True, help="fd of the pipe the proxy writes"
    )
    parser.add_argument("--status", type=int, required=True, help="fd to report 'ready PORT' on")
    parser.add_argument("--counts", type=int, required=True, help="fd of the shared count table")
    parser.add_argument("--metrics-host", default="127.0.0.1")
    parser.add_argument("--metrics-port", type=int, default=9464)
    parser.add_argument("--log-format", choices=LOG_FORMATS, default="auto")
    parser.add_argument("--log-file", default="", help="append the log here instead of stdout")
    parser.add_argument("--log-arguments", choices=ARGUMENT_MODES, default="raw")
    parser.add_argument("--model-labels", type=int, default=50)
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, format="tooltap inspector: %(message)s")
    # Ctrl-C reaches the whole process group: the proxy stops, then closes the
    # pipe, and this process finishes what it was handed before it exits.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(OSError):
        os.nice(10)  # forwarding comes first when the cores are busy

    metrics = Metrics(args.model_labels)
    with os.fdopen(args.status, "w") as status:
        try:
            port = metrics.serve(args.metrics_host, args.metrics_port)
        except OSError as exc:
            status.write(
                f"error cannot serve metrics on {args.metrics_host}:{args.metrics_port}: {exc}\n"
            )
            return 2
        status.write(f"ready {port}\n")
    counts = SharedCounts(args.counts)
    faults = os.environ.get("TOOLTAP_INJECT_FAULT", "").split(",")
    stream = open(args.log_file, "a", encoding="utf-8") if args.log_file else sys.stdout  # noqa: SIM115
    inspector = Inspector(LogSink(args.log_format, args.log_arguments, stream), metrics, faults)
    buffer = bytearray()
    try:
        while True:
            # Wake at least once a second, so the proxy's counts show up while idle.
            readable, _, _ = select.select([args.records], [], [], 1.0)
            if readable:
                data = os.read(args.records, 1 << 20)
                if not data:
                    break  # the proxy closed the pipe: everything is handled
                buffer += data
                for record in _frames(buffer):
                    try:
                        inspector.handle(record)
                    except Exception:
                        metrics.internal_error("worker")
                        logger.exception("error while inspecting a flow")
            counts.fold_into(metrics)
    finally:
        counts.fold_into(metrics)
        metrics.close()
        counts.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
