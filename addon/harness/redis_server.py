"""A real redis-server (Debian's package) on loopback, for the tests and the bench: started,
killed and restarted on one port.

No persistence (`--save "" --appendonly no`): a restart starts empty, as a
Redis that lost its memory does. Ready means it printed that it accepts
connections; stopped means its process, found by the PID this started, exited.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import threading
from typing import IO, Self

READY = "Ready to accept connections"
START_TIMEOUT = 15.0


class RedisServer:
    def __init__(self, port: int) -> None:
        self.port = port
        self.process: subprocess.Popen[str] | None = None
        self.output: list[str] = []
        self._ready = threading.Event()

    @staticmethod
    def missing() -> bool:
        return shutil.which("redis-server") is None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> Self:
        """Start it on its port (again, after kill), and wait until it accepts connections."""
        self._ready.clear()
        self.process = subprocess.Popen(  # noqa: S603 - a fixed argv, no shell
            [  # noqa: S607 - Debian's redis-server, found on PATH as the tests expect
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--logfile",
                "",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        threading.Thread(target=self._read, args=(self.process.stdout,), daemon=True).start()
        if not self._ready.wait(START_TIMEOUT):
            self.stop()
            raise RuntimeError("redis-server did not start:\n" + "\n".join(self.output[-20:]))
        return self

    def _read(self, stream: IO[str] | None) -> None:
        for line in stream or ():
            self.output.append(line.rstrip("\n"))
            if READY in line:
                self._ready.set()

    def kill(self) -> None:
        """SIGKILL: gone at once, as a crashed Redis is; its memory is lost."""
        self._end(signal.SIGKILL)

    def pause(self) -> None:
        """SIGSTOP: connections stay open and nothing answers, as on a stalled Redis."""
        if self.process is not None:
            self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        self._end(signal.SIGTERM)

    def _end(self, how: signal.Signals) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)  # a paused server takes its SIGTERM too
            self.process.send_signal(how)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.process = None
