"""Benchmark: inspection on real traffic, by size, as a ratio to json.loads of the same bodies.

Every 2xx exchange of the real-world corpus (every `exchanges*.jsonl` of the corpus folder)
that tooltap inspects, grouped by the size of its request and response together: small
(< 3 kB), medium (3-30 kB), large (> 30 kB). For each group, in one run and taking turns pass
by pass, five things read every exchange of the group once:

- json.loads: the standard library's parse of the request body and the response body (of
  each event's data for an SSE stream, of each line for NDJSON): the baseline;
- inspect: tooltap.core.inspect, with the caches the worker keeps warm (validators, tool
  definitions);
- Session.read: the worker's path (addon/inspection/session.py): inspect with the session's
  memory and the tool-definition pins, in one session that has read the group before (the
  steady state of a proxy whose applications send the same tools on every request);
- Session.read with times: the same, each exchange given the times the proxy records (the
  corpus keeps none; `timed`), so that the calls a later exchange answers are timed: what
  timing adds on real traffic, which the core cost target covers too;
- first sight: Session.read in a fresh session (every schema compiled, every definition read
  and pinned for the first time): informative, not a target.

Each figure is the fastest of `passes` passes over the group, the five taking turns (each
first in turn), with the garbage collector off, as timeit has it. A pass is timed in this
thread's CPU time (time.thread_time), not by the wall clock: on a shared machine the wall
clock counts the time the scheduler gave to other jobs (under a load of 16 on two cores it
read a json.loads pass at six times its CPU time), which a ratio cannot take out.
Then the worker's path is profiled by group (pyinstrument), written to profile-<group>.txt.

When this process runs tooltap as pure Python and the machine can compile (gcc, mypy), the same
groups are measured again in the same run with the modules setup.py lists compiled, as the
container image ships them (`compiled_ratios`): a copy of the tree built as `TOOLTAP_COMPILE=1`
builds it, read by a child process (`python -m bench.realworld --ratios SIZE`) under this
process's interpreter, whose build moves every ratio (bench/README.md). Not in smoke runs.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyinstrument import Profiler

from tooltap.addon.audit.inputs import RecordedExchange
from tooltap.addon.inspection.session import Session
from tooltap.core import Exchange, ValidatorCache, inspect

from . import compiled
from .core_cost import warm_caches
from .given_times import given_times
from .profile_worker import _walk
from .sizes import Size
from .targets import Noise

ROOT = Path(__file__).resolve().parent.parent
CORPUS_ENV = "TOOLTAP_BENCH_CORPUS"
# The corpus folder: TOOLTAP_BENCH_CORPUS, else the shared corpus beside the checkout (every
# recording, the newest included), else the part of it the tests carry.
CANDIDATES = (
    ROOT.parent / "shared" / "corpus" / "realworld",
    ROOT / "tests" / "corpus" / "realworld",
)
GROUPS = (("small", 0, 3_000), ("medium", 3_000, 30_000), ("large", 30_000, None))
PASSES: dict[Size, int] = {"full": 9, "quick": 5, "smoke": 1}
CLOCK = time.thread_time
PROFILED: dict[Size, float] = {"full": 3.0, "quick": 1.0, "smoke": 0.0}  # seconds per group
TARGET, TARGET_LARGE = 3.0, 1.5


def corpus_folder() -> Path:
    chosen = os.environ.get(CORPUS_ENV)
    if chosen:
        return Path(chosen)
    return next((p for p in CANDIDATES if p.is_dir()), CANDIDATES[-1])


@dataclass
class Case:
    exchange: Exchange
    application: str | None
    payloads: list[bytes]  # what json.loads reads: the request, then the response's JSON texts
    size: int


@dataclass
class Group:
    name: str
    cases: list[Case] = field(default_factory=list)

    @property
    def size(self) -> int:
        return sum(c.size for c in self.cases)


def _sse_data(body: bytes) -> list[bytes]:
    """Each SSE event's data (its data lines joined), [DONE] left out."""
    found = []
    for event in re.split(rb"\r\n\r\n|\n\n|\r\r", body):
        lines = [
            line[5:].removeprefix(b" ")
            for line in re.split(rb"\r\n|\n|\r", event)
            if line.startswith(b"data:")
        ]
        data = b"\n".join(lines).strip()
        if data and data != b"[DONE]":
            found.append(data)
    return found


def _streamed(exchange: Exchange) -> bool:
    return "event-stream" in exchange.response_headers.get("content-type", "")


def _payloads(exchange: Exchange) -> list[bytes] | None:
    """The JSON texts of an exchange, as a client would parse them; None when its bodies are
    not plain JSON texts (encoded, or framed otherwise), which this benchmark leaves out."""
    headers = {k.lower(): v for k, v in exchange.response_headers.items()}
    if headers.get("content-encoding") or any(
        k.lower() == "content-encoding" for k in exchange.request_headers
    ):
        return None
    kind = headers.get("content-type", "").lower()
    body = exchange.response_body
    request = [exchange.request_body] if exchange.request_body else []
    if "text/event-stream" in kind or (
        "json" not in kind and body.lstrip()[:6].startswith((b"data:", b"event:", b":", b"id:"))
    ):
        return request + _sse_data(body)
    if "ndjson" in kind:
        return request + [line for line in body.splitlines() if line.strip()]
    try:
        json.loads(body)
    except ValueError:
        return None
    return [*request, body]


def read_corpus(folder: Path) -> tuple[list[Group], dict[str, int]]:
    """The 2xx exchanges tooltap inspects, by size group; and how many were left out, why."""
    groups = [Group(name) for name, _, _ in GROUPS]
    left: dict[str, int] = {"not 2xx": 0, "not inspected": 0, "not plain JSON texts": 0}
    validators = ValidatorCache()
    for path in sorted(folder.glob("exchanges*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            record = RecordedExchange.model_validate_json(line)
            if record.status is None or not 200 <= record.status < 300:
                left["not 2xx"] += 1
                continue
            exchange = record.exchange()
            if inspect(exchange, {}, validators=validators).outcome != "inspected":
                left["not inspected"] += 1
                continue
            payloads = _payloads(exchange)
            if payloads is None:
                left["not plain JSON texts"] += 1
                continue
            size = len(exchange.request_body) + len(exchange.response_body)
            index = next(
                i for i, (_, low, high) in enumerate(GROUPS) if high is None or size < high
            )
            application = record.application or record.recording or str(path.name)
            groups[index].cases.append(Case(exchange, application, payloads, size))
    return groups, left


def timed(cases: list[Case]) -> list[Exchange]:
    """The group's exchanges with the times the proxy gives them (given_times)."""
    return given_times([case.exchange for case in cases])


def measure(group: Group, passes: int) -> dict[str, Any]:
    """Seconds per pass over the group, per measure: the fastest of `passes` passes, the five
    measures taking turns (each first in turn)."""
    caches = warm_caches()
    warm = Session()
    clocked = Session()  # reads the exchanges with times
    cases = group.cases
    with_times = timed(cases)

    def loads() -> None:
        for case in cases:
            for text in case.payloads:
                json.loads(text)

    def inspected() -> None:
        for case in cases:
            inspect(case.exchange, {}, **caches)

    def read() -> None:
        for case in cases:
            warm.read(case.exchange, case.application)

    def read_timed() -> None:
        for case, exchange in zip(cases, with_times, strict=True):
            clocked.read(exchange, case.application)

    def first_sight() -> None:
        for case, session in zip(cases, [Session() for _ in cases], strict=True):
            session.read(case.exchange, case.application)

    measures: dict[str, Callable[[], None]] = {
        "json_loads": loads,
        "inspect": inspected,
        "session_read": read,
        "session_read_timed": read_timed,
        "first_sight": first_sight,
    }
    inspected()  # warm: validators compiled, definitions read, the session's pins set
    read()
    answered = sum(  # calls timed in a pass (a warm one)
        len(verdict.tool_times)
        for case, exchange in zip(cases, with_times, strict=True)
        for _, verdict in clocked.read(exchange, case.application)
    )
    best = dict.fromkeys(measures, float("inf"))
    order = list(measures)
    gc.collect()
    gc.disable()
    try:
        for _ in range(passes):
            for name in order:
                started = CLOCK()
                measures[name]()
                best[name] = min(best[name], CLOCK() - started)
            order.append(order.pop(0))
    finally:
        gc.enable()
    base = best["json_loads"]
    count = max(1, len(cases))
    return {
        "exchanges": len(cases),
        "bytes": group.size,
        "streams": sum(_streamed(c.exchange) for c in cases),
        "tool_times": answered,
        "us_per_exchange": {k: v / count * 1e6 for k, v in best.items()},
        "ratio_to_json_loads": {k: v / base for k, v in best.items() if k != "json_loads"},
    }


def profile(group: Group, seconds: float, out_dir: Path) -> dict[str, Any]:
    """The worker's path (Session.read, warm) on one group, sampled; the top functions."""
    session = Session()
    for case in group.cases:
        session.read(case.exchange, case.application)
    profiler = Profiler(interval=0.0001)
    profiler.start()
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        for case in group.cases:
            session.read(case.exchange, case.application)
    profiler.stop()
    root = profiler.last_session.root_frame() if profiler.last_session else None
    if root is None:
        return {"top_own": [], "top_total": []}
    own: dict[str, float] = {}
    total: dict[str, float] = {}
    _walk(root, (), own, total)
    duration = root.time or 1.0
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"profile-{group.name}.txt").write_text(
        profiler.output_text(unicode=True, color=False)
    )
    return {
        "top_own": [
            {"function": n, "share": s / duration}
            for n, s in sorted(own.items(), key=lambda kv: -kv[1])[:25]
        ],
        "top_total": [
            {"function": n, "share": s / duration}
            for n, s in sorted(total.items(), key=lambda kv: -kv[1])[:40]
        ],
    }


def run(size: Size, out_dir: Path) -> dict[str, Any]:
    folder = corpus_folder()
    groups, left = read_corpus(folder)
    if size == "smoke":  # a few of each: proves the step runs
        for group in groups:
            group.cases = group.cases[:5]
    result: dict[str, Any] = {
        "corpus": str(folder),
        "files": sorted(p.name for p in folder.glob("exchanges*.jsonl")),
        "left_out": left,
        "passes": PASSES[size],
        "groups": {},
    }
    for group in groups:
        if not group.cases:
            continue
        if size != "smoke":
            Noise().wait_quiet(max_wait=10.0)
        row = measure(group, PASSES[size])
        result["groups"][group.name] = row
        ratios = row["ratio_to_json_loads"]
        print(
            f"  realworld {group.name:<7} {row['exchanges']:>5} exchanges"
            f"  inspect {ratios['inspect']:.2f}x  Session.read {ratios['session_read']:.2f}x"
            f" (with times {ratios['session_read_timed']:.2f}x, {row['tool_times']} calls timed)"
            f"  first sight {ratios['first_sight']:.2f}x  json.loads"
            f" {row['us_per_exchange']['json_loads']:.1f} us/exchange",
            flush=True,
        )
    result["compiled"] = compiled_ratios(size)
    if result["compiled"]["groups"]:
        for name, ratios in result["compiled"]["groups"].items():
            print(
                f"  realworld {name:<7} compiled: inspect {ratios['inspect']:.2f}x"
                f"  Session.read {ratios['session_read']:.2f}x"
                f" (with times {ratios['session_read_timed']:.2f}x)",
                flush=True,
            )
    else:
        print(f"  realworld compiled: not measured ({result['compiled']['why']})", flush=True)
    if PROFILED[size]:
        result["profile"] = {
            group.name: profile(group, PROFILED[size], out_dir) for group in groups if group.cases
        }
    return result


def compiled_ratios(size: Size) -> dict[str, Any]:
    """Each group's ratios with the modules setup.py lists compiled, as the image builds them:
    {"groups": {name: ratios}} measured in a child process, or {"groups": {}, "why": ...}."""
    why = None
    if size == "smoke":
        why = "smoke run"
    elif compiled.running():
        why = "this run's tooltap is compiled already"
    elif shutil.which("gcc") is None:
        why = "no C compiler (gcc)"
    elif importlib.util.find_spec("mypyc") is None:
        why = "no mypy in this venv"
    if why is not None:
        return {"groups": {}, "why": why}
    with tempfile.TemporaryDirectory(prefix="tooltap-bench-compiled-") as stage:
        tree = Path(stage) / "tooltap"
        compiled.copy_tree(compiled.ROOT, tree)
        paths = compiled.build(tree)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, [*paths, compiled.ROOT]))}
        ran = subprocess.run(
            [sys.executable, "-m", "bench.realworld", "--ratios", size],
            env=env, capture_output=True, text=True, timeout=1800, check=False,
        )  # fmt: skip
    if ran.returncode != 0:
        raise RuntimeError(f"the compiled measurement failed:\n{ran.stderr[-3000:]}")
    return {"groups": json.loads(ran.stdout.splitlines()[-1])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ratios", choices=list(PASSES), required=True,
                        help="print each group's ratios to json.loads as one JSON line")  # fmt: skip
    size = parser.parse_args().ratios
    if not compiled.running():
        raise SystemExit("tooltap here is not compiled: put a compiled tree first on PYTHONPATH")
    groups, _ = read_corpus(corpus_folder())
    print(
        json.dumps(
            {g.name: measure(g, PASSES[size])["ratio_to_json_loads"] for g in groups if g.cases}
        )
    )


if __name__ == "__main__":
    main()
