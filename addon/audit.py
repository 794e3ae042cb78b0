"""`tooltap audit`: the seed scripts' offline mode, over stored responses and recorded traffic.

Stored responses are read with one read-only GET /v1/responses/{id} each; a
mitmproxy flow file, a HAR file or a JSONL file of exchanges is read from
disk. Every exchange goes through tooltap.core.inspect, like the live proxy.
Exit codes, as the seeds': 0 clean, 1 findings, 2 usage or access error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
from pydantic import BaseModel, ValidationError

from tooltap.core import Exchange, Verdict, parallel, schema

from .session import Session

DEFAULT_BASE = "https://api.openai.com/v1"
RETRIES = 4
UNREADABLE_404 = "not found. Stored responses expire, and a response created with store: false was never readable."


class AccessError(Exception):
    """401/403: the key cannot read stored responses. Stops the audit (exit 2)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--responses", metavar="FILE", help="a text file of stored response ids, one per line"
    )
    parser.add_argument(
        "--response-id",
        action="append",
        default=[],
        metavar="ID",
        help="a stored response id; repeatable",
    )
    parser.add_argument(
        "-r",
        "--read",
        action="append",
        default=[],
        metavar="FILE",
        help="a mitmproxy flow file (mitmdump -w) or a HAR file; repeatable",
    )
    parser.add_argument(
        "--har", action="append", default=[], metavar="FILE", help="a HAR file; repeatable"
    )
    parser.add_argument(
        "--jsonl",
        action="append",
        default=[],
        metavar="FILE",
        help="a JSONL file of exchanges {method, url, request_body, status, response_headers, response_body}",
    )
    parser.add_argument(
        "--show-all", action="store_true", help="also print turns that are correctly configured"
    )
    parser.add_argument(
        "--format", choices=("text", "json"), default="text", help="text (default) or JSON lines"
    )


class RecordedExchange(BaseModel):
    """One line of a JSONL exchange file. Bodies are JSON values, or strings sent as they are."""

    method: str = "POST"
    url: str
    request_body: Any = None
    request_headers: dict[str, str] = {}
    status: int | None = None
    response_headers: dict[str, str] = {}
    response_body: Any = None

    def exchange(self) -> Exchange:
        return Exchange(
            method=self.method,
            url=self.url,
            request_body=_bytes(self.request_body),
            request_headers=self.request_headers,
            status=self.status,
            response_headers=self.response_headers,
            response_body=_bytes(self.response_body),
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
                    "GET",
                    f"{base}/responses/{response_id}",
                    b"",
                    reply.status_code,
                    {"content-type": reply.headers.get("content-type", "application/json")},
                    reply.content,
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
    """Every HTTP exchange in a mitmproxy flow file or a HAR file."""
    from mitmproxy import http, io  # noqa: PLC0415 - only this input needs mitmproxy

    with open(path, "rb") as handle:
        for flow in io.FlowReader(handle).stream():
            if not isinstance(flow, http.HTTPFlow):
                continue
            request, response = flow.request, flow.response
            exchange = Exchange(
                method=request.method,
                url=request.url,
                request_body=request.raw_content or b"",
                request_headers={"content-encoding": request.headers.get("content-encoding", "")},
                status=response.status_code if response is not None else None,
                response_headers=dict(response.headers.items()) if response is not None else {},
                response_body=(response.raw_content or b"") if response is not None else b"",
            )
            yield Item(f"{request.method} {request.path.partition('?')[0]}", exchange)


def jsonl_file(path: str) -> Iterator[Item]:
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = RecordedExchange.model_validate_json(line)
            except ValidationError as exc:
                yield Item(
                    f"{path}:{number}", unreadable=f"not an exchange: {exc.errors()[0]['msg']}"
                )
                continue
            yield Item(f"{record.method} {record.url}", record.exchange())


# --- the report -------------------------------------------------------------


@dataclass
class Report:
    show_all: bool
    as_json: bool
    out: Any = field(default_factory=lambda: sys.stdout)
    rows: list[dict[str, Any]] = field(default_factory=list)
    read: int = 0
    findings: int = 0

    def line(self, text: str) -> None:
        if not self.as_json:
            print(text, file=self.out)

    def unreadable(self, item: Item) -> None:
        if self.as_json:
            print(
                json.dumps(
                    {"label": item.label, "outcome": "unreadable", "reason": item.unreadable}
                ),
                file=self.out,
            )
        self.line(f"{'unreadable':<19} {item.label}  {item.unreadable}")

    def verdict(self, item: Item, verdict: Verdict) -> None:
        self.read += 1
        label = verdict.response_id or item.label
        if verdict.state is not None:
            self.rows.append({"state": verdict.state, "calls": len(verdict.calls)})
        found = self._text(label, verdict)
        self.findings += found
        if self.as_json:
            print(
                json.dumps({"label": item.label, "finding": bool(found), **verdict.to_dict()}),
                file=self.out,
            )

    def _text(self, label: str, v: Verdict) -> int:
        """Print one verdict the seeds' way; returns how many findings it holds."""
        findings = 0
        if v.outcome in ("unparseable", "upstream_error"):
            self.line(f"{v.outcome:<19} {label}  {v.reason}")
        if (
            v.state in parallel.FINDINGS
            or v.state in ("fanout-no-strict", "strict-at-risk")
            or (self.show_all and v.state)
        ):
            findings += v.state in parallel.FINDINGS
            self.line(f"{v.state:<19} {label:<14} {v.detail}")
            if v.state == "strict-void":
                self.line(f"  calls: {', '.join(c.name for c in v.calls)}")
            if line := parallel.duplicate_line(v.duplicates):
                self.line(f"  {line}")
            if v.state in ("strict-void", "fanout-no-strict"):
                for repair in parallel.repair_lines(v.state):
                    self.line(f"  repair: {repair}")
        if v.format_state in schema.FINDINGS or (
            v.format_state and (self.show_all or v.format_state == "unknown-format")
        ):
            findings += v.format_state in schema.FINDINGS
            self.line(f"{v.format_state:<19} {label}  {v.format_detail}")
            if v.format_state in schema.FINDINGS:
                for repair in v.repairs:
                    if repair not in parallel.repair_lines(v.state) and not repair.startswith(
                        ("duplicate:", "answer ")
                    ):
                        self.line(f"  repair: {repair}")
        for call in v.calls:
            if call.parse_error is not None:
                findings += 1
                self.line(
                    f"{'argument-parse':<19} {label}  call {call.call_id} ({call.name}): {call.parse_error.message} at {call.parse_error.position}"
                )
            if call.schema_errors:
                findings += 1
                errors = "; ".join(f"{e.path}: {e.message}" for e in call.schema_errors)
                self.line(
                    f"{'argument-schema':<19} {label}  call {call.call_id} ({call.name}): {errors}"
                )
        for error in v.loop_errors:
            findings += 1
            self.line(f"{error.rule:<19} {label}  {', '.join(error.ids)} at {error.where}")
            self.line(f"  repair: {error.repair}")
        for result in v.tool_results:
            if result.outcome == "error":
                self.line(f"{'tool-failure':<19} {label}  {result.call_id} at {result.where}")
        if v.rejected is not None:
            findings += 1
            self.line(
                f"{'rejected':<19} {label}  {v.rejected.status} {v.rejected.type}: {v.rejected.message}"
            )
            for blocker in v.rejected.blockers:
                self.line(f"  blocker: {blocker}")
        return findings

    def summary(self) -> None:
        shape = parallel.exposure(row["state"] for row in self.rows)
        if self.as_json:
            out = {
                "summary": True,
                "read": self.read,
                "findings": self.findings,
                **shape,
                "unguaranteed_arguments": parallel.unvalidated_calls(self.rows),
            }
            print(json.dumps(out), file=self.out)
            return
        if shape["rate"] is None:
            self.line(
                "no turn in this sample declared a strict tool with parallel calls left on, so there is no exposure to report"
            )
        else:
            self.line(
                f"exposure: {shape['void']} of {shape['at_risk']} at-risk turn(s) fanned out ({shape['rate'] * 100:.1f}%), "
                f"covering {parallel.unvalidated_calls(self.rows)} argument object(s) with no guarantee"
            )
            if shape["void"] == 0:
                self.line(
                    "  every at-risk turn happened to return one call. That is luck, not configuration: set "
                    "parallel_tool_calls false before it stops being lucky."
                )
        self.line(f"{self.read} response(s) read, {self.findings} finding(s)")


def _progress(items: list[Item] | Iterator[Item], total: int | None) -> Iterable[Item]:
    """A progress bar on stderr when the input is long and stderr is a terminal."""
    if total is None or total < 20 or not sys.stderr.isatty():
        return items
    from rich.progress import track  # noqa: PLC0415

    return track(items, total=total, description="auditing", transient=True)


def main(args: argparse.Namespace, out: Any = None) -> int:
    report = Report(show_all=args.show_all, as_json=args.format == "json", out=out or sys.stdout)
    sources: list[tuple[Iterator[Item], int | None]] = []
    ids = list(args.response_id)
    if args.responses:
        try:
            with open(args.responses, encoding="utf-8") as handle:
                ids.append(handle.read())
        except OSError as exc:
            print(f"tooltap audit: could not read {args.responses}: {exc}", file=sys.stderr)
            return 2
    if args.response_id or args.responses:
        ids = parallel.parse_ids("\n".join(ids))
        rejected = [i for i in args.response_id if i not in ids]
        for bad in rejected:
            print(f"tooltap audit: {bad!r} is not a response id; skipped", file=sys.stderr)
        if not ids:
            print(
                "tooltap audit: no usable response ids. /v1/responses cannot be listed, so the sample has to come "
                "from your own request log",
                file=sys.stderr,
            )
            return 2
        key = os.environ.get("OPENAI_API_KEY")
        if not key:
            print(
                "tooltap audit: set OPENAI_API_KEY to a project key that can read stored responses",
                file=sys.stderr,
            )
            return 2
        base = os.environ.get("OPENAI_BASE_URL", DEFAULT_BASE).rstrip("/")
        sources.append((stored_responses(ids, base, key), len(ids)))
    for path in [*args.read, *args.har]:
        sources.append((flow_file(path), None))
    for path in args.jsonl:
        sources.append((jsonl_file(path), None))
    if not sources:
        print(
            "tooltap audit: give --responses, --response-id, -r, --har or --jsonl", file=sys.stderr
        )
        return 2

    session = Session()
    try:
        for items, total in sources:
            for item in _progress(items, total):
                if item.exchange is None:
                    report.unreadable(item)
                    continue
                verdict = session.inspect(item.exchange)
                if verdict.outcome == "skipped":
                    continue
                report.verdict(item, verdict)
    except AccessError as exc:
        print(f"tooltap audit: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"tooltap audit: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - a corrupt flow file is a usage error, said plainly
        print(f"tooltap audit: could not read the input: {exc}", file=sys.stderr)
        return 2
    report.summary()
    return 1 if report.findings else 0
