"""Anthropic on Bedrock and Vertex AI, Bedrock Converse, and InvokeModel's other model families
(Nova, gpt-oss, Titan, Claude 2's Text Completions), through a real `tooltap run` with the
clients teams use: boto3's bedrock-runtime, and the anthropic SDK's AnthropicBedrock and
AnthropicVertex; then the same exchanges audited from the flow file and the HAR the proxy saved,
with the live findings.

SigV4 signs the Host header, so Bedrock goes through tooltap in regular mode (an explicit HTTPS
proxy whose CA the client trusts), as docs/running.md says; Vertex AI too, here. The upstream is
a loopback TLS server answering with recorded bodies from the dialects corpus (event streams
sent a frame at a time), by operation and model family. Credentials are dummies.
"""

from __future__ import annotations

import base64
import json
import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import anthropic
import boto3
import httpx
import pytest
from botocore.config import Config
from mitmproxy import io
from support.prom import sample, scrape
from support.tls import regular_proxy, upstream_tls

from tooltap.addon.harness.replay import ReplayServer, Reply, Seen

CORPUS = Path(__file__).parents[1] / "corpus" / "dialects"
LINES = (CORPUS / "exchanges.jsonl").read_text(encoding="utf-8").splitlines()
SECOND = (CORPUS / "exchanges-2.jsonl").read_text(encoding="utf-8").splitlines()
CLAUDE = "anthropic.claude-3-sonnet-20240229-v1:0"
NOVA_CLAUDE = "anthropic.claude-3-5-sonnet-20240620-v1:0"
VERTEX_CLAUDE = "claude-sonnet-4-5@20250929"
NOVA = "amazon.nova-micro-v1:0"
GPT_OSS = "openai.gpt-oss-120b-1:0"
TITAN = "amazon.titan-text-express-v1"
CLAUDE_2 = "anthropic.claude-v2"


def recorded(line: int, lines: list[str] = LINES) -> dict[str, Any]:
    return json.loads(lines[line])


def frames(body: bytes) -> list[bytes]:
    """An event stream cut at its frames, as a server flushes it."""
    out = []
    while body:
        (total,) = struct.unpack_from("!I", body)
        out.append(body[:total])
        body = body[total:]
    return out


def reply_of(record: dict[str, Any]) -> Reply:
    headers = [("content-type", record["response_headers"]["content-type"])]
    if "response_body_base64" in record:
        body = base64.b64decode(record["response_body_base64"])
        return Reply(headers=headers, chunks=frames(body), delay=0.005)
    body = record["response_body"].encode()
    if "event-stream" in headers[0][1]:
        chunks = [event + b"\n\n" for event in body.split(b"\n\n") if event.strip()]
        return Reply(headers=headers, chunks=chunks, delay=0.005)
    return Reply(headers=headers, chunks=[body])


# By operation: the recorded replies (corpus lines 19, 22, 25, 23, 242 and 244).
REPLIES = {
    "invoke": reply_of(recorded(19)),
    "invoke-with-response-stream": reply_of(recorded(22)),
    "converse": reply_of(recorded(25)),
    "converse-stream": reply_of(recorded(23)),
    "rawPredict": reply_of(recorded(242)),
    "streamRawPredict": reply_of(recorded(244)),
}


GPT_OSS_REPLY = {
    "id": "chatcmpl-4f1c", "object": "chat.completion", "created": 1764633600, "model": GPT_OSS,
    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": "<reasoning>Two cities: two calls.</reasoning>",
        "tool_calls": [
            {"id": "chatcmpl-tool-a1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"location": "Paris"}'}},
            {"id": "chatcmpl-tool-b2", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"location": "Oslo", "unit": 3}'}},
        ]}}],
    "usage": {"prompt_tokens": 180, "completion_tokens": 52, "total_tokens": 232},
}  # fmt: skip
# InvokeModel by model family: the recorded replies (exchanges-2.jsonl lines 289, 305, 334 and
# 336), and a gpt-oss one in AWS's documented shape (a Chat Completions response).
FAMILIES = {
    (NOVA, "invoke"): reply_of(recorded(289, SECOND)),
    (NOVA, "invoke-with-response-stream"): reply_of(recorded(305, SECOND)),
    (TITAN, "invoke"): reply_of(recorded(334, SECOND)),
    (CLAUDE_2, "invoke-with-response-stream"): reply_of(recorded(336, SECOND)),
    (GPT_OSS, "invoke"): Reply(
        headers=[("content-type", "application/json")], chunks=[json.dumps(GPT_OSS_REPLY).encode()]
    ),
}


def route(seen: Seen) -> Reply:
    operation = seen.path.rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    model = unquote(seen.path.split("/")[2]) if seen.path.startswith("/model/") else ""
    return (
        FAMILIES.get((model, operation))
        or REPLIES.get(operation)
        or Reply(404, chunks=[b'{"message": "no such operation"}'])
    )


WEATHER = {
    "type": "object",
    "properties": {"location": {"type": "string"}, "unit": {"type": "string"}},
    "required": ["location"],
}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tls")
    upstream_ca, server_tls = upstream_tls(folder)
    with (
        ReplayServer(route, tls=server_tls) as upstream,
        regular_proxy(upstream_ca) as (proxy, trusted),
    ):
        yield upstream, proxy, trusted, os.path.join(proxy.confdir, "mitmproxy-ca-cert.pem")


def bedrock(stack) -> tuple[Any, list[dict[str, Any]]]:
    """boto3's client through the proxy, and what it sent (its signed requests)."""
    upstream, proxy, _, ca = stack
    client = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=upstream.url,
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        config=Config(proxies={"https": proxy.url}, retries={"max_attempts": 1}),
        verify=ca,
    )
    sent: list[dict[str, Any]] = []
    client.meta.events.register(
        "before-send.bedrock-runtime.*",
        lambda request, **_: sent.append(
            {
                "headers": {
                    k: v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items()
                },
                "body": request.body,
            }
        ),
    )
    return client, sent


def turns_since(proxy, mark, count):
    return proxy.wait_for("turn", count, since=mark)


def test_boto3_invoke_and_its_stream_are_read_as_messages_and_the_signature_arrives_intact(stack):
    upstream, proxy, _, _ = stack
    client, sent = bedrock(stack)
    mark, before = proxy.mark(), len(upstream.seen)
    body = {
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": 200,
        "messages": [{"role": "user", "content": "Weather in SF, and 2+2?"}],
        "tools": [
            {"name": "get_weather", "description": "w", "input_schema": WEATHER},
            {"name": "calculate", "description": "c", "input_schema": {"type": "object"}},
        ],
    }
    answer = json.loads(client.invoke_model(modelId=CLAUDE, body=json.dumps(body))["body"].read())
    assert [b["id"] for b in answer["content"] if b["type"] == "tool_use"] == [
        "toolu_bdrk_01FqpV1qX3bJ4bczkdtMhdGz",
        "toolu_bdrk_01KMAmxrwkK8jh8h6YNQ495y",
    ]
    streamed = client.invoke_model_with_response_stream(modelId=CLAUDE, body=json.dumps(body))
    events = [json.loads(e["chunk"]["bytes"]) for e in streamed["body"] if "chunk" in e]
    assert events[-1]["type"] == "message_stop"
    turns = turns_since(proxy, mark, 2)
    assert [(t["api"], t["stream"], t["state"], t["calls"], t["model"]) for t in turns] == [
        ("messages", False, "fanout-no-strict", 2, "claude-3-sonnet-20240229"),
        ("messages", True, "no-strict-declared", 1, "claude-3-sonnet-20240229"),
    ]
    assert [t["path"] for t in turns] == [
        f"/model/{CLAUDE.replace(':', '%3A')}/invoke",
        f"/model/{CLAUDE.replace(':', '%3A')}/invoke-with-response-stream",
    ]
    # What boto3 signed reached the upstream unchanged: the signature, what it covers, the body.
    signed = ("Authorization", "X-Amz-Date", "X-Amz-Content-SHA256", "Content-Type")
    for request, seen in zip(sent, upstream.seen[before:], strict=True):
        assert {h: request["headers"].get(h) for h in signed} == {
            h: seen.headers.get(h.lower()) for h in signed
        }
        assert seen.body == request["body"]
        assert "host" in request["headers"]["Authorization"].split("SignedHeaders=")[1]


def test_boto3_converse_and_its_stream_are_read_by_the_converse_dialect(stack):
    _, proxy, _, _ = stack
    client, _ = bedrock(stack)
    mark = proxy.mark()
    request = {
        "modelId": NOVA_CLAUDE,
        "messages": [{"role": "user", "content": [{"text": "Weather in San Francisco?"}]}],
        "toolConfig": {"tools": [{"toolSpec": {"name": "get_weather", "description": "w",
                                               "inputSchema": {"json": WEATHER}}}]},
    }  # fmt: skip
    answer = client.converse(**request)
    assert answer["stopReason"] == "max_tokens"
    kinds = [next(iter(event)) for event in client.converse_stream(**request)["stream"]]
    assert kinds[0] == "messageStart" and "messageStop" in kinds
    turns = turns_since(proxy, mark, 2)
    assert [(t["api"], t["stream"], t["state"], t["calls"], t["model"]) for t in turns] == [
        ("converse", False, "no-strict-declared", 1, NOVA_CLAUDE),
        ("converse", True, "no-strict-declared", 1, NOVA_CLAUDE),
    ]
    calls = proxy.wait_for("tool_call", 2, since=mark)
    assert [(c["call_id"], c["arguments_raw"]) for c in calls] == [
        ("tooluse_0ae1_ahYROawF4OObK5xBg", '{"location":"San Francisco, CA"}'),
        ("tooluse_wnjikhCUTruJciycmmm5Kg", '{"location":"San Francisco, CA","unit":"fahrenheit"}'),
    ]


def test_anthropic_bedrock_and_vertex_clients(stack):
    upstream, proxy, trusted, _ = stack
    mark = proxy.mark()
    http = anthropic.DefaultHttpxClient(proxy=proxy.url, verify=trusted, timeout=10)
    tools = [{"name": "get_weather", "description": "w", "input_schema": WEATHER}]
    on_bedrock = anthropic.AnthropicBedrock(
        aws_region="us-east-1", aws_access_key="AKIDEXAMPLE", aws_secret_key="dummy",
        base_url=upstream.url, http_client=http, max_retries=0,
    )  # fmt: skip
    message = on_bedrock.messages.create(
        model=CLAUDE, max_tokens=200, tools=tools, messages=[{"role": "user", "content": "SF?"}]
    )
    assert [b.id for b in message.content if b.type == "tool_use"] == [
        "toolu_bdrk_01FqpV1qX3bJ4bczkdtMhdGz",
        "toolu_bdrk_01KMAmxrwkK8jh8h6YNQ495y",
    ]
    on_vertex = anthropic.AnthropicVertex(
        region="us-east5", project_id="fantasy-playground-472418", access_token="dummy",
        base_url=upstream.url + "/v1", http_client=http, max_retries=0,
    )  # fmt: skip
    weather = [{"name": "weather", "description": "w", "input_schema": WEATHER}]
    ask = [{"role": "user", "content": "Florence?"}]
    message = on_vertex.messages.create(
        model=VERTEX_CLAUDE, max_tokens=200, tools=weather, messages=ask
    )
    assert message.content[-1].type == "tool_use"
    with on_vertex.messages.stream(
        model=VERTEX_CLAUDE, max_tokens=200, tools=weather, messages=ask
    ) as stream:
        assert stream.get_final_message().content[-1].id == "toolu_vrtx_01JhPy9eXqgjLWmUpoCiEkCs"
    turns = turns_since(proxy, mark, 3)
    assert [(t["api"], t["stream"], t["state"], t["calls"]) for t in turns] == [
        ("messages", False, "fanout-no-strict", 2),
        ("messages", False, "no-strict-declared", 1),
        ("messages", True, "no-strict-declared", 1),
    ]
    # The response names its model; the body sent named none (Vertex AI's is in the path).
    assert [(t["model"], t["response_id"]) for t in turns] == [
        ("claude-3-sonnet-20240229", "msg_bdrk_01VGSSxYibWoHmna5zwvqqCt"),
        ("claude-3-7-sonnet-20250219", "msg_vrtx_01L7SUBiWzE3rGECmhLHSZtU"),
        ("claude-3-7-sonnet-20250219", "msg_vrtx_015NhGGaKxyd2YQNDWYkNqXk"),
    ]


def test_every_byte_reaches_the_client_as_the_upstream_sent_it(stack):
    upstream, proxy, trusted, _ = stack
    with httpx.Client(proxy=proxy.url, verify=trusted, timeout=10) as client:
        for operation, reply in REPLIES.items():
            path = (
                f"/model/{CLAUDE}/{operation}"
                if "Predict" not in operation
                else f"/v1/projects/p/locations/us-east5/publishers/anthropic/models/{VERTEX_CLAUDE}:{operation}"
            )
            got = client.post(upstream.url + path, content=b'{"messages": []}')
            assert (got.status_code, got.content) == (200, reply.body), operation


NOVA_ASK = recorded(289, SECOND)["request_body"]  # as the AWS SDK for Java sent it
GPT_OSS_ASK = {
    "messages": [{"role": "user", "content": "Weather in Paris and Oslo?"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}],
}
TITAN_ASK = {"inputText": "What are the 4 cardinal directions?",
             "textGenerationConfig": {"maxTokenCount": 4096}}  # fmt: skip
CLAUDE_2_ASK = {"prompt": "\n\nHuman:What are the 4 cardinal directions?\n\nAssistant:",
                "max_tokens_to_sample": 300}  # fmt: skip
TITAN_WHY = "Amazon Titan Text on InvokeModel (inputText): no tool calls"
CLAUDE_2_WHY = (
    "Anthropic Text Completions on InvokeModel (prompt and completion): no tools, and no "
    "Messages turn"
)


def invoke_by_family(client: Any) -> None:
    """boto3's invoke_model and invoke_model_with_response_stream, a model of each family; what
    the client reads is the upstream's, unchanged."""
    nova = json.loads(client.invoke_model(modelId=NOVA, body=NOVA_ASK)["body"].read())
    assert [b["toolUse"]["toolUseId"] for b in nova["output"]["message"]["content"]
            if "toolUse" in b] == ["d01caf28-63e1-4d23-9b03-41cb967810d3",
                                   "ee0169e4-80b3-4691-83c9-fc1e17971570"]  # fmt: skip
    streamed = client.invoke_model_with_response_stream(modelId=NOVA, body=NOVA_ASK)["body"]
    events = [json.loads(e["chunk"]["bytes"]) for e in streamed if "chunk" in e]
    assert "messageStart" in events[0] and "metadata" in events[-1]
    chat = client.invoke_model(modelId=GPT_OSS, body=json.dumps(GPT_OSS_ASK))
    assert json.loads(chat["body"].read()) == GPT_OSS_REPLY
    titan = json.loads(
        client.invoke_model(modelId=TITAN, body=json.dumps(TITAN_ASK))["body"].read()
    )
    assert titan["results"][0]["completionReason"] == "FINISH"
    legacy = client.invoke_model_with_response_stream(
        modelId=CLAUDE_2, body=json.dumps(CLAUDE_2_ASK)
    )
    completion = "".join(json.loads(e["chunk"]["bytes"])["completion"] for e in legacy["body"])
    assert completion.startswith(" The 4 cardinal directions are")


def test_each_endpoint_and_family_read_offline_from_a_flow_file_and_a_har_gives_the_live_findings(
    tmp_path,
):
    """invoke, its stream, converse, its stream, rawPredict and streamRawPredict, then boto3's
    InvokeModel of Nova (read by the Converse room, streamed and not), gpt-oss (by the Chat
    room), Titan and Claude 2's Text Completions (not read, each said with why, at info), saved
    by the proxy as flows (-w) and as HAR, then audited: the same findings as the live log."""
    upstream_ca, server_tls = upstream_tls(tmp_path)
    flows, har = tmp_path / "flows.mitm", tmp_path / "flows.har"
    saving = ("-w", str(flows), "--set", f"hardump={har}", "--set", "store_streamed_bodies=true")
    with (
        ReplayServer(route, tls=server_tls) as upstream,
        regular_proxy(upstream_ca, saving) as (proxy, trusted),
        httpx.Client(proxy=proxy.url, verify=trusted, timeout=10) as client,
    ):
        for line in (19, 22, 25, 23, 242, 244):
            record = recorded(line)
            path = urlsplit(record["url"]).path
            client.post(
                upstream.url + path,
                content=record["request_body"].encode(),
                headers={"content-type": "application/json"},
            )
        ca = os.path.join(proxy.confdir, "mitmproxy-ca-cert.pem")
        invoke_by_family(bedrock((upstream, proxy, trusted, ca))[0])
        live = proxy.wait_for("turn", 11)
        calls = proxy.wait_for("tool_call", 13)
        counted = sample(scrape(proxy), "tooltap_flows_total", api="none", outcome="not_read")
    found = [
        (t["api"], t["stream"], t["outcome"], t["state"], t["calls"], t.get("response_id"),
         t["reason"])
        for t in live
    ]  # fmt: skip
    assert [(api, stream, outcome, reason) for api, stream, outcome, *_, reason in found] == [
        ("messages", False, "inspected", None), ("messages", True, "inspected", None),
        ("converse", False, "inspected", None), ("converse", True, "inspected", None),
        ("messages", False, "inspected", None), ("messages", True, "inspected", None),
        ("converse", False, "inspected", None), ("converse", True, "inspected", None),
        ("chat", False, "inspected", None),
        (None, False, "not_read", TITAN_WHY), (None, True, "not_read", CLAUDE_2_WHY),
    ]  # fmt: skip
    assert [(t["state"], t["calls"], t["level"]) for t in live[6:]] == [
        ("fanout-no-strict", 2, "info"), ("fanout-no-strict", 2, "info"),
        ("fanout-no-strict", 2, "warning"), (None, 0, "info"), (None, 0, "info"),
    ]  # fmt: skip
    assert [(t["path"], t["model"]) for t in live[6:8]] == [
        (f"/model/{NOVA.replace(':', '%3A')}/invoke", NOVA),
        (f"/model/{NOVA.replace(':', '%3A')}/invoke-with-response-stream", NOVA),
    ]
    assert [(c["name"], c["arguments_raw"], bool(c["schema_errors"])) for c in calls[-6:]] == [
        ("get_current_weather", '{"location":"Seattle"}', False),
        ("get_current_weather", '{"location":"San Francisco"}', False),
        ("get_current_weather", '{"location":"Seattle"}', False),
        ("get_current_weather", '{"location":"San Francisco"}', False),
        ("get_weather", '{"location": "Paris"}', False),
        ("get_weather", '{"location": "Oslo", "unit": 3}', True),  # unit must be a string
    ]
    assert len(calls) == 13 and counted == 2
    # mitmproxy's HAR keeps the event streams as text (they are mostly text); other tools keep a
    # binary body in base64, as this copy does with the bytes the flow file holds.
    with flows.open("rb") as handle:
        sent = [flow.response.raw_content for flow in io.FlowReader(handle).stream()]
    document = json.loads(har.read_text())
    for entry, body in zip(document["log"]["entries"], sent, strict=True):
        if "eventstream" in entry["response"]["content"]["mimeType"]:
            entry["response"]["content"] |= {
                "text": base64.b64encode(body).decode(),
                "encoding": "base64",
            }
    base64_har = tmp_path / "base64.har"
    base64_har.write_text(json.dumps(document))
    assert base64_har.read_text().count('"encoding": "base64"') == 4
    for source in (["-r", str(flows)], ["--har", str(har)], ["--har", str(base64_har)]):
        done = subprocess.run(
            [sys.executable, "-m", "tooltap.addon.commands.cli", "audit", *source,
             "--format", "json"],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        *rows, summary = [json.loads(row) for row in done.stdout.splitlines()]
        offline = [
            (r["api"], r["stream"], r["outcome"], r["state"], len(r["calls"]),
             r.get("response_id"), r["reason"])
            for r in rows
        ]  # fmt: skip
        assert offline == found, source
        assert summary["not_read_by_reason"] == {TITAN_WHY: 1, CLAUDE_2_WHY: 1}, source
