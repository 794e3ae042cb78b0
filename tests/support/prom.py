"""Reading a running proxy's /metrics (every sample by name and labels), and running a real
Prometheus (Debian's `prometheus`, on loopback) that scrapes it with deploy/prometheus/rules.yml
loaded, asked through its HTTP API."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

PROMETHEUS_DIR = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(proxy: Any) -> Samples:
    text = httpx.get(proxy.metrics_url, timeout=5).text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def sample(values: Samples, name: str, **labels: str) -> float:
    return values.get((name, tuple(sorted(labels.items()))), 0.0)


def scrape_until(proxy: Any, done: Callable[[Samples], bool], timeout: float = 10.0) -> Samples:
    """Scrape until `done` holds or `timeout` passes; the last scrape either way. For counts the
    inspector adds after the log line a test waits for (a socket's last batch comes at its
    close)."""
    deadline = time.monotonic() + timeout
    values = scrape(proxy)
    while not done(values) and time.monotonic() < deadline:
        time.sleep(0.05)
        values = scrape(proxy)
    return values


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(what: str, check: Any, timeout: float, every: float = 0.1) -> Any:
    """check() until it returns something truthy; fail with `what` after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(every)


@dataclass
class Prometheus:
    url: str
    process: subprocess.Popen[bytes]
    log: Path
    client: httpx.Client = field(default_factory=lambda: httpx.Client(timeout=10))

    def api(self, path: str, **params: Any) -> Any:
        if self.process.poll() is not None:
            pytest.fail("prometheus exited:\n" + self.log.read_text(errors="replace")[-3000:])
        body = self.client.get(self.url + path, params=params).json()
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        params = {"query": expr} if at is None else {"query": expr, "time": f"{at:.3f}"}
        data = self.api("/api/v1/query", **params)
        assert data["resultType"] == "vector", (expr, data)
        return list(data["result"])

    def value(self, expr: str, at: float | None = None) -> float | None:
        result = self.query(expr, at)
        assert len(result) <= 1, (expr, result)
        return float(result[0]["value"][1]) if result else None


def start_prometheus(tmp: Path, target: str) -> Prometheus:
    binary = shutil.which("prometheus")
    assert binary, "prometheus not found: install Debian's `prometheus` package (./dev does)"
    # The shipped scrape config, with this run's target, a 1s cadence and the shipped rules.
    config = yaml.safe_load((PROMETHEUS_DIR / "prometheus.yml").read_text(encoding="utf-8"))
    config["global"] = {
        "scrape_interval": "1s",
        "scrape_timeout": "1s",
        "evaluation_interval": "1s",
    }
    config["rule_files"] = [str(PROMETHEUS_DIR / "rules.yml")]
    [job] = config["scrape_configs"]
    assert job["job_name"] == "tooltap"  # TooltapDown and the "Proxies up" panel select it
    job["static_configs"] = [{"targets": [target]}]
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    port = free_port()
    log = tmp / "prometheus.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={tmp / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    prometheus = Prometheus(f"http://127.0.0.1:{port}", process, log)

    def ready() -> bool:
        if process.poll() is not None:
            pytest.fail("prometheus exited:\n" + log.read_text(errors="replace")[-3000:])
        try:
            return prometheus.client.get(prometheus.url + "/-/ready").status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_until("Prometheus to be ready", ready, timeout=30)
    except BaseException:
        stop_prometheus(prometheus)
        raise
    return prometheus


def stop_prometheus(prometheus: Prometheus) -> None:
    prometheus.client.close()
    prometheus.process.terminate()  # SIGTERM to the pid this test started
    try:
        prometheus.process.wait(15)
    except subprocess.TimeoutExpired:
        prometheus.process.kill()
        prometheus.process.wait()
