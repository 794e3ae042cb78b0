"""The addon with mitmproxy's own test helpers: hooks, tap, worker, sinks; flows never change."""

import asyncio
import io
import json
import threading

import pytest
from mitmproxy.test import taddons, tflow
from support.captures import SSE, WIRE, stream_bytes
from support.flows import CHAT_REQUEST, lines, make_flow

import tooltap.addon.proxy.addon as addon_module
from tooltap.addon.inspection.inspector import Inspector
from tooltap.addon.proxy.addon import Tooltap


async def test_a_strict_void_chat_turn_is_logged_and_counted_and_the_flow_is_untouched(harness):
    body = (WIRE / "chat_nonstream_parallel_tool_calls.json").read_bytes()
    flow = make_flow("/v1/chat/completions", CHAT_REQUEST, body)
    before = (flow.request.get_state(), flow.response.get_state())
    await harness.cycle(flow)
    assert harness.addon.flush(5)
    assert (flow.request.get_state(), flow.response.get_state()) == before

    events = harness.events()
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
        harness.value(
            "tooltap_turns_total",
            api="chat",
            model="gpt-4o-2024-08-06",
            state="strict-void",
        )
        == 1
    )
    assert (
        harness.value("tooltap_unguaranteed_arguments_total", api="chat", model="gpt-4o-2024-08-06")
        == 2
    )
    assert (
        harness.value(
            "tooltap_argument_errors_total",
            api="chat",
            model="gpt-4o-2024-08-06",
            kind="schema",
        )
        == 1
    )
    assert harness.value("tooltap_flows_total", api="chat", outcome="inspected") == 1
    assert harness.value("tooltap_calls_per_turn_count", api="chat") == 1


async def test_a_streamed_response_goes_through_the_tap_byte_for_byte(harness):
    wire = stream_bytes("chat_stream_parallel_tool_calls_with_usage.sse")
    flow = make_flow("/v1/chat/completions", CHAT_REQUEST, b"", headers=tuple(SSE.items()))
    harness.addon.request(flow)
    harness.addon.responseheaders(flow)
    tap = flow.response.stream
    assert callable(tap)
    out = b"".join(tap(wire[i : i + 7]) for i in range(0, len(wire), 7)) + tap(b"")
    assert out == wire
    flow.response.content = None  # as mitmproxy leaves a streamed response
    harness.addon.response(flow)
    assert harness.addon.flush(5)
    turn = next(e for e in harness.events() if e["event"] == "turn")
    assert (turn["stream"], turn["state"], turn["calls"]) == (True, "strict-void", 2)


async def test_a_client_that_hangs_up_after_the_last_event_still_gets_its_turn_logged(harness):
    wire = stream_bytes("chat_stream_single_tool_call.sse")
    flow = make_flow("/v1/chat/completions", CHAT_REQUEST, b"", headers=tuple(SSE.items()))
    harness.addon.request(flow)
    harness.addon.responseheaders(flow)
    flow.response.stream(wire)
    flow.error = tflow.terr("Client disconnected.")
    harness.addon.error(flow)
    harness.addon.response(flow)  # a late response hook must not count the flow twice
    assert harness.addon.flush(5)
    assert [e["event"] for e in harness.events()].count("turn") == 1
    assert harness.value("tooltap_flows_total", api="chat", outcome="inspected") == 1


async def test_an_injected_tap_fault_still_forwards_every_chunk_and_is_counted(harness):
    harness.faults.clear()
    harness.faults.add("tap")
    flow = make_flow("/v1/chat/completions", CHAT_REQUEST, b"", headers=tuple(SSE.items()))
    harness.addon.request(flow)
    harness.addon.responseheaders(flow)
    assert flow.response.stream(b"data: {}\n\n") == b"data: {}\n\n"
    assert flow.response.stream(b"") == b""
    harness.addon.response(flow)
    assert harness.value("tooltap_internal_errors_total", where="tap") == 2


async def test_an_injected_worker_fault_is_counted_and_the_worker_keeps_going(harness):
    body = (WIRE / "chat_nonstream_parallel_tool_calls.json").read_bytes()
    harness.faults.clear()
    harness.faults.add("worker")
    await harness.cycle(make_flow("/v1/chat/completions", CHAT_REQUEST, body))
    assert harness.addon.flush(5)
    assert harness.value("tooltap_internal_errors_total", where="worker") == 1
    harness.faults.clear()
    await harness.cycle(make_flow("/v1/chat/completions", CHAT_REQUEST, body))
    assert harness.addon.flush(5)
    assert harness.value("tooltap_flows_total", api="chat", outcome="inspected") == 1


async def test_a_hook_fault_is_counted_and_the_flow_is_untouched(harness):
    harness.faults.clear()
    harness.faults.add("hook")
    flow = make_flow("/v1/chat/completions", CHAT_REQUEST, b"{}")
    before = (flow.request.get_state(), flow.response.get_state())
    await harness.cycle(flow)  # request, responseheaders, response: each one raises
    assert harness.value("tooltap_internal_errors_total", where="hook") == 3
    assert (flow.request.get_state(), flow.response.get_state()) == before


async def test_a_body_over_the_cap_is_skipped_and_counted_not_inspected(harness):
    harness.tctx.configure(harness.addon, tooltap_max_body=100)
    flow = make_flow("/v1/chat/completions", {"model": "m"}, b"{" + b" " * 200 + b"}")
    await harness.cycle(flow)
    assert harness.addon.flush(5)
    turn = next(e for e in harness.events() if e["event"] == "turn")
    assert (turn["outcome"], turn["reason"]) == ("skipped", "response body above tooltap_max_body")
    assert harness.value("tooltap_flows_total", api="chat", outcome="skipped") == 1


async def test_a_large_declared_body_is_streamed_through_rather_than_buffered(harness):
    harness.tctx.configure(harness.addon, tooltap_max_body=100)
    flow = make_flow(
        "/v1/chat/completions", {"model": "m"}, b"", headers=(("content-length", "5000"),)
    )
    harness.addon.request(flow)
    harness.addon.responseheaders(flow)
    assert flow.response.stream is True


@pytest.mark.parametrize(
    ("path", "headers", "streamed"),
    [
        ("/sse", (("content-type", "text/event-stream"),), True),  # an MCP server's GET stream
        ("/poll", (("transfer-encoding", "chunked"),), True),  # a long poll
        ("/events", (("content-type", "application/x-ndjson"),), True),  # ended by its close
        ("/v1/embeddings", (("content-type", "application/json"),), False),  # a known length
    ],
)
async def test_a_stream_nobody_inspects_still_flows_as_it_comes(harness, path, headers, streamed):
    # I1: a response of unknown length is streamed whether or not tooltap reads it; the
    # regular-mode host and the reverse mode decide nothing here.
    for host in ("example.com", "api.openai.com"):
        flow = make_flow(path, None, b"{}", headers=headers, host=host, method="GET")
        if path == "/events":
            del flow.response.headers["content-length"]
        harness.addon.request(flow)
        harness.addon.responseheaders(flow)
        assert flow.response.stream is streamed


async def test_an_inspected_body_of_unknown_length_is_tapped_as_it_flows(harness):
    body = (WIRE / "chat_nonstream_parallel_tool_calls.json").read_bytes()
    flow = make_flow(
        "/v1/chat/completions", CHAT_REQUEST, b"", headers=(("transfer-encoding", "chunked"),)
    )
    harness.addon.request(flow)
    harness.addon.responseheaders(flow)
    assert callable(flow.response.stream)
    assert [flow.response.stream(body[:50]), flow.response.stream(body[50:])] == [
        body[:50],
        body[50:],
    ]
    flow.response.content = None  # as mitmproxy leaves a streamed response
    harness.addon.response(flow)
    assert harness.addon.flush(5)
    turn = next(e for e in harness.events() if e["event"] == "turn")
    assert (turn["outcome"], turn["stream"], turn["state"]) == ("inspected", False, "strict-void")


async def test_other_hosts_are_not_followed(harness):
    await harness.tctx.cycle(
        harness.addon, make_flow("/v1/chat/completions", CHAT_REQUEST, b"{}", host="example.com")
    )
    assert harness.addon.flush(5)
    assert harness.stream.getvalue() == ""


async def test_other_endpoints_of_a_watched_host_are_said_and_counted_as_not_read(harness):
    """Nothing unaccounted: a model list, embeddings, a stream no dialect reads. Their bodies
    are never held, and a stream still flows event by event."""
    assert harness.value("tooltap_flows_total", api="none", outcome="not_read") == 0
    listing = make_flow("/v1/models", None, b'{"data": []}', method="GET")
    embeddings = make_flow("/v1/embeddings", {"input": "x"}, b'{"data": []}')
    stream = make_flow("/v1/audio/speech", {"input": "x"}, b"data: {}\n\n",
                       headers=(("content-type", "text/event-stream"),))  # fmt: skip
    # Cohere's v1 chat calls tools: it is said to, never that it is no tool-calling endpoint.
    cohere_v1 = make_flow("/v1/chat", {"message": "hi"}, b'{"text": "hi"}', host="api.cohere.com")
    unknown = make_flow("/v1/brand-new", {"input": "x"}, b"{}")
    for flow in (listing, embeddings, cohere_v1, unknown):
        await harness.cycle(flow)
    harness.addon.request(stream)
    harness.addon.responseheaders(stream)
    assert stream.response.stream is True  # passed through, neither held nor tapped
    harness.addon.response(stream)
    assert harness.addon.flush(5)
    turns = [e for e in harness.events() if e["event"] == "turn"]
    none = "it makes no tool calls, and is not read"  # each says what it is
    assert [(t["path"], t["outcome"], t["reason"], t["level"], t["stream"]) for t in turns] == [
        ("/v1/models", "not_read", f"a model list or a model's details: {none}", "info", False),
        (
            "/v1/embeddings",
            "not_read",
            f"embeddings (OpenAI's API and those compatible with it): {none}",
            "info",
            False,
        ),
        (
            "/v1/chat",
            "not_read",
            "Cohere's v1 chat (/v1/chat): it calls tools, and tooltap does "
            "not read it (its v2 chat, /v2/chat, is read)",
            "info",
            False,
        ),
        ("/v1/brand-new", "not_read", "not an endpoint tooltap reads", "info", False),
        ("/v1/audio/speech", "not_read", f"OpenAI's audio API: {none}", "info", True),
    ]
    assert harness.value("tooltap_flows_total", api="none", outcome="not_read") == 5
    assert harness.addon.budget.peak == 0  # no body was kept for them


async def test_an_invoke_model_stream_is_tapped_whole_and_its_body_says_who_reads_it(harness):
    """Claude 2's Text Completions and a Messages stream share one model id and one path: the
    proxy keeps the body, and the inspection reads which it is (never Messages by the id)."""
    from tooltap.addon.harness.eventstream import CONTENT_TYPE, chunk

    completion = {"prompt": "\n\nHuman: Hi\n\nAssistant:", "max_tokens_to_sample": 300}
    wire = chunk({"completion": " Hello", "stop_reason": None}) + chunk(
        {"completion": "!", "stop_reason": "stop_sequence"}
    )
    flow = make_flow("/model/anthropic.claude-v2/invoke-with-response-stream", completion, b"",
                     headers=(("content-type", CONTENT_TYPE),),
                     host="bedrock-runtime.us-east-1.amazonaws.com")  # fmt: skip
    harness.addon.request(flow)
    harness.addon.responseheaders(flow)
    assert callable(flow.response.stream)
    assert flow.response.stream(wire) + flow.response.stream(b"") == wire
    flow.response.content = None
    harness.addon.response(flow)
    assert harness.addon.flush(5)
    turn = next(e for e in harness.events() if e["event"] == "turn")
    assert (turn["api"], turn["outcome"], turn["stream"], turn["level"]) == (
        None, "not_read", True, "info"
    )  # fmt: skip
    assert turn["reason"].startswith("Anthropic Text Completions on InvokeModel")


async def test_an_mcp_servers_traffic_besides_its_json_rpc_posts_is_left_to_mcp(harness):
    host = "tools.example.com"
    harness.tctx.configure(harness.addon, tooltap_hosts=[host], tooltap_mcp_hosts=[host])
    for method in ("GET", "DELETE"):
        await harness.cycle(make_flow("/mcp", None, b"", method=method, host=host))
    assert harness.addon.flush(5)
    assert harness.value("tooltap_flows_total", api="none", outcome="not_read") == 0


async def test_a_websocket_upgrade_is_left_to_the_socket_hooks(harness):
    upgrade = make_flow("/v1/realtime", None, b"", method="GET")
    upgrade.request.headers["upgrade"] = "websocket"
    await harness.cycle(upgrade)
    assert harness.addon.flush(5)
    assert harness.value("tooltap_flows_total", api="none", outcome="not_read") == 0


@pytest.mark.parametrize(
    "host",
    [
        "my-resource.services.ai.azure.com",
        "aws-external-anthropic.us-east-1.api.aws",
        "bedrock-mantle.eu-west-1.api.aws",
    ],
)
async def test_anthropic_on_azure_foundry_and_aws_is_inspected_by_default(harness, host):
    body = (WIRE / "anthropic_roundtrip_tool_use_tool_result.json").read_text()
    reply = json.dumps(json.loads(body)[0]["response"]["body"]).encode()
    await harness.tctx.cycle(
        harness.addon, make_flow("/anthropic/v1/messages", {"tools": []}, reply, host=host)
    )
    assert harness.addon.flush(5)
    turn = next(e for e in harness.events() if e["event"] == "turn")
    assert (turn["api"], turn["host"], turn["calls"]) == ("messages", host, 1)


async def test_a_background_response_polled_with_get_is_counted_once_when_it_finishes(harness):
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
        await harness.cycle(flow)
    assert harness.addon.flush(5)
    turns = [e for e in harness.events() if e["event"] == "turn"]
    assert [(t["path"], t["state"]) for t in turns] == [
        ("/v1/responses", None),
        ("/v1/responses/resp_bg", None),
        ("/v1/responses/resp_bg", "strict-at-risk"),
        ("/v1/responses/resp_bg", None),
    ]
    assert harness.value("tooltap_flows_total", api="responses", outcome="inspected") == 4
    assert (
        harness.value(
            "tooltap_turns_total",
            api="responses",
            model="unknown",
            state="strict-at-risk",
        )
        == 1
    )
    assert harness.value("tooltap_tool_calls_total", api="responses", model="unknown") == 1


async def test_the_budget_is_given_back_once_each_record_is_inspected_or_refused(harness):
    harness.tctx.configure(harness.addon, tooltap_memory_budget=1 << 20)
    body = (WIRE / "chat_nonstream_parallel_tool_calls.json").read_bytes()
    stream = stream_bytes("chat_stream_parallel_tool_calls_with_usage.sse")
    for _ in range(5):
        await harness.cycle(make_flow("/v1/chat/completions", CHAT_REQUEST, body))
        flow = make_flow("/v1/chat/completions", CHAT_REQUEST, b"", headers=tuple(SSE.items()))
        harness.addon.request(flow)
        harness.addon.responseheaders(flow)
        flow.response.stream(stream)
        flow.response.stream(b"")
        harness.addon.response(flow)
    assert harness.addon.flush(5)
    budget = harness.addon.budget
    assert (budget.used, 0 < budget.peak <= budget.limit) == (0, True)
    assert harness.value("tooltap_held_bytes") == 0
    assert harness.value("tooltap_flows_total", api="chat", outcome="inspected") == 10


async def test_a_records_bytes_stay_in_the_budget_until_the_thread_inspector_has_handled_it(
    harness, monkeypatch
):
    gate, handle = threading.Event(), Inspector.handle

    def held_at_the_gate(self, record):
        gate.wait(5)
        handle(self, record)

    monkeypatch.setattr(Inspector, "handle", held_at_the_gate)
    harness.tctx.configure(harness.addon, tooltap_queue_size=8)
    await harness.addon.restarting  # a new worker, on the gated handler
    body = (WIRE / "chat_nonstream_parallel_tool_calls.json").read_bytes()
    flow = make_flow("/v1/chat/completions", CHAT_REQUEST, body)
    await harness.cycle(flow)
    budget = harness.addon.budget
    assert budget.used == len(flow.request.raw_content) + len(body)
    gate.set()
    assert harness.addon.flush(5)
    assert budget.used == 0


async def test_a_full_queue_drops_and_counts_without_blocking(harness):
    harness.tctx.configure(harness.addon, tooltap_queue_size=1)
    await harness.addon.restarting
    harness.addon.inspection.worker.stop()  # nothing drains the queue now
    body = (WIRE / "chat_nonstream_parallel_tool_calls.json").read_bytes()
    for _ in range(3):
        await harness.cycle(make_flow("/v1/chat/completions", CHAT_REQUEST, body))
    assert harness.value("tooltap_flows_total", api="chat", outcome="dropped") == 2


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


async def test_a_body_mitmproxy_already_streams_is_tapped_not_lost(harness):
    body = (WIRE / "chat_nonstream_parallel_tool_calls.json").read_bytes()
    flow = make_flow("/v1/chat/completions", CHAT_REQUEST, b"")
    harness.addon.request(flow)
    flow.response.stream = True  # what stream_large_bodies decides before our hook
    harness.addon.responseheaders(flow)
    assert callable(flow.response.stream)
    assert flow.response.stream(body) == body
    harness.addon.response(flow)
    assert harness.addon.flush(5)
    turn = next(e for e in harness.events() if e["event"] == "turn")
    assert (turn["outcome"], turn["state"], turn["calls"]) == ("inspected", "strict-void", 2)


def _cut_response(flow):
    """A response whose body never finished arriving, as mitmproxy leaves it."""
    flow.response.content = None
    flow.response.timestamp_end = None


async def test_an_upstream_that_breaks_off_a_buffered_body_counts_as_upstream_error(harness):
    # Regression: the error hook's empty body used to be parsed as if complete,
    # and logged as status 200 "unparseable" while the client got mitmproxy's 502.
    flow = make_flow("/v1/chat/completions", CHAT_REQUEST, b"")
    harness.addon.request(flow)
    harness.addon.responseheaders(flow)
    _cut_response(flow)
    message = "HTTP/1 protocol error: peer closed connection without sending complete message body"
    flow.error = tflow.terr(message)
    before = (flow.request.get_state(), flow.response.get_state())
    harness.addon.error(flow)
    assert harness.addon.flush(5)
    assert (flow.request.get_state(), flow.response.get_state()) == before
    turn = next(e for e in harness.events() if e["event"] == "turn")
    assert turn["outcome"] == "upstream_error"
    assert turn["reason"] == f"the upstream failed: {message}"
    assert harness.value("tooltap_flows_total", api="chat", outcome="upstream_error") == 1
    assert harness.value("tooltap_flows_total", api="chat", outcome="unparseable") == 0


async def test_an_upstream_reset_mid_stream_keeps_the_calls_seen_and_counts_upstream_error(harness):
    wire = stream_bytes("chat_stream_single_tool_call.sse")
    flow = make_flow("/v1/chat/completions", CHAT_REQUEST, b"", headers=tuple(SSE.items()))
    harness.addon.request(flow)
    harness.addon.responseheaders(flow)
    half = wire[: len(wire) // 2]
    assert flow.response.stream(half) == half
    _cut_response(flow)
    flow.error = tflow.terr("HTTP/1 protocol error: incomplete chunked read")
    harness.addon.error(flow)
    assert harness.addon.flush(5)
    events = harness.events()
    turn = next(e for e in events if e["event"] == "turn")
    assert (turn["outcome"], turn["stream"], turn["calls"]) == ("upstream_error", True, 1)
    assert [e["event"] for e in events].count("tool_call") == 1
    assert harness.value("tooltap_flows_total", api="chat", outcome="upstream_error") == 1


async def test_a_client_that_hangs_up_mid_stream_is_inspected_and_says_so(harness):
    wire = stream_bytes("chat_stream_single_tool_call.sse")
    flow = make_flow("/v1/chat/completions", CHAT_REQUEST, b"", headers=tuple(SSE.items()))
    harness.addon.request(flow)
    harness.addon.responseheaders(flow)
    flow.response.stream(wire[:600])
    _cut_response(flow)
    flow.error = tflow.terr("Client disconnected.")
    harness.addon.error(flow)
    assert harness.addon.flush(5)
    turn = next(e for e in harness.events() if e["event"] == "turn")
    assert turn["outcome"] == "inspected"
    assert turn["reason"] == "the stream ended before its final event (Client disconnected.)"


async def test_a_client_that_hangs_up_before_any_answer_is_client_gone_not_upstream_error(harness):
    flow = make_flow("/v1/chat/completions", CHAT_REQUEST, b"")
    harness.addon.request(flow)
    flow.response = None  # nothing had come back
    flow.error = tflow.terr("Client disconnected.")
    harness.addon.error(flow)
    assert harness.addon.flush(5)
    turn = next(e for e in harness.events() if e["event"] == "turn")
    assert (turn["outcome"], turn["reason"]) == (
        "client_gone",
        "the client hung up before the answer (Client disconnected.)",
    )
    assert harness.value("tooltap_flows_total", api="chat", outcome="client_gone") == 1
    assert harness.value("tooltap_flows_total", api="chat", outcome="upstream_error") == 0


def _legacy_session(harness):
    """An MCP server's legacy GET stream, tapped, past its endpoint event; and a tools/call
    POSTed to that endpoint, answered 202 (not yet through the hooks)."""
    harness.tctx.configure(harness.addon, tooltap_mcp_hosts=["tools.example.com"])
    stream = make_flow("/sse", None, b"", headers=tuple(SSE.items()), host="tools.example.com",
                       method="GET")  # fmt: skip
    harness.addon.request(stream)
    harness.addon.responseheaders(stream)
    tap = stream.response.stream
    assert callable(tap)
    endpoint = b"event: endpoint\ndata: /messages/?session_id=s9\n\n"
    assert tap(endpoint) == endpoint
    call = {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "t0"}}
    post = make_flow("/messages/?session_id=s9", call, b"Accepted", host="tools.example.com",
                     headers=(("content-type", "text/plain"),))  # fmt: skip
    post.response.status_code = 202
    return stream, tap, post


async def test_an_mcp_get_stream_is_read_piece_by_piece_and_pairs_its_posts(harness):
    stream, tap, post = _legacy_session(harness)
    await harness.cycle(post)
    answer = b'event: message\ndata: {"jsonrpc":"2.0","id":4,"result":{"content":[]}}\n\n'
    assert tap(answer[:20]) + tap(answer[20:]) == answer  # handed over as it passes
    assert harness.addon.flush(5)
    (turn,) = [e for e in harness.events() if e["event"] == "turn"]
    assert (turn["api"], turn["path"], turn["rpc"], turn["stream"], turn["reason"]) == (
        "mcp",
        "/messages/",
        ["tools/call"],
        True,
        None,
    )
    stream.error = tflow.terr("Client disconnected.")
    harness.addon.error(stream)
    assert harness.addon.flush(5)
    assert len([e for e in harness.events() if e["event"] == "turn"]) == 1  # no flow of its own


async def test_a_legacy_post_whose_202_broke_off_is_still_paired_with_its_answer(harness):
    # A client that exits on its last result hangs up on that call's 202, whose body may then
    # never arrive; the call's answer came on the session's stream, and it is logged with it.
    _stream, tap, post = _legacy_session(harness)
    harness.addon.request(post)
    harness.addon.responseheaders(post)
    tap(b'event: message\ndata: {"jsonrpc":"2.0","id":4,"result":{"content":[]}}\n\n')
    _cut_response(post)
    post.error = tflow.terr("Client disconnected.")
    harness.addon.error(post)
    assert harness.addon.flush(5)
    events = harness.events()
    assert [e["name"] for e in events if e["event"] == "tool_call"] == ["t0"]
    (turn,) = [e for e in events if e["event"] == "turn"]
    assert (turn["outcome"], turn["rpc"], turn["path"]) == (
        "inspected",
        ["tools/call"],
        "/messages/",
    )


async def test_on_an_mcp_host_mcp_wins_over_the_path_and_mcp_method_says_mcp(harness):
    harness.tctx.configure(harness.addon, tooltap_mcp_hosts=["tools.example.com"])
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    legacy = make_flow("/messages/?session_id=s1", call, b"{}", host="tools.example.com")
    modern = make_flow("/mcp", None, b"{}", host="tools.example.com")
    modern.request.raw_content = b"\x1f\x8b compressed"  # no JSON-RPC to see at a glance
    modern.request.headers["mcp-method"] = "tools/list"
    anthropic = make_flow("/v1/messages", {"model": "m"}, b"{}", host="api.anthropic.com")
    for flow in (legacy, modern, anthropic):
        harness.addon.request(flow)
    assert [harness.addon._flows[f.id].api for f in (legacy, modern, anthropic)] == [
        "mcp",
        "mcp",
        "messages",
    ]


async def test_a_body_mitmproxy_starts_streaming_after_our_hook_is_skipped_not_unparseable(harness):
    # Regression: stream_large_bodies on a chunked body switches to streaming
    # after responseheaders; the body was never seen, and used to be logged as
    # an empty, unparseable document.
    flow = make_flow("/v1/chat/completions", CHAT_REQUEST, b"")
    harness.addon.request(flow)
    harness.addon.responseheaders(flow)
    assert flow.response.stream is False
    flow.response.stream = True
    flow.response.content = None
    harness.addon.response(flow)
    assert harness.addon.flush(5)
    turn = next(e for e in harness.events() if e["event"] == "turn")
    assert (turn["outcome"], turn["reason"]) == (
        "skipped",
        "response body streamed by mitmproxy (stream_large_bodies), not inspected",
    )
    assert harness.value("tooltap_flows_total", api="chat", outcome="skipped") == 1


def _connect_error(mode):
    from mitmproxy.proxy.mode_specs import ProxyMode
    from mitmproxy.proxy.server_hooks import ServerConnectionHookData

    client, server = tflow.tclient_conn(), tflow.tserver_conn()
    client.proxy_mode = ProxyMode.parse(mode)
    server.address = ("127.0.0.1", 9)
    server.error = "[Errno 111] Connect call failed ('127.0.0.1', 9)"
    return ServerConnectionHookData(client=client, server=server)


async def test_an_unreachable_upstream_before_any_request_is_logged_and_counted(harness):
    # Regression: in reverse mode mitmproxy connects upstream when the client
    # connects; a refused connection drops the client before any flow exists,
    # and tooltap used to log and count nothing.
    harness.addon.server_connect_error(_connect_error("reverse:http://127.0.0.1:9"))
    harness.addon.server_connect_error(_connect_error("regular"))  # 127.0.0.1 is not a watched host
    assert harness.addon.flush(5)
    turns = [e for e in harness.events() if e["event"] == "turn"]
    assert [(t["api"], t["outcome"], t["host"]) for t in turns] == [
        (None, "upstream_error", "127.0.0.1")
    ]
    assert turns[0]["reason"] == (
        "cannot connect to 127.0.0.1:9: [Errno 111] Connect call failed ('127.0.0.1', 9)"
    )
    assert harness.value("tooltap_flows_total", api="none", outcome="upstream_error") == 1


async def test_a_connect_error_inside_a_flow_is_counted_once_by_the_flow(harness):
    data = _connect_error("reverse:http://127.0.0.1:9")
    flow = make_flow("/v1/chat/completions", CHAT_REQUEST, b"")
    flow.client_conn = data.client
    flow.response = None
    harness.addon.request(flow)
    harness.addon.server_connect_error(data)  # connection_strategy=lazy: the flow is waiting
    flow.error = tflow.terr(data.server.error)
    harness.addon.error(flow)
    assert harness.addon.flush(5)
    turns = [e for e in harness.events() if e["event"] == "turn"]
    assert [(t["api"], t["outcome"]) for t in turns] == [("chat", "upstream_error")]
    assert harness.value("tooltap_flows_total", api="none", outcome="upstream_error") is None


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


async def test_an_error_event_inside_a_200_stream_is_logged_in_the_apis_words(harness):
    # Regression: the API's in-stream error (here Anthropic's overloaded_error
    # after message_start) was kept in Verdict.stream_errors and never logged:
    # the turn only said the stream ended early.
    start = stream_bytes("anthropic_stream_text_then_tool_use.sse").split(b"\n\n")[0] + b"\n\n"
    overloaded = (
        b'{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}'
    )
    wire = start + b"event: error\ndata: " + overloaded + b"\n\n"
    flow = make_flow("/v1/messages", {"model": "m"}, b"", headers=tuple(SSE.items()))
    harness.addon.request(flow)
    harness.addon.responseheaders(flow)
    assert flow.response.stream(wire) == wire
    assert flow.response.stream(b"") == b""
    flow.response.content = None
    harness.addon.response(flow)
    assert harness.addon.flush(5)
    events = harness.events()
    error = next(e for e in events if e["event"] == "stream_error")
    assert (error["api"], error["type"], error["message"]) == (
        "messages",
        "overloaded_error",
        "Overloaded",
    )
    assert error["level"] == "warning"
    assert next(e for e in events if e["event"] == "turn")["level"] == "warning"


async def test_a_settings_change_restarts_inspection_in_a_task_and_counts_what_it_missed(harness):
    old = harness.addon.inspection
    harness.tctx.configure(harness.addon, tooltap_model_labels=7)
    restart = harness.addon.restarting
    assert restart is not None and not restart.done()  # scheduled, not done inside configure
    body = (WIRE / "chat_nonstream_parallel_tool_calls.json").read_bytes()
    await asyncio.sleep(0)  # the restart begins: the old inspection is closed
    await harness.cycle(make_flow("/v1/chat/completions", CHAT_REQUEST, body))
    await restart
    assert harness.addon.inspection is not old
    assert harness.addon.inspection.metrics.model_labels == 7
    assert harness.value("tooltap_flows_total", api="chat", outcome="dropped") == 1


async def test_flows_forgotten_past_the_in_flight_bound_are_counted_as_dropped(
    harness, monkeypatch
):
    monkeypatch.setattr(addon_module, "MAX_TRACKED", 2)
    flows = [make_flow("/v1/chat/completions", CHAT_REQUEST, b"{}") for _ in range(3)]
    for flow in flows:
        harness.addon.request(flow)  # three in flight: the first is forgotten
    assert harness.value("tooltap_flows_total", api="chat", outcome="dropped") == 1


async def test_the_host_decisions_are_bounded(harness, monkeypatch):
    monkeypatch.setattr(addon_module, "MAX_HOSTS", 3)
    for n in range(10):
        flow = make_flow("/v1/chat/completions", CHAT_REQUEST, b"{}", host=f"h{n}.example.com")
        harness.addon.request(flow)
    assert len(harness.addon._hosts) == 3


async def test_two_quick_settings_changes_end_with_one_inspection_on_the_latest(harness):
    import threading

    harness.tctx.configure(harness.addon, tooltap_model_labels=10)
    harness.tctx.configure(harness.addon, tooltap_model_labels=20)
    await harness.addon.restarting
    assert harness.addon.inspection.metrics.model_labels == 20
    current = harness.addon.inspection.worker._thread
    for old in [t for t in threading.enumerate() if t.name == "tooltap-worker" and t != current]:
        old.join(5)  # the inspections the two changes replaced end
    workers = [t for t in threading.enumerate() if t.name == "tooltap-worker"]
    assert workers == [current]


OLLAMA_STREAM = b"".join(
    json.dumps(line).encode() + b"\n"
    for line in (
        {"model": "qwen3:8b", "message": {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_ab12cd34", "function": {"index": 0, "name": "get_weather",
                                                 "arguments": {"city": "Paris"}}}]}, "done": False},
        {"model": "qwen3:8b", "message": {"role": "assistant", "content": ""}, "done": True,
         "done_reason": "stop"},
    )
)  # fmt: skip


async def test_a_users_own_ollama_named_by_host_and_port_is_tapped_line_by_line(harness):
    harness.tctx.configure(harness.addon, tooltap_hosts=["localhost:11434"])
    request = {"model": "qwen3:8b", "messages": [{"role": "user", "content": "Paris?"}]}
    headers = (("content-type", "application/x-ndjson"),)
    flows = [make_flow("/api/chat", request, b"", headers=headers, host="localhost")
             for _ in range(2)]  # fmt: skip
    flows[0].request.port, flows[1].request.port = 11434, 8000  # another port: not named
    for flow in flows:
        harness.addon.request(flow)
        harness.addon.responseheaders(flow)
    tap = flows[0].response.stream
    assert callable(tap) and not callable(flows[1].response.stream)
    lines = OLLAMA_STREAM.splitlines(keepends=True)
    assert b"".join(tap(line) for line in lines) + tap(b"") == OLLAMA_STREAM
    flows[0].response.content = None  # as mitmproxy leaves a streamed response
    harness.addon.response(flows[0])
    assert harness.addon.flush(5)
    (turn,) = [e for e in harness.events() if e["event"] == "turn"]
    assert (turn["api"], turn["stream"], turn["calls"], turn["state"]) == (
        "ollama",
        True,
        1,
        "no-tools",
    )
