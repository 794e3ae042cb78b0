"""deploy/prometheus: the scrape config, the rules and their promtool unit tests.

promtool is required, not optional: CI installs Debian's `prometheus` package for it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

PROMETHEUS = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
REQUIRED_ALERTS = {
    "TooltapStrictGuaranteeVoid",
    "TooltapArgumentErrors",
    "TooltapLoopErrors",
    "TooltapFlowsDropped",
    "TooltapInternalErrors",
    "TooltapDown",
    "TooltapToolCallsOverdue",
    "TooltapSerialBatches",
}


def promtool(*args: str, cwd: Path = PROMETHEUS) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("promtool")
    assert binary, "promtool not found: install Debian's `prometheus` package (./dev test does)"
    return subprocess.run(
        [binary, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def rules() -> list[dict]:
    groups = yaml.safe_load((PROMETHEUS / "rules.yml").read_text(encoding="utf-8"))["groups"]
    return [rule for group in groups for rule in group["rules"]]


def test_promtool_accepts_the_scrape_config_and_finds_its_rule_file():
    result = promtool("check", "config", "prometheus.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 rule files found" in result.stdout


def test_promtool_accepts_the_rules():
    result = promtool("check", "rules", "rules.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(rules())} rules found" in result.stdout


def test_promtool_unit_tests_pass():
    result = promtool("test", "rules", "rules_test.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_unit_tests_fail_when_the_zero_denominator_guard_is_lost(tmp_path):
    # Without `> 0`, no strict parallel traffic gives NaN, and the unit tests must say so.
    text = (PROMETHEUS / "rules.yml").read_text(encoding="utf-8")
    broken = text.replace('strict-at-risk"}[5m])) > 0)', 'strict-at-risk"}[5m])))')
    assert broken != text
    (tmp_path / "rules.yml").write_text(broken, encoding="utf-8")
    shutil.copy(PROMETHEUS / "rules_test.yml", tmp_path)
    result = promtool("test", "rules", "rules_test.yml", cwd=tmp_path)
    assert result.returncode != 0
    assert "NaN" in result.stdout + result.stderr


def test_the_design_recording_rule_and_its_variants_exist():
    records = {rule["record"] for rule in rules() if "record" in rule}
    assert records == {
        "tooltap:exposure_rate:5m",
        "tooltap:exposure_rate_by_model:5m",
        "tooltap:exposure_rate_by_api:5m",
    }


def test_the_required_alerts_exist_with_a_severity_summary_and_runbook():
    alerts = {rule["alert"]: rule for rule in rules() if "alert" in rule}
    assert set(alerts) >= REQUIRED_ALERTS
    for name, rule in alerts.items():
        # info: advice no one is paged for (a serial batch may be the team's choice).
        assert rule["labels"]["severity"] in {"info", "warning", "critical"}, name
        assert rule["annotations"]["summary"].strip(), name
        assert rule["annotations"]["runbook"].strip(), name


@pytest.mark.parametrize(
    ("alert", "repair"),
    [
        ("TooltapStrictGuaranteeVoid", "parallel_tool_calls: false"),
        ("TooltapStrictGuaranteeVoid", "drop strict and validate"),
        ("TooltapArgumentErrors", "error result bound to its call_id"),
        ("TooltapLoopErrors", "exactly once"),
        ("TooltapLoopErrors", "single next user message"),
        ("TooltapFlowsDropped", "tooltap_queue_size"),
        ("TooltapFlowsDropped", "replicas"),
        ("TooltapInternalErrors", "stderr"),
        ("TooltapDown", "pod or process"),
        ("TooltapToolCallsOverdue", "timeout of its own"),
        ("TooltapToolCallsOverdue", "tooltap_tool_deadline"),
        ("TooltapSerialBatches", "asyncio.gather"),
    ],
)
def test_each_runbook_names_its_repair(alert, repair):
    runbook = next(rule for rule in rules() if rule.get("alert") == alert)["annotations"]["runbook"]
    assert repair in " ".join(runbook.split())


def test_every_rule_has_a_promtool_unit_test():
    tests = yaml.safe_load((PROMETHEUS / "rules_test.yml").read_text(encoding="utf-8"))["tests"]
    tested_exprs = {t["expr"] for case in tests for t in case.get("promql_expr_test", [])}
    tested_alerts = {
        t["alertname"]
        for case in tests
        for t in case.get("alert_rule_test", [])
        if t["exp_alerts"]  # a test that only expects silence proves nothing fires
    }
    assert {rule["record"] for rule in rules() if "record" in rule} <= tested_exprs
    assert {rule["alert"] for rule in rules() if "alert" in rule} <= tested_alerts


def test_every_recording_rule_is_tested_for_the_zero_denominator_case():
    tests = yaml.safe_load((PROMETHEUS / "rules_test.yml").read_text(encoding="utf-8"))["tests"]
    empty = {
        t["expr"]
        for case in tests
        for t in case.get("promql_expr_test", [])
        if t["exp_samples"] == []
    }
    assert {rule["record"] for rule in rules() if "record" in rule} <= empty


def test_prometheus_scrapes_the_job_the_alerts_and_dashboard_expect():
    config = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text(encoding="utf-8"))
    (job,) = config["scrape_configs"]
    assert job["job_name"] == "tooltap"
    assert job["metrics_path"] == "/metrics"
    assert job["static_configs"][0]["targets"] == ["tooltap:9464"]
    assert config["rule_files"] == ["rules.yml"]
