"""The plugin installed the way users install it: a fresh venv outside the repo, `pip install`
of tooltap with no extras, pytest and the openai SDK; then `pytest --tooltap` in a small sample
project of its own, found through the pytest11 entry point."""

from __future__ import annotations

import subprocess
from importlib.metadata import version
from pathlib import Path

import pytest
from support import sidevenv

SAMPLE = """
import httpx2
import openai
import pytest

TOOLS = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
         for n in ("get_weather", "get_traffic")]
CALLS = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4.1",
         "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
             "role": "assistant", "content": None, "tool_calls": [
                 {"id": i, "type": "function", "function": {"name": n, "arguments": "{}"}}
                 for i, n in (("c1", "get_weather"), ("c2", "get_traffic"))]}}]}
DONE = {**CALLS, "choices": [{"index": 0, "finish_reason": "stop",
                              "message": {"role": "assistant", "content": "Mild."}}]}


def agent(answered):
    script = iter([CALLS, DONE])
    transport = httpx2.MockTransport(lambda request: httpx2.Response(200, json=next(script)))
    client = openai.OpenAI(api_key="sk-test", base_url="http://model.test/v1",
                           http_client=httpx2.Client(transport=transport))
    messages = [{"role": "user", "content": "Lisbon?"}]
    message = client.chat.completions.create(model="gpt-4.1", messages=messages, tools=TOOLS)
    messages.append(message.choices[0].message.model_dump(exclude_none=True))
    for call in message.choices[0].message.tool_calls[:answered]:
        messages.append({"role": "tool", "tool_call_id": call.id, "content": "{}"})
    client.chat.completions.create(model="gpt-4.1", messages=messages, tools=TOOLS)


def test_answers_every_call(tooltap):
    agent(answered=2)
    tooltap.assert_clean()


def test_answers_the_first_call_only():
    agent(answered=1)
"""


def run(*argv: str | Path, cwd: Path | None = None, timeout: float = 120):
    return subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, timeout=timeout, cwd=cwd,
        check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sample project with its own venv: tooltap (no extras), pytest, openai."""
    root = tmp_path_factory.mktemp("sample-project")
    pins = [f"pytest=={version('pytest')}", f"openai=={version('openai')}"]  # pip's cache
    sidevenv.fresh(root, *pins)
    (root / "tests").mkdir()
    (root / "tests" / "test_agent.py").write_text(SAMPLE)
    return root


def test_pytest_finds_the_plugin_and_strict_mode_fails_the_loop_that_drops_a_call(project):
    pytest_ = project / "venv/bin/pytest"
    plain = run(pytest_, "-p", "no:cacheprovider", "tests", cwd=project)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert "tooltap-0.1.0" in plain.stdout  # listed among the plugins
    strict = run(pytest_, "-p", "no:cacheprovider", "--tooltap=strict", "tests", cwd=project)
    assert strict.returncode == 1, strict.stdout + strict.stderr
    assert "1 failed, 1 passed" in strict.stdout
    assert "FAILED tests/test_agent.py::test_answers_the_first_call_only" in strict.stdout
    assert "  unanswered-call: c2 at messages.1. Repair: answer every call" in strict.stdout
    assert "4 exchange(s) read in 2 test(s); 3 finding(s)" in strict.stdout
