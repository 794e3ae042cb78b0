"""tooltap demo end to end: its summary, read from the real proxy, matches the scenario it plays."""

import io
import re
import subprocess
from pathlib import Path

from rich.console import Console

from tooltap.addon.demo import run
from tooltap.addon.demo_script import STEPS

ROOT = Path(__file__).parent.parent


def test_the_demo_summary_matches_the_scripted_scenario():
    out = io.StringIO()
    summary = run(Console(file=out, width=200))
    assert summary.turns == {
        "strict-void": 1,
        "strict-at-risk": 1,
        "strict-serialised": 1,
        "fanout-no-strict": 2,
        "no-strict-declared": 3,
        "no-tools": 1,
    }
    assert summary.exposure == 0.5
    assert summary.unguaranteed == 3
    assert summary.formats == {"free-text": 8, "advisory-schema": 1}
    assert summary.argument_errors == {"schema": 1, "parse": 1}
    assert summary.loop_errors == {"unanswered-call": 1, "split-results": 1, "orphan-result": 1}
    assert summary.tool_results == {"ok": 5, "error": 1}
    assert summary.rejected == {"400": 3}
    assert summary.flows == {"inspected": len(STEPS)}
    assert summary.internal_errors == 0
    repairs = "\n".join(summary.repairs)
    assert "set parallel_tool_calls false whenever strict schemas matter" in repairs
    assert (
        "the 400 is explained: tool create_ticket: $: needs additionalProperties: false" in repairs
    )
    assert (
        "put every tool_result for one assistant turn into the single next user message" in repairs
    )
    text = out.getvalue()
    for event in (
        "turn",
        "tool_call",
        "loop_error",
        "request_rejected",
        "tool_result_error",
        "no_tool_call",
    ):
        assert f"] {event} " in text, event  # the live log, in the console renderer's shape
    assert (
        "exposure rate (strict-void / at-risk turns): 50%, 3 argument object(s) with no guarantee"
        in text
    )


def test_the_readme_quick_start_demo_command_runs_as_written():
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"## Quick start.*?```(?:sh|bash)?\n(.*?)```", readme, re.S).group(1)
    command = next(line.split("#")[0].strip() for line in block.splitlines() if "demo" in line)
    done = subprocess.run(
        command, shell=True, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "exposure rate (strict-void / at-risk turns): 50%" in done.stdout
    assert "every process and port is closed" in done.stdout
