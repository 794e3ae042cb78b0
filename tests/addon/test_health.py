"""The proxy's health endpoint in mitmproxy's test context: served on the running event loop,
/livez answering, /readyz saying why it is not ready, never the inspector's state."""

from __future__ import annotations

import asyncio

import httpx
from mitmproxy.test import taddons

from tooltap.addon.proxy.addon import Tooltap
from tooltap.addon.proxy.health import readiness


def listener(**fields):
    return {"mode": "reverse:https://api.openai.com@8080", "upstream": "https://api.openai.com",
            "listening": ["127.0.0.1:8080"], "running": True, "error": None} | fields  # fmt: skip


def test_ready_once_every_listener_listens_with_its_upstream_and_why_not_otherwise():
    assert readiness([]) == "no listener yet"
    assert readiness([listener()]) is None
    down = listener(running=False, error="[Errno 98] address already in use")
    assert readiness([listener(), down]) == (
        "reverse:https://api.openai.com@8080 is not listening: [Errno 98] address already in use"
    )
    assert (
        readiness([listener(upstream="")]) == "reverse:https://api.openai.com@8080 has no upstream"
    )


async def test_the_endpoint_answers_on_the_event_loop_and_says_why_it_is_not_ready():
    addon = Tooltap()
    with taddons.context(addon) as tctx:
        tctx.configure(addon, tooltap_health="127.0.0.1:0", tooltap_inspector="thread")
        addon.health.running()
        await asyncio.sleep(0.1)  # the server starts as a task on this loop
        url = addon.health.url
        assert url is not None
        async with httpx.AsyncClient(timeout=5) as client:
            live = await client.get(url + "livez")
            ready = await client.get(url + "readyz")
            head = await client.head(url + "readyz")
            missing = await client.get(url + "metrics")
            posted = await client.post(url + "livez")
        assert live.status_code == 200 and live.json()["status"] == "live"
        # No proxy server in this context: nothing listens, so not ready, and it says so.
        assert ready.status_code == 503
        assert ready.json()["reason"] == "no listener yet"
        assert ready.json()["inspector"] == {"state": "up", "where": "thread"}
        assert head.status_code == 503 and head.content == b""
        assert missing.status_code == 404 and posted.status_code == 405
        addon.health.done()  # mitmproxy calls a sub-addon's hooks after its parent's
        addon.done()
        assert addon.health.url is None
        await asyncio.sleep(0.05)
        async with httpx.AsyncClient(timeout=5) as client:
            try:
                await client.get(url + "livez")
                raise AssertionError("the health port is still open")
            except httpx.ConnectError:
                pass
