"""Run the benchmarks: `python -m bench [--quick] [--only json,stream,memory,core,profile,websocket,web,traces,stress,why]`.

Results go to bench/out/<name>.json (bench/out/quick/ for --quick); the
report step then writes results.md there, and for full runs (or with
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
    json_load,
    memory,
    profile_worker,
    report,
    streaming,
    stress,
    traces,
    web,
    websocket,
    why,
)

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
SNAPSHOT_ENV = "TOOLTAP_BENCH_SNAPSHOT"
ALL = ("json", "stream", "memory", "core", "profile", "websocket", "web", "traces", "stress", "why")
QUICK = ALL[:8]  # `stress` and `why` (the cause analysis) run in full mode or when asked for


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
    parser.add_argument("--quick", action="store_true", help="small counts: under ~2 minutes")
    parser.add_argument(
        "--only", help=f"comma list of {', '.join(ALL)} (default: all; quick: not why)"
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
    if args.report:
        report.write(OUT, HERE, readme=True)
        print((OUT / "results.md").read_text())
        return 0
    if args.commit and not os.environ.get(SNAPSHOT_ENV):
        pin(args.commit, _without_commit(sys.argv[1:]))
    only = args.only or ",".join(QUICK if args.quick else ALL)
    wanted = [name for name in only.split(",") if name]
    unknown = set(wanted) - set(ALL)
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
    # Quick runs keep to their own folder, so a smoke run never replaces full results.
    out = OUT / "quick" if args.quick else OUT
    out.mkdir(parents=True, exist_ok=True)
    mode = "quick" if args.quick else "full"
    meta = {"mode": mode, "machine": machine(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    print(f"bench ({mode}): {meta['machine']}", flush=True)

    steps = {
        "json": lambda: asyncio.run(json_load.run(args.quick)),
        "stream": lambda: asyncio.run(streaming.run(args.quick)),
        "memory": lambda: asyncio.run(memory.run(args.quick)),
        "core": lambda: core_cost.run(args.quick),
        "profile": lambda: profile_worker.run(args.quick, out),
        "websocket": lambda: asyncio.run(websocket.run(args.quick)),
        "web": lambda: asyncio.run(web.run(args.quick)),
        "traces": lambda: traces.run(args.quick),
        "stress": lambda: asyncio.run(stress.run(args.quick)),
        "why": lambda: asyncio.run(why.run(args.quick)),
    }
    for name in wanted:
        if name == "why" and not why.applicable():
            print("== why: skipped, see why.applicable() (use --commit dc86e40)", flush=True)
            continue
        started = time.monotonic()
        print(f"== {name}", flush=True)
        result = steps[name]()
        result["meta"] = {**meta, "seconds": round(time.monotonic() - started, 1)}
        (out / f"{name}.json").write_text(json.dumps(result, indent=1))
        print(f"== {name} done in {time.monotonic() - started:.0f} s", flush=True)

    report.write(out, HERE, readme=args.readme or not args.quick)
    print((out / "results.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
