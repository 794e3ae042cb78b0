"""Time in the loop with real agent runtimes, through one real `tooltap run`.

Three runtimes, each in its pinned release, call tools on a real MCP server (the `mcp` SDK's
MCPServer over Streamable HTTP, tests/support/mcp_timed_server.py) behind `--upstream mcp:URL`,
against a scripted model behind the same proxy that answers the first request with a batch of
three calls and the follow-up with text, every response streamed:
- pydantic-ai (Chat Completions; MCPToolset on fastmcp's client) runs its batch together;
- the OpenAI Agents SDK (the Responses API; MCPServerStreamableHttp) starts its calls together,
  but its MCP client sends one server's requests one at a time, so the batch runs in series;
- a plain loop (the openai client, then each call in turn with the `mcp` SDK's ClientSession).
pydantic-ai and the Agents SDK live in side venvs (tests/support/sidevenv.py); the loop is
tooltap's own venv's openai and mcp. Each forecast call sleeps a known 300 ms once its batch is
in flight, and the server reports the order its calls really ran in: the verdicts are checked
against that order and the log lines, never against a time.

On the same proxy: a Realtime session (openai's realtime client) and a Gemini Live session
(google-genai's live client) answer a call each, and an MCP tool that hangs until the test
releases it gets its tool_overdue line (tooltap_tool_deadline lowered to DEADLINE) while it
still runs. The run happens once for the module (`ran`); the tests read it, the last one all
seven time metrics on /metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from google import genai
from google.genai import types
from support import sidevenv
from support.mcp_client import in_session
from support.mcp_server import running
from support.prom import sample, scrape_until
from support.sockets import REALTIME_CASSETTE, realtime_session, realtime_turn, recording, script

from tooltap.addon.commands.demo_agent import sse_reply
from tooltap.addon.commands.demo_live import ask, until_call, until_turn_complete
from tooltap.addon.commands.demo_openai import response_object, responses_stream
from tooltap.addon.harness import live
from tooltap.addon.harness.launch import Proxy, free_ports
from tooltap.addon.harness.replay import ReplayServer, Reply, Seen

SUPPORT = Path(__file__).parents[1] / "support"
PYDANTIC_AI = ("pydantic-ai-slim[openai,mcp]==2.68.0", "mcp==2.3.0", "openai==3.60.0")
AGENTS = ("openai-agents==0.24.0", "mcp==2.3.0", "openai==3.60.0")
DEADLINE = 10  # seconds: past every forecast call and batch here, short of the stall's hang
SERVER = "timed-tools 2.0.1"
ANSWER = "Tomorrow: showers everywhere, 14C."


@dataclass(frozen=True)
class Runtime:
    name: str  # time_drive.py's RUNTIME
    api: str
    cities: tuple[str, str, str]  # its batch's calls, one forecast each
    venv: tuple[str, ...] | None  # its side venv's pins; None: tooltap's own venv
    serial: str | None  # how its serial-execution names the cause; None: it runs together

    @property
    def model(self) -> str:
        return f"scripted-{self.name}"

    @property
    def calls(self) -> list[str]:
        return [f"call_{self.name.replace('-', '')}_{city.lower()}" for city in self.cities]


RUNTIMES = [
    Runtime("pydantic-ai", "chat", ("Oslo", "Lima", "Pune"), PYDANTIC_AI, None),
    Runtime("agents", "responses", ("Quito", "Hanoi", "Tunis"), AGENTS,
            "All of them went to one MCP server, in no session: if your runtime starts a "
            "batch's calls together, its MCP client sent them one at a time"),
    Runtime("loop", "chat", ("Perth", "Cusco", "Malmo"), None,
            "All of them went over one MCP session: if your runtime starts a batch's calls "
            "together, its MCP client sent them one at a time"),
]  # fmt: skip
BY_MODEL = {r.model: r for r in RUNTIMES}
# The usage each scripted response reports: (input, output) tokens.
CHAT_USAGE = {"calls": (80, 20), "text": (120, 18)}
RESPONSES_USAGE = {"calls": (45, 25), "text": (130, 12)}

# --- the scripted model: Chat Completions and Responses over HTTP, Realtime and Gemini Live ---


def chat_chunks(model: str, calls: list[tuple[str, str, str]], text: str) -> list[bytes]:
    """A streamed Chat completion: each call's name, then its arguments in pieces, or the text
    in pieces; then the finish, the usage, [DONE]."""
    head = {"id": f"chatcmpl-{model}-{len(calls)}", "object": "chat.completion.chunk",
            "created": 1764480000, "model": model}  # fmt: skip

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return b"data: " + json.dumps(head | {"choices": [choice]}).encode() + b"\n\n"

    out = [chunk({"role": "assistant", "content": None if calls else ""})]
    for index, (call_id, name, arguments) in enumerate(calls):
        function = {"name": name, "arguments": ""}
        out.append(chunk({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                                          "function": function}]}))  # fmt: skip
        for at in range(0, len(arguments), 6):
            piece = {"index": index, "function": {"arguments": arguments[at : at + 6]}}
            out.append(chunk({"tool_calls": [piece]}))
    for at in range(0, len(text), 8):
        out.append(chunk({"content": text[at : at + 8]}))
    out.append(chunk({}, "tool_calls" if calls else "stop"))
    prompt, completion = CHAT_USAGE["calls" if calls else "text"]
    usage = {"prompt_tokens": prompt, "completion_tokens": completion,
             "total_tokens": prompt + completion}  # fmt: skip
    out.append(b"data: " + json.dumps(head | {"choices": [], "usage": usage}).encode() + b"\n\n")
    return [*out, b"data: [DONE]\n\n"]


def responses_reply(body: dict[str, Any], calls: list[tuple[str, str, str]]) -> Reply:
    runtime = BY_MODEL[body["model"]]
    step = "calls" if calls else "text"
    response = response_object(
        f"resp_{runtime.name.replace('-', '')}{step}", calls, body.get("tools", []),
        text=None if calls else ANSWER,
    )  # fmt: skip
    tokens, out = RESPONSES_USAGE[step]
    usage = {"input_tokens": tokens, "output_tokens": out, "total_tokens": tokens + out}
    return sse_reply(responses_stream(response | {"model": runtime.model, "usage": usage}))


def route(seen: Seen) -> Reply:
    """The first request of a run gets a batch of three forecast calls; the follow-up, text."""
    body = json.loads(seen.body)
    runtime = BY_MODEL[body["model"]]
    calls = [
        (call_id, "forecast", json.dumps({"city": city}))
        for call_id, city in zip(runtime.calls, runtime.cities, strict=True)
    ]
    if seen.path.endswith("/chat/completions"):
        if any(m.get("role") == "tool" for m in body["messages"]):
            return sse_reply(chat_chunks(runtime.model, [], ANSWER))
        return sse_reply(chat_chunks(runtime.model, calls, ""))
    items = body["input"] if isinstance(body["input"], list) else []
    answering = any(item.get("type") == "function_call_output" for item in items)
    return responses_reply(body, [] if answering else calls)


REALTIME_TOOL = {"type": "function", "name": "get_weather", "description": "The weather.",
                 "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                "required": ["city"]}}  # fmt: skip
REALTIME_CALLS = [
    ("call_rt0timeParis", "get_weather", '{"city":"Paris"}'),
    ("call_rt0timeRome", "get_weather", '{"city":"Rome"}'),
]
R1, R2 = "resp_TimeRealtime01", "resp_TimeRealtime02"
LIVE_MODEL = "gemini-live-2.5-flash-preview"
LIVE_CALL = ("fc_time0paris", "get_weather", {"city": "Paris", "units": "c"})
LIVE_USAGE = (230, 9)


def sockets(path: str, _headers: dict[str, str]) -> list[Any]:
    if path.startswith("/v1/realtime"):
        created, updated = realtime_session([REALTIME_TOOL])
        return script(
            (None, [created]),
            ("session.update", [updated]),
            ("response.create", realtime_turn(R1, REALTIME_CALLS)),
            ("response.create", realtime_turn(R2, [], "Paris 12C, Rome 18C.")),
        )
    return live.script(
        ("clientContent", [live.tool_call(LIVE_CALL)]),
        ("toolResponse", live.answer("Paris is 12C.", *LIVE_USAGE)),
    )


# --- the run -----------------------------------------------------------------------------------


@dataclass
class Ran:
    """What each part of the run printed and logged."""

    printed: dict[str, dict[str, Any]] = field(default_factory=dict)  # by runtime
    order: dict[str, list[list[str]]] = field(default_factory=dict)  # the server's, by runtime
    lines: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # by part
    hang: list[dict[str, Any]] = field(default_factory=list)  # the log from the stall's start
    stall_said: list[str] = field(default_factory=list)  # what the stalled call answered
    metrics: dict[Any, float] = field(default_factory=dict)  # /metrics at the end


def drive(runtime: Runtime, python: Path, proxy: Proxy) -> dict[str, Any]:
    # -P: the script's folder (tests/support, whose agents.py is the tests' own) stays off
    # sys.path, so `import agents` is the OpenAI Agents SDK.
    command = [str(python), "-P", str(SUPPORT / "time_drive.py"), runtime.name, f"{proxy.url}/v1",
               f"http://127.0.0.1:{proxy.ports[1]}/mcp"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def realtime(proxy: Proxy) -> None:
    """livekit's order: the user's words, a response, each call's output, a response."""
    client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk-test-TIME-0123", max_retries=0)
    with client.realtime.connect(model="gpt-realtime") as connection:
        until(connection, "session.created")
        connection.session.update(session={"type": "realtime", "tools": [REALTIME_TOOL]})
        until(connection, "session.updated")
        connection.conversation.item.create(
            item={"type": "message", "role": "user",
                  "content": [{"type": "input_text", "text": "Paris and Rome?"}]}
        )  # fmt: skip
        connection.response.create()
        until(connection, "response.done")
        for call_id, _, _ in REALTIME_CALLS:
            connection.conversation.item.create(
                item={"type": "function_call_output", "call_id": call_id, "output": "12C"}
            )
        connection.response.create()
        until(connection, "response.done")


def until(connection: Any, final: str) -> None:
    while json.loads(connection.recv_bytes())["type"] != final:
        pass


def gemini_live(proxy: Proxy) -> None:
    trust = ssl.create_default_context(cafile=os.path.join(proxy.confdir, "mitmproxy-ca-cert.pem"))
    options = types.HttpOptions(base_url=proxy.url, api_version="v1beta",
                                async_client_args={"ssl": trust})  # fmt: skip
    client = genai.Client(api_key="AIza-dummy-not-a-real-key", http_options=options)

    async def run() -> None:
        config = {"response_modalities": ["TEXT"],
                  "tools": [{"function_declarations": [live.WEATHER]}]}  # fmt: skip
        async with client.aio.live.connect(model=LIVE_MODEL, config=config) as session:
            await ask(session, "Weather in Paris?")
            (call,) = await until_call(session)
            response = types.FunctionResponse(id=call.id, name=call.name, response={"c": 12})
            await session.send_tool_response(function_responses=response)
            await until_turn_complete(session)

    asyncio.run(run())


def stall(mcp_url: str, said: list[str]) -> None:
    """One call of the tool that hangs, by the `mcp` SDK's client: what it answered."""

    async def work(session: Any) -> None:
        result = await session.call_tool("stall", {})
        said.extend(getattr(part, "text", "") for part in result.content)

    in_session(mcp_url, work)


@pytest.fixture(scope="module")
def envs() -> dict[str, Path]:
    # Made side by side the first time (pip waits on the network and the disk).
    with ThreadPoolExecutor(2) as pool:
        made = {r.name: pool.submit(sidevenv.python, *r.venv) for r in RUNTIMES if r.venv}
        return {r.name: made[r.name].result() if r.venv else Path(sys.executable) for r in RUNTIMES}


@contextlib.contextmanager
def hanging(proxy: Proxy, mcp: str) -> Iterator[list[str]]:
    """The stall, called as the block starts and released as soon as its tool_overdue is
    logged (or as the block fails): what it answered, once the block has ended."""
    said: list[str] = []
    since, stop = proxy.mark(), threading.Event()
    call = threading.Thread(target=stall, args=(f"http://127.0.0.1:{proxy.ports[1]}/mcp", said))

    def release_once_overdue() -> None:
        deadline = time.monotonic() + DEADLINE + 60
        while not stop.is_set() and time.monotonic() < deadline:
            if proxy.wait_for("tool_overdue", since=since, timeout=0.2):
                break
        httpx.post(f"{mcp}/release", timeout=5)

    watch = threading.Thread(target=release_once_overdue)
    call.start()
    watch.start()
    try:
        yield said
    except BaseException:
        stop.set()
        raise
    finally:
        watch.join()
        call.join(30)


@pytest.fixture(scope="module")
def ran(envs) -> Ran:
    """The whole run, once: the stall hangs from the start while the three runtimes, then the
    two sockets, run one after another."""
    result = Ran()
    with (
        running(str(SUPPORT / "mcp_timed_server.py")) as mcp,
        ReplayServer(route, sockets=sockets) as model,
        Proxy.tooltap([model.url, f"mcp:{mcp}"], "--log-format", "json",
                      listen=f"127.0.0.1:{free_ports(2)}",
                      extra=("--set", f"tooltap_tool_deadline={DEADLINE}")) as proxy,
    ):  # fmt: skip
        hang_mark = proxy.mark()
        with hanging(proxy, mcp) as result.stall_said:
            for runtime in RUNTIMES:
                mark = proxy.mark()
                result.printed[runtime.name] = drive(runtime, envs[runtime.name], proxy)
                answering = proxy.wait_for(  # its follow-up's turn: the last of its lines
                    "turn", where=lambda e, r=runtime: e.get("model") == r.model and "tool_wait_ms" in e,
                    since=mark, timeout=30,
                )  # fmt: skip
                assert answering, f"{runtime.name}: no answering turn was logged"
                result.order[runtime.name] = httpx.get(f"{mcp}/order", timeout=5).json()
                result.lines[runtime.name] = proxy.events[mark : proxy.mark()]
            for name, session in (("realtime", realtime), ("gemini_live", gemini_live)):
                mark = proxy.mark()
                session(proxy)
                proxy.wait_for("turn", 2, where=lambda e, n=name: e.get("api") == n, since=mark)
                result.lines[name] = proxy.events[mark : proxy.mark()]
        # The stall's exchange, logged once it answered: its tool_result, then its turn.
        answered = proxy.wait_for("tool_result", where=lambda e: e.get("name") == "stall",
                                  since=hang_mark, timeout=30)  # fmt: skip
        assert answered, "the stalled call's result was never logged"
        at = next(i for i, e in enumerate(proxy.events) if e is answered[0])
        assert proxy.wait_for("turn", since=at, timeout=10)
        result.hang = proxy.events[hang_mark:]
        result.metrics = scrape_until(
            proxy, lambda v: sample(v, "tooltap_overdue_calls_total", api="mcp") >= 1
        )
    return result


def exchanges(lines: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The log lines of each exchange whose turn was logged, by the exchange id every line
    carries, its turn last (a tool_overdue line, said while its exchange ran, aside)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        if line.get("event") != "tool_overdue":
            found.setdefault(line["exchange"], []).append(line)
    return [e for e in found.values() if e[-1].get("event") == "turn"]


def of(lines: list[dict[str, Any]], event: str, **fields: Any) -> list[dict[str, Any]]:
    return [e for e in lines if e.get("event") == event and all(e.get(k) == v for k, v in fields.items())]  # fmt: skip


def ran_together(order: list[list[str]]) -> bool:
    """Every call had started on the server before any ended."""
    kinds = [kind for kind, _ in order]
    return kinds == ["start"] * 3 + ["end"] * 3


def ran_in_turn(order: list[list[str]]) -> bool:
    """Each call ended on the server before the next started."""
    return (
        all(
            order[i][0] == "start" and order[i + 1] == ["end", order[i][1]]
            for i in range(0, len(order), 2)
        )
        and len(order) == 6
    )


@pytest.mark.parametrize("runtime", RUNTIMES, ids=lambda r: r.name)
def test_each_runtime_ran_its_batch_through_the_proxy_as_it_runs_batches(ran, runtime):
    assert ran.printed[runtime.name] == {"output": ANSWER, "tools": ["forecast", "stall"]}
    order = ran.order[runtime.name]
    assert sorted(city for kind, city in order if kind == "start") == sorted(runtime.cities)
    # The ground truth the verdicts below are checked against: the server's own order.
    assert ran_together(order) if runtime.serial is None else ran_in_turn(order), order


def assert_timed(turn: dict[str, Any]) -> None:
    """A streamed turn: its first token from the request's end, inside the whole exchange."""
    first, whole = turn["first_token_ms"], turn["duration_ms"]
    assert first is not None and whole is not None, turn
    assert 0 <= first <= whole, turn


@pytest.mark.parametrize("runtime", RUNTIMES, ids=lambda r: r.name)
def test_each_model_turn_is_timed_to_its_first_token_and_counts_its_tokens(ran, runtime):
    usage = CHAT_USAGE if runtime.api == "chat" else RESPONSES_USAGE
    turns = of(ran.lines[runtime.name], "turn", model=runtime.model)
    assert [(t["api"], t["stream"], t["calls"]) for t in turns] == [(runtime.api, True, 3),
                                                                    (runtime.api, True, 0)]  # fmt: skip
    for turn in turns:
        assert_timed(turn)
    assert [(t["input_tokens"], t["output_tokens"]) for t in turns] == [usage["calls"],
                                                                        usage["text"]]  # fmt: skip
    assert "tool_wait_ms" not in turns[0]  # it answered nothing


@pytest.mark.parametrize("runtime", RUNTIMES, ids=lambda r: r.name)
def test_each_answered_call_is_timed_and_linked_to_its_mcp_run(ran, runtime):
    found = exchanges(ran.lines[runtime.name])
    (answering,) = [
        e for e in found if e[-1].get("model") == runtime.model and "tool_wait_ms" in e[-1]
    ]
    times = of(answering, "tool_time")
    assert [(t["api"], t["call_id"], t["name"], t["server"]) for t in times] == [
        (runtime.api, call_id, "forecast", SERVER) for call_id in runtime.calls
    ]
    assert answering[-1]["tool_wait_ms"] == max(t["waited_ms"] for t in times)
    # Each call linked to its own run: the tools/call whose arguments name its city, whose
    # turn line times the same run; and every run came inside its call's wait.
    runs = {
        json.loads(call["arguments_raw"])["city"]: exchange[-1]["duration_ms"]
        for exchange in found
        for call in of(exchange, "tool_call", api="mcp", name="forecast")
    }
    assert sorted(runs) == sorted(runtime.cities)
    for timed, city in zip(times, runtime.cities, strict=True):
        assert timed["ran_ms"] == runs[city]
        assert 0 < timed["ran_ms"] <= timed["waited_ms"]


@pytest.mark.parametrize("runtime", RUNTIMES, ids=lambda r: r.name)
def test_a_batch_that_ran_in_turn_is_said_serial_with_its_cause_and_one_run_together_is_not(
    ran, runtime
):
    lines = ran.lines[runtime.name]
    errors = of(lines, "loop_error")
    if runtime.serial is None:
        assert errors == []
        return
    (error,) = errors
    assert (error["api"], error["rule"], error["ids"], error["level"]) == (
        runtime.api, "serial-execution", runtime.calls, "info",
    )  # fmt: skip
    assert error["where"] == "the tools/call runs of the 3 calls one response issued"
    assert error["repair"].startswith("the batch took ")
    assert "Run a batch's independent calls together" in error["repair"]
    assert runtime.serial in error["repair"]


def socket_turns(ran: Ran, api: str) -> list[list[dict[str, Any]]]:
    return [e for e in exchanges(ran.lines[api]) if e[-1].get("api") == api]


def test_realtime_turns_are_timed_and_the_turn_that_answers_says_how_long_its_calls_waited(ran):
    first, second = socket_turns(ran, "realtime")
    usage = next(e["response"]["usage"] for d, e in recording(REALTIME_CASSETTE)
                 if d == "received" and e["type"] == "response.done")  # fmt: skip
    for exchange in (first, second):
        turn = exchange[-1]
        assert (turn["transport"], turn["stream"]) == ("websocket", True)
        assert_timed(turn)
        assert (turn["input_tokens"], turn["output_tokens"]) == (
            usage["input_tokens"], usage["output_tokens"],
        )  # fmt: skip
    assert (first[-1]["response_id"], first[-1]["calls"], "tool_wait_ms" in first[-1]) == (
        R1, 2, False,
    )  # fmt: skip
    times = of(second, "tool_time")
    assert [(t["api"], t["transport"], t["call_id"], t["ran_ms"]) for t in times] == [
        ("realtime", "websocket", call_id, None) for call_id, _, _ in REALTIME_CALLS
    ]
    assert second[-1]["response_id"] == R2
    assert second[-1]["tool_wait_ms"] == max(t["waited_ms"] for t in times) > 0


def test_gemini_live_turns_are_timed_and_the_turn_that_answers_says_how_long_its_call_waited(ran):
    first, second = socket_turns(ran, "gemini_live")
    for exchange in (first, second):
        assert_timed(exchange[-1])
    # The toolCall's turn reported no usage: its tokens are unknown, never 0.
    assert (first[-1]["calls"], first[-1]["input_tokens"], first[-1]["output_tokens"]) == (
        1, None, None,
    )  # fmt: skip
    assert (second[-1]["input_tokens"], second[-1]["output_tokens"]) == LIVE_USAGE
    (timed,) = of(second, "tool_time")
    assert (timed["api"], timed["call_id"], timed["name"], timed["ran_ms"]) == (
        "gemini_live", LIVE_CALL[0], LIVE_CALL[1], None,
    )  # fmt: skip
    assert second[-1]["tool_wait_ms"] == timed["waited_ms"] > 0


def test_a_hanging_mcp_tool_is_said_overdue_once_while_it_runs_and_never_another_call(ran):
    hang = ran.hang
    overdue = of(hang, "tool_overdue")
    (stall,) = [e for e in exchanges(hang) if of(e, "tool_call", name="stall")]
    (call,) = of(stall, "tool_call")
    assert [(o["api"], o["transport"], o["call_id"], o["name"], o["server"], o["deadline_s"],
             o["level"]) for o in overdue] == [
        ("mcp", "http", call["call_id"], "stall", SERVER, DEADLINE, "warning")
    ]  # fmt: skip
    assert overdue[0]["waited_ms"] > DEADLINE * 1000  # said past the deadline, not before
    assert overdue[0]["exchange"] == stall[-1]["exchange"]  # joined to the call's own lines
    # Said while the call still ran: before its exchange's lines, written once it answered.
    assert hang.index(overdue[0]) < hang.index(call) < hang.index(stall[-1])
    assert (stall[-1]["rpc"], stall[-1]["outcome"]) == (["tools/call"], "inspected")
    # It ended because the test released it on seeing the line, not by running out: the line
    # came while the call still ran.
    assert ran.stall_said == ["released"]
    assert [r["outcome"] for r in of(stall, "tool_result")] == ["ok"]


def test_the_scripted_run_shows_every_time_figure_and_all_seven_metrics(ran):
    values = ran.metrics

    def count(name: str, **labels: str) -> float:
        return sample(values, f"{name}_count", **labels)

    models = [(r.api, r.model) for r in RUNTIMES] + [
        (api, socket_turns(ran, api)[0][-1]["model"]) for api in ("realtime", "gemini_live")
    ]
    for api, model in models:
        assert count("tooltap_model_duration_seconds", api=api, model=model) == 2
        assert count("tooltap_first_token_seconds", api=api, model=model) == 2
    for runtime in RUNTIMES:
        usage = CHAT_USAGE if runtime.api == "chat" else RESPONSES_USAGE
        for kind, index in (("input", 0), ("output", 1)):
            tokens = sample(values, "tooltap_tokens_total", api=runtime.api, model=runtime.model,
                            type=kind)  # fmt: skip
            assert tokens == usage["calls"][index] + usage["text"][index]
    waits = {api: count("tooltap_tool_wait_seconds", api=api)
             for api in ("chat", "responses", "realtime", "gemini_live")}  # fmt: skip
    assert waits == {"chat": 6, "responses": 3, "realtime": 2, "gemini_live": 1}
    assert count("tooltap_tool_run_seconds", server=SERVER) == 9  # every forecast, linked
    assert sample(values, "tooltap_serial_batches_total", api="chat") == 1  # the loop's
    assert sample(values, "tooltap_serial_batches_total", api="responses") == 1  # the Agents SDK's
    assert sample(values, "tooltap_overdue_calls_total", api="mcp") == 1
    # The run as a reader of the log sees it (pytest -s).
    shown = ("duration_ms", "first_token_ms", "input_tokens", "output_tokens", "tool_wait_ms",
             "call_id", "name", "waited_ms", "ran_ms", "server", "rule", "ids", "deadline_s")  # fmt: skip
    for part, lines in [*ran.lines.items(), ("hang", of(ran.hang, "tool_overdue"))]:
        for line in lines:
            if line.get("event") in ("turn", "tool_time", "loop_error", "tool_overdue"):
                said = {k: line[k] for k in shown if line.get(k) is not None}
                print(f"{part:12} {line['event']:12} {line.get('api')} {json.dumps(said)}")
