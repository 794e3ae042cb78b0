"""Benchmark 3: RSS of the proxy over many mixed flows.

A fixed cycle of 20 flows: JSON from all three APIs (Responses ids unique, so
tooltap's previous_response_id map fills as in production), SSE, malformed
JSON, a truncated stream, a 400, and bodies above tooltap_max_body (set to
256 KiB here) as JSON and as SSE. Plain mitmdump gets the same traffic,
batch for batch, so growth that is mitmproxy's own shows in both columns.
RSS is sampled after each batch, once tooltap's worker has caught up.
"""

from __future__ import annotations

from typing import Any

from tooltap.addon.sinks.metrics import OUTCOMES

from . import bodies, client, targets
from .sizes import Size
from .stats import slope
from .upstream import MAX_BODY

MESSAGES_REQUEST = bodies.messages_pair()[0]
CYCLE = [
    *["chat-json"] * 5,
    *["responses-json"] * 4,
    *["messages-json"] * 2,
    *["chat-sse"] * 3,
    "responses-sse",
    "malformed-json",
    "truncated-sse",
    "rejected",
    "big-json",
    "big-sse",
]


def requests(url: str) -> list[bytes]:
    """One prebuilt request per slot of CYCLE."""
    chat, chat_stream = bodies.chat_request(), bodies.chat_request(stream=True)
    by_name = {
        "chat-json": (bodies.CHAT_PATH, chat),
        "responses-json": (bodies.RESPONSES_PATH, bodies.responses_request()),
        "messages-json": (bodies.MESSAGES_PATH, MESSAGES_REQUEST),
        "chat-sse": (bodies.CHAT_PATH, chat_stream),
        "responses-sse": (bodies.RESPONSES_PATH, bodies.responses_request()),
        "malformed-json": (bodies.CHAT_PATH, chat),
        "truncated-sse": (bodies.CHAT_PATH, chat_stream),
        "rejected": (bodies.CHAT_PATH, chat),
        "big-json": (bodies.CHAT_PATH, chat),
        "big-sse": (bodies.CHAT_PATH, chat_stream),
    }
    return [client.build_request(url, *by_name[name], scenario=name) for name in CYCLE]


SETTINGS: dict[Size, dict[str, int]] = {
    "full": {"flows": 50_000, "batch": 1_000, "warmup": 10_000, "concurrency": 8},
    "quick": {"flows": 3_000, "batch": 500, "warmup": 1_000, "concurrency": 8},
    "smoke": {"flows": 40, "batch": 20, "warmup": 20, "concurrency": 8},
}


async def run(size: Size) -> dict[str, Any]:
    cfg = SETTINGS[size]
    with targets.upstream() as (url, _pid):
        proxies = {
            "tooltap": targets.tooltap(url, "--set", f"tooltap_max_body={MAX_BODY}"),
            "mitmdump": targets.mitmdump(url),
        }
        # One RSS series per process: tooltap's proxy, its inspector process (if
        # inspection runs in one), and plain mitmdump.
        samples: dict[str, list[tuple[int, int]]] = {
            "tooltap": [],
            "tooltap-inspector": [],
            "mitmdump": [],
        }
        errors = dict.fromkeys(proxies, 0)
        with targets.started(*proxies.values()):
            ts = {name: targets.Target(name, p.url, p) for name, p in proxies.items()}
            raws = {name: requests(p.url) for name, p in proxies.items()}

            def sample(flows: int) -> None:
                samples["tooltap"].append((flows, ts["tooltap"].rss()))
                samples["tooltap-inspector"].append((flows, ts["tooltap"].children_rss()))
                samples["mitmdump"].append((flows, ts["mitmdump"].rss()))

            sample(0)
            done = 0
            while done < cfg["flows"]:
                for name, proxy in proxies.items():
                    cycle = raws[name]
                    before = proxy.turns
                    batch = await client.run_batch(
                        proxy.url,
                        lambda n, c=cycle, d=done: c[(d + n) % len(c)],  # type: ignore[misc]
                        cfg["batch"],
                        cfg["concurrency"],
                    )
                    errors[name] += batch.errors
                    if name == "tooltap":
                        proxy.wait_turns(before + cfg["batch"], timeout=10)
                done += cfg["batch"]
                sample(done)
                print(
                    f"  memory {done:>6} flows  "
                    + "  ".join(f"{n} {v[-1][1] / 2**20:6.1f} MiB" for n, v in samples.items()),
                    flush=True,
                )
            tooltap = proxies["tooltap"]
            outcomes = {o: tooltap.metric("tooltap_flows_total", outcome=o) for o in OUTCOMES}
            internal = tooltap.metric("tooltap_internal_errors_total")
            reloads = tooltap.reloads
    if not any(r for _, r in samples["tooltap-inspector"]):
        del samples["tooltap-inspector"]  # inspection ran inside the proxy
    summary = {}
    for name, points in samples.items():
        after = [(f, r) for f, r in points if f >= cfg["warmup"]]
        growth = slope([f for f, _ in after], [r for _, r in after]) * 10_000 / 2**20
        summary[name] = {
            "rss_start_mib": points[0][1] / 2**20,
            "rss_warm_mib": after[0][1] / 2**20 if after else float("nan"),
            "rss_end_mib": points[-1][1] / 2**20,
            "rss_max_mib": max(r for _, r in points) / 2**20,
            "growth_mib_per_10k_after_warmup": growth,
            "errors": errors.get(name.split("-")[0], 0),
        }
    return {
        "settings": cfg,
        "summary": summary,
        "tooltap_flows": outcomes,
        "tooltap_internal_errors": internal,
        "tooltap_reloads": reloads,
        "samples": {k: [[f, r] for f, r in v] for k, v in samples.items()},
    }
