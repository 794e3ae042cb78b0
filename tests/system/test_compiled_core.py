"""tooltap built with the modules setup.py lists compiled (TOOLTAP_COMPILE=1) reads as it does
interpreted.

A copy of this tree is compiled in place as setup.py builds it (bench/compiled.py), then core's
suite, the inspector session's, and the real-world and dialect corpora run against the copy in a
child process, which imports the compiled modules first. A compiled module checks its names'
annotations at run time, so a narrowing mypy allowed but a value breaks is a TypeError there,
where the interpreter went on: these runs are what find one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench import compiled  # noqa: E402 - the bench's builder, as its --compiled uses it

SUITES = (
    "tests/core",
    "tests/addon",
    "tests/system/test_realworld.py",
    "tests/system/test_dialects_corpus.py",
)


@pytest.fixture(scope="module")
def compiled_tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    if shutil.which("gcc") is None:
        pytest.fail("install Debian's gcc (./dev test does) to compile the modules setup.py lists")
    tree = tmp_path_factory.mktemp("compiled") / "tooltap"
    compiled.copy_tree(ROOT, tree)
    return tree, compiled.build(tree)


def test_every_module_setup_names_is_built_and_imported_compiled(compiled_tree):
    tree, paths = compiled_tree
    listed = _listed()
    built = compiled.extensions(tree)
    assert len(listed) >= 10
    for path in listed:
        stem = path.removesuffix(".py")
        assert any(b.startswith(stem + ".cpython-") for b in built), (path, built)
    modules = ["tooltap." + p.removesuffix(".py").replace("/", ".") for p in listed]
    shown = subprocess.run(
        [sys.executable, "-c", f"import importlib; print([importlib.import_module(m).__file__ for m in {modules!r}])"],
        env=_env(paths), capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert shown.count(".so'") == len(modules), shown


def test_the_compiled_build_passes_core_the_addon_and_the_corpora(compiled_tree):
    _, paths = compiled_tree
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *SUITES],
        cwd=ROOT, env=_env(paths), capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout[-6000:] + ran.stderr[-3000:]
    assert " passed" in ran.stdout.splitlines()[-1]


def _listed() -> list[str]:
    """setup.py's COMPILED, read as data (importing setup.py would run the build)."""
    text = (ROOT / "setup.py").read_text()
    block = text[text.index("COMPILED = (") : text.index(")", text.index("COMPILED = ("))]
    return [line.strip().strip('",') for line in block.splitlines()[1:] if line.strip()]


def _env(paths: list[Path]) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS")
    }
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in paths)
    return env
