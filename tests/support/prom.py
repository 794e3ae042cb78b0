"""Reading a running proxy's /metrics: every sample by name and labels."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

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
