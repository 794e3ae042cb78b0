"""Did a change move a verdict? Every exchange of every corpus file, read by two versions of
tooltap, and their verdicts compared whole.

    python -m bench.verdicts                    # the working tree against where it left main
    python -m bench.verdicts --against HEAD~3   # ... against another commit
    python -m bench.verdicts --write out.jsonl  # this tree's verdicts, to a file

Each exchange is read two ways: by `inspect` alone (a warm ValidatorCache, no memory), and in a
session per file as `tooltap audit` reads it (Session.read: the pins, the tool changes and the
hidden text said once, MCP sessions, previous_response_id). What is compared is each verdict's
logged dict (to_dict) and the tool definitions it carried (their origin, name, fingerprint and
canonical form, which the pins are keyed by): equal, byte for byte, or the first differences are
printed and the exit status is 1.

The other version runs from a copy of its core/ and addon/ (git archive), first on the Python
path, as `python -m bench --commit` measures one.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import tooltap.core
from tooltap.addon.audit.inputs import RecordedExchange
from tooltap.addon.inspection.session import Session
from tooltap.core import ValidatorCache, inspect

ROOT = Path(__file__).resolve().parent.parent
# The corpora: the shared folder beside the checkout (every recording) and the tests' own.
FOLDERS = (
    ROOT.parent / "shared" / "corpus" / "realworld",
    ROOT.parent / "shared" / "corpus" / "dialects",
    ROOT / "tests" / "corpus" / "realworld",
    ROOT / "tests" / "corpus" / "dialects",
    ROOT / "tests" / "corpus" / "ollama",
)


def corpus_files() -> list[Path]:
    """Every exchanges*.jsonl of the corpora, each content once."""
    seen: set[str] = set()
    found = []
    for folder in FOLDERS:
        for path in sorted(folder.glob("exchanges*.jsonl")) if folder.is_dir() else ():
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            if digest not in seen:
                seen.add(digest)
                found.append(path)
    return found


def _definitions(verdict: Any) -> Any:
    """The definitions a verdict carried, as the pins read them (their hidden text is in the
    verdict's own)."""
    found = getattr(verdict, "definitions", None)
    if found is None:
        return None
    return {
        "declared": [
            [dataclasses.asdict(d.origin), d.name, d.fingerprint, d.canonical]
            for d in found.declared
        ],
        "whole": None if found.whole is None else dataclasses.asdict(found.whole),
        "announced": found.announced,
    }


def verdicts() -> Iterator[dict[str, Any]]:
    """A line per exchange: where it is, its verdict read alone, and those Session.read gave."""
    for path in corpus_files():
        session, validators = Session(), ValidatorCache()
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            record = RecordedExchange.model_validate_json(line)
            exchange = record.exchange()
            alone = inspect(exchange, validators=validators)
            pinned = record.application or record.recording or str(path)
            read = session.read(exchange, pinned)
            yield {
                "where": f"{path.parent.name}/{path.name}:{number}",
                "alone": [alone.to_dict(), _definitions(alone)],
                "session": [[v.to_dict(), _definitions(v)] for _, v in read],
            }
        yield {
            "where": f"{path.parent.name}/{path.name}:end",
            "alone": None,
            "session": [[v.to_dict(), _definitions(v)] for _, v in session.finish()],
        }


def write(out: Path) -> int:
    count = 0
    with out.open("w", encoding="utf-8") as handle:
        for line in verdicts():
            handle.write(json.dumps(line, sort_keys=True, ensure_ascii=False) + "\n")
            count += 1
    return count


def snapshot(commit: str, into: Path) -> None:
    """core/ and addon/ as of commit, as the package tooltap, under `into`."""
    for part in ("core", "addon"):
        target = into / "tooltap" / part
        target.mkdir(parents=True)
        archive = subprocess.run(
            ["git", "archive", commit, part], cwd=ROOT, capture_output=True, check=True
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            for member in tar.getmembers():
                if member.isfile():
                    member.name = member.name.split("/", 1)[1]
                    tar.extract(member, target, filter="data")


def compare(before: Path, after: Path, shown: int = 10) -> int:
    """The number of exchanges whose verdicts differ; the first `shown` printed."""
    differ = 0
    with before.open(encoding="utf-8") as a, after.open(encoding="utf-8") as b:
        for old, new in zip(a, b, strict=True):
            if old == new:
                continue
            differ += 1
            if differ <= shown:
                one, two = json.loads(old), json.loads(new)
                print(f"differs: {one['where']}")
                for key in ("alone", "session"):
                    if one[key] != two[key]:
                        print(f"  {key}:\n    before {one[key]}\n    after  {two[key]}"[:4000])
    return differ


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.verdicts", description=__doc__)
    parser.add_argument(
        "--against", help="the commit compared with (default: the merge base of HEAD and main)"
    )
    parser.add_argument("--write", type=Path, help="only write this tree's verdicts here")
    args = parser.parse_args()
    if args.write:
        count = write(args.write)
        code = Path(tooltap.core.__file__).resolve().parent
        print(f"{count} lines of verdicts of {code} written to {args.write}", flush=True)
        return 0
    against = (
        args.against
        or subprocess.run(
            ["git", "merge-base", "HEAD", "main"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    files = corpus_files()
    print(f"corpus: {len(files)} files: " + ", ".join(f"{p.parent.name}/{p.name}" for p in files))
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        snapshot(against, base / "code")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            filter(None, [str(base / "code"), os.environ.get("PYTHONPATH")]))}  # fmt: skip
        before, after = base / "before.jsonl", base / "after.jsonl"
        for out, environ in ((before, env), (after, dict(os.environ))):
            subprocess.run(
                [sys.executable, "-m", "bench.verdicts", "--write", str(out)],
                cwd=ROOT, env=environ, check=True,
            )  # fmt: skip
        differ = compare(before, after)
        lines = sum(1 for _ in before.open(encoding="utf-8"))
    print(f"{lines} exchanges, read alone and in a session: {differ} differ from {against[:12]}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
