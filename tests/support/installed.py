"""What an installed tooltap must do, however it was installed (a plain venv, the container image):
forward exchanges byte for byte, log a `turn` line for each, and count them on /metrics.

The expected states are literals read off the captures by hand: two calls of a strict tool with
`parallel_tool_calls` left on is strict-void; one call of a tool declared without strict is
no-strict-declared.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tooltap.addon.harness.launch import Proxy

from .upstreams import Got, fetch, upstream_headers

STRICT_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "strict": True,
            "parameters": {
                "type": "object",
                "additionalProperties": False,
                "required": list(properties),
                "properties": {key: {"type": "string"} for key in properties},
            },
        },
    }
    for name, properties in (
        ("GetWeatherArgs", ("city", "country", "units")),
        ("get_stock_price", ("ticker", "exchange")),
    )
]
CHAT = {
    "model": "gpt-4o",
    "messages": [{"role": "user", "content": "Weather in Edinburgh, and AAPL?"}],
    "tools": STRICT_TOOLS,
}
MESSAGES = {
    "model": "claude-sonnet-4-20250514",
    "max_tokens": 1024,
    "stream": True,
    "messages": [{"role": "user", "content": "Weather in San Francisco?"}],
    "tools": [
        {
            "name": "get_weather",
            "input_schema": {"type": "object", "properties": {"location": {"type": "string"}}},
        }
    ],
}


@dataclass(frozen=True)
class Exchange:
    path: str
    scenario: str  # the loopback upstream's reply (support.scenarios)
    body: dict[str, Any]
    api: str
    state: str
    calls: int


EXCHANGES = [
    Exchange("/v1/chat/completions", "chat-json", CHAT, "chat", "strict-void", 2),
    Exchange(
        "/v1/chat/completions", "chat-sse", {**CHAT, "stream": True}, "chat", "strict-void", 2
    ),
    Exchange("/v1/messages", "messages-sse", MESSAGES, "messages", "no-strict-declared", 1),
]


def undated(got: Got) -> list[tuple[str, str]]:
    return [(name, value) for name, value in upstream_headers(got) if name != "date"]


def send_through(proxy: Proxy, upstream_url: str) -> None:
    """Each exchange through the proxy and straight to the upstream: the client sees the same."""
    with httpx.Client() as client:
        for exchange in EXCHANGES:
            body = json.dumps(exchange.body).encode()
            headers = {"x-scenario": exchange.scenario}
            proxied = fetch(client, proxy.url + exchange.path, body, headers)
            direct = fetch(client, upstream_url + exchange.path, body, headers)
            assert proxied.error is None and proxied.status == 200, proxied
            assert proxied.body == direct.body, exchange.scenario
            # The reverse proxy may redo the framing headers only (mitmproxy's own behaviour);
            # the upstream dates each reply, so two replies may be a second apart.
            assert undated(proxied) == undated(direct), exchange.scenario


def check_reported(proxy: Proxy, metrics_url: str) -> None:
    """One `turn` line per exchange, in order, with its state; the counters say the same."""
    turns = proxy.wait_for("turn", len(EXCHANGES))
    assert [(t["api"], t["path"], t["state"], t["calls"]) for t in turns] == [
        (e.api, e.path, e.state, e.calls) for e in EXCHANGES
    ]
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(httpx.get(metrics_url, timeout=10).text)
        for sample in family.samples
    }
    turned = {
        (dict(labels)["api"], dict(labels)["state"]): value
        for (name, labels), value in samples.items()
        if name == "tooltap_turns_total" and value
    }
    assert turned == {("chat", "strict-void"): 2.0, ("messages", "no-strict-declared"): 1.0}
    flows = {
        dict(labels)["api"]: value
        for (name, labels), value in samples.items()
        if name == "tooltap_flows_total" and dict(labels)["outcome"] == "inspected" and value
    }
    assert flows == {"chat": 2.0, "messages": 1.0}
