"""`tooltap audit`: the same rules offline, over stored responses and recorded traffic.

Stored responses are read with one read-only GET /v1/responses/{id} each; a
mitmproxy flow file, a HAR file or a JSONL file of exchanges is read from
disk. Every exchange goes through tooltap.core.inspect, like the live proxy.
Exit codes: 0 clean, 1 findings over budget, 2 usage or read error.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any

from tooltap.core import Verdict, parallel
from tooltap.core.definitions import Declared
from tooltap.core.lock import lock_of

from ..inspection.pins import LocalPins, Pins, load_lock
from ..inspection.session import Session
from ..options import lock_problem
from .budget import Baseline, parse_fail_on, parse_rate
from .cassettes import cassette_files, cassette_items
from .inputs import DEFAULT_BASE, AccessError, Item, flow_file, jsonl_file, stored_responses
from .report import Report


def _progress(items: list[Item] | Iterator[Item], total: int | None) -> Iterable[Item]:
    """A progress bar on stderr when the input is long and stderr is a terminal."""
    if total is None or total < 20 or not sys.stderr.isatty():
        return items
    from rich.progress import track  # noqa: PLC0415

    return track(items, total=total, description="auditing", transient=True)


def main(args: argparse.Namespace, out: Any = None) -> int:
    try:
        fail_on = parse_fail_on(args.fail_on)
        max_exposure = parse_rate(args.max_exposure) if args.max_exposure else None
        baseline = Baseline.load(args.baseline) if args.baseline else None
    except ValueError as exc:
        print(f"tooltap audit: {exc}", file=sys.stderr)
        return 2
    if problem := lock_problem(args.tools_lock or ""):
        print(f"tooltap audit: {problem.removeprefix('tooltap_tools_lock: ')}", file=sys.stderr)
        return 2
    # Pins outlive a session: a definition is checked against the first seen in any recording.
    pins = Pins(LocalPins(), load_lock(args.tools_lock or ""))
    declared: list[tuple[Declared, str | None]] = []  # for --write-tools-lock
    report = Report(
        show_all=args.show_all,
        format=args.format,
        out=out or sys.stdout,
        fail_on=fail_on,
        baseline=baseline,
        max_exposure=max_exposure,
    )
    # (items, how many if known, a session of their own: a cassette is one recorded session)
    sources: list[tuple[Iterator[Item], int | None, bool]] = []
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
        sources.append((stored_responses(ids, base, key), len(ids), False))
    for path in [*args.read, *args.har]:
        sources.append((flow_file(path), None, False))
    for path in args.jsonl:
        sources.append((jsonl_file(path), None, False))
    try:
        for cassette in cassette_files(args.cassettes):
            sources.append((cassette_items(cassette), None, True))
    except OSError as exc:
        print(f"tooltap audit: {exc}", file=sys.stderr)
        return 2
    if not sources:
        print(
            "tooltap audit: give --responses, --response-id, -r, --har, --jsonl or --cassettes",
            file=sys.stderr,
        )
        return 2

    session = Session(pins=pins)

    def judged(done: list[tuple[Item, Verdict]]) -> None:
        for item, verdict in done:
            if args.write_tools_lock and verdict.definitions is not None:
                declared.extend((d, item.application) for d in verdict.definitions.declared)
            if verdict.outcome == "skipped":
                if item.turn is not None:  # a turn a socket carried, said not inspected
                    report.unreadable(replace(item, unreadable=verdict.reason), "skipped")
                continue
            report.verdict(item, verdict)

    try:
        for items, total, own_session in sources:
            if own_session:
                judged([(Item.of(e), v) for e, v in session.finish()])
                session = Session(pins=pins)
            for item in _progress(items, total):
                if item.exchange is None:
                    report.unreadable(item)
                    continue
                judged(item.inspect(session))
        judged([(Item.of(e), v) for e, v in session.finish()])
    except AccessError as exc:
        print(f"tooltap audit: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"tooltap audit: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - a corrupt flow file is a usage error, said plainly
        print(f"tooltap audit: could not read the input: {exc}", file=sys.stderr)
        return 2
    if args.write_tools_lock:
        try:
            with open(args.write_tools_lock, "w", encoding="utf-8") as handle:
                handle.write(lock_of(declared).dumps())
        except OSError as exc:
            print(f"tooltap audit: could not write the tools lock: {exc}", file=sys.stderr)
            return 2
    if args.write_baseline:
        try:
            Baseline.write(args.write_baseline, report.seen)
        except OSError as exc:
            print(f"tooltap audit: could not write the baseline: {exc}", file=sys.stderr)
            return 2
        # Judged against what was just written: only the exposure budget can fail now.
        report.findings, report.baselined = 0, report.baselined + report.findings
    report.summary()
    return 1 if report.findings or report.over_exposure else 0
