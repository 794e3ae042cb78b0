"""Shared fixtures: the addon in mitmproxy's test context, a fresh Metrics, a free port."""

from __future__ import annotations

import io
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mitmproxy import http
from mitmproxy.test import taddons
from support.flows import lines

from tooltap.addon.harness.redis_server import RedisServer
from tooltap.addon.proxy.addon import Tooltap
from tooltap.addon.sinks.metrics import Metrics

pytest_plugins = ("pytester",)  # the pytest plugin is tested in pytest subprocesses

# Modules that take minutes on one worker (a build, a long run), longest first. ./dev test hands
# modules to its two workers in collection order (--no-loadscope-reorder: xdist would put the
# modules with the most tests first, and these, which have few, last), so these start first and
# the short modules fill in beside them instead of one of these running alone at the end.
LONG_FIRST = (
    "deploy/test_deploy_image.py",
    "system/test_compiled_core.py",
    "system/test_bench_smoke.py",
    "system/test_reliability.py",
    "system/test_mcp_ecosystem.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    gone = [name for name in LONG_FIRST if not (Path(__file__).parent / name).exists()]
    if gone:  # a module moved: say so, or the order would quietly stop working
        raise pytest.UsageError(f"tests/conftest.py LONG_FIRST names modules that are gone: {gone}")

    def rank(item: pytest.Item) -> int:
        path = item.path.as_posix()
        return next(
            (i for i, long in enumerate(LONG_FIRST) if path.endswith(long)), len(LONG_FIRST)
        )

    items.sort(key=rank)  # stable: every module keeps its own order, and the rest theirs


@dataclass
class Harness:
    """The addon (inspecting in a thread) inside mitmproxy's test context, and what it wrote."""

    addon: Tooltap
    tctx: Any
    stream: io.StringIO  # the log
    faults: set[str]  # places ("hook", "tap", "worker") where the fault seam raises

    async def cycle(self, flow: http.HTTPFlow) -> None:
        await self.tctx.cycle(self.addon, flow)

    def events(self) -> list[dict[str, Any]]:
        return lines(self.stream)

    def value(self, name: str, **labels: str) -> float | None:
        assert self.addon.inspection is not None and self.addon.inspection.metrics is not None
        return self.addon.inspection.metrics.registry.get_sample_value(name, labels)


@pytest.fixture
def harness() -> Iterator[Harness]:
    stream, faults = io.StringIO(), set[str]()

    def fault(where: str) -> None:
        if where in faults:
            raise RuntimeError(f"injected fault: {where}")

    addon = Tooltap(log_stream=stream, fault=fault)
    with taddons.context(addon) as tctx:
        tctx.configure(
            addon, tooltap_metrics_port=0, tooltap_log_format="json", tooltap_inspector="thread"
        )
        yield Harness(addon, tctx, stream, faults)
        addon.done()


@pytest.fixture
def metrics() -> Metrics:
    return Metrics()


@pytest.fixture
def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def redis_server(free_port: int) -> Iterator[RedisServer]:
    """A real redis-server on a free loopback port, no persistence, stopped at teardown."""
    if RedisServer.missing():
        pytest.skip("redis-server is not installed (./dev test installs Debian's redis-server)")
    server = RedisServer(free_port).start()
    yield server
    server.stop()
