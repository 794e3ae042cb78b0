"""Every command but the demo runs on the base install: nothing imports an extra by accident.

The test venv holds every extra, so each check runs in a child interpreter in which the modules
that only the extras bring cannot be imported, as in a venv made by plain `pip install .`.
tests/system/test_base_install.py then does it for real, in a fresh venv.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from importlib import metadata

from packaging.requirements import Requirement

from tooltap.addon.commands.cli import DEMO_EXTRA

# Modules of the addon that only the demo, the tests, the bench and pytest use.
DEMO_ONLY = {
    "tooltap.addon.commands.demo",
    "tooltap.addon.commands.demo_steps",
    "tooltap.addon.commands.demo_agent",
    "tooltap.addon.commands.demo_openai",
    "tooltap.addon.commands.demo_anthropic",
    "tooltap.addon.commands.demo_converse",
    "tooltap.addon.commands.demo_gemini",
    "tooltap.addon.commands.demo_mcp",
    "tooltap.addon.commands.demo_live",
    "tooltap.addon.harness.live",
    "tooltap.addon.commands.demo_ollama",
    "tooltap.addon.commands.demo_cohere",
    "tooltap.addon.harness.replay",
    "tooltap.addon.harness.sockets",
    # pytest loads the plugin (pytest11), and pytest is what imports it: never the base install.
    "tooltap.addon.testing.plugin",
}


def _name(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


def base_distributions() -> set[str]:
    """tooltap's base dependencies and all they need, as installed here."""
    seen: set[str] = set()
    todo = ["tooltap"]
    while todo:
        name = _name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for line in requires:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return seen


def extras_only_modules() -> list[str]:
    """Modules that a plain `pip install .` would not have: top-level ones, and the parts the
    extras bring to a namespace the base install shares (google.genai beside google.protobuf)."""
    base = base_distributions()
    found = set()
    for module, owners in metadata.packages_distributions().items():
        if not module.isidentifier():
            continue
        if not {_name(owner) for owner in owners} & base:
            found.add(module)
            continue
        parts = {o: _parts(o, module) for o in set(owners)}
        kept = set().union(*(p for o, p in parts.items() if _name(o) in base))
        found |= set().union(*(p for o, p in parts.items() if _name(o) not in base)) - kept
    return sorted(found)


def _parts(distribution: str, namespace: str) -> set[str]:
    """The packages a distribution puts inside a namespace package: google.genai, ..."""
    return {
        f"{namespace}.{file.parts[1]}"
        for file in metadata.files(distribution) or []
        if len(file.parts) > 2 and file.parts[0] == namespace and file.parts[1].isidentifier()
    }


def run_without_extras(code: str) -> subprocess.CompletedProcess[str]:
    # A None in sys.modules makes `import` raise ModuleNotFoundError and find_spec say None.
    blocker = (
        f"import sys; sys.modules.update(dict.fromkeys({json.dumps(extras_only_modules())}))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", blocker + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_extras_modules_are_what_the_blocker_blocks():
    # Without this, an empty list would make every other test here pass.
    blocked = extras_only_modules()
    assert {"openai", "anthropic", "websockets", "pytest", "hypothesis", "google.genai"} <= set(
        blocked
    )
    assert not {"mitmproxy", "structlog", "prometheus_client", "httpx", "yaml", "google.protobuf",
                "botocore"} & set(blocked)  # fmt: skip
    done = run_without_extras("import websockets")
    assert done.returncode == 1 and "ModuleNotFoundError" in done.stderr


def test_every_command_but_the_demo_runs_its_help_without_the_extras():
    done = run_without_extras(
        """
        from tooltap.addon.commands.cli import main
        for command in ([], ["run"], ["web"], ["audit"], ["demo"], ["script-path"]):
            try:
                main([*command, "--help"])
            except SystemExit as stop:
                assert stop.code == 0, (command, stop.code)
        print("all helps ran")
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith("all helps ran")


def test_every_module_outside_the_demo_imports_without_the_extras():
    done = run_without_extras(
        f"""
        import importlib, pkgutil
        import tooltap.addon, tooltap.core
        names = [
            info.name
            for package in (tooltap.core, tooltap.addon)
            for info in pkgutil.walk_packages(package.__path__, package.__name__ + ".")
        ]
        for name in names:
            if name not in {sorted(DEMO_ONLY)!r} and not name.endswith("__main__"):
                importlib.import_module(name)
        print(len(names))
        """
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[-1]) > 40


def test_the_demo_without_its_extra_says_what_to_install_and_exits_2():
    done = run_without_extras(
        """
        import sys
        from tooltap.addon.commands.cli import main
        sys.exit(main(["demo"]))
        """
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"tooltap demo needs {', '.join(DEMO_EXTRA)}: pip install 'tooltap[demo]'"
    ]


def test_a_redis_state_without_the_redis_extra_is_refused_with_the_install_line():
    done = run_without_extras(
        """
        from tooltap.addon.options import state_problem
        print(state_problem("redis://127.0.0.1:6379/0"))
        print(state_problem(""))
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "tooltap_state needs the Redis client: pip install 'tooltap[redis]'",
        "None",
    ]
