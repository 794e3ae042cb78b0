"""Benchmark 4: the cost of tooltap.core, as a ratio to json.loads of the same bytes.

A ratio travels across machines where microseconds do not. inspect() runs as
the proxy's worker runs it (a warm ValidatorCache); the baseline is the
standard library's json.loads of the request and the response body (for a
stream, of the request and of every event's data). Then StreamReader's
throughput in MB/s for each dialect, and whether costs grow linearly: bodies
at 1x, 10x and 100x, where a quadratic step would show as a time ratio far
above the size ratio.
"""

from __future__ import annotations

import gc
import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from tooltap.core import Exchange, StreamReader, ValidatorCache, inspect

try:
    from tooltap.core.definitions import DefinitionCache
except ImportError:  # a tooltap from before the worker kept its definitions (bench --commit)
    DefinitionCache = None  # type: ignore[assignment,misc]
try:
    from tooltap.core.dialects import Routes
except ImportError:  # a tooltap from before the worker kept the paths it routed (bench --commit)
    Routes = None  # type: ignore[assignment,misc]
from tooltap.core.stream import Framing

from . import bodies
from .sizes import Size
from .targets import Noise

URLS = {
    "chat": "https://api.openai.com/v1/chat/completions",
    "responses": "https://api.openai.com/v1/responses",
    "messages": "https://api.anthropic.com/v1/messages",
}
BEDROCK_URL = (
    "https://bedrock-runtime.us-east-1.amazonaws.com"
    "/model/anthropic.claude-sonnet-4-20250514-v1%3A0/invoke-with-response-stream"
)
OLLAMA_URL = "http://localhost:11434/api/chat"
JSON_HEADERS = {"content-type": "application/json"}
NDJSON_HEADERS = {"content-type": "application/x-ndjson"}
EVENTSTREAM_HEADERS = {"content-type": "application/vnd.amazon.eventstream"}
SSE_HEADERS = {"content-type": "text/event-stream; charset=utf-8"}


@dataclass(frozen=True)
class Timing:
    """How a figure is timed: the fastest of `repeats` runs of at least `min_time` seconds
    each, after waiting up to `wait` seconds for other jobs to quiet down."""

    min_time: float
    repeats: int = 5
    wait: float = 10.0


TIMING: dict[Size, Timing] = {
    "full": Timing(0.3),
    "quick": Timing(0.05),
    "smoke": Timing(0.0, repeats=1, wait=0.0),  # one call each
}


def warm_caches() -> dict[str, Any]:
    """What the worker keeps warm from one exchange to the next, as inspect() takes it: the
    validators, and the tool definitions read and the paths routed (where this tooltap keeps
    them)."""
    caches: dict[str, Any] = {"validators": ValidatorCache()}
    if DefinitionCache is not None:
        caches["definition_cache"] = DefinitionCache()
    if Routes is not None:
        caches["routes"] = Routes()
    return caches


def per_call(fn: Callable[[], Any], timing: Timing) -> float:
    """Seconds per call: the fastest of `timing.repeats` runs of at least `timing.min_time` each.

    As timeit does: the fastest run, since slower ones measure what else the
    machine was doing (on a shared VM, bursts that no local process shows), and
    the cyclic garbage collector off, since its pauses depend on everything the
    benchmark process holds. Waits (bounded) for other jobs to quiet down first.
    """
    if timing.wait:
        Noise().wait_quiet(max_wait=timing.wait)
    fn()
    gc.collect()
    gc.disable()
    try:
        return _fastest(fn, timing.min_time, timing.repeats)
    finally:
        gc.enable()


def _fastest(fn: Callable[[], Any], min_time: float, repeats: int) -> float:
    # This thread's CPU time, not the wall clock: on a shared machine the wall clock counts
    # the time the scheduler gave to other jobs, which no fastest run can always escape.
    clock = time.thread_time
    n, elapsed = 1, 0.0
    while True:  # find a loop count that takes about min_time (bounded: doubles)
        start = clock()
        for _ in range(n):
            fn()
        elapsed = clock() - start
        if elapsed >= min_time or n >= 1 << 20:
            break
        n *= 2
    runs = [elapsed / n]
    for _ in range(repeats - 1):
        start = clock()
        for _ in range(n):
            fn()
        runs.append((clock() - start) / n)
    return min(runs)


def json_case(request: bytes, response: bytes) -> tuple[Exchange, Callable[[], Any], int]:
    exchange = Exchange(
        method="POST",
        url=URLS["chat"],
        request_body=request,
        status=200,
        response_headers=JSON_HEADERS,
        response_body=response,
    )
    return (
        exchange,
        lambda: (json.loads(request), json.loads(response)),
        len(request) + len(response),
    )


def sse_case(request: bytes, events: list[bytes]) -> tuple[Exchange, Callable[[], Any], int]:
    body = b"".join(events)
    datas = [e.split(b"data: ", 1)[1].strip() for e in events]
    datas = [d for d in datas if d != b"[DONE]"]

    def baseline() -> None:
        json.loads(request)
        for data in datas:
            json.loads(data)

    exchange = Exchange(
        method="POST",
        url=URLS["chat"],
        request_body=request,
        status=200,
        response_headers=SSE_HEADERS,
        response_body=body,
    )
    return exchange, baseline, len(request) + len(body)


def measure(
    exchange: Exchange, baseline: Callable[[], Any], size: int, timing: Timing
) -> dict[str, Any]:
    caches = warm_caches()
    verdict = inspect(exchange, {}, **caches)
    assert verdict.outcome == "inspected", verdict.reason
    t_inspect = per_call(lambda: inspect(exchange, {}, **caches), timing)
    t_json = per_call(baseline, timing)
    t_orjson = per_call(
        lambda: (
            (orjson.loads(exchange.request_body), orjson.loads(exchange.response_body))
            if not verdict.stream
            else None
        ),
        timing,
    )
    return {
        "bytes": size,
        "calls": len(verdict.calls),
        "inspect_us": t_inspect * 1e6,
        "json_loads_us": t_json * 1e6,
        "ratio_to_json_loads": t_inspect / t_json,
        "orjson_loads_us": t_orjson * 1e6 if not verdict.stream else None,
    }


def stream_throughput(
    events: list[bytes], api: str, timing: Timing, chunk: int | None, framing: Framing = "sse"
) -> dict[str, Any]:
    """MB/s of StreamReader.feed over the body, cut per event or in `chunk`-byte pieces."""
    body = b"".join(events)
    pieces = events if chunk is None else [body[i : i + chunk] for i in range(0, len(body), chunk)]

    def read() -> None:
        reader = StreamReader(api, framing=framing)
        for piece in pieces:
            reader.feed(piece)
        result = reader.close()
        assert result.complete

    seconds = per_call(read, timing)
    return {
        "bytes": len(body),
        "events": len(events),
        "us": seconds * 1e6,
        "mb_per_s": len(body) / seconds / 1e6,
    }


def growth(points: list[dict[str, Any]], key: str) -> list[dict[str, float]]:
    """Each step's time ratio next to its size ratio; ~equal means linear."""
    return [
        {
            "size_ratio": b["bytes"] / a["bytes"],
            "time_ratio": b[key] / a[key],
        }
        for a, b in itertools.pairwise(points)
    ]


def mcp_exchange(request: bytes, answer: bytes) -> Exchange:
    return Exchange(method="POST", url="http://127.0.0.1:8000/mcp", request_body=request,
                    status=200, response_headers=SSE_HEADERS, response_body=answer, api="mcp")  # fmt: skip


def run(size: Size) -> dict[str, Any]:
    timing = TIMING[size]
    cases = {
        "small": json_case(*bodies.small_pair()),
        "medium": json_case(bodies.chat_request(), bodies.chat_response()),
        "large": json_case(*bodies.scaled_pair(100)),
        "medium-sse": sse_case(bodies.chat_request(stream=True), bodies.chat_stream_events()),
    }
    per_case = {name: measure(*case, timing) for name, case in cases.items()}
    for name, row in per_case.items():
        print(
            f"  core {name:<11} {row['bytes']:>8} B  inspect {row['inspect_us']:9.1f} us"
            f"  json.loads {row['json_loads_us']:9.1f} us  ratio {row['ratio_to_json_loads']:.2f}",
            flush=True,
        )

    # The same Anthropic turn as SSE and as Bedrock's event stream: what the framing costs.
    messages_request = bodies.messages_pair()[0]
    framed = {}
    for framing, url, headers, body in (
        ("sse", URLS["messages"], SSE_HEADERS, b"".join(bodies.messages_stream_events())),
        ("eventstream", BEDROCK_URL, EVENTSTREAM_HEADERS,
         b"".join(bodies.bedrock_frames(bodies.messages_stream_events()))),
    ):  # fmt: skip
        exchange = Exchange(method="POST", url=url, request_body=messages_request, status=200,
                            response_headers=headers, response_body=body)  # fmt: skip
        caches = warm_caches()
        verdict = inspect(exchange, {}, **caches)
        assert verdict.outcome == "inspected" and verdict.calls, verdict.reason
        framed[framing] = {
            "bytes": len(body),
            "inspect_us": per_call(lambda e=exchange, c=caches: inspect(e, {}, **c), timing) * 1e6,
        }
    framed["eventstream_to_sse"] = framed["eventstream"]["inspect_us"] / framed["sse"]["inspect_us"]
    print(
        f"  core messages turn: SSE {framed['sse']['inspect_us']:.1f} us, Bedrock event stream "
        f"{framed['eventstream']['inspect_us']:.1f} us ({framed['eventstream_to_sse']:.2f}x)",
        flush=True,
    )

    # One MCP tools/call, checked against the schemas its session listed, beside that turn.
    listing, answer = bodies.mcp_list_pair()
    session = inspect(mcp_exchange(listing, answer)).tool_server
    call = mcp_exchange(*bodies.mcp_call_pair())
    validators = ValidatorCache()
    verdict = inspect(call, validators=validators, tool_server=session)
    assert verdict.calls and verdict.tool_results, verdict.reason
    framed["mcp_call"] = {
        "bytes": len(call.response_body),
        "inspect_us": per_call(
            lambda: inspect(call, validators=validators, tool_server=session), timing
        )
        * 1e6,
    }
    framed["mcp_call_to_turn"] = framed["mcp_call"]["inspect_us"] / framed["sse"]["inspect_us"]
    print(
        f"  core MCP tools/call (SSE, both schemas checked): {framed['mcp_call']['inspect_us']:.1f}"
        f" us ({framed['mcp_call_to_turn']:.2f}x the messages turn)",
        flush=True,
    )

    # The same three calls as a Chat SSE stream and as an Ollama NDJSON stream of the same size,
    # each inspected whole after its request's loop check: what Ollama's turn costs beside Chat's.
    chat_stream = cases["medium-sse"][0]
    lines = bodies.ollama_stream_lines(len(chat_stream.response_body))
    ollama = Exchange(method="POST", url=OLLAMA_URL, request_body=bodies.ollama_request(),
                      status=200, response_headers=NDJSON_HEADERS, response_body=b"".join(lines))  # fmt: skip
    side: dict[str, Any] = {}
    for name, exchange, events in (
        ("chat_sse", chat_stream, len(bodies.chat_stream_events())),
        ("ollama_ndjson", ollama, len(lines)),
    ):
        caches = warm_caches()
        verdict = inspect(exchange, {}, **caches)
        assert verdict.outcome == "inspected" and len(verdict.calls) == 3, verdict.reason
        side[name] = {
            "bytes": len(exchange.response_body),
            "events": events,
            "inspect_us": per_call(lambda e=exchange, c=caches: inspect(e, {}, **c), timing) * 1e6,
        }
    side["ollama_to_chat"] = side["ollama_ndjson"]["inspect_us"] / side["chat_sse"]["inspect_us"]
    framed["ollama"] = side
    print(
        f"  core a turn of three calls: Chat SSE {side['chat_sse']['bytes']} B "
        f"{side['chat_sse']['inspect_us']:.1f} us, Ollama NDJSON {side['ollama_ndjson']['bytes']} B "
        f"{side['ollama_ndjson']['inspect_us']:.1f} us ({side['ollama_to_chat']:.2f}x)",
        flush=True,
    )

    scales = (1, 10, 100)
    inspect_scaling = [
        measure(*json_case(*bodies.scaled_pair(k)), timing) | {"scale": k} for k in scales
    ]
    builders: dict[str, Callable[..., list[bytes]]] = {
        "chat": bodies.chat_stream_events,
        "responses": bodies.responses_stream_built,
        "messages": bodies.messages_stream_built,
    }
    streams: dict[str, Any] = {}
    for api, build in builders.items():
        points = [
            stream_throughput(build(content_size=2800 * k, deltas=43 * k), api, timing, None)
            | {"scale": k}
            for k in scales
        ]
        streams[api] = {"per_event": points, "growth": growth(points, "us")}
        print(
            f"  stream {api:<9} "
            + "  ".join(f"{p['bytes'] / 1e3:8.0f} kB {p['mb_per_s']:6.1f} MB/s" for p in points),
            flush=True,
        )
    points = [
        stream_throughput(
            bodies.ollama_stream_lines(len(b"".join(bodies.chat_stream_events(2800 * k, 43 * k))),
                                       43 * k, 2800 * k),
            "ollama", timing, None, "ndjson",
        )
        | {"scale": k}
        for k in scales
    ]  # fmt: skip
    streams["ollama"] = {"per_event": points, "growth": growth(points, "us")}
    print(
        "  stream ollama    "
        + "  ".join(f"{p['bytes'] / 1e3:8.0f} kB {p['mb_per_s']:6.1f} MB/s" for p in points),
        flush=True,
    )
    # One 2 MB argument object in one NDJSON line, in 64-byte pieces: the same check for lines.
    streams["ollama-long-line-64B-chunks"] = stream_throughput(
        bodies.ollama_stream_lines(0, 3, 2_000_000), "ollama", timing, 64, "ndjson"
    )
    # One long argument string in 64-byte pieces: the case that catches a
    # line buffer rebuilt on every feed (quadratic).
    long_line = bodies.chat_stream_events(content_size=2_000_000, deltas=3)
    streams["chat-long-line-64B-chunks"] = stream_throughput(long_line, "chat", timing, 64)
    streams["chat-1KiB-chunks"] = stream_throughput(
        bodies.chat_stream_events(content_size=280_000, deltas=4300), "chat", timing, 1024
    )
    return {
        "cases": per_case,
        "framing": framed,
        "inspect_scaling": inspect_scaling,
        "inspect_growth": growth(inspect_scaling, "inspect_us"),
        "json_loads_growth": growth(inspect_scaling, "json_loads_us"),
        "streams": streams,
    }
