"""Two real `tooltap run` replicas sharing one real redis-server: one set of findings.

A round-robin Service sends a client's exchanges to replicas in turn; here the
test does, alternating between replica A and B. A third `tooltap run` with no
shared state is what one replica finds. The upstream is a loopback replay
server, Redis a redis-server on loopback; each exchange waits for its own
`turn` line before the next is sent, as a client waits for its reply.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from support.prom import sample, scrape

from tooltap.addon.harness.launch import Proxy, free_port
from tooltap.addon.harness.redis_server import RedisServer
from tooltap.addon.harness.replay import ReplayServer, Reply, Seen

TOOLS = [{"type": "function", "name": "lookup"}]
SSE = [("content-type", "text/event-stream")]
DOWN = "did not answer"
BACK = "answers again"


class Upstream:
    """Replies by the request's x-reply header: the test says what each exchange gets."""

    def __init__(self) -> None:
        self.replies: dict[str, Reply] = {}
        self.server = ReplayServer(self.route)

    def route(self, seen: Seen) -> Reply:
        return self.replies[seen.headers["x-reply"]]


@dataclass
class Cluster:
    upstream: Upstream
    redis: RedisServer
    a: Proxy
    b: Proxy
    alone: Proxy  # one replica: no shared state


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    if RedisServer.missing():
        pytest.skip("redis-server is not installed (./dev test installs Debian's redis-server)")
    upstream = Upstream()
    redis = RedisServer(free_port()).start()
    shared = ("--log-format", "json", "--state", redis.url)
    with upstream.server:
        proxies = [
            Proxy.tooltap([upstream.server.url], *shared),
            Proxy.tooltap([upstream.server.url], *shared),
            Proxy.tooltap([upstream.server.url], "--log-format", "json"),
        ]
        try:
            for proxy in proxies:
                proxy.start()
            yield Cluster(upstream, redis, *proxies)
        finally:
            for proxy in proxies:
                proxy.stop()
            redis.stop()


def response(response_id: str, *call_ids: str, status: str = "completed", model: str = "gpt-4o"):
    output: list[dict[str, Any]] = [
        {"type": "function_call", "call_id": c, "name": "lookup", "arguments": '{"q": "x"}'}
        for c in call_ids
    ] or [{"type": "message", "role": "assistant", "content": [{"type": "output_text"}]}]
    if status != "completed":
        output = []
    return {"id": response_id, "status": status, "model": model, "output": output, "tools": TOOLS}


def send(
    cluster: Cluster,
    proxy: Proxy,
    key: str,
    body: dict[str, Any] | None,
    reply: Reply,
    response_id: str,
) -> list[dict[str, Any]]:
    """One exchange through proxy, checked byte for byte both ways; the log lines it caused,
    once its turn is logged."""
    cluster.upstream.replies[key] = reply
    mark = proxy.mark()
    content = json.dumps(body).encode() if body is not None else b""
    headers = {"x-reply": key, "content-type": "application/json"}
    with httpx.Client(base_url=proxy.url, timeout=10) as client:
        if body is None:
            got = client.get(f"/v1/responses/{response_id}", headers=headers)
        else:
            got = client.post("/v1/responses", content=content, headers=headers)
    seen = next(s for s in reversed(cluster.upstream.server.seen) if s.headers["x-reply"] == key)
    assert (got.status_code, got.content) == (reply.status, reply.body)
    assert seen.body == content
    logged = proxy.wait_for(since=mark, where=lambda e: e.get("response_id") == response_id)
    assert len(logged) == 1, proxy.text[-20:]
    return [e for e in proxy.events[mark:] if e["event"] in ("turn", "loop_error")]


def json_reply(body: dict[str, Any]) -> Reply:
    return Reply(chunks=[json.dumps(body).encode()])


def chain(cluster: Cluster, proxies: list[Proxy], run: str) -> list[list[tuple[Any, ...]]]:
    """A previous_response_id chain, one request per proxy in turn: call_2 and call_3 are never
    answered. What each request's inspection said, with the run's ids made alike."""
    first, second, third = (f"resp_{run}_{n}" for n in (1, 2, 3))
    steps = [
        ({"model": "gpt-4o", "input": "go", "tools": TOOLS}, first, ("call_1", "call_2")),
        (
            {
                "model": "gpt-4o",
                "previous_response_id": first,
                "input": [{"type": "function_call_output", "call_id": "call_1", "output": "42"}],
                "tools": TOOLS,
            },
            second,
            ("call_3",),
        ),
        (
            {"model": "gpt-4o", "previous_response_id": second, "input": "and?", "tools": TOOLS},
            third,
            (),
        ),
    ]
    said = []
    for n, (request, response_id, calls) in enumerate(steps):
        proxy = proxies[n % len(proxies)]
        reply = json_reply(response(response_id, *calls))
        lines = send(cluster, proxy, f"{run}-{n}", request, reply, response_id)
        said.append(
            [
                tuple(
                    json.dumps(e.get(field)).replace(run, "RUN")
                    for field in ("event", "rule", "ids", "where", "state", "calls", "reason")
                )
                for e in lines
            ]
        )
    return said


def loop_errors(said: list[list[tuple[Any, ...]]]) -> list[list[tuple[Any, ...]]]:
    return [[line[1:4] for line in lines if line[0] == '"loop_error"'] for lines in said]


EXPECTED_LOOP_ERRORS = [
    [],
    [('"unanswered-call"', '["call_2"]', '"previous_response_id resp_RUN_1"')],
    [('"unanswered-call"', '["call_3"]', '"previous_response_id resp_RUN_2"')],
]


def test_a_chain_alternating_between_two_replicas_gives_the_findings_of_one(cluster):
    alone = chain(cluster, [cluster.alone], "one")
    alternating = chain(cluster, [cluster.a, cluster.b], "two")
    assert loop_errors(alone) == EXPECTED_LOOP_ERRORS
    assert alternating == alone


def background(cluster: Cluster, run: str, polls: list[tuple[Proxy, str]]) -> list[Any]:
    """A background response created through A, then polled through each proxy in turn with the
    status given; the reason each poll's turn gave."""
    response_id = f"resp_{run}_bg"
    model = f"bg-{run}"
    request = {"model": model, "background": True, "input": "go", "tools": TOOLS}
    queued = json_reply(response(response_id, status="queued", model=model))
    send(cluster, cluster.a, f"{run}-create", request, queued, response_id)
    reasons = []
    for n, (proxy, status) in enumerate(polls):
        reply = json_reply(response(response_id, "call_9", status=status, model=model))
        lines = send(cluster, proxy, f"{run}-poll-{n}", None, reply, response_id)
        reasons.append(next(e for e in lines if e["event"] == "turn").get("reason"))
    return reasons


def barrier(cluster: Cluster, proxy: Proxy, run: str) -> None:
    """An exchange whose turn is logged only after the inspector recorded all that came before
    in its metrics: it handles one record at a time, log then metrics."""
    response_id = f"resp_{run}_barrier"
    body = {"model": "barrier", "input": "x"}
    send(cluster, proxy, f"{run}-barrier", body, json_reply(response(response_id)), response_id)


def turns(proxy: Proxy, model: str) -> float:
    values = scrape(proxy)
    return sum(
        value
        for (name, labels), value in values.items()
        if name == "tooltap_turns_total" and ("model", model) in labels
    )


def test_a_background_response_polled_through_both_replicas_is_counted_once(cluster):
    a, b = cluster.a, cluster.b
    polls = [(b, "queued"), (a, "completed"), (b, "completed"), (a, "completed")]
    reasons = background(cluster, "poll", polls)
    assert reasons[0].startswith("the response is queued")
    assert reasons[1] is None
    counted = "response resp_poll_bg was already counted when it reached its final status"
    assert reasons[2:] == [counted, counted]
    for proxy in (a, b):
        barrier(cluster, proxy, f"poll-{id(proxy)}")
    assert (turns(a, "bg-poll"), turns(b, "bg-poll")) == (1.0, 0.0)


def said(proxy: Proxy, words: str, timeout: float = 20.0) -> list[str]:
    """The proxy's lines holding words, once there is one or time is up (its log is read as it
    comes, by the launcher's threads)."""
    deadline = time.monotonic() + timeout
    while True:
        found = [line for line in proxy.text if words in line]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def sse_reply(response_id: str) -> Reply:
    done = response(response_id, "call_1")
    events = [
        {"type": "response.created", "response": {**done, "status": "in_progress", "output": []}},
        {"type": "response.output_item.done", "output_index": 0, "item": done["output"][0]},
        {"type": "response.completed", "response": done},
    ]
    chunks = [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]
    return Reply(headers=SSE, chunks=chunks)


def test_with_redis_killed_every_flow_passes_intact_the_fallback_is_counted_and_sharing_resumes(
    cluster,
):
    a, b, redis = cluster.a, cluster.b, cluster.redis
    redis.kill()
    try:
        for n in range(6):
            proxy = (a, b)[n % 2]
            response_id = f"resp_down_{n}"
            body = {"model": "gpt-4o", "input": "go", "tools": TOOLS, "stream": n % 3 == 0}
            reply = (
                sse_reply(response_id)
                if n % 3 == 0
                else json_reply(response(response_id, "call_1"))
            )
            send(cluster, proxy, f"down-{n}", body, reply, response_id)
        # What two replicas without shared memory say: the follow-up on B cannot be checked.
        assert loop_errors(chain(cluster, [a, b], "outage")) == [[], [], []]
        for proxy in (a, b):
            assert sample(scrape(proxy), "tooltap_state_errors_total") > 0
            assert [line for line in proxy.text if DOWN in line] == [
                next(line for line in proxy.text if DOWN in line)
            ]
    finally:
        redis.start()  # the same port, empty
    for proxy in (a, b):  # each tries Redis again in a thread of its own, backing off
        assert len(said(proxy, BACK)) == 1, proxy.text[-20:]
    assert loop_errors(chain(cluster, [a, b], "again")) == EXPECTED_LOOP_ERRORS
    for proxy in (a, b):
        assert len([line for line in proxy.text if DOWN in line]) == 1
