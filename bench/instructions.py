"""Inspection on the real corpus counted in instructions, not timed: an A/B that a busy machine
cannot move.

    python -m bench.instructions                     # this tree, by size group
    python -m bench.instructions --against a6df61f   # ... and a commit's core/ and addon/
    python -m bench.instructions --groups small

On a shared two-core machine a timed ratio moves by 10-20% from one run to the next, more than
most single changes to the hot path are worth. Valgrind's cachegrind counts the instructions a
process executes, and the count barely moves with the load around it. Each measure reads the
same exchanges with warm caches, as `bench/realworld.py` has them: json.loads of the bodies,
core `inspect`, the worker's `Session.read` (`read`), and the same given the times the proxy
records (`timed`: what timing the tool loop adds); `--measures` picks which beside json.loads.
Each runs in a process of its own under cachegrind, `--passes` times over the group; a process
of each version that makes no pass counts its start, and the difference, so divided, is one
pass. json.loads, the same C code in every version, is counted once. A process's own start
moves by a few hundred thousand instructions from one run to the next, nothing beside the
hundreds of millions of a pass over a real group; a small one wants more passes. What it cannot
see is how fast each instruction runs: json.loads is compact C, inspection is interpreted
Python, so the timed ratios (`python -m bench --only realworld`) stay the targets, and run
1.3-1.7 times these.

Needs valgrind (`apt-get install valgrind`); a run takes 2-5 minutes per version and group, up
to two processes at a time.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

MEASURES = ("loads", "inspect", "read", "timed")
COUNTED = ("inspect", "read")  # counted by default, beside json.loads
PASSES = 2  # passes over a group counted, by default


def _child(cases_file: str, measure: str, passes: int) -> None:
    """One measure over one group, `passes` times, after a warm pass of each (run under
    cachegrind; nothing printed)."""
    # Only what is measured is imported: under cachegrind every import is slow.
    from tooltap.addon.inspection.session import Session
    from tooltap.core import Exchange, ValidatorCache, inspect
    from tooltap.core.definitions import DefinitionCache

    from .given_times import given_times

    with open(cases_file, "rb") as handle:
        raw = pickle.load(handle)
    cases = [(Exchange.model_validate(e), app, payloads) for e, app, payloads in raw]
    times = given_times([exchange for exchange, _, _ in cases])
    caches: dict[str, Any] = {"validators": ValidatorCache(), "definition_cache": DefinitionCache()}
    try:  # as the worker keeps them, in the version measured
        from tooltap.core.dialects import Routes

        caches["routes"] = Routes()
    except ImportError:  # a tooltap from before the worker kept the paths it routed
        pass
    session, clocked = Session(), Session()

    def loads() -> None:
        for _, _, payloads in cases:
            for text in payloads:
                json.loads(text)

    def inspected() -> None:
        for exchange, _, _ in cases:
            inspect(exchange, {}, **caches)

    def read() -> None:
        for exchange, app, _ in cases:
            session.read(exchange, app)

    def timed() -> None:
        for (_, app, _), exchange in zip(cases, times, strict=True):
            clocked.read(exchange, app)

    chosen = {"loads": loads, "inspect": inspected, "read": read, "timed": timed}[measure]
    loads(), inspected(), read(), timed()  # the same warm start whatever is counted
    gc.disable()
    for _ in range(passes):
        chosen()


def _count(python_path: str | None, cases_file: Path, measure: str, passes: int) -> int:
    """Instructions a child process executed, start to end."""
    with tempfile.NamedTemporaryFile(suffix=".cg") as out:
        # One hash seed for every child, and no bytecode written by one child for the next to
        # read (the code of --against is a fresh copy): what differs between two is the measure.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env |= {"PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
        if python_path:
            env["PYTHONPATH"] = python_path
        subprocess.run(
            [
                "valgrind", "--tool=cachegrind", "--cache-sim=no",
                f"--cachegrind-out-file={out.name}",
                sys.executable, "-m", "bench.instructions", "--child",
                str(cases_file), measure, str(passes),
            ],
            cwd=Path(__file__).resolve().parent.parent, env=env, check=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=1800,
        )  # fmt: skip
        for line in Path(out.name).read_text().splitlines():
            if line.startswith("summary:"):
                return int(line.split()[1])
    raise RuntimeError("cachegrind wrote no summary")


def per_pass(
    versions: dict[str, str | None],
    cases_file: Path,
    measures: tuple[str, ...] = COUNTED,
    passes: int = PASSES,
) -> dict[str, dict[str, int]]:
    """Instructions per pass of json.loads and of each measure, for each version (its
    PYTHONPATH) on one group. Each version's start (no pass) is counted; json.loads, the same
    C code in every version, passes only under the first."""
    first = next(iter(versions))
    runs = [(v, "loads", 0) for v in versions] + [(first, "loads", passes)]
    runs += [(v, m, passes) for v in versions for m in measures]
    with ThreadPoolExecutor(max_workers=2) as pool:
        counted = pool.map(lambda r: _count(versions[r[0]], cases_file, r[1], r[2]), runs)
        counts = dict(zip(runs, counted, strict=True))
    loads = (counts[(first, "loads", passes)] - counts[(first, "loads", 0)]) // passes
    return {
        v: {"loads": loads}
        | {m: (counts[(v, m, passes)] - counts[(v, "loads", 0)]) // passes for m in measures}
        for v in versions
    }


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        _child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    from .realworld import GROUPS, corpus_folder, read_corpus
    from .verdicts import snapshot

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", help="a commit whose core/ and addon/ are counted too")
    parser.add_argument("--groups", default=",".join(name for name, _, _ in GROUPS))
    parser.add_argument("--passes", type=int, default=PASSES, help="passes counted (default 2)")
    parser.add_argument(
        "--measures",
        default=",".join(COUNTED),
        help="what is counted beside json.loads, of: inspect, read (Session.read), timed "
        f"(Session.read with the proxy's times); default {','.join(COUNTED)}",
    )
    args = parser.parse_args()
    measures = tuple(args.measures.split(","))
    unknown = sorted(set(measures) - set(MEASURES[1:]))
    if unknown:
        parser.error(f"unknown measure(s): {', '.join(unknown)}")
    if shutil.which("valgrind") is None:
        sys.exit("bench.instructions needs valgrind: apt-get install valgrind")
    wanted = args.groups.split(",")
    groups, _ = read_corpus(corpus_folder())
    with tempfile.TemporaryDirectory() as work:
        versions: dict[str, str | None] = {"this tree": None}
        if args.against:
            snapshot(args.against, Path(work) / "code")
            versions = {args.against: str(Path(work) / "code"), **versions}
        names = {"inspect": "inspect", "read": "Session.read", "timed": "Session.read, timed"}
        print("| group | exchanges | version | json.loads /pass | "
              + " | ".join(names[m] for m in measures) + " |")  # fmt: skip
        print("|---|---|---|---|" + "---|" * len(measures))
        for group in groups:
            if group.name not in wanted:
                continue
            cases_file = Path(work) / f"{group.name}.pickle"
            cases = [(c.exchange.model_dump(), c.application, c.payloads) for c in group.cases]
            cases_file.write_bytes(pickle.dumps(cases))
            for version, counts in per_pass(versions, cases_file, measures, args.passes).items():
                loads = counts["loads"]
                ratios = " | ".join(f"{counts[m] / loads:.3f}x" for m in measures)
                print(f"| {group.name} | {len(cases)} | {version} | {loads:,} | {ratios} |",
                      flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
