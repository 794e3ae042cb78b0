"""`pytest --tooltap` with the other clients agent code uses, each run a pytest subprocess
(pytester), each client built as by default: google-genai (httpx2, or httpx when asked; sync and
async; generate_content and generate_content_stream) and ollama (httpx; sync and async; chat
whole and streamed) against a scripted loopback model (tests/support/agents.py), and the mcp
SDK's client sessions (Streamable HTTP with SSE or JSON answers, and the legacy HTTP+SSE
transport) against the SDK's own servers (tests/support/mcp_server.py,
mcp_definitions_server.py). Each scripted case gets exactly its finding, a correct run none;
a tool list change the server says on its GET stream in the middle of a test is applied before
the next call is read."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import agents
from support.mcp_server import running

SUPPORT = Path(agents.__file__).parent

MODELS = '''
import asyncio

import agents
import httpx
import httpx2
import pytest
from tooltap.addon.harness.replay import ReplayServer

KEY = "test-key-0123456789abcdef"


def said(tooltap):
    """Each exchange's API, whether streamed, and the calls read in it; the findings by name."""
    read = [(v.api, v.outcome, v.stream, [c.name for c in v.calls]) for v in tooltap.verdicts]
    return read, sorted(tooltap.findings)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("case", agents.CASES)
@pytest.mark.parametrize("backend", ["httpx2", "httpx"])
def test_gemini(tooltap, monkeypatch, backend, case, stream, asynchronous):
    from google import genai
    from google.genai import _api_client, types

    # With aiohttp installed, the async client would use it, which tooltap does not watch.
    assert not _api_client.has_aiohttp
    monkeypatch.setenv("GOOGLE_GENAI_HTTP_CLIENT", backend)  # the SDK's own switch
    with ReplayServer(agents.gemini_route(case)) as server:
        options = types.HttpOptions(base_url=server.url)
        client = genai.Client(api_key=KEY, http_options=options)
        loop = agents.gemini_loop_async if asynchronous else agents.gemini_loop
        text = asyncio.run(loop(client, stream)) if asynchronous else loop(client, stream)
    assert text == "".join(agents.ANSWER)
    library = {"httpx2": httpx2, "httpx": httpx}[backend]
    transport = client._api_client._async_httpx_client if asynchronous else (
        client._api_client._httpx_client)
    assert isinstance(transport, (library.AsyncClient, library.Client))
    assert said(tooltap) == (
        [("gemini", "inspected", stream, ["get_weather"]), ("gemini", "inspected", stream, [])],
        sorted(agents.EXPECTED[case]),
    )


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("case", agents.CASES)
def test_ollama(tooltap, case, stream, asynchronous):
    import ollama

    with ReplayServer(agents.ollama_route(case)) as server:
        if asynchronous:
            client = ollama.AsyncClient(host=server.url)
            text = asyncio.run(agents.ollama_loop_async(client, stream))
        else:
            text = agents.ollama_loop(ollama.Client(host=server.url), stream)
    assert text == "".join(agents.ANSWER)
    assert said(tooltap) == (
        [("ollama", "inspected", stream, ["get_weather"]), ("ollama", "inspected", stream, [])],
        sorted(agents.EXPECTED[case]),
    )
'''


def test_google_genai_and_ollama_loops_each_get_exactly_their_finding(pytester):
    pytester.makepyfile(agents=(SUPPORT / "agents.py").read_text(), test_models=MODELS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--tooltap", timeout=240)
    result.assert_outcomes(passed=2 * 2 * 2 * 2 + 2 * 2 * 2)


SESSIONS = """
import os

import anyio
import mcp_types as types
import pytest
from mcp_client import attempt, in_session

SERVER, DEFINITIONS = os.environ["MCP_SERVER"], os.environ["MCP_DEFINITIONS"]
# What each session calls, and the finding the off-schema calls must get, alone.
WEATHER = {
    "correct": [("add", {"a": 2, "b": 3}), ("weather", {"city": "Oslo"})],
    "off-schema": [("add", {"a": 2, "b": 3}), ("add", {"a": "x"})],  # an argument off its schema
}
PAGED = {
    "correct": [("t2", {"q": "a"})],
    "off-schema": [("t2", {"q": "a"}), ("t0", {"q": "a"})],  # a result off its outputSchema
}
CASES = [
    ("/sse/mcp", WEATHER, "argument-schema"),  # Streamable HTTP, answers as SSE
    ("/json/mcp", WEATHER, "argument-schema"),  # ... and as JSON
    ("/legacy/sse", WEATHER, "argument-schema"),  # HTTP+SSE: answered on the GET stream
    ("/lo/mcp", PAGED, "result-schema"),
]


@pytest.mark.parametrize("case", ["correct", "off-schema"])
@pytest.mark.parametrize(("path", "script", "finding"), CASES, ids=[c[0] for c in CASES])
def test_session(tooltap, path, script, finding, case):
    async def work(session):
        await session.list_tools()
        return [await attempt(session.call_tool(name, arguments)) for name, arguments in
                script[case]]

    in_session(SERVER + path, work)
    calls = [c.name for v in tooltap.verdicts for c in v.calls]
    assert calls == [name for name, _ in script[case]]  # every call read, in its session
    # The GET stream is read as it comes and counts as no exchange of its own: every exchange
    # is MCP's and read, but Streamable HTTP's closing DELETE, which says nothing to read.
    outcomes = [(v.api, v.outcome) for v in tooltap.verdicts]
    closing = [] if path.endswith("/sse") else [(None, "not_read")]
    assert outcomes == [("mcp", "inspected")] * (len(outcomes) - len(closing)) + closing
    assert sorted(tooltap.findings) == ([] if case == "correct" else [finding])
    assert all(len(found) == 1 for found in tooltap.findings.values())


def test_a_list_change_on_the_get_stream_is_applied_before_the_next_call(tooltap):
    told = anyio.Event()

    async def on_message(message):
        if isinstance(message, types.ToolListChangedNotification):
            told.set()  # tooltap read it from the GET stream before handing it on

    async def work(session):
        await session.list_tools()  # forecast takes a city
        await session.call_tool("forecast", {"town": "Oslo"})  # off the list: a finding
        await session.call_tool("shift", {})  # forecast takes a town now; the GET stream says so
        with anyio.fail_after(10):
            await told.wait()
        await session.call_tool("forecast", {"town": "Oslo"})  # on the new list: no finding

    in_session(DEFINITIONS + "/shifting/mcp", work, message_handler=on_message)
    (first,) = tooltap.findings["argument-schema"]
    assert list(tooltap.findings) == ["argument-schema"]
    assert first.startswith("call 3 (forecast): ")
    (last,) = [v for v in tooltap.verdicts if [c.name for c in v.calls] == ["forecast"]][1:]
    assert last.unchecked == [
        f"call {last.calls[0].call_id}: arguments not validated, the server said its tool "
        "list changed (notifications/tools/list_changed), and it was not listed again since"
    ]
"""


@pytest.fixture(scope="module")
def mcp_servers():
    """The SDK's own servers, each in a child process on loopback, for the module."""
    with running() as server, running(str(SUPPORT / "mcp_definitions_server.py")) as definitions:
        yield server, definitions


def test_mcp_sessions_each_get_exactly_their_finding_and_a_list_change_is_applied_at_once(
    pytester, monkeypatch, mcp_servers
):
    server, definitions = mcp_servers
    monkeypatch.setenv("MCP_SERVER", server)
    monkeypatch.setenv("MCP_DEFINITIONS", definitions)
    pytester.makepyfile(mcp_client=(SUPPORT / "mcp_client.py").read_text(), test_mcp=SESSIONS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--tooltap", timeout=240)
    result.assert_outcomes(passed=4 * 2 + 1)
