"""The things under test, started side by side: upstream, plain mitmdump, tooltap run.

All are child processes on loopback, started with tooltap.addon.harness.launch.Proxy,
stopped by their own PID (SIGINT, then kill) when the context exits.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO

import psutil

from tooltap.addon.harness.launch import Proxy

from .sizes import Size

ROOT = Path(__file__).resolve().parent.parent


class BenchProxy(Proxy):
    """A Proxy that counts tooltap's `turn` log lines instead of parsing every line.

    launch.Proxy json-decodes and keeps each stdout line; at 1k flows/s that is
    CPU in the benchmark process (the client's) and memory that only grows.
    """

    turns = 0
    glued = 0  # JSON log lines that came out glued to another line (shared stdout)

    def _read(self, stream: IO[str] | None) -> None:
        super()._read(self._skip_events(stream))

    def _skip_events(self, stream: IO[str] | None) -> Iterator[str]:
        for line in stream or ():  # only this reader thread writes the counters
            if '"event":"turn"' in line:
                self.turns += 1
            if line.startswith("{"):
                continue
            if '{"api":' in line:
                self.glued += 1
            yield line

    @property
    def reloads(self) -> int:
        """Times the addon was loaded again (mitmproxy live-reloads an edited script)."""
        with self._lock:
            return max(0, sum("tooltap metrics at" in line for line in self.text) - 1)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def wait_turns(self, expected: int, timeout: float = 20.0) -> int:
        """Wait until `expected` turns were logged, or nothing moved for 1 s (drops)."""
        deadline = time.monotonic() + timeout
        last, last_change = self.turns, time.monotonic()
        while self.turns < expected and time.monotonic() < deadline:
            time.sleep(0.02)
            if self.turns != last:
                last, last_change = self.turns, time.monotonic()
            elif time.monotonic() - last_change > 1.0:
                break
        return self.turns

    def metric(self, name: str, **labels: str) -> float:
        """Sum of one metric's samples matching `labels`, scraped from /metrics."""
        assert self.metrics_url is not None
        text = urllib.request.urlopen(self.metrics_url, timeout=5).read().decode()
        total = 0.0
        for line in text.splitlines():
            if not line.startswith(name + "{") and not line.startswith(name + " "):
                continue
            if all(f'{k}="{v}"' in line for k, v in labels.items()):
                total += float(line.rsplit(" ", 1)[1])
        return total


def cpu_seconds(process: psutil.Process) -> float:
    """CPU seconds (user + system, all threads) a process has used so far."""
    times = process.cpu_times()
    return times.user + times.system


class Target:
    """One column of the results: a name, the URL the client uses, and the proxy (if any)."""

    def __init__(self, name: str, url: str, proxy: BenchProxy | None = None) -> None:
        self.name = name
        self.url = url
        self.proxy = proxy
        self.process = psutil.Process(proxy.pid) if proxy else None

    def cpu(self) -> float:
        """CPU seconds (user + system, all threads) the proxy process has used so far."""
        return 0.0 if self.process is None else cpu_seconds(self.process)

    def children_cpu(self) -> float:
        """CPU seconds of the proxy's child processes (tooltap's inspector, if it runs in one)."""
        return self._children_sum(cpu_seconds)

    def rss(self) -> int:
        return self.process.memory_info().rss if self.process else 0

    def children_rss(self) -> int:
        """RSS of the proxy's child processes (tooltap's inspector, if it runs in one)."""
        return int(self._children_sum(lambda child: child.memory_info().rss))

    def _children_sum(self, measure: Callable[[psutil.Process], float]) -> float:
        total = 0.0
        for child in self.process.children(recursive=True) if self.process else ():
            with contextlib.suppress(psutil.Error):  # a child may end while we look
                total += measure(child)
        return total


def has_inspector_option() -> bool:
    """Whether this tooltap has `tooltap_inspector` (process or thread); older ones ran a thread."""
    import importlib.util

    return importlib.util.find_spec("tooltap.addon.inspection") is not None


@contextlib.contextmanager
def helper(*module: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`python -m <module...>` in its own process, until its stdin closes; yields the process
    and the first line it printed (it says there that it is ready)."""
    process = subprocess.Popen(
        [sys.executable, "-m", *module],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        yield process, process.stdout.readline()
    finally:
        assert process.stdin is not None
        process.stdin.close()  # the helper exits when its stdin closes
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def upstream(replay: bool = False) -> Iterator[tuple[str, int]]:
    """Start bench.upstream in its own process; yields (url, pid)."""
    with helper("bench.upstream", *(["--replay"] if replay else [])) as (process, line):
        if not line.startswith("port "):
            raise RuntimeError(f"upstream did not start: {line!r}")
        yield f"http://127.0.0.1:{int(line.split()[1])}", process.pid


def mitmdump(upstream_url: str, *extra: str) -> BenchProxy:
    proxy = BenchProxy.mitmdump(upstream_url, *extra)
    assert isinstance(proxy, BenchProxy)
    return proxy


def tooltap(upstream_url: str, *extra: str) -> BenchProxy:
    """`tooltap run` in reverse mode, JSON log; `extra` goes to mitmdump."""
    proxy = BenchProxy.tooltap([upstream_url], "--log-format", "json", extra=extra)
    assert isinstance(proxy, BenchProxy)
    return proxy


def idle_tooltap(upstream_url: str) -> BenchProxy:
    """`tooltap run` as `tooltap` starts it, its flow hooks doing nothing (bench/idle_run.py)."""
    launcher = (sys.executable, str(ROOT / "bench" / "idle_run.py"))
    proxy = BenchProxy.tooltap([upstream_url], "--log-format", "json", tooltap=launcher)
    assert isinstance(proxy, BenchProxy)
    return proxy


def variant(upstream_url: str, name: str) -> BenchProxy:
    """mitmdump -s bench/variant_addon.py: an addon variant from bench/variants.py."""
    options = ["-s", str(ROOT / "bench" / "variant_addon.py")]
    if name not in ("empty-script", "empty-hooks", "stream-only"):  # tooltap's own options
        options += ["--set", "tooltap_metrics_port=0", "--set", "tooltap_log_format=json"]
    proxy = BenchProxy.mitmdump(upstream_url, *options, env={"TOOLTAP_BENCH_VARIANT": name})
    assert isinstance(proxy, BenchProxy)
    return proxy


@contextlib.contextmanager
def started(*proxies: BenchProxy) -> Iterator[None]:
    """Start every proxy; stop each one (by its PID) whatever happens.

    All at once: nothing is measured while they start or stop, and one after another those
    waits would be most of a short run.
    """
    with ThreadPoolExecutor(max(1, len(proxies))) as pool:
        try:
            for starting in [pool.submit(proxy.start) for proxy in proxies]:
                starting.result()
            yield
        finally:
            list(pool.map(lambda proxy: proxy.stop(), proxies))


def _busy() -> float:
    """Seconds of CPU the whole machine has been busy (all cores)."""
    t = psutil.cpu_times()
    return (
        t.user
        + t.nice
        + t.system
        + getattr(t, "irq", 0)
        + getattr(t, "softirq", 0)
        + getattr(t, "steal", 0)
    )


def noise(size: Size) -> Noise | None:
    """The watch on other jobs' CPU; none for a smoke run, which waits for no quiet machine."""
    return None if size == "smoke" else Noise()


class Noise:
    """CPU used by processes that are not ours (other jobs on a shared machine), in cores.

    Ours are this process and all its children (upstream, proxies, their
    workers). Benchmarks wait for a quiet machine before each batch and record
    the noise during it, so a batch disturbed by someone else's work (a test
    suite on the same two cores, say) can be seen and left out.
    """

    NOISY = 0.25  # cores used by others during a batch that make it unreliable

    def _ours(self) -> float:
        me = psutil.Process(os.getpid())
        total = 0.0
        for p in (me, *me.children(recursive=True)):
            with contextlib.suppress(psutil.Error):
                t = p.cpu_times()
                total += t.user + t.system + t.children_user + t.children_system
        return total

    def start(self) -> tuple[float, float, float]:
        return time.monotonic(), _busy(), self._ours()

    def since(self, mark: tuple[float, float, float]) -> float:
        wall, busy, ours = mark
        elapsed = time.monotonic() - wall
        return max(0.0, (_busy() - busy) - (self._ours() - ours)) / elapsed if elapsed else 0.0

    def wait_quiet(self, limit: float = 0.15, max_wait: float = 30.0) -> float:
        """Wait (bounded) until others use under `limit` cores; returns the last reading."""
        deadline = time.monotonic() + max_wait
        while True:
            mark = self.start()
            time.sleep(0.2)
            others = self.since(mark)
            if others < limit or time.monotonic() > deadline:
                return others
