"""Benchmark: what timing adds per turn, beside the same work without it.

Timing costs in two places. In core, a stream's first token: with its pieces' arrival times
the stream is read piece by piece, each dated, where without them it is read whole. In the
session, tool time: the calls a response issues remembered by id with their time, the MCP
tools/calls that run them begun and ended, and the follow-up's answers timed, linked to their
runs and their batch judged. Each is timed with and without the exchanges' times (the same
code: an exchange without times is what a JSONL file or a cassette gives), in interleaved
rounds, the fastest of each, and as a ratio to json.loads of the same bytes, as the core cost
target reads it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tooltap.addon.inspection.session import Session
from tooltap.core import Exchange, ValidatorCache, inspect

from . import bodies
from .core_cost import JSON_HEADERS as JSON
from .core_cost import TIMING, URLS, per_call, sse_case
from .given_times import T0
from .sizes import Size

ROUNDS: dict[Size, int] = {"full": 5, "quick": 3, "smoke": 1}

MCP_URL = "http://127.0.0.1:8000/mcp"
SSE = {"content-type": "text/event-stream", "mcp-session-id": "s-1"}
CITIES = ("Oslo", "Rome", "Paris")


def streamed() -> tuple[Exchange, Exchange, Callable[[], Any], int]:
    """The medium Chat stream (50 events), each event a piece of its own: without times, and
    with each piece's arrival, 20 ms apart."""
    request = bodies.chat_request(stream=True)
    events = bodies.chat_stream_events()
    plain, baseline, size = sse_case(request, events)
    ends, end = [], 0
    for event in events:
        end += len(event)
        ends.append(end)
    timed = plain.model_copy(
        update={
            "request_start": T0,
            "request_end": T0 + 0.01,
            "response_end": T0 + 0.02 * len(events),
            "arrivals": tuple((e, T0 + 0.02 * (i + 1)) for i, e in enumerate(ends)),
        }
    )
    return plain, timed, baseline, size


def _mcp(message: dict[str, Any], answer: dict[str, Any]) -> Exchange:
    return Exchange(
        method="POST", url=MCP_URL, api="mcp", status=200, response_headers=SSE,
        request_headers={"mcp-session-id": "s-1"}, request_body=json.dumps(message).encode(),
        response_body=b"event: message\ndata: " + json.dumps(answer).encode() + b"\n\n",
    )  # fmt: skip


def loop() -> list[tuple[Exchange, float, float]]:
    """An agent's loop, with each exchange's start and end: a Chat turn issuing three calls,
    their three tools/calls run one after another on an MCP server, and the follow-up that
    answers them (a serial batch, linked and judged)."""
    calls = [
        {"id": f"call_{city}_fdNz3vOBKYgOIpMdWotB9MjY", "type": "function",
         "function": {"name": "weather", "arguments": json.dumps({"city": city})}}
        for city in CITIES
    ]  # fmt: skip
    issued = json.loads(bodies.chat_response())
    issued["choices"][0]["message"]["tool_calls"] = calls
    request = json.loads(bodies.chat_request())
    follow_up = {**request, "messages": [
        *request["messages"], {"role": "assistant", "content": None, "tool_calls": calls},
        *({"role": "tool", "tool_call_id": c["id"], "content": "12C"} for c in calls),
    ]}  # fmt: skip
    answer = json.loads(bodies.chat_response(ident="chatcmpl-answer"))
    answer["choices"][0]["message"] = {"role": "assistant", "content": "Mild everywhere."}

    def chat(body: dict[str, Any], reply: dict[str, Any]) -> Exchange:
        return Exchange(
            method="POST",
            url=URLS["chat"],
            status=200,
            response_headers=JSON,
            request_body=json.dumps(body).encode(),
            response_body=json.dumps(reply).encode(),
        )

    runs = [
        _mcp({"jsonrpc": "2.0", "id": n, "method": "tools/call",
              "params": {"name": "weather", "arguments": {"city": city}}},
             {"jsonrpc": "2.0", "id": n, "result": {
                 "content": [{"type": "text", "text": "12C"}], "isError": False,
                 "structuredContent": {"city": city, "temperature": 12, "conditions": "rain"}}})
        for n, city in enumerate(CITIES, 3)
    ]  # fmt: skip
    return [
        (chat(request, issued), 0.0, 1.0),
        *((run, 1.1 + n, 1.9 + n) for n, run in enumerate(runs)),
        (chat(follow_up, answer), 4.0, 5.0),
    ]


def listing() -> Exchange:
    request, answer = bodies.mcp_list_pair()
    return Exchange(
        method="POST", url=MCP_URL, api="mcp", status=200, response_headers=SSE,
        request_headers={"mcp-session-id": "s-1"}, request_body=request, response_body=answer,
    )  # fmt: skip


def session_case(timed: bool) -> tuple[Callable[[], Any], Session]:
    """One pass of the loop through a session that knows the server's tools, with or without
    the exchanges' times."""
    session = Session()
    session.inspect(listing())
    exchanges = [
        e.model_copy(
            update={
                "request_start": T0 + start,
                "request_end": T0 + start + 0.01,
                "response_end": T0 + end,
            }
        )
        if timed
        else e
        for e, start, end in loop()
    ]

    def one_pass() -> list[Any]:
        return [session.inspect(exchange) for exchange in exchanges]

    return one_pass, session


def loop_baseline() -> tuple[Callable[[], Any], int]:
    pairs = [(e.request_body, e.response_body) for e, _, _ in loop()]
    datas = [body.split(b"data: ", 1)[1] if body.startswith(b"event:") else body
             for _, body in pairs]  # fmt: skip

    def baseline() -> None:
        for (request, _), data in zip(pairs, datas, strict=True):
            json.loads(request)
            json.loads(data)

    return baseline, sum(len(a) + len(b) for a, b in pairs)


def run(size: Size) -> dict[str, Any]:
    timing = TIMING[size]
    plain, timed, stream_baseline, stream_bytes = streamed()
    validators = ValidatorCache()
    without_pass, _ = session_case(timed=False)
    with_pass, _ = session_case(timed=True)
    answered = with_pass()[-1]
    loop_json, loop_bytes = loop_baseline()
    cases: dict[str, Callable[[], Any]] = {
        "stream_json": stream_baseline,
        "stream_without": lambda: inspect(plain, validators=validators),
        "stream_with": lambda: inspect(timed, validators=validators),
        "loop_json": loop_json,
        "loop_without": without_pass,
        "loop_with": with_pass,
    }
    fastest: dict[str, float] = {}
    for _ in range(ROUNDS[size]):  # interleaved: each case once a round, the fastest kept
        for name, fn in cases.items():
            seconds = per_call(fn, timing)
            fastest[name] = min(fastest.get(name, seconds), seconds)
    first = inspect(timed, validators=validators)
    result: dict[str, Any] = {
        "settings": {
            "rounds": ROUNDS[size],
            "stream_bytes": stream_bytes,
            "loop_bytes": loop_bytes,
        },
        # What the timed runs said, so that a timing that measured nothing shows.
        "said": {
            "first_token_ms": first.first_token_ms,
            "tool_times": len(answered.tool_times),
            "linked_runs": sum(1 for t in answered.tool_times if t.ran_ms is not None),
            "loop_errors": [e.rule for e in answered.loop_errors],
        },
    }
    for case, exchanges in (("stream", 1), ("loop", 5)):
        json_s, without, with_ = (fastest[f"{case}_{k}"] for k in ("json", "without", "with"))
        result[case] = {
            "json_us": json_s * 1e6,
            "without_us": without * 1e6,
            "with_us": with_ * 1e6,
            "added_us_per_exchange": (with_ - without) * 1e6 / exchanges,
            "ratio": with_ / without,
            "x_json_without": without / json_s,
            "x_json_with": with_ / json_s,
        }
        print(
            f"  {case}: {without * 1e6:.0f} us without times, {with_ * 1e6:.0f} us with"
            f" ({with_ / without:.3f}x); {without / json_s:.2f}x -> {with_ / json_s:.2f}x json.loads",
            flush=True,
        )
    return result
