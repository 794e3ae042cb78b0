"""tooltap audit --cassettes: VCR cassettes recorded for real, in every body form, as a CI gate.

The cassettes are recorded by vcrpy while the official openai and anthropic SDKs drive the
demo's traffic through a real `tooltap run`: the audit of the cassette must give the findings
the live proxy logged for the same traffic.
"""

from __future__ import annotations

import copy
import gzip
import json
import os
import re
import socket
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import brotli
import pytest
import vcr
import yaml
from junitparser import Error, Failure, JUnitXml

from tooltap.addon.commands.demo_steps import STEPS, Clients, client_errors, route, socket_route
from tooltap.addon.harness.launch import Proxy
from tooltap.addon.harness.replay import ReplayServer

HTTP_STEPS = [step for step in STEPS if step.reply is not None]
REALWORLD = Path(__file__).parents[1] / "corpus" / "realworld" / "exchanges.jsonl"


def audit(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tooltap.addon.commands.cli", "audit", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=cwd,
    )


def verdicts(*args: str, code: int = 1) -> tuple[int, list[dict[str, Any]], dict[str, Any]]:
    """audit's JSON rows and summary; code: the exit code it must give (1: findings)."""
    done = audit(*args, "--format", "json")
    assert done.returncode == code, done.stderr
    *rows, summary = [json.loads(line) for line in done.stdout.splitlines()]
    return done.returncode, rows, summary


def key(row: dict[str, Any]) -> tuple[Any, ...]:
    """What a verdict found, as the log and the audit both say it."""
    return (
        row["api"],
        row.get("response_id"),
        row.get("state"),
        row.get("format_state"),
        row.get("outcome"),
        sorted((e["rule"], tuple(e["ids"]), e["where"]) for e in row.get("loop_errors", [])),
    )


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The demo's HTTP steps through `tooltap run`, recorded by vcrpy at the SDKs' side."""
    folder = tmp_path_factory.mktemp("cassettes")
    cassette = folder / "demo.yaml"
    with (
        ReplayServer(route, sockets=socket_route) as upstream,
        Proxy.tooltap([upstream.url], "--log-format", "json") as proxy,
        vcr.VCR(record_mode="all").use_cassette(str(cassette)),
    ):
        clients = Clients(proxy.url)
        for step in HTTP_STEPS:
            try:
                step.call(clients.with_headers({"x-demo-step": step.name}))
            except client_errors():
                assert step.expect_error
        turns = proxy.wait_for("turn", len(HTTP_STEPS))
        loop_errors = proxy.wait_for("loop_error", 1)
    return {"folder": folder, "cassette": cassette, "turns": turns, "loop_errors": loop_errors}


def test_a_recorded_cassette_gives_the_findings_the_live_proxy_logged(recorded):
    code, rows, summary = verdicts("--cassettes", str(recorded["cassette"]))
    assert summary["read"] == len(HTTP_STEPS) == len(recorded["turns"])
    live = Counter(
        (t["api"], t.get("response_id"), t.get("state"), t.get("format_state"), t.get("outcome"))
        for t in recorded["turns"]
    )
    assert Counter(key(row)[:5] for row in rows) == live  # row for row, repeats included
    audited = sorted(
        (e["rule"], tuple(e["ids"]), e["where"]) for r in rows for e in r["loop_errors"]
    )
    assert audited == sorted(
        (e["rule"], tuple(e["ids"]), e["where"]) for e in recorded["loop_errors"]
    )
    assert code == 1  # the demo's findings fail the default budget


def rewrite(source: Path, target: Path, form: str) -> Path:
    """The same interactions with their bodies stored another way, as projects' cassettes do."""
    data = yaml.safe_load(source.read_text())
    for interaction in data["interactions"]:
        request, response = interaction["request"], interaction["response"]
        body = response["body"]["string"]
        body = body if isinstance(body, bytes) else body.encode()  # an event stream is !!binary
        kind = str(response["headers"].get("content-type", ""))
        json_body = "json" in kind and "ndjson" not in kind  # NDJSON is lines, not one value
        if form == "binary":  # base64 !!binary, both ways
            response["body"]["string"] = body
            request["body"] = (
                request["body"]
                if isinstance(request["body"], bytes)
                else (request["body"] or "").encode()
            )
        elif form in ("gzip", "br"):
            packed = gzip.compress(body) if form == "gzip" else brotli.compress(body)
            response["body"]["string"] = packed
            response["headers"]["Content-Encoding"] = [form]
        elif form == "parsed" and json_body:  # a custom serialiser's parsed JSON
            response["parsed_body"] = json.loads(body)
            del response["body"]
            request["parsed_body"] = json.loads(request.pop("body"))
    target.write_text(yaml.dump(data, Dumper=yaml.SafeDumper, allow_unicode=True))
    return target


@pytest.mark.parametrize("form", ["binary", "gzip", "br", "parsed"])
def test_every_body_form_gives_the_same_verdicts(recorded, form, tmp_path):
    _, plain, _ = verdicts("--cassettes", str(recorded["cassette"]))
    cassette = rewrite(recorded["cassette"], tmp_path / f"{form}.yaml", form)
    text = cassette.read_text()
    # vcrpy keeps Bedrock's event stream as !!binary: the one response body that is not text.
    binary = len(HTTP_STEPS) if form in ("binary", "gzip", "br") else 1
    assert text.count("string: !!binary") == binary
    assert ("parsed_body" in text) == (form == "parsed")
    _, rows, _ = verdicts("--cassettes", str(cassette))
    assert [key(r) for r in rows] == [key(r) for r in plain]
    streamed = [r for r in rows if r["stream"]]
    assert streamed and all(r["outcome"] == "inspected" for r in streamed)  # SSE bodies too


def test_fail_on_names_what_fails_and_an_unknown_name_is_a_usage_error(recorded):
    cassette = str(recorded["cassette"])
    assert audit("--cassettes", cassette).returncode == 1  # the default set
    assert audit("--cassettes", cassette, "--fail-on", "duplicate-result").returncode == 0
    failing = audit("--cassettes", cassette, "--fail-on", "orphan-result,argument-parse")
    assert failing.returncode == 1
    assert failing.stdout.splitlines()[-1].endswith(", 2 finding(s)")
    wrong = audit("--cassettes", cassette, "--fail-on", "strict-void,strict-voids")
    assert wrong.returncode == 2 and "unknown finding(s) strict-voids" in wrong.stderr


def test_max_exposure_fails_above_the_budget_only(recorded):
    cassette = str(recorded["cassette"])
    _, _, summary = verdicts("--cassettes", cassette)
    rate = summary["rate"]
    assert 0 < rate < 1
    calm = ("--cassettes", cassette, "--fail-on", "duplicate-result")
    assert audit(*calm, "--max-exposure", f"{rate * 100 + 1:.0f}%").returncode == 0
    over = audit(*calm, "--max-exposure", f"{rate / 2:.3f}")
    assert over.returncode == 1
    assert "over the budget of" in over.stdout


ID = re.compile(r"\b(resp|call|toolu|msg|chatcmpl|fc)([_-])([A-Za-z0-9]{6,})")


def rerecorded(source: Path, target: Path) -> Path:
    """The cassette as a second recording would have it: every id new, consistently."""
    fresh: dict[str, str] = {}

    def renew(match: re.Match[str]) -> str:
        old = match.group(0)
        if old not in fresh:
            fresh[old] = (
                f"{match.group(1)}{match.group(2)}rerec{len(fresh):06d}{match.group(3)[::-1]}"
            )
        return fresh[old]

    target.write_text(ID.sub(renew, source.read_text()))
    assert fresh  # there were ids to change
    return target


def test_a_baseline_lets_a_team_adopt_and_survives_a_re_recording(recorded, tmp_path):
    cassettes = tmp_path / "cassettes"
    cassettes.mkdir()
    cassette = cassettes / "demo.yaml"
    cassette.write_text(recorded["cassette"].read_text())
    baseline = tmp_path / "tooltap-baseline.json"
    written = audit("--cassettes", "cassettes", "--write-baseline", str(baseline), cwd=tmp_path)
    assert written.returncode == 0, written.stdout
    rows = json.loads(baseline.read_text())["findings"]
    assert rows and {r["source"] for r in rows} == {"cassettes/demo.yaml"}
    assert not any(ID.search(json.dumps(r)) for r in rows)  # keyed without ids

    rerecorded(recorded["cassette"], cassette)
    again = audit("--cassettes", "cassettes", "--baseline", str(baseline), cwd=tmp_path)
    assert again.returncode == 0, again.stdout
    held = sum(r["count"] for r in rows)
    assert again.stdout.splitlines()[-1].endswith(f", 0 finding(s) ({held} more in the baseline)")

    # A test that now makes the strict-void call twice: one finding past the baseline.
    data = yaml.safe_load(cassette.read_text())
    data["interactions"].insert(1, copy.deepcopy(data["interactions"][0]))
    cassette.write_text(yaml.dump(data, Dumper=yaml.SafeDumper))
    new = audit(
        "--cassettes", "cassettes", "--baseline", str(baseline), "--format", "json", cwd=tmp_path
    )
    assert new.returncode == 1
    failing = [json.loads(line) for line in new.stdout.splitlines()[:-1]]
    assert [r["failing"] for r in failing if r["failing"]] == [["strict-void"]]


def test_junit_is_read_back_by_a_junit_consumer(recorded, tmp_path):
    broken = tmp_path / "broken.yaml"  # an interaction without its response's status
    request = {"method": "POST", "uri": "https://api.openai.com/v1/responses", "body": "{}",
               "headers": {}}  # fmt: skip
    broken.write_text(
        yaml.safe_dump({"version": 1, "interactions": [{"request": request, "response": {}}]})
    )
    done = audit("--cassettes", str(recorded["cassette"]), str(broken), "--format", "junit")
    assert done.returncode == 1
    report = JUnitXml.fromstring(done.stdout.encode())
    suites = {suite.name: suite for suite in report}
    assert set(suites) == {str(recorded["cassette"]), str(broken), "exposure"}
    demo = suites[str(recorded["cassette"])]
    cases = list(demo)
    assert len(cases) == len(HTTP_STEPS)
    failed = [c for c in cases if any(isinstance(r, Failure) for r in c.result)]
    _, rows, summary = verdicts("--cassettes", str(recorded["cassette"]))
    assert len(failed) == sum(1 for r in rows if r["failing"]) == demo.failures
    first = failed[0].result[0]
    assert first.message == "strict-void" and "Repair: set parallel_tool_calls false" in first.text
    assert cases[0].name.startswith(f"{recorded['cassette']}:")  # the interaction's line
    (error,) = [r for c in suites[str(broken)] for r in c.result]
    assert isinstance(error, Error) and "cannot be rebuilt" in error.message
    assert report.failures == demo.failures and summary["findings"] >= demo.failures


COMMAND = re.compile(r"^::(error|warning|notice)(?: ([^:]*))?::(.*)$")


def test_github_output_is_workflow_commands_pointing_at_the_interaction(recorded):
    done = audit("--cassettes", str(recorded["cassette"]), "--format", "github")
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    parsed = [COMMAND.match(line) for line in lines]
    assert all(parsed), [line for line, m in zip(lines, parsed, strict=True) if not m]
    errors = [m for m in parsed if m and m.group(1) == "error"]
    properties = [dict(p.split("=", 1) for p in m.group(2).split(",")) for m in errors]
    text = recorded["cassette"].read_text().splitlines()
    for props in properties:
        assert props["file"] == str(recorded["cassette"]).replace(":", "%3A")
        assert text[int(props["line"]) - 1].startswith("- request:")  # where it starts
    assert {p["title"] for p in properties} >= {"tooltap%3A strict-void", "tooltap%3A rejected"}
    assert parsed[-1].group(1) == "notice" and "exposure" in parsed[-1].group(3)


def cassette_of_jsonl(source: Path, target: Path) -> None:
    """The real-world corpus written back into vcrpy's cassette format (version 1)."""

    def text(body: Any) -> str:  # a JSON value is sent as its JSON text, as --jsonl reads it
        return body if isinstance(body, str) else json.dumps(body)

    interactions = []
    for line in source.read_text().splitlines():
        record = json.loads(line)
        interactions.append(
            {
                "request": {
                    "method": record["method"],
                    "uri": record["url"],
                    "body": text(record["request_body"]),
                    "headers": {k: [v] for k, v in (record.get("request_headers") or {}).items()},
                },
                "response": {
                    "status": {"code": record["status"], "message": ""},
                    "headers": {k: [v] for k, v in record["response_headers"].items()},
                    "body": {"string": text(record["response_body"])},
                },
            }
        )
    data = {"version": 1, "interactions": interactions}
    target.write_text(yaml.dump(data, Dumper=yaml.SafeDumper, allow_unicode=True))


def test_the_real_world_corpus_as_a_cassette_gives_the_verdicts_of_jsonl(tmp_path):
    cassette = tmp_path / "realworld.yaml"
    cassette_of_jsonl(REALWORLD, cassette)
    # One cassette is one recording, whose tools are pinned together: so is the JSONL file
    # once its lines no longer name the recordings they came from.
    one_recording = tmp_path / "realworld.jsonl"
    lines = [json.loads(line) for line in REALWORLD.read_text(encoding="utf-8").splitlines()]
    one_recording.write_text("".join(json.dumps({**r, "source": None}) + "\n" for r in lines))
    _, from_jsonl, jsonl_summary = verdicts("--jsonl", str(one_recording))
    _, from_cassette, summary = verdicts("--cassettes", str(cassette))
    assert len(from_cassette) == len(from_jsonl) == 1182
    strip = ("label", "inspect_ms")

    def kept(rows: list[dict[str, Any]], recording: Path) -> str:  # the recordings named alike
        shown = [{k: v for k, v in r.items() if k not in strip} for r in rows]
        return json.dumps(shown).replace(str(recording), "RECORDING")

    assert kept(from_cassette, cassette) == kept(from_jsonl, one_recording)
    # The summary names the recordings that keep no times: each its own file.
    assert kept([summary], cassette) == kept([jsonl_summary], one_recording)


AUDIT_DOC = Path(__file__).parents[2] / "docs" / "audit.md"
AGENT_TESTS = """\
import pytest

from tooltap.addon.commands.demo_steps import STEPS, Clients, client_errors

UPSTREAM = "{upstream}"
BY_NAME = {{step.name: step for step in STEPS}}


@pytest.fixture(scope="module")
def vcr_config():
    return {{"filter_headers": ["authorization", "x-api-key"]}}


@pytest.mark.vcr
@pytest.mark.parametrize("name", {names!r})
def test_agent_step(name):
    step = BY_NAME[name]
    try:
        step.call(Clients(UPSTREAM, {{"x-demo-step": name}}))
    except client_errors():
        assert step.expect_error
"""


def readme_ci() -> tuple[list[str], list[str]]:
    """The "In CI" section's commands: the one-time adoption, and the workflow's `run:` lines."""
    section = AUDIT_DOC.read_text().split("## In CI", 1)[1].split("\n## ", 1)[0]
    shell = re.search(r"```sh\n(.*?)```", section, re.S)
    workflow = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert shell is not None and workflow is not None
    adopt = [line.split("  #")[0].strip() for line in shell.group(1).splitlines() if line.strip()]
    steps = yaml.safe_load(workflow.group(1))["jobs"]["tool-calls"]["steps"]
    return adopt, [step["run"] for step in steps if "run" in step]


def run(line: str, project: Path) -> subprocess.CompletedProcess[str]:
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ["PATH"]}
    return subprocess.run(
        line, shell=True, cwd=project, env=env, capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip


@pytest.fixture
def held_port() -> Iterator[int]:
    """A loopback port kept for this test while no server listens on it: bound and not listening,
    so a connection to it is refused as to no server, and no other process (the suite's other
    worker) can take it meanwhile. A ReplayServer may listen on it (both reuse the address)."""
    with socket.socket() as hold:
        hold.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        hold.bind(("127.0.0.1", 0))
        yield hold.getsockname()[1]


def test_the_readmes_ci_section_command_for_command_on_a_temporary_project(tmp_path, held_port):
    adopt, workflow = readme_ci()
    install, *checks = workflow
    assert install.startswith("pip install") and "tooltap" in install  # this venv has both
    project = tmp_path / "agent"
    (project / "tests").mkdir(parents=True)
    test_file = project / "tests" / "test_agent.py"
    today = ["chat-stream-one-call", "anthropic-parallel", "chat-serialised", "responses-fanout"]
    # The cassettes name the upstream's address: the second recording needs the same port.
    with ReplayServer(route, port=held_port) as upstream:
        test_file.write_text(AGENT_TESTS.format(upstream=upstream.url, names=today))
        for line in adopt:  # record once, and adopt with a baseline
            done = run(line, project)
            assert done.returncode == 0, (line, done.stdout[-3000:], done.stderr[-3000:])
    cassettes = sorted((project / "tests" / "cassettes").rglob("*.yaml"))
    assert len(cassettes) == len(today)
    assert "sk-test" not in "".join(c.read_text() for c in cassettes)  # filtered when recorded

    # CI, with no upstream at all: the suite replays, the audit passes on the baseline.
    results = [run(line, project) for line in checks]
    assert [r.returncode for r in results] == [0, 0], [r.stdout[-2000:] for r in results]
    gate = results[-1].stdout.splitlines()
    assert not [line for line in gate if line.startswith("::error")]
    assert gate[-1].startswith("::notice title=tooltap audit::4 response(s) read, 0 finding(s)")

    # A change makes a new fan-out under strict tools: a finding, and the exposure over budget.
    test_file.write_text(AGENT_TESTS.format(upstream=upstream.url, names=[*today, "chat-fanout"]))
    with ReplayServer(route, port=held_port):  # recorded at the same address as before
        recorded = run("pytest --record-mode=once -k chat-fanout", project)
        assert recorded.returncode == 0, recorded.stdout[-3000:]
    results = [run(line, project) for line in checks]
    assert [r.returncode for r in results] == [0, 1]
    errors = [line for line in results[-1].stdout.splitlines() if line.startswith("::error")]
    new = "file=tests/cassettes/test_agent/test_agent_step[chat-fanout].yaml,line=2"
    assert [e.split("::")[1] for e in errors] == [
        f"error title=tooltap%3A strict-void,{new}",
        "error title=tooltap%3A exposure over budget",
    ]


def test_the_budgets_and_formats_work_on_every_input_and_a_missing_path_is_a_usage_error(
    tmp_path,
):
    gate = audit("--jsonl", str(REALWORLD), "--fail-on", "rejected", "--format", "github")
    assert gate.returncode == 1
    errors = [line for line in gate.stdout.splitlines() if line.startswith("::error")]
    assert len(errors) == 42  # the corpus's 4xx, each at its line of the file
    assert all(f"file={REALWORLD},line=" in e and "title=tooltap%3A rejected" in e for e in errors)
    notes = tmp_path / "notes.yaml"
    notes.write_text("hello: world\n")
    read = audit("--cassettes", str(tmp_path), "--fail-on", "strict-void")
    assert read.returncode == 0
    assert (
        f"unreadable          {notes}  not a VCR cassette: it has no 'interactions'" in read.stdout
    )
    missing = audit("--cassettes", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "no such file or folder" in missing.stderr
