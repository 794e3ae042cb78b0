"""tooltap installed the way users install it: a fresh venv, `pip install .`, no extras.

Every other test runs in the venv with the test extras, where a command that imports an extra by
accident still works. Here the sources are copied as the container build copies them, installed
into a new venv, and every command is run from it: each --help, the demo's one-line refusal, one
`tooltap run` in front of a loopback upstream, and `tooltap audit --jsonl`.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support import sidevenv
from support.installed import EXCHANGES, check_reported, send_through
from support.scenarios import SCENARIOS, route

from tooltap.addon.commands.cli import DEMO_EXTRA
from tooltap.addon.harness.launch import Proxy
from tooltap.addon.harness.replay import ReplayServer


def run(*argv: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sidevenv.fresh(tmp_path_factory.mktemp("base-install")).parents[1]


def test_the_base_install_has_none_of_the_demos_or_the_tests_libraries(venv):
    probe = run(
        venv / "bin/python",
        "-c",
        "import importlib.util, sys; print([m for m in sys.argv[1:] if importlib.util.find_spec(m)])",
        *DEMO_EXTRA,
        "pytest",
        "hypothesis",
        "psutil",
    )
    assert probe.stdout.strip() == "[]", probe.stderr


@pytest.mark.parametrize("command", ["", "run", "web", "audit", "demo", "script-path"])
def test_every_command_shows_its_help(venv, command):
    shown = run(venv / "bin/tooltap", *command.split(), "--help")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"usage: tooltap {command}".rstrip() + " "), shown.stdout
    assert shown.stderr == ""


def test_the_demo_says_in_one_line_what_to_install_and_exits_2(venv):
    refused = run(venv / "bin/tooltap", "demo")
    assert refused.returncode == 2
    assert refused.stdout == ""
    assert refused.stderr == (
        "tooltap demo needs openai, anthropic, boto3, google.genai, websockets, mcp, ollama, "
        "cohere: "
        "pip install 'tooltap[demo]'\n"
    )


def test_script_path_names_the_installed_script(venv):
    shown = run(venv / "bin/tooltap", "script-path")
    assert shown.returncode == 0, shown.stderr
    path = Path(shown.stdout.strip())
    assert path.is_file() and path.name == "script.py"
    assert path.is_relative_to(venv)


def test_tooltap_run_forwards_logs_and_counts_an_exchange_of_each_kind(venv):
    with (
        ReplayServer(route) as upstream,
        Proxy.tooltap(
            [upstream.url], "--log-format", "json", tooltap=(str(venv / "bin/tooltap"),)
        ) as proxy,
    ):
        send_through(proxy, upstream.url)
        assert proxy.metrics_url is not None
        check_reported(proxy, proxy.metrics_url)
    assert not [line for line in proxy.text if "Traceback" in line or "Error" in line]


def test_audit_reads_a_jsonl_file_and_fails_on_its_finding(venv, tmp_path):
    exchange = EXCHANGES[0]  # strict-void: a finding the default audit fails on
    reply = SCENARIOS[exchange.scenario]
    recorded = {
        "method": "POST",
        "url": "https://api.openai.com" + exchange.path,
        "request_body": json.dumps(exchange.body),
        "status": reply.status,
        "response_headers": dict(reply.headers),
        "response_body": reply.body.decode(),
    }
    path = tmp_path / "exchanges.jsonl"
    path.write_text(json.dumps(recorded) + "\n", encoding="utf-8")
    audited = run(venv / "bin/tooltap", "audit", "--jsonl", path, "--format", "json")
    assert audited.returncode == 1, audited.stderr
    lines = [json.loads(line) for line in audited.stdout.splitlines()]
    assert [(v["api"], v["state"], v["failing"]) for v in lines[:-1]] == [
        ("chat", "strict-void", ["strict-void"])
    ]
