"""Every metric, label and label value that a rule or a dashboard panel reads is in the contract.

The contract is DESIGN.md's metric table, written here as data. A typo in PromQL returns an
empty result instead of an error, so nothing else would catch it. The helpers
(rule_expressions, dashboard_expressions, concrete, metric_names) are shared with the
end-to-end test, which evaluates the same expressions against a live Prometheus.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "rules.yml"
DASHBOARDS = ROOT / "grafana" / "dashboards"

ANY = None  # a label whose values are open (model, status, le, ...)
APIS = {
    "responses", "chat", "messages", "realtime", "converse", "gemini", "gemini_live", "mcp",
    "ollama", "cohere",
}  # fmt: skip
# realtime and gemini_live are only ever WebSockets (tests/system/test_websocket.py,
# test_gemini_live.py); mcp is a tool server's (tests/system/test_mcp_clients.py)
HTTP_APIS = APIS - {"realtime", "gemini_live", "mcp"}
TURN_STATES = {
    "no-tools",
    "no-strict-declared",
    "fanout-no-strict",
    "strict-serialised",
    "strict-void",
    "strict-at-risk",
}
FORMAT_STATES = {
    "advisory-schema",
    "no-schema",
    "free-text",
    "unknown-format",
    "advisory-tools",
    "enforced",
}
LOOP_RULES = {
    "unanswered-call",
    "orphan-result",
    "duplicate-result",
    "split-results",
    "results-not-first",
    "empty-result",
    "unanswered-at-close",
    "missing-thought-signature",
    "unlisted-tool",
    "serial-execution",
}
FLOW_OUTCOMES = {
    "inspected", "skipped", "unparseable", "upstream_error", "client_gone", "dropped", "not_read"
}  # fmt: skip

# DESIGN.md's table: metric -> label -> allowed values (ANY when open).
COUNTERS: dict[str, dict[str, set[str] | None]] = {
    "tooltap_turns_total": {"api": APIS, "model": ANY, "state": TURN_STATES},
    "tooltap_formats_total": {"api": APIS, "model": ANY, "state": FORMAT_STATES},
    "tooltap_tool_calls_total": {"api": APIS, "model": ANY},
    "tooltap_unguaranteed_arguments_total": {"api": APIS, "model": ANY},
    "tooltap_argument_errors_total": {
        "api": APIS,
        "model": ANY,
        "kind": {"parse", "schema", "result_schema"},
    },
    "tooltap_duplicate_calls_total": {"api": APIS, "model": ANY},
    "tooltap_loop_errors_total": {"api": APIS, "rule": LOOP_RULES},
    "tooltap_tool_results_total": {"api": APIS, "outcome": {"ok", "error"}},
    "tooltap_rejected_requests_total": {"api": APIS, "status": ANY},
    "tooltap_session_errors_total": {"api": {"realtime"}, "type": ANY},
    "tooltap_flows_total": {"api": APIS | {"none"}, "outcome": FLOW_OUTCOMES},
    "tooltap_internal_errors_total": {"where": {"hook", "tap", "worker"}},
    "tooltap_inspector_restarts_total": {},
    "tooltap_state_errors_total": {},
    "tooltap_spans_total": {"outcome": {"exported", "dropped"}},
    "tooltap_tool_changes_total": {"api": APIS, "server": ANY},
    "tooltap_hidden_text_total": {"api": APIS, "where": {"definition", "result"}},
    "tooltap_tokens_total": {
        "api": APIS,
        "model": ANY,
        "type": {"input", "output", "cached_input", "reasoning"},
    },
    "tooltap_serial_batches_total": {"api": APIS},
    "tooltap_overdue_calls_total": {"api": APIS},
    "tooltap_websocket_messages_skipped_total": {
        "api": {"responses", "realtime", "gemini_live"},
        "reason": {
            "binary",
            "over_budget",
            "queue_full",
            "not_json",
            "turn_too_large",
            "too_many_lanes",
            "too_many_waiting",
            "too_many_items",
            "joined_late",
            "lost",
        },
    },
}
GAUGES: dict[str, dict[str, set[str] | None]] = {
    "tooltap_held_bytes": {},
    "tooltap_held_peak_bytes": {},
}
HISTOGRAMS: dict[str, dict[str, set[str] | None]] = {
    "tooltap_calls_per_turn": {"api": APIS},
    "tooltap_inspect_seconds": {"api": APIS},
    "tooltap_model_duration_seconds": {"api": APIS, "model": ANY},
    "tooltap_first_token_seconds": {"api": APIS, "model": ANY},
    "tooltap_tool_wait_seconds": {"api": APIS},
    "tooltap_tool_run_seconds": {"server": ANY},
}
# Series Prometheus makes itself, which the rules and dashboards may read.
PROMETHEUS: dict[str, dict[str, set[str] | None]] = {"up": {"job": ANY, "instance": ANY}}
# Labels every scraped series has.
TARGET_LABELS = {"job", "instance"}

KEYWORDS = {
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "inf",
    "nan",
}
GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)?\s*\{([^}]*)\}")
MATCHER = re.compile(r"([a-zA-Z_]\w*)\s*(=~|!~|!=|=)\s*\"((?:[^\"\\]|\\.)*)\"")
# Grafana's own variables, and values that make a panel's query plain PromQL.
GRAFANA_VARIABLES = {
    "$__rate_interval": "1m",
    "$__interval": "1m",
    "$__range": "1h",
    "$api": ".*",
    "$model": ".*",
}


def contract() -> dict[str, dict[str, set[str] | None]]:
    """Every series name the proxy exposes (histograms as _bucket, _sum, _count), with labels."""
    names = dict(COUNTERS) | GAUGES
    for base, labels in HISTOGRAMS.items():
        names[f"{base}_bucket"] = {**labels, "le": ANY}
        names[f"{base}_sum"] = labels
        names[f"{base}_count"] = labels
    return names


def rule_expressions() -> list[tuple[str, str]]:
    """(rule name, PromQL) for every recording and alerting rule in rules.yml."""
    groups = yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
    return [
        (rule.get("record") or rule["alert"], rule["expr"])
        for group in groups
        for rule in group["rules"]
    ]


def recording_rules() -> dict[str, dict[str, set[str] | None]]:
    """Recording rule name -> the labels its result keeps (its `by` labels)."""
    groups = yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
    return {
        rule["record"]: dict.fromkeys(grouping_labels(rule["expr"]) | set(rule.get("labels", {})))
        for group in groups
        for rule in group["rules"]
        if "record" in rule
    }


def _panels(panels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found = []
    for panel in panels:
        found.append(panel)
        found.extend(_panels(panel.get("panels", [])))  # collapsed rows nest their panels
    return found


def dashboard_panels(path: Path) -> list[dict[str, Any]]:
    return _panels(json.loads(path.read_text(encoding="utf-8"))["panels"])


def dashboard_expressions() -> list[tuple[str, str]]:
    """(dashboard/panel/refId, PromQL as Grafana sends it) for every panel target and every
    label_values() variable query in grafana/dashboards/*.json."""
    found = []
    for path in sorted(DASHBOARDS.glob("*.json")):
        board = json.loads(path.read_text(encoding="utf-8"))
        for panel in _panels(board["panels"]):
            for target in panel.get("targets", []):
                found.append((f"{path.stem}/{panel['title']}/{target['refId']}", target["expr"]))
        for variable in board.get("templating", {}).get("list", []):
            query = variable.get("query")
            if variable.get("type") == "query" and isinstance(query, str):
                match = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", query.strip())
                if match:
                    found.append((f"{path.stem}/${variable['name']}", match.group(1)))
    return found


def concrete(expr: str) -> str:
    """The PromQL that Prometheus evaluates for a panel: Grafana's variables filled in."""
    for name in sorted(GRAFANA_VARIABLES, key=len, reverse=True):
        expr = expr.replace(name, GRAFANA_VARIABLES[name])
    return expr


def _without_strings_and_selectors(expr: str) -> str:
    expr = SELECTOR.sub(lambda m: m.group(1) or "", expr)
    expr = re.sub(r"\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'", " ", expr)
    return re.sub(r"\[[^\]]*\]", " ", expr)


def metric_names(expr: str) -> set[str]:
    """The metric names an expression selects (functions, keywords and labels left out)."""
    text = GROUPING.sub(" ", _without_strings_and_selectors(concrete(expr)))
    text = re.sub(r"(?<![\w:])\d[\w.+-]*", " ", text)  # numbers and durations
    names = set()
    for match in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", text):
        if text[match.end() :].lstrip().startswith("(") or match.group().lower() in KEYWORDS:
            continue
        names.add(match.group())
    return names


def label_matchers(expr: str) -> list[tuple[str, str, str, str]]:
    """(metric, label, operator, value) for every label matcher in the expression."""
    return [
        (selector.group(1) or "", *matcher.groups())
        for selector in SELECTOR.finditer(expr)
        for matcher in MATCHER.finditer(selector.group(2))
    ]


def grouping_labels(expr: str) -> set[str]:
    """Labels named in by(), without(), on(), ignoring() and group_left/right()."""
    return {
        label.strip()
        for match in GROUPING.finditer(expr)
        for label in match.group(2).split(",")
        if label.strip()
    }


def _known() -> dict[str, dict[str, set[str] | None]]:
    return {**contract(), **recording_rules(), **PROMETHEUS}


def _all_expressions() -> list[tuple[str, str]]:
    return rule_expressions() + dashboard_expressions()


def test_the_helper_finds_metric_names_and_skips_functions_labels_and_durations():
    expr = (
        'histogram_quantile(0.95, sum by (le) (rate(tooltap_inspect_seconds_bucket{api=~"$api"}'
        "[$__rate_interval]))) or sum(tooltap_flows_total unless tooltap_flows_total offset 10m)"
        ' / on (api) group_left (model) (up{job="tooltap"} == 0) or vector(1e3)'
    )
    assert metric_names(expr) == {"tooltap_inspect_seconds_bucket", "tooltap_flows_total", "up"}
    assert grouping_labels(expr) == {"le", "api", "model"}
    assert label_matchers(expr) == [
        ("tooltap_inspect_seconds_bucket", "api", "=~", "$api"),
        ("up", "job", "=", "tooltap"),
    ]


def test_the_helper_sees_a_misspelt_metric():
    assert metric_names("sum(rate(tooltap_turn_total[5m]))") - set(_known()) == {
        "tooltap_turn_total"
    }


def test_rules_and_dashboards_have_expressions_to_check():
    rules, panels = rule_expressions(), dashboard_expressions()
    assert {"tooltap:exposure_rate:5m", "TooltapDown"} <= {name for name, _ in rules}
    assert len(panels) >= 15
    assert all(metric_names(expr) for _, expr in rules + panels)


@pytest.mark.parametrize(("where", "expr"), _all_expressions())
def test_every_metric_read_is_in_the_contract_or_a_recording_rule(where, expr):
    assert metric_names(expr) <= set(_known()), where


@pytest.mark.parametrize(("where", "expr"), _all_expressions())
def test_every_label_matcher_names_a_label_and_value_the_metric_has(where, expr):
    known = _known()
    for metric, label, op, value in label_matchers(expr):
        labels = known[metric] if metric else {}
        assert label in labels or label in TARGET_LABELS, f"{where}: {metric} has no {label}"
        allowed = labels.get(label)
        if allowed is None or "$" in value or op.startswith("!"):
            continue
        literals = value.split("|") if op == "=~" else [value]
        # Regex alternatives of plain words are checked; real regexes like .* are not.
        for literal in literals:
            if re.fullmatch(r"[\w-]+", literal):
                assert literal in allowed, f"{where}: {metric}{{{label}}} is never {literal!r}"


@pytest.mark.parametrize(("where", "expr"), _all_expressions())
def test_every_grouping_label_exists_on_a_metric_of_the_expression(where, expr):
    known = _known()
    labels = set(TARGET_LABELS)
    for name in metric_names(expr):
        labels |= set(known[name])
    assert grouping_labels(expr) <= labels, where
