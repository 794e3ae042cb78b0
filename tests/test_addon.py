"""The addon with mitmproxy's own test helpers: hooks, tap, worker, sinks; flows never change."""

import asyncio
import io
import json
import logging
import os
import socket
import time

import httpx
import psutil
import pytest
from captures import SSE, WIRE, stream_bytes
from mitmproxy.test import taddons, tflow, tutils
from prometheus_client.parser import text_string_to_metric_families

from tooltap.addon.proxy.addon import Tooltap

CHAT_REQUEST = {
    "model": "gpt-4o",
    "messages": [{"role": "user", "content": "weather and stock"}],
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "GetWeatherArgs",
                "strict": True,
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                    "additionalProperties": False,
                },
            },
        },
        {
            "type": "function",
            "function": {
                "name": "get_stock_price",
                "strict": True,
                "parameters": {"type": "object"},
            },
        },
    ],
}


def make_flow(
    path,
    request,
    response_body,
    headers=(("content-type", "application/json"),),
    host="api.openai.com",
    method="POST",
):
    req = tutils.treq(
        method=method.encode(),
        host=host,
        port=443,
        scheme=b"https",
        path=path.encode(),
        headers=((b"content-type", b"application/json"),),
        content=json.dumps(request).encode() if request is not None else b"",
    )
    resp = tutils.tresp(
        status_code=200,
        headers=tuple((k.encode(), v.encode()) for k, v in headers),
        content=response_body,
    )
    flow = tflow.tflow(req=req, resp=resp)
    return flow


def lines(stream):
    return [json.loads(line) for line in stream.getvalue().splitlines()]


@pytest.fixture
def addon():
    stream = io.StringIO()
    faults = set()

    def fault(where):
        if where in faults:
            raise RuntimeError(f"injected fault: {where}")

    tap = Tooltap(log_stream=stream, fault=fault)
    tap.faults = faults
    with taddons.context(tap) as tctx:
        tctx.configure(
            tap, tooltap_metrics_port=0, tooltap_log_format="json", tooltap_inspector="thread"
        )
        tap.stream = stream
        tap.tctx = tctx
        yield tap
        tap.done()


def value(addon, name, **labels):
    return addon.inspection.metrics.registry.get_sample_value(name, labels)


async def test_a_strict_void_chat_turn_is_logged_and_counted_and_the_flow_is_untouched(addon):
    body = (WIRE / "chat_nonstream_parallel_tool_calls.json").read_bytes()
    flow = make_flow("/v1/chat/completions", CHAT_REQUEST, body)
    before = (flow.request.get_state(), flow.response.get_state())
    await addon.tctx.cycle(addon, flow)
    assert addon.flush(5)
    assert (flow.request.get_state(), flow.response.get_state()) == before

    events = lines(addon.stream)
    turn = next(e for e in events if e["event"] == "turn")
    assert turn["state"] == "strict-void"
    assert turn["api"] == "chat"
    assert turn["calls"] == 2
    assert turn["path"] == "/v1/chat/completions"
    assert turn["level"] == "warning"
    calls = [e for e in events if e["event"] == "tool_call"]
    assert [(c["call_id"], c["arguments_raw"]) for c in calls] == [
        ("call_fdNz3vOBKYgOIpMdWotB9MjY", '{"city": "Edinburgh", "country": "GB", "units": "c"}'),
        ("call_h1DWI1POMJLb0KwIyQHWXD4p", '{"ticker": "AAPL", "exchange": "NASDAQ"}'),
    ]
    # The weather call breaks its schema: extra properties under additionalProperties false.
    assert [e["path"] for e in calls[0]["schema_errors"]] == ["$"]
    assert (
        value(
            addon, "tooltap_turns_total", api="chat", model="gpt-4o-2024-08-06", state="strict-void"
        )
        == 1
    )
    assert (
        value(addon, "tooltap_unguaranteed_arguments_total", api="chat", model="gpt-4o-2024-08-06")
        == 2
    )
    assert (
        value(
            addon,
            "tooltap_argument_errors_total",
            api="chat",
            model="gpt-4o-2024-08-06",
            kind="schema",
        )
        == 1
    )
    assert value(addon, "tooltap_flows_total", api="chat", outcome="inspected") == 1
    assert value(addon, "tooltap_calls_per_turn_count", api="chat") == 1


async def test_a_streamed_response_goes_through_the_tap_byte_for_byte(addon):
    wire = stream_bytes("chat_stream_parallel_tool_calls_with_usage.sse")
    flow = make_flow("/v1/chat/completions", CHAT_REQUEST, b"", headers=tuple(SSE.items()))
    addon.request(flow)
    addon.responseheaders(flow)
    tap = flow.response.stream
    assert callable(tap)
    out = b"".join(tap(wire[i : i + 7]) for i in range(0, len(wire), 7)) + tap(b"")
    assert out == wire
    flow.response.content = None  # as mitmproxy leaves a streamed response
    addon.response(flow)
    assert addon.flush(5)
    turn = next(e for e in lines(addon.stream) if e["event"] == "turn")
    assert (turn["stream"], turn["state"], turn["calls"]) == (True, "strict-void", 2)


async def test_a_client_that_hangs_up_after_the_last_event_still_gets_its_turn_logged(addon):
    wire = stream_bytes("chat_stream_single_tool_call.sse")
    flow = make_flow("/v1/chat/completions", CHAT_REQUEST, b"", headers=tuple(SSE.items()))
    addon.request(flow)
    addon.responseheaders(flow)
    flow.response.stream(wire)
    flow.error = tflow.terr("Client disconnected.")
    addon.error(flow)
    addon.response(flow)  # a late response hook must not count the flow twice
    assert addon.flush(5)
    assert [e["event"] for e in lines(addon.stream)].count("turn") == 1
    assert value(addon, "tooltap_flows_total", api="chat", outcome="inspected") == 1


async def test_an_injected_tap_fault_still_forwards_every_chunk_and_is_counted(addon):
    addon.faults.clear()
    addon.faults.add("tap")
    flow = make_flow("/v1/chat/completions", CHAT_REQUEST, b"", headers=tuple(SSE.items()))
    addon.request(flow)
    addon.responseheaders(flow)
    assert flow.response.stream(b"data: {}\n\n") == b"data: {}\n\n"
    assert flow.response.stream(b"") == b""
    addon.response(flow)
    assert value(addon, "tooltap_internal_errors_total", where="tap") == 2


async def test_an_injected_worker_fault_is_counted_and_the_worker_keeps_going(addon):
    body = (WIRE / "chat_nonstream_parallel_tool_calls.json").read_bytes()
    addon.faults.clear()
    addon.faults.add("worker")
    await addon.tctx.cycle(addon, make_flow("/v1/chat/completions", CHAT_REQUEST, body))
    assert addon.flush(5)
    assert value(addon, "tooltap_internal_errors_total", where="worker") == 1
    addon.faults.clear()
    await addon.tctx.cycle(addon, make_flow("/v1/chat/completions", CHAT_REQUEST, body))
    assert addon.flush(5)
    assert value(addon, "tooltap_flows_total", api="chat", outcome="inspected") == 1


async def test_a_hook_fault_is_counted_and_the_flow_is_untouched(addon):
    addon.faults.clear()
    addon.faults.add("hook")
    flow = make_flow("/v1/chat/completions", CHAT_REQUEST, b"{}")
    before = (flow.request.get_state(), flow.response.get_state())
    await addon.tctx.cycle(addon, flow)  # request, responseheaders, response: each one raises
    assert value(addon, "tooltap_internal_errors_total", where="hook") == 3
    assert (flow.request.get_state(), flow.response.get_state()) == before


async def test_a_body_over_the_cap_is_skipped_and_counted_not_inspected(addon):
    addon.tctx.configure(addon, tooltap_max_body=100)
    flow = make_flow("/v1/chat/completions", {"model": "m"}, b"{" + b" " * 200 + b"}")
    await addon.tctx.cycle(addon, flow)
    assert addon.flush(5)
    turn = next(e for e in lines(addon.stream) if e["event"] == "turn")
    assert (turn["outcome"], turn["reason"]) == ("skipped", "response body above tooltap_max_body")
    assert value(addon, "tooltap_flows_total", api="chat", outcome="skipped") == 1


async def test_a_large_declared_body_is_streamed_through_rather_than_buffered(addon):
    addon.tctx.configure(addon, tooltap_max_body=100)
    flow = make_flow(
        "/v1/chat/completions", {"model": "m"}, b"", headers=(("content-length", "5000"),)
    )
    addon.request(flow)
    addon.responseheaders(flow)
    assert flow.response.stream is True


async def test_other_hosts_and_endpoints_are_not_inspected(addon):
    await addon.tctx.cycle(
        addon, make_flow("/v1/chat/completions", CHAT_REQUEST, b"{}", host="example.com")
    )
    await addon.tctx.cycle(addon, make_flow("/v1/embeddings", {"input": "x"}, b"{}"))
    assert addon.flush(5)
    assert addon.stream.getvalue() == ""


@pytest.mark.parametrize(
    "host",
    [
        "my-resource.services.ai.azure.com",
        "aws-external-anthropic.us-east-1.api.aws",
        "bedrock-mantle.eu-west-1.api.aws",
    ],
)
async def test_anthropic_on_azure_foundry_and_aws_is_inspected_by_default(addon, host):
    body = (WIRE / "anthropic_roundtrip_tool_use_tool_result.json").read_text()
    reply = json.dumps(json.loads(body)[0]["response"]["body"]).encode()
    await addon.tctx.cycle(
        addon, make_flow("/anthropic/v1/messages", {"tools": []}, reply, host=host)
    )
    assert addon.flush(5)
    turn = next(e for e in lines(addon.stream) if e["event"] == "turn")
    assert (turn["api"], turn["host"], turn["calls"]) == ("messages", host, 1)


async def test_a_background_response_polled_with_get_is_counted_once_when_it_finishes(addon):
    queued = {"id": "resp_bg", "status": "queued", "output": [], "tools": []}
    done = {
        **queued,
        "status": "completed",
        "output": [{"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"}],
        "tools": [{"type": "function", "name": "f", "strict": True}],
    }
    post = make_flow(
        "/v1/responses", {"background": True, "input": "go"}, json.dumps(queued).encode()
    )
    polls = [
        make_flow("/v1/responses/resp_bg", None, json.dumps(body).encode(), method="GET")
        for body in (queued, done, done)
    ]
    for flow in (post, *polls):
        await addon.tctx.cycle(addon, flow)
    assert addon.flush(5)
    turns = [e for e in lines(addon.stream) if e["event"] == "turn"]
    assert [(t["path"], t["state"]) for t in turns] == [
        ("/v1/responses", None),
        ("/v1/responses/resp_bg", None),
        ("/v1/responses/resp_bg", "strict-at-risk"),
        ("/v1/responses/resp_bg", None),
    ]
    assert value(addon, "tooltap_flows_total", api="responses", outcome="inspected") == 4
    assert (
        value(
            addon, "tooltap_turns_total", api="responses", model="unknown", state="strict-at-risk"
        )
        == 1
    )
    assert value(addon, "tooltap_tool_calls_total", api="responses", model="unknown") == 1


async def test_a_full_queue_drops_and_counts_without_blocking(addon):
    addon.tctx.configure(addon, tooltap_queue_size=1)
    await addon.restarting
    addon.inspection.worker.stop()  # nothing drains the queue now
    body = (WIRE / "chat_nonstream_parallel_tool_calls.json").read_bytes()
    for _ in range(3):
        await addon.tctx.cycle(addon, make_flow("/v1/chat/completions", CHAT_REQUEST, body))
    assert value(addon, "tooltap_flows_total", api="chat", outcome="dropped") == 2


async def test_previous_response_id_follow_ups_are_checked_against_the_calls_seen():
    stream = io.StringIO()
    addon = Tooltap(log_stream=stream)
    with taddons.context(addon) as tctx:
        tctx.configure(
            addon, tooltap_metrics_port=0, tooltap_log_format="json", tooltap_inspector="thread"
        )
        first = {
            "output": [
                {"type": "function_call", "call_id": "call_a", "name": "f", "arguments": "{}"},
                {"type": "function_call", "call_id": "call_b", "name": "f", "arguments": "{}"},
            ],
            "id": "resp_1",
            "tools": [{"type": "function", "name": "f"}],
        }
        await tctx.cycle(
            addon, make_flow("/v1/responses", {"input": "go"}, json.dumps(first).encode())
        )
        follow = {
            "previous_response_id": "resp_1",
            "input": [{"type": "function_call_output", "call_id": "call_a", "output": "ok"}],
        }
        await tctx.cycle(
            addon,
            make_flow("/v1/responses", follow, json.dumps({"id": "resp_2", "output": []}).encode()),
        )
        assert addon.flush(5)
        errors = [e for e in lines(stream) if e["event"] == "loop_error"]
        assert [(e["rule"], e["ids"], e["where"]) for e in errors] == [
            ("unanswered-call", ["call_b"], "previous_response_id resp_1")
        ]
        addon.done()


def test_invalid_options_are_refused():
    from mitmproxy import exceptions

    addon = Tooltap(log_stream=io.StringIO())
    with taddons.context(addon) as tctx:
        for bad in (
            {"tooltap_max_body": 0},
            {"tooltap_queue_size": -1},
            {"tooltap_metrics_port": 70000},
            {"tooltap_model_labels": -1},
        ):
            with pytest.raises(exceptions.OptionsError):
                tctx.configure(addon, **bad)
        with pytest.raises(exceptions.OptionsError):
            tctx.configure(addon, tooltap_log_format="xml")
        addon.done()


async def test_a_body_mitmproxy_already_streams_is_tapped_not_lost(addon):
    body = (WIRE / "chat_nonstream_parallel_tool_calls.json").read_bytes()
    flow = make_flow("/v1/chat/completions", CHAT_REQUEST, b"")
    addon.request(flow)
    flow.response.stream = True  # what stream_large_bodies decides before our hook
    addon.responseheaders(flow)
    assert callable(flow.response.stream)
    assert flow.response.stream(body) == body
    addon.response(flow)
    assert addon.flush(5)
    turn = next(e for e in lines(addon.stream) if e["event"] == "turn")
    assert (turn["outcome"], turn["state"], turn["calls"]) == ("inspected", "strict-void", 2)


def _cut_response(flow):
    """A response whose body never finished arriving, as mitmproxy leaves it."""
    flow.response.content = None
    flow.response.timestamp_end = None


async def test_an_upstream_that_breaks_off_a_buffered_body_counts_as_upstream_error(addon):
    # Regression: the error hook's empty body used to be parsed as if complete,
    # and logged as status 200 "unparseable" while the client got mitmproxy's 502.
    flow = make_flow("/v1/chat/completions", CHAT_REQUEST, b"")
    addon.request(flow)
    addon.responseheaders(flow)
    _cut_response(flow)
    message = "HTTP/1 protocol error: peer closed connection without sending complete message body"
    flow.error = tflow.terr(message)
    before = (flow.request.get_state(), flow.response.get_state())
    addon.error(flow)
    assert addon.flush(5)
    assert (flow.request.get_state(), flow.response.get_state()) == before
    turn = next(e for e in lines(addon.stream) if e["event"] == "turn")
    assert turn["outcome"] == "upstream_error"
    assert turn["reason"] == f"the upstream failed: {message}"
    assert value(addon, "tooltap_flows_total", api="chat", outcome="upstream_error") == 1
    assert value(addon, "tooltap_flows_total", api="chat", outcome="unparseable") == 0


async def test_an_upstream_reset_mid_stream_keeps_the_calls_seen_and_counts_upstream_error(addon):
    wire = stream_bytes("chat_stream_single_tool_call.sse")
    flow = make_flow("/v1/chat/completions", CHAT_REQUEST, b"", headers=tuple(SSE.items()))
    addon.request(flow)
    addon.responseheaders(flow)
    half = wire[: len(wire) // 2]
    assert flow.response.stream(half) == half
    _cut_response(flow)
    flow.error = tflow.terr("HTTP/1 protocol error: incomplete chunked read")
    addon.error(flow)
    assert addon.flush(5)
    events = lines(addon.stream)
    turn = next(e for e in events if e["event"] == "turn")
    assert (turn["outcome"], turn["stream"], turn["calls"]) == ("upstream_error", True, 1)
    assert [e["event"] for e in events].count("tool_call") == 1
    assert value(addon, "tooltap_flows_total", api="chat", outcome="upstream_error") == 1


async def test_a_client_that_hangs_up_mid_stream_is_inspected_and_says_so(addon):
    wire = stream_bytes("chat_stream_single_tool_call.sse")
    flow = make_flow("/v1/chat/completions", CHAT_REQUEST, b"", headers=tuple(SSE.items()))
    addon.request(flow)
    addon.responseheaders(flow)
    flow.response.stream(wire[:600])
    _cut_response(flow)
    flow.error = tflow.terr("Client disconnected.")
    addon.error(flow)
    assert addon.flush(5)
    turn = next(e for e in lines(addon.stream) if e["event"] == "turn")
    assert turn["outcome"] == "inspected"
    assert turn["reason"] == "the stream ended before its final event (Client disconnected.)"


async def test_a_body_mitmproxy_starts_streaming_after_our_hook_is_skipped_not_unparseable(addon):
    # Regression: stream_large_bodies on a chunked body switches to streaming
    # after responseheaders; the body was never seen, and used to be logged as
    # an empty, unparseable document.
    flow = make_flow("/v1/chat/completions", CHAT_REQUEST, b"")
    addon.request(flow)
    addon.responseheaders(flow)
    assert flow.response.stream is False
    flow.response.stream = True
    flow.response.content = None
    addon.response(flow)
    assert addon.flush(5)
    turn = next(e for e in lines(addon.stream) if e["event"] == "turn")
    assert (turn["outcome"], turn["reason"]) == (
        "skipped",
        "response body streamed by mitmproxy (stream_large_bodies), not inspected",
    )
    assert value(addon, "tooltap_flows_total", api="chat", outcome="skipped") == 1


def _connect_error(mode):
    from mitmproxy.proxy.mode_specs import ProxyMode
    from mitmproxy.proxy.server_hooks import ServerConnectionHookData

    client, server = tflow.tclient_conn(), tflow.tserver_conn()
    client.proxy_mode = ProxyMode.parse(mode)
    server.address = ("127.0.0.1", 9)
    server.error = "[Errno 111] Connect call failed ('127.0.0.1', 9)"
    return ServerConnectionHookData(client=client, server=server)


async def test_an_unreachable_upstream_before_any_request_is_logged_and_counted(addon):
    # Regression: in reverse mode mitmproxy connects upstream when the client
    # connects; a refused connection drops the client before any flow exists,
    # and tooltap used to log and count nothing.
    addon.server_connect_error(_connect_error("reverse:http://127.0.0.1:9"))
    addon.server_connect_error(_connect_error("regular"))  # 127.0.0.1 is not a watched host
    assert addon.flush(5)
    turns = [e for e in lines(addon.stream) if e["event"] == "turn"]
    assert [(t["api"], t["outcome"], t["host"]) for t in turns] == [
        (None, "upstream_error", "127.0.0.1")
    ]
    assert turns[0]["reason"] == (
        "cannot connect to 127.0.0.1:9: [Errno 111] Connect call failed ('127.0.0.1', 9)"
    )
    assert value(addon, "tooltap_flows_total", api="none", outcome="upstream_error") == 1


async def test_a_connect_error_inside_a_flow_is_counted_once_by_the_flow(addon):
    data = _connect_error("reverse:http://127.0.0.1:9")
    flow = make_flow("/v1/chat/completions", CHAT_REQUEST, b"")
    flow.client_conn = data.client
    flow.response = None
    addon.request(flow)
    addon.server_connect_error(data)  # connection_strategy=lazy: the flow is waiting
    flow.error = tflow.terr(data.server.error)
    addon.error(flow)
    assert addon.flush(5)
    turns = [e for e in lines(addon.stream) if e["event"] == "turn"]
    assert [(t["api"], t["outcome"]) for t in turns] == [("chat", "upstream_error")]
    assert value(addon, "tooltap_flows_total", api="none", outcome="upstream_error") is None


@pytest.mark.parametrize("mode", ["raw", "redact", "hash", "omit"])
async def test_credentials_the_upstream_echoes_back_never_reach_the_log_or_metrics(mode):
    # Regression: an API (or a gateway in front of it) that quotes the key in
    # its error message, or a model that repeats it in a tool argument, put
    # the header's value into request_rejected.message, the turn's reason
    # (5xx, every mode) and arguments_raw.
    key, azure, org = (
        "sk-proj-ECHOEDkey0123456789",
        "0123456789abcdef0123456789abcdef",
        "org-ECHO1234",
    )
    stream = io.StringIO()
    tap = Tooltap(log_stream=stream)
    with taddons.context(tap) as tctx:
        tctx.configure(
            tap, tooltap_metrics_port=0, tooltap_log_format="json", tooltap_inspector="thread"
        )
        tctx.configure(tap, tooltap_log_arguments=mode)
        for status, message in ((401, f"Incorrect API key provided: {key}."), (502, azure)):
            body = {"error": {"message": message, "type": "invalid_request_error"}}
            flow = make_flow("/v1/chat/completions", CHAT_REQUEST, json.dumps(body).encode())
            flow.response.status_code = status
            flow.request.headers["authorization"] = f"Bearer {key}"
            flow.request.headers["api-key"] = azure
            flow.request.headers["openai-organization"] = org
            await tctx.cycle(tap, flow)
        answer = {
            "model": f"gpt-{org}",
            "choices": [
                {
                    "message": {
                        "tool_calls": [
                            {
                                "id": "call_1",
                                "function": {
                                    "name": "GetWeatherArgs",
                                    "arguments": json.dumps({"city": key, "note": azure}),
                                },
                            }
                        ]
                    }
                }
            ],
        }
        flow = make_flow("/v1/chat/completions", CHAT_REQUEST, json.dumps(answer).encode())
        flow.request.headers["x-api-key"] = key
        flow.request.headers["api-key"] = azure
        flow.request.headers["openai-organization"] = org
        await tctx.cycle(tap, flow)
        assert tap.flush(5)
        from prometheus_client import generate_latest

        exposed = stream.getvalue() + generate_latest(tap.inspection.metrics.registry).decode()
        tap.done()
    events = lines(stream)
    assert [e["event"] for e in events].count("turn") == 3
    for secret in (key, azure, org):
        assert secret not in exposed, (mode, secret)
    rejected = next(e for e in events if e["event"] == "request_rejected")
    assert rejected["message"] == "Incorrect API key provided: [redacted]."
    call = next(e for e in events if e["event"] == "tool_call")
    if mode == "raw":  # the rest of the arguments stays as it was
        assert call["arguments_raw"] == '{"city": "[redacted]", "note": "[redacted]"}'


async def test_an_error_event_inside_a_200_stream_is_logged_in_the_apis_words(addon):
    # Regression: the API's in-stream error (here Anthropic's overloaded_error
    # after message_start) was kept in Verdict.stream_errors and never logged:
    # the turn only said the stream ended early.
    start = stream_bytes("anthropic_stream_text_then_tool_use.sse").split(b"\n\n")[0] + b"\n\n"
    overloaded = (
        b'{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}'
    )
    wire = start + b"event: error\ndata: " + overloaded + b"\n\n"
    flow = make_flow("/v1/messages", {"model": "m"}, b"", headers=tuple(SSE.items()))
    addon.request(flow)
    addon.responseheaders(flow)
    assert flow.response.stream(wire) == wire
    assert flow.response.stream(b"") == b""
    flow.response.content = None
    addon.response(flow)
    assert addon.flush(5)
    events = lines(addon.stream)
    error = next(e for e in events if e["event"] == "stream_error")
    assert (error["api"], error["type"], error["message"]) == (
        "messages",
        "overloaded_error",
        "Overloaded",
    )
    assert error["level"] == "warning"
    assert next(e for e in events if e["event"] == "turn")["level"] == "warning"


# --- the default: inspection in a child process ------------------------------------


@pytest.fixture
def in_process_mode(tmp_path):
    """The addon as tooltap run has it: a child inspects, serves /metrics and writes the log."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    tap = Tooltap()
    with taddons.context(tap) as tctx:
        tctx.configure(
            tap,
            tooltap_metrics_port=port,
            tooltap_log_format="json",
            tooltap_log_file=str(tmp_path / "log.jsonl"),
            tooltap_queue_size=1,
        )
        tap.running()
        (child,) = [
            c
            for c in psutil.Process().children()
            if "tooltap.addon.inspection" in " ".join(c.cmdline())
        ]
        tap.tctx, tap.child, tap.url = tctx, child, f"http://127.0.0.1:{port}/metrics"
        yield tap
        tap.done()


async def flows_by_outcome(url):
    text = (await asyncio.to_thread(httpx.get, url, timeout=5)).text
    return {
        sample.labels["outcome"]: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "tooltap_flows_total" and sample.labels["api"] == "chat"
    }


async def test_a_child_that_cannot_keep_up_costs_drops_that_are_counted_never_a_wait(
    in_process_mode,
):
    tap = in_process_mode
    body = (WIRE / "chat_nonstream_parallel_tool_calls.json").read_bytes()
    tap.child.suspend()  # the pipe fills, then the one-record backlog
    sent = 200
    try:
        for _ in range(sent):
            flow = make_flow("/v1/chat/completions", CHAT_REQUEST, body)
            before = flow.response.get_state()
            await tap.tctx.cycle(tap, flow)  # returns although nothing reads the pipe
            assert flow.response.get_state() == before
    finally:
        tap.child.resume()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        seen = await flows_by_outcome(tap.url)
        if seen.get("inspected", 0) + seen.get("dropped", 0) >= sent:
            break
        await asyncio.sleep(0.1)  # the event loop drains the backlog meanwhile
    assert seen["dropped"] > 0 and seen["inspected"] > 0
    assert seen["inspected"] + seen["dropped"] == sent


async def test_a_dead_child_is_said_once_and_traffic_goes_on_untouched(in_process_mode, caplog):
    tap = in_process_mode
    tap.child.kill()
    # Dead, not yet reaped (the addon reaps it and reads its code). waitid reports the exit
    # only once every thread is gone, and with them the pipe's read end; a zombie status
    # can show while the metrics thread still holds it.
    deadline = time.monotonic() + 5
    flags = os.WEXITED | os.WNOWAIT | os.WNOHANG
    while os.waitid(os.P_PID, tap.child.pid, flags) is None and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    body = (WIRE / "chat_nonstream_parallel_tool_calls.json").read_bytes()
    with caplog.at_level(logging.ERROR, logger="tooltap"):
        for _ in range(3):
            flow = make_flow("/v1/chat/completions", CHAT_REQUEST, body)
            before = (flow.request.get_state(), flow.response.get_state())
            await tap.tctx.cycle(tap, flow)
            await asyncio.sleep(0)  # the hand-over's write
            assert (flow.request.get_state(), flow.response.get_state()) == before
    gone = [
        r.getMessage() for r in caplog.records if "inspection process is gone" in r.getMessage()
    ]
    assert len(gone) == 1 and "exit code -9" in gone[0]
