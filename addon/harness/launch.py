"""Start `tooltap run` (`tooltap web`, or plain mitmdump) as a child process on loopback, and stop it.

Used by the demo, the benchmarks and the tests: each reads the real ports
from the process's own "listening at" lines, collects its JSON log lines, and
stops it with SIGINT so that mitmproxy's `done` hooks run.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import IO, Any

LISTENING = re.compile(r"listening at (?:.*?):(\d+)")
METRICS = re.compile(r"tooltap metrics at (http://\S+/metrics)")
HEALTH = re.compile(r"tooltap health at (http://\S+/) ")
WEB = re.compile(r"Web server listening at (http://\S+)")


def free_port() -> int:
    """A loopback port free now (for servers that print the port they were given, not the real one)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def free_ports(count: int, tries: int = 50) -> int:
    """The first of `count` consecutive loopback ports free now (`tooltap run` with several
    --upstream listens on a port and the ones after it)."""
    for _ in range(tries):
        first = free_port()
        if first + count > 65535:
            continue
        with contextlib.ExitStack() as held:
            try:
                for port in range(first, first + count):
                    probe = held.enter_context(socket.socket())
                    probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        return first
    raise RuntimeError(f"no {count} consecutive free loopback ports")


class Proxy:
    """A proxy child process. `ports` and `metrics_url` are known once start() returns."""

    def __init__(
        self,
        argv: list[str],
        modes: int,
        env: dict[str, str] | None = None,
        *,
        has_metrics: bool = True,
        has_web: bool = False,
        has_health: bool = False,
    ) -> None:
        self.argv = argv
        self.modes = modes
        self.has_metrics = has_metrics
        self.has_web = has_web
        self.has_health = has_health
        self.health_url: str | None = None  # the proxy's own /livez and /readyz, under it
        self.web_url: str | None = None  # with its login token
        self.env = {**os.environ, **(env or {})}
        self.ports: list[int] = []
        self.metrics_url: str | None = None
        self.events: list[dict[str, Any]] = []
        self.text: list[str] = []
        self.confdir = tempfile.mkdtemp(prefix="tooltap-conf-")
        self.process: subprocess.Popen[str] | None = None
        self._ready = threading.Event()
        self._lock = threading.Lock()

    @classmethod
    def tooltap(
        cls,
        upstreams: list[str],
        *options: str,
        extra: tuple[str, ...] = (),
        web: bool = False,
        tooltap: tuple[str, ...] = (sys.executable, "-m", "tooltap.addon.commands.cli"),
        listen: str = "127.0.0.1:0",
        **kw: Any,
    ) -> Proxy:
        """`tooltap run` on a free loopback port: reverse mode to one upstream, or none with
        --regular. web: `tooltap web` instead, its UI on another free port, no browser opened.
        tooltap: the command to start (another install's `tooltap`, a container's). listen:
        where, with a port for several upstreams (each takes the next port)."""
        command = ["web", "--web", f"127.0.0.1:{free_port()}"] if web else ["run"]
        argv = [
            *tooltap,
            *command,
            "--listen",
            listen,
            "--metrics",
            "127.0.0.1:0",
            "--health",
            "127.0.0.1:0",
        ]
        for upstream in upstreams:
            argv += ["--upstream", upstream]
        if web:
            extra = ("--set", "web_open_browser=false", *extra)
        modes = max(1, len(upstreams))
        kw.setdefault("has_health", True)
        return cls([*argv, *options, "--", *extra], modes=modes, has_web=web, **kw)

    @classmethod
    def mitmdump(cls, upstream: str, *extra: str, has_metrics: bool = False, **kw: Any) -> Proxy:
        """mitmdump in reverse mode: plain for side-by-side measurements, or with a script (-s)."""
        mitmdump = shutil.which("mitmdump", path=os.path.dirname(sys.executable)) or "mitmdump"
        argv = [
            mitmdump,
            "--listen-host",
            "127.0.0.1",
            "-p",
            "0",
            "--mode",
            f"reverse:{upstream}",
            "--set",
            "flow_detail=0",
            *extra,
        ]
        return cls(argv, modes=1, has_metrics=has_metrics, **kw)

    def start(self, timeout: float = 30.0) -> Proxy:
        argv = [*self.argv, "--set", f"confdir={self.confdir}"]
        self.process = subprocess.Popen(  # noqa: S603 - our own argv, no shell
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.env, bufsize=1
        )
        for stream in (self.process.stdout, self.process.stderr):
            threading.Thread(target=self._read, args=(stream,), daemon=True).start()
        if not self._ready.wait(timeout):
            self.stop()
            raise RuntimeError("proxy did not start:\n" + "\n".join(self.text[-30:]))
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.ports[0]}"

    def _read(self, stream: IO[str] | None) -> None:
        for raw in stream or ():
            line = raw.rstrip("\n")
            with self._lock:
                if line.startswith("{"):
                    try:
                        self.events.append(json.loads(line))
                        continue
                    except ValueError:
                        pass
                self.text.append(line)
                if match := LISTENING.search(line):
                    self.ports.append(int(match.group(1)))
                if match := METRICS.search(line):
                    self.metrics_url = match.group(1)
                if match := WEB.search(line):
                    self.web_url = match.group(1)
                if match := HEALTH.search(line):
                    self.health_url = match.group(1)
                if (
                    len(self.ports) >= self.modes
                    and (self.metrics_url or not self.has_metrics)
                    and (self.web_url or not self.has_web)
                    and (self.health_url or not self.has_health)
                ):
                    self._ready.set()

    def wait_for(
        self,
        event: str = "turn",
        count: int = 1,
        where: Callable[[dict[str, Any]], bool] | None = None,
        timeout: float = 15.0,
        since: int = 0,
    ) -> list[dict[str, Any]]:
        """The log events named `event` (and matching `where`), once `count` have arrived or time
        is up; since: only those after the first `since` events (a `mark()` taken before)."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                found = [
                    e
                    for e in self.events[since:]
                    if e.get("event") == event and (where is None or where(e))
                ]
            if len(found) >= count or time.monotonic() > deadline:
                return found
            time.sleep(0.02)

    def mark(self) -> int:
        """A point in the log: wait_for(..., since=mark) sees only what came after it."""
        with self._lock:
            return len(self.events)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = 15.0) -> int | None:
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)
        shutil.rmtree(self.confdir, ignore_errors=True)
        return self.process.returncode

    def __enter__(self) -> Proxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
