"""tooltap with the modules setup.py lists compiled, as `TOOLTAP_COMPILE=1` builds it.

`build(tree)` compiles a copy of the package (a folder holding core/ and addon/) where it
lies: setup.py, pyproject.toml and README.md are copied beside them from this checkout, and
setup.py's own list of modules is compiled in place (`build_ext --inplace`), each extension
beside the source it shadows. The bench (`--compiled`) and the test that runs core's suite
against the compiled build (tests/system/test_compiled_core.py) both build this way, the test at
the C compiler's -O0: it checks what mypyc compiled, not how fast it runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD_FILES = ("setup.py", "pyproject.toml", "README.md")
EXTENSION = ".cpython-*.so"


def build(tree: Path, timeout: float = 900, optimise: str = "3") -> list[Path]:
    """Compile the tree in place, at the C optimisation level `optimise` (the image's is 3);
    the folders Python must find first (PYTHONPATH): the tree's parent, where `tooltap` is the
    tree, and the tree, where mypyc's shared runtime lies."""
    for name in BUILD_FILES:
        shutil.copy2(ROOT / name, tree / name)
    made = subprocess.run(
        [sys.executable, "setup.py", "--quiet", "build_ext", "--inplace"],
        cwd=tree,
        env={**os.environ, "TOOLTAP_COMPILE": "1", "TOOLTAP_COMPILE_OPT": optimise},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if made.returncode != 0:
        raise RuntimeError(
            f"the compiled build failed:\n{made.stdout[-3000:]}{made.stderr[-3000:]}"
        )
    return [tree.parent, tree]


def running() -> bool:
    """Is the tooltap this process imports the compiled build?"""
    import tooltap.core.inspection  # here: the tooltap this process ends up importing

    return Path(tooltap.core.inspection.__file__ or "").suffix == ".so"


def extensions(tree: Path) -> list[str]:
    """The compiled modules in a tree, as paths under it (sorted)."""
    found = (p.relative_to(tree) for p in tree.rglob(f"*{EXTENSION}"))
    return sorted(str(p) for p in found if p.parts[0] != "build")


def copy_tree(source: Path, tree: Path) -> None:
    """core/ and addon/ of a checkout, without bytecode or extensions built in it before."""
    for part in ("core", "addon"):
        shutil.copytree(
            source / part,
            tree / part,
            ignore=shutil.ignore_patterns("__pycache__", f"*{EXTENSION}"),
        )
