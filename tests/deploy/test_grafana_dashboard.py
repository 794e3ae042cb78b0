"""grafana/: the committed dashboard is what the generator makes, and it is sound.

Sound means: every panel says what it shows, reads the datasource variable, has a PromQL
target that Prometheus parses, honours the api/model filters, and sits on the grid without
overlapping another panel.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
import yaml
from test_deploy_metric_names import (
    COUNTERS,
    GAUGES,
    HISTOGRAMS,
    concrete,
    contract,
    dashboard_panels,
    grouping_labels,
    label_matchers,
    metric_names,
    recording_rules,
)
from test_deploy_prometheus import promtool

GRAFANA = Path(__file__).resolve().parents[2] / "grafana"
DASHBOARD = GRAFANA / "dashboards" / "tooltap.json"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def generator():
    spec = importlib.util.spec_from_file_location("build_dashboard", GRAFANA / "build_dashboard.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def board() -> dict:
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))


def panels() -> list[dict]:
    return [p for p in dashboard_panels(DASHBOARD) if p["type"] != "row"]


def targets() -> list[tuple[dict, dict]]:
    return [(panel, target) for panel in panels() for target in panel["targets"]]


def test_the_committed_json_is_what_the_generator_makes():
    assert DASHBOARD.read_text(encoding="utf-8") == generator().render(), (
        "run: python grafana/build_dashboard.py"
    )


def test_the_dashboard_is_a_grafana_11_or_12_dashboard_with_a_fixed_uid():
    data = board()
    assert data["schemaVersion"] >= 39  # Grafana 11.0 writes 39, 11.6 and 12 write 41
    assert data["uid"] == "tooltap"
    assert data["title"]


def test_panel_ids_are_unique():
    ids = [p["id"] for p in dashboard_panels(DASHBOARD)]
    assert len(ids) == len(set(ids))
    assert all(isinstance(i, int) and i > 0 for i in ids)


def test_every_panel_has_a_description_a_new_user_can_read():
    for panel in panels():
        assert len(panel.get("description", "").split()) >= 15, panel["title"]


def test_every_panel_and_target_reads_the_datasource_variable():
    for panel in panels():
        assert panel["datasource"] == DATASOURCE, panel["title"]
    for panel, target in targets():
        assert target["datasource"] == DATASOURCE, panel["title"]


def test_every_panel_has_targets_with_an_expression_and_unique_ref_ids():
    for panel in panels():
        assert panel["targets"], panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert all(refs) and len(refs) == len(set(refs)), panel["title"]
        assert all(t["expr"].strip() for t in panel["targets"]), panel["title"]


def test_panels_sit_inside_the_grid_without_overlapping():
    taken: set[tuple[int, int]] = set()
    for panel in dashboard_panels(DASHBOARD):
        pos = panel["gridPos"]
        assert pos["w"] > 0 and pos["h"] > 0 and pos["x"] >= 0 and pos["y"] >= 0
        assert pos["x"] + pos["w"] <= 24, panel["title"]
        cells = {
            (x, y)
            for x in range(pos["x"], pos["x"] + pos["w"])
            for y in range(pos["y"], pos["y"] + pos["h"])
        }
        assert not cells & taken, f"{panel['title']} overlaps another panel"
        taken |= cells


def test_the_template_variables_are_datasource_api_and_model():
    variables = {v["name"]: v for v in board()["templating"]["list"]}
    assert set(variables) == {"datasource", "api", "model"}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for name in ("api", "model"):
        variable = variables[name]
        assert variable["type"] == "query"
        assert variable["datasource"] == DATASOURCE
        assert variable["includeAll"] and variable["multi"]
        assert variable["allValue"] == ".*"
        assert variable["description"]
    assert "$api" in variables["model"]["query"], "models follow the chosen api"


def test_every_target_applies_the_api_and_model_filters_its_metric_supports():
    metrics = contract()
    for panel, target in targets():
        matchers: dict[tuple[str, str], set[tuple[str, str]]] = {}
        for m, label, op, value in label_matchers(target["expr"]):
            matchers.setdefault((m, label), set()).add((op, value))
        for metric in metric_names(target["expr"]) & set(metrics):
            for label in ("api", "model"):
                if label in metrics[metric]:
                    # A row may pin a label too (api="mcp"); the filter must still apply.
                    assert ("=~", f"${label}") in matchers.get((metric, label), set()), (
                        f"{panel['title']}: {metric} ignores ${label}"
                    )


def test_legends_name_only_labels_the_query_keeps():
    records = recording_rules()
    for panel, target in targets():
        kept = grouping_labels(target["expr"])
        for name in re.findall(r"tooltap:\w+:\w+", target["expr"]):
            kept |= set(records[name])
        for label in re.findall(r"\{\{\s*(\w+)\s*\}\}", target.get("legendFormat", "")):
            assert label in kept, f"{panel['title']}: legend {{{{{label}}}}} is never set"


def test_every_expression_parses_as_promql(tmp_path):
    # promtool has no "parse" command: load the expressions as recording rules instead.
    rules = [
        {"record": f"panel:{panel['id']}:{target['refId']}", "expr": concrete(target["expr"])}
        for panel, target in targets()
    ]
    path = tmp_path / "dashboard_rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    result = promtool("check", "rules", path.name, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(rules)} rules found" in result.stdout


REQUIRED = {
    "exposure rate stat": ("stat", r"^tooltap:exposure_rate:5m$"),
    "exposure rate by model": ("timeseries", r"tooltap:exposure_rate_by_model:5m"),
    "void, at-risk and fanout turns": (
        "timeseries",
        r'state=~"strict-void\|strict-at-risk\|fanout-no-strict"',
    ),
    "argument objects without guarantee": ("timeseries", r"tooltap_unguaranteed_arguments_total"),
    "argument errors by kind": ("timeseries", r"by \(kind\).*tooltap_argument_errors_total"),
    "loop errors by rule": ("timeseries", r"by \(rule\).*tooltap_loop_errors_total"),
    "tool failures": ("timeseries", r'tooltap_tool_results_total\{[^}]*outcome="error"'),
    "rejected requests": ("timeseries", r"tooltap_rejected_requests_total"),
    "output-format states": ("timeseries", r"by \(state\).*tooltap_formats_total"),
    "calls-per-turn distribution": ("bargauge", r"by \(le\).*tooltap_calls_per_turn_bucket"),
    "flows by outcome": ("timeseries", r"by \(outcome\).*tooltap_flows_total"),
    "inspect latency p99": (
        "timeseries",
        r"histogram_quantile\(0\.99,.*tooltap_inspect_seconds_bucket",
    ),
    "dropped flows": ("stat", r'tooltap_flows_total\{[^}]*outcome="dropped"'),
    "internal errors": ("stat", r"tooltap_internal_errors_total"),
    "MCP calls by server": ("timeseries", r'by \(model\).*tooltap_tool_calls_total\{api="mcp"'),
    "MCP argument and result errors": (
        "timeseries",
        r'by \(kind\).*tooltap_argument_errors_total\{api="mcp"',
    ),
    "MCP failure share": ("timeseries", r'tooltap_tool_results_total\{api="mcp"[^}]*"error".*/'),
    "MCP rejections by code": (
        "timeseries",
        r'by \(status\).*tooltap_rejected_requests_total\{api="mcp"',
    ),
    "MCP unlisted tools": ("timeseries", r'loop_errors_total\{api="mcp"[^}]*"unlisted-tool"'),
    "model time p50 by model": (
        "timeseries",
        r"histogram_quantile\(0\.5, sum by \(le, model\).*tooltap_model_duration_seconds_bucket",
    ),
    "model time p95 by model": (
        "timeseries",
        r"histogram_quantile\(0\.95, sum by \(le, model\).*tooltap_model_duration_seconds_bucket",
    ),
    "time to first token": ("timeseries", r"tooltap_first_token_seconds_bucket"),
    "output tokens per second": (
        "timeseries",
        r'tooltap_tokens_total\{[^}]*type="output".*/\s*\(sum by \(model\).*'
        r"tooltap_model_duration_seconds_sum",
    ),
    "tool wait p95": (
        "timeseries",
        r"histogram_quantile\(0\.95, sum by \(le, api\).*tooltap_tool_wait_seconds_bucket",
    ),
    "serial batches": ("timeseries", r"tooltap_serial_batches_total"),
    "overdue calls": ("timeseries", r"tooltap_overdue_calls_total"),
}


@pytest.mark.parametrize("what", sorted(REQUIRED))
def test_the_dashboard_shows(what):
    kind, pattern = REQUIRED[what]
    assert any(
        panel["type"] == kind and re.search(pattern, target["expr"]) for panel, target in targets()
    ), what


def test_every_contract_metric_has_a_panel():
    read = " ".join(target["expr"] for _, target in targets())
    for metric in [*COUNTERS, *GAUGES, *(f"{h}_bucket" for h in HISTOGRAMS)]:
        assert metric in read, metric


def test_the_calls_per_turn_query_is_a_heatmap_format_instant_query():
    # Heatmap format turns cumulative buckets into per-bucket counts.
    (target,) = [t for p, t in targets() if "tooltap_calls_per_turn_bucket" in t["expr"]]
    assert target["format"] == "heatmap"
    assert target["instant"] is True


def test_provisioning_points_grafana_at_prometheus_and_the_dashboards():
    provisioning = GRAFANA / "provisioning"
    (source,) = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())[
        "datasources"
    ]
    assert source["type"] == "prometheus"
    assert source["isDefault"] is True
    (provider,) = yaml.safe_load((provisioning / "dashboards" / "tooltap.yml").read_text())[
        "providers"
    ]
    assert provider["type"] == "file"
    assert provider["options"]["path"] == "/etc/grafana/dashboards"


def mcp_targets() -> dict[str, str]:
    """The MCP row's queries by panel title, as Prometheus gets them with every filter at All."""
    row = next(p for p in board()["panels"] if p["title"] == "MCP tool servers")
    return {
        panel["title"]: concrete(target["expr"])
        for panel in panels()
        if panel["gridPos"]["y"] > row["gridPos"]["y"] and panel["title"].startswith("MCP ")
        for target in panel["targets"]
    }


def test_the_mcp_row_reads_tool_servers_only_and_its_numbers_are_right(tmp_path):
    # Series shaped as the proxy exposes them, over 2 minutes (a sample a minute): two MCP
    # servers and a model API whose series the row must leave out. Evaluated by promtool's
    # PromQL engine at 2m, over the panels' 1m rate windows: rate = last minute's rise / 60.
    series = {
        'tooltap_tool_calls_total{api="mcp", model="forecast-tools 0.3.1"}': "0 60 180",
        'tooltap_tool_calls_total{api="mcp", model="docs 2.0"}': "0 0 60",
        'tooltap_tool_calls_total{api="chat", model="gpt-4o"}': "0 600 1200",
        'tooltap_argument_errors_total{api="mcp", model="docs 2.0", kind="schema"}': "0 0 30",
        'tooltap_argument_errors_total{api="mcp", model="docs 2.0", kind="result_schema"}': (
            "0 6 12"
        ),
        'tooltap_argument_errors_total{api="chat", model="gpt-4o", kind="schema"}': "0 60 120",
        'tooltap_tool_results_total{api="mcp", outcome="ok"}': "0 30 90",
        'tooltap_tool_results_total{api="mcp", outcome="error"}': "0 10 40",
        'tooltap_tool_results_total{api="chat", outcome="error"}': "0 600 1200",
        'tooltap_rejected_requests_total{api="mcp", status="-32602"}': "0 6 18",
        'tooltap_rejected_requests_total{api="chat", status="400"}': "0 60 120",
        'tooltap_loop_errors_total{api="mcp", rule="unlisted-tool"}': "0 3 9",
        'tooltap_loop_errors_total{api="chat", rule="unlisted-tool"}': "0 60 120",
    }
    expected = {
        "MCP tool calls per second": [
            ('{model="forecast-tools 0.3.1"}', 2.0),
            ('{model="docs 2.0"}', 1.0),
        ],
        "MCP argument and result errors": [
            ('{kind="schema"}', 0.5),
            ('{kind="result_schema"}', 0.1),
        ],
        "MCP tool failure share": [("{}", 30 / 90)],
        "MCP JSON-RPC rejections by code": [('{status="-32602"}', 0.2)],
        "MCP unlisted-tool calls": [("{}", 0.1)],
    }
    queries = mcp_targets()
    assert set(queries) == set(expected)
    tests = {
        "rule_files": [],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": k, "values": v} for k, v in series.items()],
                "promql_expr_test": [
                    {
                        "expr": queries[title],
                        "eval_time": "2m",
                        "exp_samples": [
                            {"labels": labels, "value": value} for labels, value in want
                        ],
                    }
                    for title, want in expected.items()
                ],
            }
        ],
    }
    (tmp_path / "mcp_row_test.yml").write_text(yaml.safe_dump(tests))
    result = promtool("test", "rules", "mcp_row_test.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_mcp_failure_share_is_empty_without_results_rather_than_nan(tmp_path):
    # The proxy creates tool_results at 0 for every API: 0/0 must show as no data.
    series = {
        'tooltap_tool_results_total{api="mcp", outcome="ok"}': "0 0 0",
        'tooltap_tool_results_total{api="mcp", outcome="error"}': "0 0 0",
    }
    tests = {
        "rule_files": [],
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": k, "values": v} for k, v in series.items()],
                "promql_expr_test": [
                    {
                        "expr": mcp_targets()["MCP tool failure share"],
                        "eval_time": "2m",
                        "exp_samples": [],
                    }
                ],
            }
        ],
    }
    (tmp_path / "mcp_empty_test.yml").write_text(yaml.safe_dump(tests))
    result = promtool("test", "rules", "mcp_empty_test.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
