"""pip-audit over the installed dependency set: the environment this suite runs in.

The audit needs a vulnerability database: PyPI's per-release JSON API (the
default service) or osv.dev. Where neither answers, pip-audit does not fail:
it reports every package as "not found" and says "No known vulnerabilities
found", exit 0. That would be a silent pass, so this test reads the JSON
report and skips, saying exactly what could not be reached, unless every
installed package was actually audited.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from typing import Any

import pytest

AUDIT = [sys.executable, "-m", "pip_audit", "--format", "json", "--progress-spinner", "off"]


def _audit(service: str) -> tuple[dict[str, Any], str]:
    done = subprocess.run(
        [*AUDIT, "--vulnerability-service", service, "--skip-editable"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    try:
        return json.loads(done.stdout), ""
    except ValueError:
        return {}, (done.stderr.strip().splitlines() or ["no output"])[-1]


def judge(service: str, report: dict[str, Any], stderr: str) -> tuple[str, str]:
    """("vulnerable" | "clean" | "unaudited", details) for one pip-audit JSON report."""
    dependencies = report.get("dependencies", [])
    vulnerable = [
        f"{d['name']} {d['version']}: {', '.join(v['id'] for v in d['vulns'])}"
        for d in dependencies
        if d.get("vulns")
    ]
    if vulnerable:
        return "vulnerable", "; ".join(vulnerable)
    unaudited = [d for d in dependencies if "skip_reason" in d]
    if dependencies and not unaudited:
        return "clean", f"{len(dependencies)} packages audited against {service}"
    if unaudited:
        return "unaudited", (
            f"{service}: {len(unaudited)} of {len(dependencies)} packages not audited "
            f"({unaudited[0]['skip_reason']})"
        )
    return "unaudited", f"{service}: {stderr or 'empty report'}"


def test_no_installed_dependency_has_a_known_vulnerability():
    if importlib.util.find_spec("pip_audit") is None:
        pytest.skip("pip-audit is not installed in this environment")
    unreachable = []
    for service in ("pypi", "osv"):
        verdict, details = judge(service, *_audit(service))
        assert verdict != "vulnerable", f"known vulnerabilities: {details}"
        if verdict == "clean":
            return
        unreachable.append(details)
    pytest.skip("pip-audit could not reach a vulnerability database; " + "; ".join(unreachable))


def test_the_report_is_read_so_that_nothing_passes_silently():
    found = {"name": "jinja2", "version": "2.4.1", "vulns": [{"id": "PYSEC-2014-8"}]}
    fine = {"name": "h11", "version": "0.16.0", "vulns": []}
    lost = {
        "name": "aioquic",
        "skip_reason": "Dependency not found on PyPI and could not be audited",
    }
    assert judge("pypi", {"dependencies": [fine, found]}, "") == (
        "vulnerable",
        "jinja2 2.4.1: PYSEC-2014-8",
    )
    assert judge("pypi", {"dependencies": [fine]}, "")[0] == "clean"
    # pip-audit's own summary for this report is "No known vulnerabilities found", exit 0.
    assert judge("pypi", {"dependencies": [fine, lost]}, "") == (
        "unaudited",
        "pypi: 1 of 2 packages not audited (Dependency not found on PyPI and could not be audited)",
    )
    assert judge("osv", {}, "ConnectionError: api.osv.dev") == (
        "unaudited",
        "osv: ConnectionError: api.osv.dev",
    )
