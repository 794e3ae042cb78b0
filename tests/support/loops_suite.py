"""The scripted loops as a team's own test module: run by pytest under `--tooltap` (in a
pytester subprocess), one mock at a time (LOOPS_MOCK): httpx2's MockTransport, respx, or a vcrpy
cassette from LOOPS_CASSETTES. The tests assert nothing of tooltap: the plugin is under test."""

from __future__ import annotations

import asyncio
import os
from contextlib import ExitStack
from pathlib import Path

import httpx2
import loops
import pytest

MOCK = os.environ["LOOPS_MOCK"]
CASES = [(sdk, loop) for sdk in ("openai", "anthropic") for loop in loops.LOOPS]
CASES.remove(("openai", "split"))  # one message per result is Chat's own shape


def cassette(sdk: str, stream: bool) -> str:
    return str(Path(os.environ["LOOPS_CASSETTES"]) / f"{sdk}-{'sse' if stream else 'json'}.yaml")


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize(("sdk", "loop"), CASES)
def test_loop(sdk, loop, stream, asynchronous):
    player = loops.Player(sdk, stream)
    http_client = None
    with ExitStack() as stack:
        if MOCK == "transport":
            transport = httpx2.MockTransport(player.handler(httpx2, asynchronous))
            kind = httpx2.AsyncClient if asynchronous else httpx2.Client
            http_client = kind(transport=transport)
        elif MOCK == "respx":
            import httpx  # httpx2, as httpx2.alias_httpx() made it: respx mocks through it
            import respx

            assert httpx is httpx2
            router = stack.enter_context(respx.mock(assert_all_called=True))
            router.post(f"{loops.BASE}{loops.PATH[sdk]}").mock(
                side_effect=player.handler(httpx, asynchronous)
            )
        else:
            import vcr

            stack.enter_context(vcr.use_cassette(cassette(sdk, stream), record_mode="none"))
        client = loops.client(sdk, asynchronous, http_client)
        if asynchronous:
            said = asyncio.run(loops.run_async(sdk, client, loop, stream))
        else:
            said = loops.run(sdk, client, loop, stream)
    assert said == "Mild, light traffic, nothing on."
