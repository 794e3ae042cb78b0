"""Run the benchmarks: `python -m bench [--quick | --smoke] [--only json,throughput,stream,memory,core,realworld,profile,websocket,live,web,traces,state,definitions,timing,stress,why,neighbour,apart]`.

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
    apart,
    compiled,
    core_cost,
    definitions,
    json_load,
    live,
    memory,
    neighbour,
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
    "neighbour",
    "apart",
)
# `stress`, `why`, `neighbour` and `apart` (the causes) run in full mode or when asked for
QUICK = ALL[:14]


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
    pinned = snapshot.removesuffix("-compiled") if snapshot else "working-tree"
    compiled_core = compiled.running()
    code = f"snapshot of {snapshot}" if snapshot else "working tree (editable install)"
    return {
        # Measured code: a pinned snapshot (--commit, --compiled), or the editable install,
        # where uncommitted edits in core/ and addon/ count too.
        "code": code + (", core's pure modules compiled" if compiled_core else ""),
        "commit": _git("rev-parse", "--short", "HEAD") if pinned == "working-tree" else pinned,
        "core_compiled": compiled_core,
        "code_path": str(Path(tooltap.core.__file__).parent.parent),
        "uncommitted_in_core_addon": 0
        if pinned != "working-tree"
        else len(_git("status", "--porcelain", "core", "addon").splitlines()),
        "cpu": model,
        "cores": psutil.cpu_count(logical=True),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
        "mitmproxy": mitmproxy.version.VERSION,
    }


def pin(commit: str | None, argv: list[str], *, compile_core: bool = False) -> None:
    """Re-run this command against core/ and addon/ as of `commit`, copied out of git (None:
    copied from the working tree), with core's pure modules compiled if asked (setup.py).

    The package is installed editable, so edits made while a run is going on
    would be measured half-way (and mitmproxy live-reloads a changed addon
    script, which resets its metrics). A snapshot earlier on PYTHONPATH wins
    over the editable install, in this process and in every proxy it starts.
    """
    rev = _git("rev-parse", "--short", commit) if commit else "working-tree"
    if not rev:
        raise SystemExit(f"bench: unknown commit {commit!r}")
    label = f"{rev}-compiled" if compile_core else rev
    root = OUT / f"code-{label}"
    shutil.rmtree(root, ignore_errors=True)
    tree = root / "tooltap"
    if commit is None:
        compiled.copy_tree(HERE.parent, tree)
    for part in ("core", "addon") if commit else ():
        target = tree / part
        target.mkdir(parents=True)
        archive = subprocess.run(
            ["git", "archive", rev, part], cwd=HERE.parent, capture_output=True, check=True
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            for member in tar.getmembers():
                if member.isfile():
                    member.name = member.name.split("/", 1)[1]
                    tar.extract(member, target, filter="data")
    paths = [root]
    if compile_core:
        print(f"bench: compiling core's pure modules of {rev} (setup.py, mypyc)", flush=True)
        paths = compiled.build(tree)
    env = {**os.environ, SNAPSHOT_ENV: label}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [*map(str, paths), env.get("PYTHONPATH")]))
    print(f"bench: measuring {label} from {root}", flush=True)
    os.execve(sys.executable, [sys.executable, "-m", "bench", *argv], env)


def _without_pinning(argv: list[str]) -> list[str]:
    """The arguments without --commit and --compiled (the re-run measures what they made)."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--commit":
            skip = True
        elif not arg.startswith("--commit=") and arg != "--compiled":
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
    parser.add_argument(
        "--compiled",
        action="store_true",
        help="measure with core's pure modules compiled by mypyc, as TOOLTAP_COMPILE=1 builds"
        " tooltap (setup.py); with --commit, that commit's",
    )
    args = parser.parse_args()
    if args.readme and args.smoke:
        parser.error("--readme publishes the figures, and a smoke run's mean nothing")
    if args.report:
        report.write(OUT, HERE, readme=True)
        print((OUT / "results.md").read_text())
        return 0
    if (args.commit or args.compiled) and not os.environ.get(SNAPSHOT_ENV):
        pin(args.commit, _without_pinning(sys.argv[1:]), compile_core=args.compiled)
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
        "neighbour": lambda: asyncio.run(neighbour.run(size)),
        "apart": lambda: asyncio.run(apart.run(size)),
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

    kept = report.write(out, HERE, readme=args.readme or size == "full", replace_all=args.readme)
    print((out / "results.md").read_text())
    if kept:
        print(kept)
    return 0


if __name__ == "__main__":
    sys.exit(main())
