"""`tooltap demo`: the whole product on bundled traffic, with no key and no network.

A loopback upstream replays realistic model traffic, the real proxy (the
same `tooltap run` process users start) sits in front of it, and a scripted
agent drives every API through it with the official SDKs (openai, anthropic,
boto3). The live log is shown as it arrives; the summary at the end is read
from the proxy's own /metrics endpoint and log.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
import structlog
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console
from rich.table import Table

from ..harness.launch import Proxy
from ..harness.replay import ReplayServer
from .demo_mcp import DEADLINE, PATH, ToolServer
from .demo_steps import STEPS, Clients, client_errors, route, socket_route, status_of

QUIET_FIELDS = ("timestamp", "repairs", "host", "inspect_ms")


@dataclass
class Summary:
    """What the proxy reported, read back from /metrics and the log."""

    turns: dict[str, float] = field(default_factory=dict)
    formats: dict[str, float] = field(default_factory=dict)
    argument_errors: dict[str, float] = field(default_factory=dict)
    loop_errors: dict[str, float] = field(default_factory=dict)
    tool_results: dict[str, float] = field(default_factory=dict)
    rejected: dict[str, float] = field(default_factory=dict)
    flows: dict[str, float] = field(default_factory=dict)
    mcp_calls: dict[str, float] = field(default_factory=dict)  # by tool server
    tool_changes: dict[str, float] = field(default_factory=dict)  # by tool server
    hidden_text: dict[str, float] = field(default_factory=dict)  # by where (definition, result)
    unguaranteed: float = 0.0
    serial_batches: float = 0.0  # batches of calls run one after another
    overdue_calls: float = 0.0  # calls still running past the tool deadline
    internal_errors: float = 0.0
    repairs: list[str] = field(default_factory=list)

    @property
    def exposure(self) -> float | None:
        at_risk = self.turns.get("strict-void", 0) + self.turns.get("strict-at-risk", 0)
        return self.turns.get("strict-void", 0) / at_risk if at_risk else None


def read_summary(metrics_text: str, events: list[dict[str, Any]]) -> Summary:
    """Sum the proxy's counters by the label that matters, and collect the repairs it logged."""
    summary = Summary()
    by_label = {
        "tooltap_turns_total": (summary.turns, "state"),
        "tooltap_formats_total": (summary.formats, "state"),
        "tooltap_argument_errors_total": (summary.argument_errors, "kind"),
        "tooltap_loop_errors_total": (summary.loop_errors, "rule"),
        "tooltap_tool_results_total": (summary.tool_results, "outcome"),
        "tooltap_rejected_requests_total": (summary.rejected, "status"),
        "tooltap_flows_total": (summary.flows, "outcome"),
        "tooltap_tool_changes_total": (summary.tool_changes, "server"),
        "tooltap_hidden_text_total": (summary.hidden_text, "where"),
    }
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            if sample.name in by_label and sample.value:
                totals, label = by_label[sample.name]
                totals[sample.labels[label]] = totals.get(sample.labels[label], 0) + sample.value
            elif sample.name == "tooltap_tool_calls_total" and sample.labels["api"] == "mcp":
                if sample.value:  # a tool server's calls are counted under its name
                    summary.mcp_calls[sample.labels["model"]] = sample.value
            elif sample.name == "tooltap_unguaranteed_arguments_total":
                summary.unguaranteed += sample.value
            elif sample.name == "tooltap_serial_batches_total":
                summary.serial_batches += sample.value
            elif sample.name == "tooltap_overdue_calls_total":
                summary.overdue_calls += sample.value
            elif sample.name == "tooltap_internal_errors_total":
                summary.internal_errors += sample.value
    seen: dict[str, None] = {}
    for event in events:
        for repair in [*event.get("repairs", []), event.get("repair")]:
            if repair:
                seen.setdefault(repair)
        for blocker in event.get("blockers", []):
            seen.setdefault(f"the 400 is explained: {blocker}")
    summary.repairs = list(seen)
    return summary


def _render(console: Console, events: list[dict[str, Any]]) -> None:
    renderer = structlog.dev.ConsoleRenderer(colors=console.is_terminal)
    for event in events:
        shown = {
            k: v for k, v in event.items() if k not in QUIET_FIELDS and v not in (None, [], {}, "")
        }
        console.print(
            renderer(None, str(shown.get("level", "info")), shown),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )


def _table(title: str, rows: dict[str, float]) -> Table:
    table = Table(title=title, title_justify="left", min_width=len(title))  # title unwrapped
    table.add_column("value")
    table.add_column("count", justify="right")
    for key, count in sorted(rows.items(), key=lambda kv: (-kv[1], kv[0])):
        table.add_row(key, f"{count:g}")
    return table


def print_summary(console: Console, summary: Summary) -> None:
    console.rule("what the proxy reported (its /metrics and its log)")
    console.print(_table("turns by parallel/strict state", summary.turns))
    rate = summary.exposure
    console.print(
        f"exposure rate (strict-void / at-risk turns): {'n/a' if rate is None else f'{rate:.0%}'}, "
        f"{summary.unguaranteed:g} argument object(s) with no guarantee"
    )
    for title, rows in (
        ("output-format states", summary.formats),
        ("argument errors", summary.argument_errors),
        ("loop errors", summary.loop_errors),
        ("tool results", summary.tool_results),
        ("rejected requests (HTTP status, or an MCP server's JSON-RPC code)", summary.rejected),
        ("MCP tool calls by server", summary.mcp_calls),
        ("tool definitions changed, by MCP server", summary.tool_changes),
        ("hidden text, by where", summary.hidden_text),
        ("flows", summary.flows),
    ):
        if rows:
            console.print(_table(title, rows))
    console.print(
        f"batches of calls run one after another: {summary.serial_batches:g}; calls overdue "
        f"(still running past the tool deadline): {summary.overdue_calls:g}"
    )
    console.print(f"internal errors: {summary.internal_errors:g}")
    console.rule("repairs")
    for repair in summary.repairs:
        console.print(f"- {repair}", markup=False, highlight=False)


@contextlib.contextmanager
def demo_stack(
    web: bool = False, extra: tuple[str, ...] = ()
) -> Iterator[tuple[ToolServer, ReplayServer, Proxy]]:
    """The demo's MCP tool server, its upstream (which relays /mcp to it) and the proxy in front,
    told that the upstream's address serves MCP, with a tool deadline short enough for a demo
    to overrun (extra: more of mitmdump's arguments)."""
    with (
        ToolServer() as tools,
        ReplayServer(tools.relaying(route), sockets=socket_route) as upstream,
        Proxy.tooltap(
            [upstream.url],
            "--log-format",
            "json",
            extra=(
                "--set",
                f"tooltap_mcp_hosts={urlsplit(upstream.url).netloc}",
                "--set",
                f"tooltap_tool_deadline={DEADLINE}",
                *extra,
            ),
            web=web,
        ) as proxy,
    ):
        yield tools, upstream, proxy


def run(console: Console, serve: bool = False, web: bool = False) -> Summary:
    with demo_stack(web) as (tools, upstream, proxy):
        console.print(f"upstream (replays bundled traffic): {upstream.url}")
        console.print(f"MCP tool server (relayed at {upstream.url}{PATH}): {tools.url}")
        console.print(f"tooltap proxy: {proxy.url}   metrics: {proxy.metrics_url}")
        if web:
            console.print(f"mitmweb: {proxy.web_url}", markup=False)
        shown = drive(console, proxy)
        if proxy.metrics_url is None:  # start() waits for it: not reached
            raise RuntimeError("tooltap started without its metrics endpoint")
        summary = read_summary(httpx.get(proxy.metrics_url, timeout=10).text, proxy.events)
        print_summary(console, summary)
        if serve or web:
            _serve(console, proxy, shown)
    return summary


def drive(console: Console, proxy: Proxy) -> int:
    """Every step through the proxy with the official SDKs, its log shown as it arrives."""
    clients = Clients(proxy.url, ca=os.path.join(proxy.confdir, "mitmproxy-ca-cert.pem"))
    errors = client_errors()
    shown = turns = 0
    for number, step in enumerate(STEPS, 1):
        console.rule(f"{number}. {step.shows}", align="left")
        try:
            step.call(clients.with_headers({"x-demo-step": step.name}))
        except errors as exc:
            if not step.expect_error:
                raise
            console.print(
                f"the client got HTTP {status_of(exc)}, as this step intends", style="dim"
            )
        turns += step.turns
        proxy.wait_for("turn", turns)  # a flow's `turn` line comes after its other events
        _render(console, proxy.events[shown:])
        shown = len(proxy.events)
    return shown


def _serve(console: Console, proxy: Proxy, shown: int) -> None:
    console.rule("serving")
    console.print(
        f"OPENAI_BASE_URL={proxy.url}/v1  ANTHROPIC_BASE_URL={proxy.url}  (any API key works)"
    )
    # Ctrl-C sets a flag rather than raising wherever the main thread happens to
    # be (a KeyboardInterrupt inside a library's lock can hang the shutdown).
    stopped: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda number, _frame: stopped.append(number))
    console.print(f"metrics: {proxy.metrics_url}   Ctrl-C stops everything")
    if proxy.web_url:
        console.print(
            f"mitmweb: {proxy.web_url}  (marked flows have findings; try the filter "
            "~comment strict-void)",
            markup=False,
        )
    try:
        while proxy.alive() and not stopped:
            time.sleep(0.5)
            _render(console, proxy.events[shown:])
            shown = len(proxy.events)
    finally:
        signal.signal(signal.SIGINT, previous)
    console.print("stopping")


def main(args: argparse.Namespace) -> int:
    console = Console()
    started = time.monotonic()
    run(console, serve=args.serve, web=args.web)
    console.print(f"done in {time.monotonic() - started:.1f}s; every process and port is closed.")
    return 0
