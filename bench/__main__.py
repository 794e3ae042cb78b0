"""Run the benchmarks: `python -m bench [--quick | --smoke] [--only json,throughput,stream,memory,core,realworld,profile,websocket,live,web,traces,state,definitions,timing,stress,why]`.

Results go to bench/out/<name>.json (bench/out/quick/ for --quick,
bench/out/smoke/ for --smoke, or --out); the report step then writes
results.md and the plot latency.png there, and for full runs (or with
--readme) the plot bench/latency.png and the results in bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

from . import (
    core_cost,
    definitions,
    json_load,
    live,
    memory,
    profile_worker,
    realworld,
    report,
    state,
    streaming,
    stress,
    throughput,
    timing,
    traces,
    web,
    websocket,
    why,
)
from .sizes import Size

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
SNAPSHOT_ENV = "TOOLTAP_BENCH_SNAPSHOT"
ALL = (
    "json",
    "throughput",
    "stream",
    "memory",
    "core",
    "realworld",
    "profile",
    "websocket",
    "live",
    "web",
    "traces",
    "state",
    "definitions",
    "timing",
    "stress",
    "why",
)
QUICK = ALL[:14]  # `stress` and `why` (the cause analysis) run in full mode or when asked for


def _git(*args: str) -> str:
    try:
        return subprocess.run(
            ["git", *args], cwd=HERE.parent, capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine() -> dict[str, Any]:
    import mitmproxy.version
    import psutil

    import tooltap.core

    model = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    snapshot = os.environ.get(SNAPSHOT_ENV)
    return {
        # Measured code: a pinned snapshot (--commit), or the editable install, where
        # uncommitted edits in core/ and addon/ count too.
        "code": f"snapshot of {snapshot}" if snapshot else "working tree (editable install)",
        "commit": snapshot or _git("rev-parse", "--short", "HEAD"),
        "code_path": str(Path(tooltap.core.__file__).parent.parent),
        "uncommitted_in_core_addon": 0
        if snapshot
        else len(_git("status", "--porcelain", "core", "addon").splitlines()),
        "cpu": model,
        "cores": psutil.cpu_count(logical=True),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
        "mitmproxy": mitmproxy.version.VERSION,
    }


def pin(commit: str, argv: list[str]) -> None:
    """Re-run this command against core/ and addon/ as of `commit`, copied out of git.

    The package is installed editable, so edits made while a run is going on
    would be measured half-way (and mitmproxy live-reloads a changed addon
    script, which resets its metrics). A snapshot earlier on PYTHONPATH wins
    over the editable install, in this process and in every proxy it starts.
    """
    rev = _git("rev-parse", "--short", commit)
    if not rev:
        raise SystemExit(f"bench: unknown commit {commit!r}")
    root = OUT / f"code-{rev}"
    shutil.rmtree(root, ignore_errors=True)
    for part in ("core", "addon"):
        target = root / "tooltap" / part
        target.mkdir(parents=True)
        archive = subprocess.run(
            ["git", "archive", rev, part], cwd=HERE.parent, capture_output=True, check=True
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            for member in tar.getmembers():
                if member.isfile():
                    member.name = member.name.split("/", 1)[1]
                    tar.extract(member, target, filter="data")
    env = {**os.environ, SNAPSHOT_ENV: rev}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    print(f"bench: measuring {rev} from {root}", flush=True)
    os.execve(sys.executable, [sys.executable, "-m", "bench", *argv], env)


def _without_commit(argv: list[str]) -> list[str]:
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--commit":
            skip = True
        elif not arg.startswith("--commit="):
            out.append(arg)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    sizes = parser.add_mutually_exclusive_group()
    sizes.add_argument("--quick", action="store_true", help="small counts: a few minutes")
    sizes.add_argument(
        "--smoke",
        action="store_true",
        help="each step once at a tiny size, waiting for no quiet machine (under a minute):"
        " proves the benchmarks still run; the figures mean nothing",
    )
    parser.add_argument(
        "--only",
        help=f"comma list of {', '.join(ALL)} (default: all; quick: not stress or why)",
    )
    parser.add_argument(
        "--out", type=Path, help="results here (default: bench/out, or its quick/ or smoke/)"
    )
    parser.add_argument("--readme", action="store_true", help="update README.md even if quick")
    parser.add_argument(
        "--report", action="store_true", help="only rewrite the report from bench/out/*.json"
    )
    parser.add_argument(
        "--commit",
        help="measure core/ and addon/ as of this commit (e.g. HEAD), not the working tree",
    )
    args = parser.parse_args()
    if args.readme and args.smoke:
        parser.error("--readme publishes the figures, and a smoke run's mean nothing")
    if args.report:
        report.write(OUT, HERE, readme=True)
        print((OUT / "results.md").read_text())
        return 0
    if args.commit and not os.environ.get(SNAPSHOT_ENV):
        pin(args.commit, _without_commit(sys.argv[1:]))
    size: Size = "smoke" if args.smoke else "quick" if args.quick else "full"
    only = args.only or ",".join(QUICK if size == "quick" else ALL)
    wanted = [name for name in only.split(",") if name]
    unknown = set(wanted) - set(ALL)
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
    # Quick and smoke runs keep to their own folders, so they never replace full results.
    out = args.out or (OUT if size == "full" else OUT / size)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"mode": size, "machine": machine(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    print(f"bench ({size}): {meta['machine']}", flush=True)

    steps = {
        "json": lambda: asyncio.run(json_load.run(size)),
        "throughput": lambda: asyncio.run(throughput.run(size)),
        "stream": lambda: asyncio.run(streaming.run(size)),
        "memory": lambda: asyncio.run(memory.run(size)),
        "core": lambda: core_cost.run(size),
        "realworld": lambda: realworld.run(size, out),
        "profile": lambda: profile_worker.run(size, out),
        "websocket": lambda: asyncio.run(websocket.run(size)),
        "live": lambda: live.run(size),
        "web": lambda: asyncio.run(web.run(size)),
        "traces": lambda: traces.run(size),
        "state": lambda: state.run(size),
        "definitions": lambda: definitions.run(size),
        "timing": lambda: timing.run(size),
        "stress": lambda: asyncio.run(stress.run(size)),
        "why": lambda: asyncio.run(why.run(size)),
    }
    for name in wanted:
        if name == "why" and not why.applicable():
            print(f"== why: skipped: {why.SKIPPED}", flush=True)
            continue
        started = time.monotonic()
        print(f"== {name}", flush=True)
        result = steps[name]()
        result["meta"] = {**meta, "seconds": round(time.monotonic() - started, 1)}
        (out / f"{name}.json").write_text(json.dumps(result, indent=1))
        print(f"== {name} done in {time.monotonic() - started:.0f} s", flush=True)

    report.write(out, HERE, readme=args.readme or size == "full")
    print((out / "results.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
