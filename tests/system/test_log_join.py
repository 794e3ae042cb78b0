"""The jq queries of docs/reference.md ("Joining the lines of an exchange"), run as they are
written over the log of a real `tooltap run`: an Anthropic request refused with a 400 (a
request_rejected and a warning turn), between Chat turns that hold nothing to warn about. The
lines of one exchange join on `exchange` alone, whatever their order.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
from support.captures import pairs
from support.flows import CHAT_REQUEST
from support.scenarios import route

from tooltap.addon.harness.launch import Proxy
from tooltap.addon.harness.replay import ReplayServer

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "reference.md"
pytestmark = pytest.mark.timeout(120)


def documented_queries() -> list[list[str]]:
    """The jq commands of the joining section, each as its arguments (the file name last)."""
    section = REFERENCE.read_text(encoding="utf-8").split("### Joining the lines of an exchange")[1]
    block = re.search(r"```sh\n(.*?)```", section, flags=re.S)
    assert block is not None
    commands = [c.strip() for c in block.group(1).split("\n\n") if c.strip().startswith("jq")]
    parsed = []
    for command in commands:
        # The shell's quoting, as the docs write it: single-quoted programs, plain words.
        words = re.findall(r"'([^']*)'|(\S+)", command.replace("\n", " "))
        parsed.append([quoted or plain for quoted, plain in words])
    return parsed


def jq(args: list[str], log: Path) -> list[dict]:
    binary = shutil.which("jq")
    assert binary, "jq not found: install Debian's `jq` package (./dev test does)"
    *options, _file = args[1:]
    done = subprocess.run(
        [binary, *options, str(log)], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The proxy's stdout as a file, and the exchange id of the refused request."""
    refused = pairs("anthropic_400_orphan_tool_result.json")[0].request
    # The same tools, none strict nor closed: a fan-out with no guarantee to lose, said at info.
    loose = json.loads(json.dumps(CHAT_REQUEST))
    for tool in loose["tools"]:
        del tool["function"]["strict"]
        tool["function"]["parameters"].pop("additionalProperties", None)
    with (
        ReplayServer(route) as upstream,
        Proxy.tooltap([upstream.url], "--log-format", "json") as proxy,
        httpx.Client(base_url=proxy.url, timeout=10) as client,
    ):
        for scenario, path, body in [
            ("chat-json", "/v1/chat/completions", loose),
            ("messages-400", "/v1/messages", refused),
            ("chat-json", "/v1/chat/completions", loose),
        ]:
            client.post(path, json=body, headers={"x-scenario": scenario})
        turns = proxy.wait_for("turn", 3)
        assert len(turns) == 3
        events = list(proxy.events)
    (warning,) = [t for t in turns if t["level"] == "warning"]
    # Shuffled: two replicas writing, or Loki, keep no order; the join needs none.
    random.Random(7).shuffle(events)
    path = tmp_path_factory.mktemp("log") / "tooltap.log"
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    return path, warning["exchange"]


def written(path: Path, exchange: str) -> list[dict]:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line.get("exchange") == exchange]


def test_the_first_query_finds_every_line_of_one_exchange_and_nothing_else(log):
    path, exchange = log
    one, _ = documented_queries()
    args = [exchange if word == "5a3c1e2f9b7d" else word for word in one]
    lines = jq(args, path)
    assert {"request_rejected", "turn"} <= {line["event"] for line in lines}
    assert sorted(map(json.dumps, lines)) == sorted(map(json.dumps, written(path, exchange)))
    assert {(line["path"], line["response_id"]) for line in lines} == {("/v1/messages", None)}


def test_the_second_query_gives_each_warning_turn_with_its_findings_and_lines(log):
    path, exchange = log
    _, warnings = documented_queries()
    (found,) = jq(warnings, path)  # the Chat turns hold no finding that warns
    (turn,) = [line for line in written(path, exchange) if line["event"] == "turn"]
    assert found["exchange"] == exchange and found["path"] == "/v1/messages"
    assert found["findings"] == turn["findings"] and "rejected" in found["findings"]
    others = [line for line in written(path, exchange) if line["event"] != "turn"]
    assert sorted(line["event"] for line in found["lines"]) == sorted(e["event"] for e in others)
    (rejected,) = [line for line in found["lines"] if line["event"] == "request_rejected"]
    assert rejected["status"] == 400
