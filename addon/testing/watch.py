"""A test's exchanges, each read as the proxy reads it: tooltap.core.inspect, the same session.

Each test gets a session of its own (addon/inspection/session.py): the calls a Responses turn
left for its follow-ups (previous_response_id), what each MCP session's server listed, and the
tool definitions' pins. A test's mocks and cassettes are its own world: a response id or a tool
another test also uses says nothing about this one, so no memory crosses from test to test.

An MCP server's GET stream (the server's own messages on Streamable HTTP, the legacy
transport's session channel) is read as the proxy reads it: piece by piece as the code under
test reads it, each piece handed to the session at once, so that a tool list change the server
says in the middle of a test is applied before the next tools/call is read. It counts as no
exchange of its own: what it completes (a legacy POST answered on it) does.

An exchange is handed over as the proxy hands one over (a Record): its credentials are scrubbed
from what is kept, and then its headers are dropped; only the few that say how to read a body
(content type and encoding, an MCP session) reach inspect. Arguments are masked as
tooltap_log_arguments says. Nothing here ever raises into the code under test: a failure is
kept as the plugin's own error, beside the test's findings.
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from urllib.parse import urlsplit

from tooltap.core import Exchange, Verdict, detect_api
from tooltap.core.findings import DEFAULT, Finding, occurrences

from ..handover.record import Record
from ..inspection.scrub import scrub
from ..inspection.session import Session, with_ending
from ..options import BY_NAME
from ..sinks.redaction import REDACTED, ArgumentPolicy

MAX_BODY = BY_NAME["tooltap_max_body"].default
TOO_LARGE = "response body above tooltap_max_body"
CUT = "the code under test closed the response before its end"
LEFT_OPEN = "the response was still open when the test ended"

Headers = Iterable[tuple[str | bytes, str | bytes]]


@dataclass
class Judged:
    """One exchange a test made, as tooltap read it."""

    label: str  # the method and path, without a query that could hold a key
    verdict: Verdict  # arguments shown as tooltap_log_arguments says; no header in it
    findings: list[Finding]  # every finding, in the log's and the audit's words


@dataclass
class Ledger:
    """One test's exchanges, with the session memory they share."""

    test: str
    session: Session = field(default_factory=Session)
    judged: list[Judged] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # the plugin's own, never the test's
    open: dict[int, Pending] = field(default_factory=dict)  # responses still being read

    def failing(self, allowed: Iterable[str] = (), since: int = 0) -> list[tuple[str, Finding]]:
        """The findings an audit fails on, less those allowed, each with its exchange's label;
        since: of the exchanges judged after the first `since`."""
        allow = set(allowed)
        return [
            (judged.label, finding)
            for judged in self.judged[since:]
            for finding in judged.findings
            if finding.name in DEFAULT and finding.name not in allow
        ]


class Watch:
    """Where the watched clients hand their exchanges: the running test's ledger, if any."""

    def __init__(self, arguments: str = "raw") -> None:
        self.policy = ArgumentPolicy(arguments)
        self.current: Ledger | None = None
        self.outside: list[str] = []  # errors with no test to hold them
        self._lock = threading.Lock()  # clients in threads; a session has one owner at a time

    def begin(self, test: str) -> Ledger:
        self.current = Ledger(test)
        return self.current

    def end(self) -> Ledger | None:
        """The test is over: a response it left open is read as far as it came."""
        ledger, self.current = self.current, None
        if ledger is not None:
            for pending in list(ledger.open.values()):
                pending.end(cut=LEFT_OPEN)
        return ledger

    def opened(self, method: str, url: str, headers: Headers, body: bytes | None) -> Pending | None:
        """A request the running test is sending; None when no test is watched. body: None
        while it is still to be streamed (see Pending.request_chunk)."""
        ledger = self.current
        if ledger is None:
            return None
        try:
            return Pending(self, ledger, method=method, url=url, headers=headers, body=body)
        except Exception as exc:  # noqa: BLE001 - the plugin's failure is never the test's
            self.failed(ledger, f"{method} {url}", exc)
            return None

    def failed(self, ledger: Ledger | None, what: str, exc: BaseException) -> None:
        lines = traceback.format_exception(exc, limit=-3)
        said = f"tooltap could not read {_without_query(what)}: {''.join(lines).rstrip()}"
        with self._lock:
            (ledger.errors if ledger is not None else self.outside).append(said)

    def judge(self, pending: Pending) -> None:
        """Inspect a finished exchange with its test's session memory."""
        record, ledger = pending.record, pending.ledger
        exchange = record.exchange()
        with self._lock:
            if pending.skipped is not None:
                api = detect_api(record.method, record.url)
                skipped = Verdict(
                    api=api, outcome="skipped", reason=pending.skipped, status=record.status
                )
                said = [(exchange, skipped)]
            else:
                said = ledger.session.read(exchange)
            self._keep(ledger, record, exchange, said)

    def piece(self, pending: Pending, data: bytes, *, ended: bool = False) -> None:
        """Bytes of an MCP server's GET stream as the code under test read them (ended: the
        stream is over): the exchanges they complete, judged, and a list change they say,
        applied to the test's session now, as the proxy does."""
        record = replace(pending.record, api="mcp", chunks=[data])
        exchange = record.exchange()
        with self._lock:
            said = pending.ledger.session.stream(pending.channel or "", exchange, ended=ended)
            self._keep(pending.ledger, record, exchange, said)

    def _keep(
        self, ledger: Ledger, record: Record, heard: Exchange, said: list[tuple[Exchange, Verdict]]
    ) -> None:
        """Each exchange the record completed (itself, or POSTs an MCP stream answered), kept
        as the log would say it: credentials scrubbed, arguments as the policy says."""
        credentials = record.credentials()
        for read, found in said:
            mine = read is heard
            verdict = with_ending(found, record.note, record.failure) if mine else found
            # A POST of MCP's legacy transport may be answered on the session's stream.
            path = record.logged_path() if mine else urlsplit(read.url).path
            label = f"{read.method} {path}"
            if credentials:
                verdict = scrub(verdict, credentials)
                for credential in credentials:
                    label = label.replace(credential, REDACTED)
            verdict = self.policy.verdict(verdict)
            ledger.judged.append(Judged(label, verdict, occurrences(verdict)))


class Pending:
    """One exchange in flight: the request as sent, the response as the code under test reads
    it. Every method is safe to call from a client's own code: it never raises."""

    def __init__(
        self,
        watch: Watch,
        ledger: Ledger,
        *,
        method: str,
        url: str,
        headers: Headers,
        body: bytes | None,
    ) -> None:
        self.watch = watch
        self.ledger = ledger
        parts = urlsplit(url)
        scheme = parts.scheme or "http"
        path = parts.path or "/"
        self.record = Record(
            None,
            method=method.upper(),
            scheme=scheme,
            host=parts.hostname or "",
            port=parts.port or (443 if scheme == "https" else 80),
            path=f"{path}?{parts.query}" if parts.query else path,
            request_headers=_fields(headers),
            request_body=body or b"",
        )
        self.streamed_request = body is None
        # A body is kept only where a dialect could read it: a path one names, a JSON-RPC
        # POST (MCP), or a GET whose answer may turn out to be an MCP session's stream.
        self.keep = detect_api(method, url, body) is not None or self.record.method == "GET"
        # An MCP server's GET stream: read piece by piece, under this key (see Watch.piece).
        self.channel: str | None = None
        self.skipped: str | None = None
        self.size = 0
        self.done = False
        ledger.open[id(self)] = self

    def _guard(self, exc: BaseException) -> None:
        self.watch.failed(self.ledger, f"{self.record.method} {self.record.path}", exc)

    def request_chunk(self, data: bytes) -> None:
        try:
            self.record.request_body += data
        except Exception as exc:  # noqa: BLE001
            self._guard(exc)

    def respond(self, status: int, headers: Headers) -> None:
        try:
            self.record.status = status
            self.record.response_headers = _fields(headers)
            if self.streamed_request:
                method, body = self.record.method, self.record.request_body
                self.keep = detect_api(method, self.record.url, body) is not None
            if self.record.method == "GET" and detect_api("GET", self.record.url) is None:
                # No dialect names the path: an event stream is an MCP server's, else unread.
                # No hosts are configured here, so any such stream is taken for one: from a
                # stream that is not MCP's nothing is read (only MCP's messages are).
                self.keep = self._event_stream()
                self.channel = str(id(self)) if self.keep else None
        except Exception as exc:  # noqa: BLE001
            self._guard(exc)

    def chunk(self, data: bytes) -> None:
        """Bytes of the response as they reached the code under test (after its end, when the
        test ended first, they belong to no test: nothing is kept of them)."""
        if not self.done:
            self._take(data)

    def _take(self, data: bytes) -> None:
        if not self.keep or self.skipped is not None:
            return
        try:
            if self.channel is not None:
                self.watch.piece(self, data)
                return
            self.size += len(data)
            if self.size > MAX_BODY:
                self.skipped, self.record.chunks = TOO_LARGE, []
            else:
                self.record.chunks.append(bytes(data))
        except Exception as exc:  # noqa: BLE001
            self._guard(exc)

    def failed(self, exc: BaseException) -> None:
        """The response broke off as it was read (the server's or the transport's doing)."""
        self.record.failure = f"{type(exc).__name__}: {exc}"

    def end(self, decoded: bytes | None = None, *, cut: str | None = None) -> None:
        """The response is over. decoded: its body, when the client read it whole before
        handing it over (content-encoding undone); cut: why it ended before its end."""
        if self.done:
            return
        self.done = True
        self.ledger.open.pop(id(self), None)
        try:
            if decoded is not None:
                headers = self.record.response_headers
                self.record.response_headers = tuple(
                    (k, v) for k, v in headers if k.lower() != b"content-encoding"
                )
                self._take(decoded)
            if self.channel is not None:
                self.watch.piece(self, b"", ended=True)  # what the stream still owes, said
            else:
                if cut is not None and self.record.failure is None:
                    self.record.note = cut
                if not self.keep:
                    self.record.request_body, self.record.chunks = b"", []
                self.watch.judge(self)
        except Exception as exc:  # noqa: BLE001
            self._guard(exc)
        self.record = Record(None)  # neither its headers nor its bodies outlive the reading

    def _event_stream(self) -> bool:
        for name, value in self.record.response_headers:
            if name.lower() == b"content-type":
                return b"text/event-stream" in value.lower()
        return False


def _fields(headers: Headers) -> tuple[tuple[bytes, bytes], ...]:
    return tuple(
        (
            name.encode("latin-1") if isinstance(name, str) else bytes(name),
            value.encode("latin-1", "replace") if isinstance(value, str) else bytes(value),
        )
        for name, value in headers
    )


def _without_query(what: str) -> str:
    return what.partition("?")[0]
