"""tooltap built with the modules setup.py lists compiled (TOOLTAP_COMPILE=1) reads as it does
interpreted.

A copy of this tree is compiled in place as setup.py builds it (bench/compiled.py), then core's
suite, the inspector session's, and the real-world and dialect corpora run against the copy in a
child process, which imports the compiled modules first. A compiled module checks its names'
annotations at run time, so a narrowing mypy allowed but a value breaks is a TypeError there,
where the interpreter went on: these runs are what find one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# The build alone takes 3-4 minutes on two busy cores (gcc on one 20 MB C file), past the
# suite's 300 s; each step is bounded by its own subprocess timeout below.
pytestmark = pytest.mark.timeout(1200)

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

# The bench's builder, as its --compiled uses it, and its real-corpus step and report.
from bench import compiled, realworld, report  # noqa: E402

SUITES = (
    "tests/core",
    "tests/addon",
    "tests/system/test_realworld.py",
    "tests/system/test_dialects_corpus.py",
)
# The addon's checks of its command line, its layout and its installs read files and start
# interpreters of their own: no compiled module runs in them.
NOT_READINGS = (
    "tests/addon/test_cli.py",
    "tests/addon/test_layout.py",
    "tests/addon/test_extras.py",
)


@pytest.fixture(scope="module")
def compiled_tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    if shutil.which("gcc") is None:
        pytest.fail("install Debian's gcc (./dev test does) to compile the modules setup.py lists")
    tree = tmp_path_factory.mktemp("compiled") / "tooltap"
    compiled.copy_tree(ROOT, tree)
    # Built at -O0: what is checked is what mypyc compiled; the image's -O3 build is
    # tests/deploy's, and the bench measures that level.
    return tree, compiled.build(tree, optimise="0")


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
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *SUITES,
         *(f"--ignore={path}" for path in NOT_READINGS)],
        cwd=ROOT, env=_env(paths), capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout[-6000:] + ran.stderr[-3000:]
    assert " passed" in ran.stdout.splitlines()[-1]


def test_the_bench_measures_the_real_corpus_compiled_beside_pure(compiled_tree):
    """bench/realworld.py's child measure, run as its compiled_ratios runs it, on the corpus the
    tests carry; then the report's table and targets with both."""
    _, paths = compiled_tree
    env = {**_env([*paths, ROOT]), realworld.CORPUS_ENV: str(ROOT / "tests/corpus/realworld")}
    ran = subprocess.run(
        [sys.executable, "-m", "bench.realworld", "--ratios", "smoke"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    built = json.loads(ran.stdout.splitlines()[-1])
    assert set(built) == {"small", "medium", "large"}
    assert all(r["inspect"] > 0 and r["session_read"] > 0 for r in built.values())
    pure = subprocess.run(  # the child refuses to measure pure Python as the compiled build
        [sys.executable, "-m", "bench.realworld", "--ratios", "smoke"],
        cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
        timeout=600, check=False,
    )  # fmt: skip
    assert pure.returncode != 0 and "not compiled" in pure.stderr
    groups, _ = realworld.read_corpus(ROOT / "tests/corpus/realworld")
    data = {
        "files": ["exchanges.jsonl"],
        "passes": 1,
        "left_out": {},
        "groups": {g.name: realworld.measure(g, 1) for g in groups if g.cases},
        "compiled": {"groups": built},
    }
    targets: list[str] = []
    section = report.realworld_section(data, targets)
    assert "| inspect, compiled | Session.read, compiled |" in section
    assert len(targets) == 3
    compiled = "; compiled as the image builds it, on this interpreter: "
    assert all(compiled in line for line in targets), targets


def test_the_docs_and_changelog_count_the_modules_setup_compiles():
    for page in ("docs/running.md", "CHANGELOG.md"):
        said = re.search(r"compiles the (\d+) modules", (ROOT / page).read_text())
        assert said is not None, page
        assert int(said.group(1)) == len(_listed()), page


def test_a_build_asked_for_an_unknown_optimisation_level_says_so(tmp_path):
    shutil.copy2(ROOT / "setup.py", tmp_path / "setup.py")
    done = subprocess.run(
        [sys.executable, "setup.py", "--quiet", "build_ext", "--inplace"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "TOOLTAP_COMPILE": "1", "TOOLTAP_COMPILE_OPT": "fast"},
    )  # fmt: skip
    assert done.returncode != 0
    assert "TOOLTAP_COMPILE_OPT is 0, 1, 2 or 3 (the C optimisation level), not 'fast'" in (
        done.stderr
    )


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
