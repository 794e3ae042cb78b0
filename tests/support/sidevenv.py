"""Pinned side environments for tests that need a library tooltap's own venv cannot hold.

The official `mcp` SDK 1.x and 2.x cannot share one venv, nor fastmcp 2.x and 4.x: each pin set
gets a venv of its own under build/venvs/, named by a digest of its pins, created once and
reused. uv installs them (41 s of pip against 9.5 s for pydantic-ai's, bytecode included; its
cache makes a re-creation on a fresh clone quicker still); tooltap itself is installed with pip,
as users install it (fresh()). The TypeScript SDK and the
everything server are installed from tests/support/mcp_node's package-lock.json into
build/mcp-node, again once per lock. A lock file serialises two test processes that ask for
the same environment at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build"
NODE_SOURCE = Path(__file__).with_name("mcp_node")
STAMP = ".tooltap-ready"
UV = Path(sys.executable).with_name("uv")  # the test extras' uv, beside this interpreter


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def python(*pins: str) -> Path:
    """The interpreter of a venv holding exactly these pins (and their dependencies)."""
    key = hashlib.sha256("\n".join(sorted(pins)).encode()).hexdigest()[:12]
    venv = BUILD / "venvs" / key
    with _locked(venv):
        stamp = venv / STAMP
        if not stamp.exists() or stamp.read_text() != "\n".join(pins):
            shutil.rmtree(venv, ignore_errors=True)
            base = getattr(sys, "_base_executable", sys.executable)
            subprocess.run(
                [base, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
            )
            # Bytecode written at install: the environment sets PYTHONDONTWRITEBYTECODE, so a
            # venv without it compiles every module it imports, in every process.
            done = subprocess.run(
                [UV, "pip", "install", "--quiet", "--compile-bytecode",
                 "--python", venv / "bin" / "python", *pins],
                capture_output=True, text=True, timeout=600, check=False,
            )  # fmt: skip
            if done.returncode != 0:
                raise RuntimeError(
                    f"uv pip install {' '.join(pins)} failed:\n{done.stderr[-3000:]}"
                )
            stamp.write_text("\n".join(pins))
    return venv / "bin" / "python"


def node_modules() -> Path:
    """build/mcp-node, with the TypeScript SDK and the everything server as the lock pins them."""
    target = BUILD / "mcp-node"
    lock = (NODE_SOURCE / "package-lock.json").read_bytes()
    digest = hashlib.sha256(lock + (NODE_SOURCE / "drive.mjs").read_bytes()).hexdigest()
    with _locked(target):
        stamp = target / STAMP
        if not stamp.exists() or stamp.read_text() != digest:
            target.mkdir(parents=True, exist_ok=True)
            for name in ("package.json", "package-lock.json", "drive.mjs"):
                shutil.copyfile(NODE_SOURCE / name, target / name)
            subprocess.run(
                ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=target, check=True, timeout=600, capture_output=True,
            )  # fmt: skip
            stamp.write_text(digest)
    return target


# what deploy/Dockerfile copies
SOURCES = ("pyproject.toml", "setup.py", "README.md", "core", "addon")


def fresh(root: Path, *pins: str) -> Path:
    """A new venv under root with tooltap installed as users install it: its sources copied as
    the container build copies them, `pip install` with no extras, beside these pins. Its
    interpreter."""
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            ignore = shutil.ignore_patterns("__pycache__")
            shutil.copytree(source, root / "src" / name, ignore=ignore)
        else:
            (root / "src").mkdir(exist_ok=True)
            shutil.copy2(source, root / "src" / name)
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(root / "venv")], check=True, timeout=120)
    done = subprocess.run(
        [root / "venv" / "bin" / "python", "-m", "pip", "install", "--quiet",
         "--disable-pip-version-check", root / "src", *pins],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"pip install failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}")
    return root / "venv" / "bin" / "python"
