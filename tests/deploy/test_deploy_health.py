"""Health that tells the truth: a real `tooltap run` whose inspector is killed three times while
traffic flows. The proxy's own /livez and /readyz stay 200 all along (and say the inspector is
restarting while it is), every exchange reaches the client byte for byte, and a real Prometheus
scraping the proxy with deploy/prometheus/rules.yml loaded fires TooltapInspectorRestarts.

The proxy, its upstream and Prometheus are this test's own, on loopback; the inspector it kills
is its proxy's child, found by PID. Every loop is bounded in count and time.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import psutil
import pytest
from support.captures import WIRE
from support.flows import CHAT_REQUEST
from support.prom import Prometheus, start_prometheus, stop_prometheus, wait_until

from tooltap.addon.harness.launch import Proxy
from tooltap.addon.harness.replay import ReplayServer, Reply

pytestmark = pytest.mark.timeout(400)

KILLS = 3
STARTUP = 90  # seconds a proxy or a restarted inspector may take to be up, at most
ANSWER = (WIRE / "chat_nonstream_parallel_tool_calls.json").read_bytes()
RESTARTS_FIRE = "increase(tooltap_inspector_restarts_total[15m]) > 0"  # the rule's expression


@dataclass
class Observed:
    probes: list[tuple[float, str, int, dict[str, Any] | None]] = field(default_factory=list)
    exchanges: list[tuple[float, bool]] = field(default_factory=list)  # (when, byte-exact 200)
    outages: list[tuple[float, float]] = field(default_factory=list)  # inspector killed .. back
    restarts_at_end: float | None = None
    rule_samples: list[dict[str, Any]] = field(default_factory=list)
    alerts: list[dict[str, Any]] = field(default_factory=list)


def inspector(proxy: Proxy) -> psutil.Process | None:
    """The proxy's inspector child, once it is up (None between two)."""
    assert proxy.process is not None
    for child in psutil.Process(proxy.process.pid).children():
        try:
            if "tooltap.addon.inspection" in " ".join(child.cmdline()) and child.status() != (
                psutil.STATUS_ZOMBIE
            ):
                return child
        except psutil.NoSuchProcess:
            continue
    return None


def probe(url: str, observed: Observed, stop: threading.Event) -> None:
    # The manifests' liveness timeout: a shared machine can be slow, a dead loop never answers.
    with httpx.Client(timeout=5) as client:
        for _ in range(3000):  # bounded: 0.05 s apart, at most a few minutes
            if stop.is_set():
                return
            for path in ("livez", "readyz"):
                try:
                    answer = client.get(url + path)
                    observed.probes.append(
                        (time.monotonic(), path, answer.status_code, answer.json())
                    )
                except httpx.HTTPError:
                    observed.probes.append((time.monotonic(), path, 0, None))
            time.sleep(0.05)


def drive(url: str, observed: Observed, stop: threading.Event) -> None:
    with httpx.Client(timeout=10) as client:
        for _ in range(100_000):  # bounded in count; the test stops it much sooner
            if stop.is_set():
                return
            try:
                answer = client.post(url + "/v1/chat/completions", json=CHAT_REQUEST)
                ok = answer.status_code == 200 and answer.content == ANSWER
            except httpx.HTTPError:
                ok = False
            observed.exchanges.append((time.monotonic(), ok))


@pytest.fixture(scope="module")
def observed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Observed]:
    found = Observed()
    stop = threading.Event()
    with contextlib.ExitStack() as stack:
        upstream = stack.enter_context(ReplayServer(lambda _seen: Reply(chunks=[ANSWER])))
        proxy = Proxy.tooltap([upstream.url], "--log-format", "json")
        stack.callback(proxy.stop)
        # Bounds, not timings: on a machine shared with other suites an inspector can take
        # tens of seconds to start.
        proxy.start(timeout=STARTUP)
        assert proxy.metrics_url and proxy.health_url
        target = proxy.metrics_url.removeprefix("http://").removesuffix("/metrics")
        prometheus: Prometheus = start_prometheus(tmp_path_factory.mktemp("prometheus"), target)
        threads = [
            threading.Thread(target=probe, args=(proxy.health_url, found, stop), daemon=True),
            threading.Thread(target=drive, args=(proxy.url, found, stop), daemon=True),
        ]
        try:
            wait_until("the first scrape", lambda: prometheus.value('up{job="tooltap"}') == 1, 15)
            for thread in threads:
                thread.start()
            time.sleep(1)
            for kill in range(1, KILLS + 1):
                child = wait_until("an inspector", lambda: inspector(proxy), STARTUP)
                killed_at = time.monotonic()
                os.kill(child.pid, signal.SIGKILL)

                def back(old: int = child.pid) -> bool:
                    new = inspector(proxy)
                    if new is None or new.pid == old:
                        return False
                    try:
                        return httpx.get(proxy.metrics_url or "", timeout=1).status_code == 200
                    except httpx.HTTPError:
                        return False

                wait_until("the inspector to come back", back, STARTUP)
                found.outages.append((killed_at, time.monotonic()))

                def scraped(count: int = kill) -> bool:
                    # Each restart is scraped before the next kill, so Prometheus sees them all.
                    seen = prometheus.value(
                        'max_over_time(tooltap_inspector_restarts_total{job="tooltap"}[5m])'
                    )
                    return seen == count

                wait_until(f"Prometheus to scrape restart {kill}", scraped, 30)

            def firing() -> list[dict[str, Any]]:
                alerts = prometheus.api("/api/v1/alerts")["alerts"]
                return [
                    a
                    for a in alerts
                    if a["labels"]["alertname"] == "TooltapInspectorRestarts"
                    and a["state"] == "firing"
                ]

            found.alerts = wait_until("TooltapInspectorRestarts to fire", firing, 30)
            found.rule_samples = prometheus.query(RESTARTS_FIRE)
            found.restarts_at_end = prometheus.value(
                'max_over_time(tooltap_inspector_restarts_total{job="tooltap"}[5m])'
            )
        finally:
            stop.set()
            for thread in threads:
                if thread.is_alive():
                    thread.join(15)
            stop_prometheus(prometheus)
    yield found


def test_the_health_endpoint_stays_green_while_the_inspector_is_killed(observed):
    assert len(observed.outages) == KILLS
    first, last = observed.outages[0][0], observed.outages[-1][1]
    during = [p for p in observed.probes if first <= p[0] <= last]
    assert len(during) > 20
    assert [p for p in observed.probes if p[2] != 200] == []
    # It tells the truth about the inspector without failing on it.
    states = [p[3]["inspector"]["state"] for p in during if p[3] is not None]
    assert "restarting" in states and "up" in states
    ready = [p[3] for p in observed.probes if p[1] == "readyz" and p[3] is not None]
    assert {body["status"] for body in ready} == {"ready"}


def test_traffic_flows_byte_for_byte_while_the_inspector_is_down(observed):
    assert observed.exchanges and all(ok for _, ok in observed.exchanges)
    for killed, back in observed.outages:
        served = [when for when, ok in observed.exchanges if killed < when < back and ok]
        assert served, f"no exchange completed between {killed:.1f} and {back:.1f}"


def test_prometheus_counts_every_restart_and_fires_the_inspector_alert(observed):
    assert observed.restarts_at_end == KILLS
    assert len(observed.rule_samples) == 1
    assert float(observed.rule_samples[0]["value"][1]) > 0
    (alert,) = observed.alerts
    assert alert["labels"]["severity"] == "warning"
    assert "was restarted in the last 15 minutes" in alert["annotations"]["summary"]


def test_the_health_bodies_are_json_with_the_listeners_and_their_upstream(observed):
    body = next(p[3] for p in observed.probes if p[1] == "readyz" and p[3] is not None)
    (listener,) = body["listeners"]
    assert listener["running"] is True and listener["upstream"].startswith("http://127.0.0.1:")
    assert json.dumps(body)  # plain JSON, nothing else
