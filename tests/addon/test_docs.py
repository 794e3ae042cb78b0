"""The documentation is tested like code: its links resolve, and its reference lists exactly
what the code has (options and their flags, metrics, log events, finding names, states)."""

from __future__ import annotations

import ast
import importlib
import io
import re
from pathlib import Path
from typing import Any, get_args

import pytest
import yaml
from structlog.testing import LogCapture

from tooltap.addon.handover import supervisor
from tooltap.addon.inspection import pins, session, state
from tooltap.addon.options import BY_NAME, OPTIONS
from tooltap.addon.proxy import addon
from tooltap.addon.sinks import metrics, traces
from tooltap.addon.sinks.log import JOIN_KEYS, SOCKET_KEYS, ExchangeIds, LogSink
from tooltap.addon.sinks.metrics import Metrics
from tooltap.core import (
    Verdict,
    arguments,
    definitions,
    dialects,
    encoding,
    inspection,
    loop,
    parallel,
    schema,
)
from tooltap.core.findings import DEFAULT, NAMES
from tooltap.core.inspection import Outcome
from tooltap.core.loop import RULES as LOOP_RULES

ROOT = Path(__file__).parents[2]
DOCS = ROOT / "docs"
PAGES = [
    ROOT / "README.md",
    ROOT / "CONTRIBUTING.md",
    ROOT / "CHANGELOG.md",
    *sorted(DOCS.glob("*.md")),
    *(ROOT / folder / "README.md" for folder in ("deploy", "bench", "grafana")),
]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """A heading's anchor, as GitHub makes it."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {slug(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}


def table(page: Path, heading: str) -> list[list[str]]:
    """The rows (cells) of the first table under a heading."""
    lines = page.read_text(encoding="utf-8").split(f"\n{heading}\n", 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break  # the first table only
        rows.append(line)
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in rows]
    return [row for row in cells[2:] if row]  # past the header and its rule


def names(cell: str, prefix: str) -> set[str]:
    return set(re.findall(rf"`({prefix}[a-z_]+)`", cell))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves_to_a_file_and_its_anchor(page):
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        assert resolved.exists(), f"{page.name}: {target}"
        if anchor and resolved.suffix == ".md":
            assert anchor in anchors(resolved), f"{page.name}: {target}"


def test_the_options_table_lists_every_option_and_its_flag_and_nothing_else():
    rows = table(DOCS / "running.md", "## Options")
    listed = {name for row in rows for name in names(row[0], "tooltap_")}
    assert listed == {option.name for option in OPTIONS}
    for option in OPTIONS:
        (row,) = [row for row in rows if f"`{option.name}`" in row[0]]
        assert (option.flag is None) or f"`{option.flag}`" in row[0], option.name


def test_the_metrics_table_lists_every_metric_tooltap_exports_and_nothing_else():
    # prometheus_client names a counter's family without its _total.
    exported = {family.name for family in Metrics().registry.collect()}
    rows = table(DOCS / "reference.md", "## Metrics")
    listed = {name for row in rows for name in names(row[0], "tooltap_")}
    assert {n.removesuffix("_total") for n in listed} == exported


def log_calls() -> list[ast.Call]:
    """The log sink's log.<level>("event", ...) calls."""
    tree = ast.parse((ROOT / "addon" / "sinks" / "log.py").read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and node.args):
            continue
        # log.info(...), or (log.warning if bad else log.info)(...)
        funcs = (
            [node.func.body, node.func.orelse] if isinstance(node.func, ast.IfExp) else [node.func]
        )
        levels = {f.attr for f in funcs if isinstance(f, ast.Attribute)}
        if levels & {"info", "warning", "error"} and isinstance(node.args[0], ast.Constant):
            found.append(node)
    return found


def log_events() -> set[str]:
    """The event names the log sink emits: the first argument of each log.<level>(...) call."""
    return {call.args[0].value for call in log_calls()}  # type: ignore[attr-defined]


def test_the_log_reference_names_every_event_the_log_sink_emits():
    events = log_events()
    assert {"turn", "tool_call", "loop_error", "session_error"} <= events
    text = (DOCS / "reference.md").read_text(encoding="utf-8")
    assert {event for event in events if f"`{event}`" not in text} == set()


def test_the_audit_page_names_every_finding_fail_on_takes():
    text = (DOCS / "audit.md").read_text(encoding="utf-8")
    assert {name for name in NAMES if f"`{name}`" not in text} == set()


def test_every_state_and_format_state_is_explained():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    apis = (DOCS / "apis.md").read_text(encoding="utf-8")
    assert {s for s in parallel.STATES if f"| `{s}` |" not in readme} == set()
    assert {s for s in schema.STATES if f"`{s}`" not in apis} == set()


def defined_tests(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name.startswith("test_")
    }


def test_every_test_the_promises_page_names_exists():
    text = (DOCS / "promises.md").read_text(encoding="utf-8")
    named = re.findall(r"`(tests/[\w/]+\.py)(?:::(\w+))?`", text)
    assert len(named) > 30
    missing = [
        f"{path}::{name}" if name else path
        for path, name in named
        if not (ROOT / path).exists() or (name and name not in defined_tests(ROOT / path))
    ]
    assert missing == []


# --- the reference's tables, held to the code ----------------------------------------------

REFERENCE = DOCS / "reference.md"
RULES = ROOT / "deploy" / "prometheus" / "rules.yml"


def section(page: Path, heading: str) -> str:
    """The text under a heading, up to the next heading of the same or a higher level."""
    text = page.read_text(encoding="utf-8")
    level = heading.split(" ", 1)[0]
    start = text.index(f"\n{heading}\n") + len(heading) + 2
    ends = [text.find(f"\n{'#' * n} ", start) for n in range(1, len(level) + 1)]
    ends = [end for end in ends if end != -1]
    return text[start : min(ends) if ends else len(text)]


def field_table(heading: str) -> set[str]:
    rows = [line for line in section(REFERENCE, heading).splitlines() if line.startswith("| `")]
    return {re.match(r"\| `([a-z_]+)`", row).group(1) for row in rows}


def emitted_fields() -> dict[str, set[str]]:
    """The fields of every event, as the log sink writes them for verdicts that carry every
    part a verdict can have: an HTTP model turn, an MCP exchange, a socket turn and what a
    session says outside its turns."""
    call = {"call_id": "call_a", "name": "f", "type": "function_call", "arguments_raw": "{"}
    parse = {"type": "JSONDecodeError", "message": "EOF", "position": 1}
    change = {
        "source": "mcp s at http://h/mcp", "server": "s", "tool": "f", "change": "changed",
        "against": "first-seen", "before": "a", "after": "b", "details": ["$.description"],
    }  # fmt: skip
    hidden = {
        "part": "definition", "tool": "f", "where": "$.description", "kind": "tag", "at": 0,
        "count": 1, "chars": ["U+E0041"], "spelled": "A",
    }  # fmt: skip
    everything = Verdict(
        api="chat",
        outcome="inspected",
        state="strict-void",
        calls=[call | {"parse_error": parse}, call | {"hosted": True, "server": "srv"}],
        loop_errors=[{"rule": "orphan-result", "ids": ["c"], "where": "w", "repair": "r"}],
        tool_results=[{"call_id": "c", "where": "w", "outcome": "error"}],
        rejected={"status": 400, "type": "t", "message": "m", "blockers": ["b"]},
        stream_errors=[{"type": "t", "message": "m"}],
        tool_changes=[change],
        hidden_text=[hidden],
        usage={"input_tokens": 9, "output_tokens": 3, "cached_input_tokens": 4, "reasoning_tokens": 1},
        tool_wait_ms=812.4,
        tool_times=[{"call_id": "c", "name": "f", "waited_ms": 812.4, "issued_at": 1.0, "answered_at": 1.8}],
    )  # fmt: skip
    no_call = Verdict(api="responses", outcome="inspected", state="no-strict-declared")
    mcp = Verdict(
        api="mcp",
        outcome="inspected",
        scope="tool",
        server="s 1.0",
        session="0123456789abcdef",
        calls=[call],
        tool_results=[{"call_id": "call_a", "where": "w", "outcome": "error"}],
    )
    said = Verdict(
        api="realtime",
        outcome="inspected",
        transport="websocket",
        scope="session",
        session_errors=[{"type": "t", "message": "m"}],
    )
    capture = LogCapture()
    sink = LogSink(stream=io.StringIO(), processors=[capture])
    flow = "5a3c1e2f-9b7d-4c11-8e2a-0d6f1b2c3d4e"
    for verdict, ids in (
        (everything, ExchangeIds.of_flow(flow)),
        (no_call, ExchangeIds.of_socket(flow, 2)),
        (mcp, ExchangeIds.of_flow(flow)),
        (said, ExchangeIds.of_socket(flow, None)),
    ):
        sink.emit(verdict, "h", "/p", 0.1, ids)
    overdue = {"call_id": "7", "name": "f", "waited_ms": 61000.0, "deadline_s": 60, "path": "/p"}
    sink.tool_overdue(ExchangeIds.of_flow(flow), api="mcp", transport="http", **overdue,
                      server="s 1.0", session="487f27619b6d6703")  # fmt: skip
    sink.tool_overdue(ExchangeIds.of_socket(flow, None), api="realtime", transport="websocket",
                      **overdue, response_id="resp_1")  # fmt: skip
    fields: dict[str, set[str]] = {}
    for entry in capture.entries:
        # LogCapture names the level log_level; the JSON renderer writes it as `level`, after
        # the timestamp processor: both are on every line.
        keys = set(entry) - {"log_level"} | {"level", "timestamp"}
        fields.setdefault(entry["event"], set()).update(keys)
    return fields


def test_every_event_has_a_field_table_that_lists_exactly_what_it_writes():
    common = field_table("### Fields on every line")
    emitted = emitted_fields()
    assert set(emitted) == log_events()  # every event the sink has was written above
    for event, fields in emitted.items():
        own = field_table(f"### `{event}`")
        assert fields - common - own == set(), (event, "written, not in its table")
        assert own - fields == set(), (event, "in its table, never written")
    assert common <= set().union(*emitted.values())


def test_every_keyword_the_log_sink_passes_is_a_documented_field():
    # A field written only in a branch the captures above miss is caught here.
    passed = {keyword.arg for call in log_calls() for keyword in call.keywords if keyword.arg}
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", REFERENCE.read_text(), flags=re.M))
    assert passed - documented == set()
    # The keys bound on every line of an exchange are documented too.
    assert set(JOIN_KEYS) | set(SOCKET_KEYS) <= field_table("### Fields on every line")


def rules_by_alert() -> dict[str, dict]:
    groups = yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
    return {rule["alert"]: rule for group in groups for rule in group["rules"] if "alert" in rule}


# The metric a finding or outcome counts in, which the alert the table names must read.
COUNTED_IN = {
    "strict-void": "tooltap:exposure_rate_by_model:5m",
    **dict.fromkeys(["argument-parse", "argument-schema", "result-schema"], "tooltap_argument_errors_total"),
    **dict.fromkeys(RULES_OF_THE_LOOP := [n for n in NAMES if n in LOOP_RULES], "tooltap_loop_errors_total"),
    "tool-changed": "tooltap_tool_changes_total",
    "hidden-text": "tooltap_hidden_text_total",
    "serial-execution": "tooltap_serial_batches_total",
    **dict.fromkeys(["skipped", "unparseable", "dropped"], "tooltap_flows_total"),
}  # fmt: skip


def test_the_findings_table_has_every_finding_and_outcome_with_its_level_audit_and_alert():
    rows = table(REFERENCE, "## Findings and outcomes")
    by_name = {re.match(r"`([a-z_-]+)`", row[0]).group(1): row for row in rows}
    outcomes = set(get_args(Outcome)) | {"dropped"}
    assert set(by_name) == set(NAMES) | outcomes
    alerts = rules_by_alert()
    for name, (_, meaning, whose, level, audit, alert, todo) in by_name.items():
        assert meaning and whose and todo, name
        if name in NAMES:
            assert level == ("warning" if name in DEFAULT else "info"), name
            assert audit == ("fails" if name in DEFAULT else "passes"), name
        else:
            assert not audit.startswith("fails"), name  # an outcome is no finding
        named = re.findall(r"`(Tooltap\w+)`", alert)
        assert named or alert.startswith("none"), name
        for found in named:
            assert found in alerts, (name, found)
            assert COUNTED_IN[name] in alerts[found]["expr"], (name, found)
    # unanswered-at-close and serial-execution are left out of the loop alert, as the table says.
    assert 'rule!~"unanswered-at-close|serial-execution"' in alerts["TooltapLoopErrors"]["expr"]


def test_every_alert_has_a_runbook_section_and_every_section_an_alert():
    alerts = rules_by_alert()
    text = section(REFERENCE, "## Alerts")
    headed = re.findall(r"^### (Tooltap\w+)$", text, flags=re.M)
    assert sorted(headed) == sorted(alerts)
    for name, rule in alerts.items():
        body = section(REFERENCE, f"### {name}")
        assert body.strip().startswith(f"*{rule['labels']['severity']}.*"), name
        assert re.search(r"^1\. ", body, flags=re.M), name  # steps to take


def test_the_limits_table_says_what_the_code_holds():
    rows = {row[0]: row[1] for row in table(REFERENCE, "## Limits")}

    def option(name: str) -> Any:
        return BY_NAME[name].default

    expected = {
        "body inspected (`tooltap_max_body`)": f"{option('tooltap_max_body') >> 20} MiB",
        "memory held for inspection (`tooltap_memory_budget`)": f"{option('tooltap_memory_budget') >> 20} MiB",
        "exchanges waiting for the inspector (`tooltap_queue_size`)": f"{option('tooltap_queue_size'):,}",
        "flows in flight": f"{addon.MAX_TRACKED:,}",
        "decoded body (gzip, br, zstd)": f"{encoding.DEFAULT_MAX_DECODED >> 20} MiB",
        "calls validated and logged per turn": f"{inspection.MAX_CALLS:,}",
        "history items walked per request": f"{loop.MAX_HISTORY:,}",
        "schema errors per call": f"{arguments.MAX_SCHEMA_ERRORS:,}",
        "response ids remembered (previous_response_id, polls), per kind, per process": f"{state.REMEMBERED:,}",
        "WebSockets followed at once": f"{addon.MAX_SOCKETS:,}",
        "MCP GET streams followed at once": f"{addon.MAX_CHANNELS:,}",
        "MCP sessions remembered, with their tool lists": f"{session.TOOL_SESSIONS:,} sessions, {session.TOOL_BYTES >> 20} MiB of lists",
        "tool-definition pins kept per process": f"{pins.PINS_BYTES >> 20} MiB",
        "tool definitions already read, by their bytes, per process": f"{definitions.CACHE_BYTES >> 20} MiB",
        "compiled argument schemas, per process": f"{arguments.COMPILED_KEPT:,} schemas",
        "request paths whose dialect is remembered, per process": f"{dialects.ROUTES_KEPT:,} paths of up to {dialects.ROUTE_PATH_KEPT:,} characters",
        "`model` and `server` label values (`tooltap_model_labels`)": f"{option('tooltap_model_labels')}",
        "session error `type` label values": f"{metrics.ERROR_TYPES}",
        "trace spans waiting for the collector": f"{traces.MAX_QUEUE:,}",
        "an inspector that takes no work while exchanges wait": f"{supervisor.STALLED:.0f} s",
        "inspector restart backoff": f"{supervisor.BACKOFF[0]:.0f} s, doubling to {supervisor.BACKOFF[1]:.0f} s",
    }  # fmt: skip
    assert rows == expected


def test_the_environment_table_says_who_reads_each_name():
    rows = {
        name: row[1]
        for row in table(DOCS / "operations.md", "### Environment variables")
        for name in re.findall(r"`([A-Z_]+)`", row[0])
    }
    code = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "addon").rglob("*.py"))
    code += "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "core").rglob("*.py"))
    manifests = "\n".join(
        p.read_text(encoding="utf-8") for p in (ROOT / "deploy" / "kubernetes").glob("*.yaml")
    )
    dev = (ROOT / "dev").read_text(encoding="utf-8")
    build = (ROOT / "setup.py").read_text(encoding="utf-8")
    for name in set(re.findall(r"\bTOOLTAP_[A-Z_]+", manifests + dev + build)):
        assert name in rows, name
    for name, reader in rows.items():
        read_by_code = re.search(rf"[\"']{name}[\"']", code) is not None
        if reader == "the manifests only":
            assert not read_by_code and f"$({name})" in manifests, name
        elif reader == "`./dev` only":
            assert not read_by_code and name in dev, name
        elif reader == "the build (`setup.py`) only":
            assert not read_by_code and re.search(rf"[\"']{name}[\"']", build), name
        elif name.startswith("TOOLTAP_"):
            assert read_by_code, name


def test_the_apis_page_names_the_module_each_api_is_read_in():
    from tooltap.core.dialects import DIALECTS

    text = (ROOT / "docs" / "apis.md").read_text()
    section = text.split("## Where each API is read", 1)[1].split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| `(\w+)` \| `(core/dialects/\w+\.py)`", section, re.MULTILINE))
    assert set(rows) == set(DIALECTS)
    for api, module in rows.items():
        assert (ROOT / module).is_file() and DIALECTS[api].read_turn.__module__.endswith(
            Path(module).stem
        ), api
    for beside in re.findall(r"`(\w+\.py)`: ", section):
        assert (ROOT / "core" / "dialects" / beside).is_file(), beside


def test_the_pytest_pages_example_runs_as_pasted_and_its_options_are_the_plugins(pytester):
    text = (DOCS / "pytest.md").read_text(encoding="utf-8")
    example = text.split("## A test", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    assert len([line for line in example.splitlines() if line.strip()]) == 10
    pytester.makepyfile(test_example=example)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--tooltap", timeout=120)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["1 exchange(s) read in 1 test(s); 0 finding(s)"])
    # Every property and option the page names is one the plugin has, and the reverse.
    plugin = (ROOT / "addon" / "testing" / "plugin.py").read_text(encoding="utf-8")
    named = set(re.findall(r"`(tooltap_[a-z_]+)`", text)) - {"tooltap_max_body"}
    assert named == set(re.findall(r'"(tooltap_[a-z_]+)"', plugin))


# Where each SDK the pytest page names builds the HTTP client it sends with.
SENDERS = {
    "openai": "openai._base_client",
    "anthropic": "anthropic._base_client",
    "mcp": "mcp.client.streamable_http",
    "ollama": "ollama._client",
}


def test_the_pytest_page_names_the_transport_each_sdk_sends_with_as_installed(monkeypatch):
    from google.genai import _api_client

    monkeypatch.delenv("GOOGLE_GENAI_HTTP_CLIENT", raising=False)
    said = {}
    for transport, _, clients in table(DOCS / "pytest.md", "## What it watches"):
        if transport in ("httpx", "httpx2"):
            as_they_come = clients.split(";")[0]  # what follows says how to choose another
            said |= {name: transport for name in re.findall(r"(?:^|, )([a-z-]+)", as_they_come)}
    assert set(said) == {*SENDERS, "google-genai"}
    assert _api_client._get_http_client_backend() == said["google-genai"]
    for name, module in SENDERS.items():
        source = Path(importlib.import_module(module).__file__ or "").read_text(encoding="utf-8")
        assert set(re.findall(r"^import (httpx2?)$", source, re.M)) == {said[name]}, name
