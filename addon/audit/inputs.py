"""What `tooltap audit` reads: stored responses (read-only GETs), flow files, HAR, JSONL."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import httpx
from pydantic import Base64Bytes, BaseModel, ValidationError

from tooltap.core import Exchange, Verdict
from tooltap.core.sockets import SocketTurn

from ..inspection.applications import Applications
from ..inspection.flows import flow_exchange, socket_ending, socket_turns
from ..inspection.session import Session
from ..inspection.sockets import socket_verdict

DEFAULT_BASE = "https://api.openai.com/v1"
RETRIES = 4
UNREADABLE_404 = "not found. Stored responses expire, and a response created with store: false was never readable."


class AccessError(Exception):
    """401/403: the key cannot read stored responses. Stops the audit (exit 2)."""


class RecordedExchange(BaseModel):
    """One line of a JSONL exchange file. Bodies are JSON values, strings sent as they are, or
    a binary response in base64."""

    method: str = "POST"
    url: str
    request_body: Any = None
    request_headers: dict[str, str] = {}
    status: int | None = None
    response_headers: dict[str, str] = {}
    response_body: Any = None
    response_body_base64: Base64Bytes | None = None  # a binary body (AWS's event stream)
    application: str | None = None  # the application that sent it: its declared tools' pins
    source: str | None = None  # the recording it came from (`#n` after it: which exchange)

    @property
    def recording(self) -> str | None:
        """The recording this line came from, without which exchange of it."""
        return self.source.partition("#")[0] or None if self.source else None

    def exchange(self) -> Exchange:
        return Exchange(
            method=self.method,
            url=self.url,
            request_body=_bytes(self.request_body),
            request_headers=self.request_headers,
            status=self.status,
            response_headers=self.response_headers,
            response_body=(
                self.response_body_base64
                if self.response_body_base64 is not None
                else _bytes(self.response_body)
            ),
        )


def _bytes(body: Any) -> bytes:
    if body is None:
        return b""
    if isinstance(body, str):
        return body.encode()
    return json.dumps(body).encode()


@dataclass
class Item:
    """One thing to audit: a label for the report, and an exchange or why there is none."""

    label: str
    exchange: Exchange | None = None
    unreadable: str | None = None
    turn: SocketTurn | None = None  # a turn read off a WebSocket
    ended: tuple[str | None, str | None] = (None, None)  # how its socket ended: (note, failure)
    source: str | None = None  # the file it was read from: one session per file
    line: int | None = None  # where in that file it starts, when known
    application: str | None = None  # who sent it (a label, or a credential's keyed hash)
    recording: str | None = None  # the recording it came from, when a line names one

    @property
    def pinned_as(self) -> str | None:
        """Who its declared tools are pinned under: its application, else its recording (a
        cassette, a file): recordings of different tests may declare one tool their own way."""
        return self.application or self.recording or self.source

    def inspect(self, session: Session) -> list[tuple[Item, Verdict]]:
        """This item's verdict; or, for half of an MCP legacy exchange, those it completes
        (each under its own POST), none while it waits for its other half."""
        if self.turn is not None:
            return [(self, socket_verdict(session, self.turn, *self.ended, self.pinned_as))]
        if self.exchange is None:
            raise ValueError(f"{self.label}: {self.unreadable}")
        return [
            (self if exchange is self.exchange else Item.of(exchange, self.source), verdict)
            for exchange, verdict in session.read(self.exchange, self.pinned_as)
        ]

    @classmethod
    def of(cls, exchange: Exchange, source: str | None = None) -> Item:
        """An exchange another item completed (a POST answered on a GET stream)."""
        return cls(f"{exchange.method} {urlsplit(exchange.url).path}", exchange, source=source)


# --- inputs -----------------------------------------------------------------


def stored_responses(
    ids: list[str], base: str, key: str, sleep: Callable[[float], None] = time.sleep
) -> Iterator[Item]:
    """One read-only GET per id, retrying 429 and 5xx a bounded number of times."""
    with httpx.Client(headers={"authorization": f"Bearer {key}"}, timeout=60) as client:
        for response_id in ids:
            yield _fetch(client, base, response_id, sleep)


def _fetch(
    client: httpx.Client, base: str, response_id: str, sleep: Callable[[float], None]
) -> Item:
    problem = ""
    for attempt in range(RETRIES):
        try:
            reply = client.get(f"{base}/responses/{response_id}")
        except httpx.HTTPError as exc:
            problem = f"request failed: {exc}"
        else:
            if reply.status_code in (401, 403):
                raise AccessError(
                    f"{reply.status_code} from {base}: OPENAI_API_KEY needs read access to stored responses in this project"
                )
            if reply.status_code == 404:
                return Item(response_id, unreadable=UNREADABLE_404)
            if reply.status_code < 400:
                exchange = Exchange(
                    method="GET",
                    url=f"{base}/responses/{response_id}",
                    request_body=b"",
                    status=reply.status_code,
                    response_headers={
                        "content-type": reply.headers.get("content-type", "application/json")
                    },
                    response_body=reply.content,
                )
                return Item(response_id, exchange)
            problem = f"HTTP {reply.status_code} after {attempt + 1} attempt(s)"
            if reply.status_code != 429 and reply.status_code < 500:
                return Item(response_id, unreadable=problem)
            wait = reply.headers.get("retry-after", "")
            if attempt + 1 < RETRIES:
                sleep(
                    min(float(wait), 30.0)
                    if wait.replace(".", "", 1).isdigit()
                    else 0.5 * 2**attempt
                )
                continue
        if attempt + 1 < RETRIES and problem.startswith("request failed"):
            sleep(0.5 * 2**attempt)
    return Item(response_id, unreadable=problem)


def flow_file(path: str) -> Iterator[Item]:
    """Every HTTP exchange in a mitmproxy flow file or a HAR file, and every WebSocket turn."""
    from mitmproxy import http, io  # noqa: PLC0415 - only this input needs mitmproxy

    applications = Applications(credentials=False)
    with open(path, "rb") as handle:
        head = handle.read(4)
        handle.seek(0)
        # A HAR entry's times, read from its own fields: mitmproxy's reader ends the request
        # where the response ends, and counts connection set-up in it.
        entries = _har_times(handle) if head.lstrip(b"\xef\xbb\xbf").startswith(b"{") else None
        for index, flow in enumerate(io.FlowReader(handle).stream()):
            if not isinstance(flow, http.HTTPFlow):
                continue
            application = applications.of(flow.request.headers.items(), flow.request.url)
            if flow.websocket is not None:
                yield from _socket_items(flow, path, application)
                continue
            request = flow.request
            label = f"{request.method} {request.path.partition('?')[0]}"
            exchange = flow_exchange(flow)
            if entries is not None:
                exchange = exchange.model_copy(update=entries[index])
            yield Item(label, exchange, source=path, application=application)


def _har_times(handle: Any) -> list[dict[str, float | None]]:
    """Each HAR entry's times, as an exchange's: the file read whole, then rewound."""
    try:
        log = json.loads(handle.read().decode("utf-8-sig"))["log"]
        written_by_mitmproxy = log.get("creator", {}).get("name") == "mitmproxy"
        return [har_times(entry, written_by_mitmproxy) for entry in log["entries"]]
    finally:
        handle.seek(0)


def har_times(entry: dict[str, Any], written_by_mitmproxy: bool = False) -> dict[str, float | None]:
    """A HAR entry's request start, request end and response end (epoch seconds).

    HAR dates an entry at startedDateTime and splits its time into blocked, dns, connect (ssl
    inside it), send, wait and receive, in milliseconds, -1 where one does not apply: the
    request's first byte comes after the first three. mitmproxy's own export dates the entry at
    the request's first byte (its connect and ssl came before it). Without timings, only the
    whole (`time`) is known: the request's end is then left unknown.
    """
    started = datetime.fromisoformat(entry["startedDateTime"].replace("Z", "+00:00")).timestamp()
    timings = entry.get("timings")
    if not isinstance(timings, dict) or not all(k in timings for k in ("send", "wait", "receive")):
        return {"request_start": started, "request_end": None,
                "response_end": started + _ms(entry.get("time"))}  # fmt: skip

    setup = 0.0 if written_by_mitmproxy else sum(_ms(timings.get(k)) for k in SET_UP)
    request_start = started + setup
    request_end = request_start + _ms(timings["send"])
    response_end: float | None = request_end + _ms(timings["wait"]) + _ms(timings["receive"])
    body = entry.get("response", {}).get("content", {}).get("text")
    if written_by_mitmproxy and timings["receive"] == 0 and body:
        response_end = None  # its export's way of saying the response never ended (cut off)
    return {
        "request_start": request_start,
        "request_end": request_end,
        "response_end": response_end,
    }


SET_UP = ("blocked", "dns", "connect")  # before the request's first byte; ssl is inside connect


def _ms(value: Any) -> float:
    """A HAR timing in seconds: -1 (does not apply), or anything not a number, is 0."""
    number = isinstance(value, int | float) and not isinstance(value, bool) and value > 0
    return value / 1000 if number else 0.0


def _socket_items(flow: Any, path: str, application: str | None) -> Iterator[Item]:
    """A recorded WebSocket's turns, each with how its socket ended."""
    ended = socket_ending(flow)
    label = f"WS {flow.request.path.partition('?')[0]}"
    number = 0
    for turn in socket_turns(flow):
        said = turn.said is not None  # the session's own finding, not a turn
        number += not said
        yield Item(
            f"{label} (session)" if said else f"{label} #{number}",
            turn.exchange,
            turn=turn,
            ended=ended,
            source=path,
            application=application,
        )


def jsonl_file(path: str) -> Iterator[Item]:
    applications = Applications(credentials=False)
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = RecordedExchange.model_validate_json(line)
            except ValidationError as exc:
                why = f"not an exchange: {exc.errors()[0]['msg']}"
                yield Item(f"{path}:{number}", unreadable=why, source=path, line=number)
                continue
            label = f"{record.method} {record.url}"
            application = record.application or applications.of(
                record.request_headers.items(), record.url
            )
            yield Item(
                label,
                record.exchange(),
                source=path,
                line=number,
                application=application,
                recording=record.recording,
            )
