"""Bedrock's InvokeModel, one path for every model family: the family its model id names (plain,
encoded, cross-region, inside an ARN) or its body's own shape says which room reads it; Nova by
the Converse room, gpt-oss and Jamba by the Chat room, Claude's Messages by the Messages room;
every other family is not read, and says why."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tooltap.addon.harness.eventstream import CONTENT_TYPE, chunk
from tooltap.core import Exchange, detect_api, inspect
from tooltap.core.dialects import invoke
from tooltap.core.dialects.invoke import NO_SHAPE, TEXT_COMPLETIONS, family_id, model_id, reading

HOST = "https://bedrock-runtime.us-east-1.amazonaws.com"
NOVA = "amazon.nova-micro-v1:0"
WEATHER = {"type": "object", "properties": {"location": {"type": "string"}},
           "required": ["location"]}  # fmt: skip


def path(model: str, operation: str = "invoke") -> str:
    return f"/model/{model.replace(':', '%3A').replace('/', '%2F')}/{operation}"


@pytest.mark.parametrize(
    ("raw", "model", "family"),
    [
        ("/model/amazon.nova-pro-v1:0/invoke", "amazon.nova-pro-v1:0", "amazon.nova-pro-v1:0"),
        (path("anthropic.claude-3-5-sonnet-20240620-v1:0"),
         "anthropic.claude-3-5-sonnet-20240620-v1:0", "anthropic.claude-3-5-sonnet-20240620-v1:0"),
        # some clients encode the id twice
        ("/model/amazon.nova-micro-v1%253A0/invoke", NOVA, NOVA),
        # cross-region inference profiles, any case
        (path("us.Anthropic.claude-sonnet-4-20250514-v1:0", "invoke-with-response-stream"),
         "us.Anthropic.claude-sonnet-4-20250514-v1:0", "anthropic.claude-sonnet-4-20250514-v1:0"),
        (path("eu.amazon.nova-lite-v1:0"), "eu.amazon.nova-lite-v1:0", "amazon.nova-lite-v1:0"),
        (path("apac.amazon.nova-pro-v1:0"), "apac.amazon.nova-pro-v1:0", "amazon.nova-pro-v1:0"),
        (path("global.anthropic.claude-v2"), "global.anthropic.claude-v2", "anthropic.claude-v2"),
        # ARNs that name a model, and those that do not
        (path("arn:aws:bedrock:us-east-1::foundation-model/openai.gpt-oss-20b-1:0"),
         "arn:aws:bedrock:us-east-1::foundation-model/openai.gpt-oss-20b-1:0",
         "openai.gpt-oss-20b-1:0"),
        (path("arn:aws:bedrock:us-east-1:1:inference-profile/us.amazon.nova-pro-v1:0"),
         "arn:aws:bedrock:us-east-1:1:inference-profile/us.amazon.nova-pro-v1:0",
         "amazon.nova-pro-v1:0"),
        (path("arn:aws:bedrock:us-east-1:1:custom-model/amazon.titan-text-express-v1:0:8k/ab1"),
         "arn:aws:bedrock:us-east-1:1:custom-model/amazon.titan-text-express-v1:0:8k/ab1",
         "amazon.titan-text-express-v1:0:8k"),
        (path("arn:aws:bedrock:us-east-1:1:application-inference-profile/x1"),
         "arn:aws:bedrock:us-east-1:1:application-inference-profile/x1", ""),
        ("/model/arn:aws:bedrock:us-west-2:1:provisioned-model/p1/invoke",
         "arn:aws:bedrock:us-west-2:1:provisioned-model/p1", ""),
    ],
)  # fmt: skip
def test_the_model_id_and_the_family_it_names(raw, model, family):
    assert model_id(raw) == model
    assert family_id(model) == family
    assert invoke.recognise("POST", raw) and not invoke.recognise("GET", raw)


@pytest.mark.parametrize(
    "raw",
    ["/model/x/converse", "/model/x/invoke/extra", "/v1/messages", "/model//invoke"],
)
def test_other_paths_are_not_invoke_model(raw):
    assert not invoke.recognise("POST", raw)
    assert model_id(raw) is None
    said = reading(raw, {"messages": [{"role": "user", "content": "Hi"}]})
    assert (said.api, said.model, said.why) == (None, None, NO_SHAPE)


MESSAGES = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 10,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]}  # fmt: skip
COMPLETION = {"prompt": "\n\nHuman: Hi\n\nAssistant:", "max_tokens_to_sample": 300}
CONVERSE = {"messages": [{"role": "user", "content": [{"text": "Hi"}]}],
            "inferenceConfig": {"maxTokens": 10}}  # fmt: skip
CHAT = {"messages": [{"role": "user", "content": "Hi"}], "max_completion_tokens": 10}


@pytest.mark.parametrize(
    ("model", "body", "stream", "api", "why"),
    [
        ("anthropic.claude-3-haiku-20240307-v1:0", MESSAGES, False, "messages", None),
        ("anthropic.claude-v2", MESSAGES, True, "messages", None),  # Claude 2 takes Messages too
        ("anthropic.claude-v2", COMPLETION, True, None, TEXT_COMPLETIONS),
        ("anthropic.claude-instant-v1", COMPLETION, False, None, TEXT_COMPLETIONS),
        # a body with messages is no legacy completion, whatever else it carries
        ("anthropic.claude-v2", {**MESSAGES, "prompt": "Hi"}, False, "messages", None),
        (NOVA, CONVERSE, True, "converse", None),
        ("us.amazon.nova-premier-v1:0", CONVERSE, False, "converse", None),
        ("amazon.nova-canvas-v1:0", {"taskType": "TEXT_IMAGE"}, False, None, "Amazon Nova media"),
        ("amazon.nova-2-multimodal-embeddings-v1:0", {}, False, None, "embeddings"),
        ("amazon.titan-text-express-v1", {"inputText": "Hi"}, True, None, "Amazon Titan Text"),
        ("amazon.titan-embed-text-v2:0", {"inputText": "Hi"}, False, None, "embeddings"),
        ("openai.gpt-oss-120b-1:0", CHAT, False, "chat", None),
        ("openai.gpt-oss-20b-1:0", CHAT, True, "chat", None),
        ("ai21.jamba-1-5-mini-v1:0", CHAT, True, "chat", None),
        ("ai21.j2-ultra-v1", {"prompt": "Hi"}, False, None, "AI21 Jurassic-2"),
        ("mistral.mistral-large-2407-v1:0", CHAT, False, "chat", None),
        ("mistral.mistral-large-2407-v1:0", CHAT, True, None, "Mistral AI chat stream"),
        ("mistral.mistral-small-2402-v1:0", {"prompt": "<s>[INST] Hi [/INST]"}, True, None,
         "Mistral AI text completion"),
        ("cohere.command-r-v1:0", {"message": "Hi"}, True, None, "Cohere Command R"),
        ("cohere.command-text-v14", {"prompt": "Hi"}, False, None, "Cohere Command on"),
        ("meta.llama3-70b-instruct-v1:0", {"prompt": "Hi"}, False, None, "Meta Llama"),
        ("deepseek.r1-v1:0", {"prompt": "Hi"}, False, None, "DeepSeek-R1"),
        ("cohere.rerank-v3-5:0", {"query": "q"}, False, None, "reranking"),
        ("stability.sd3-5-large-v1:0", {"prompt": "a cat"}, False, None, "image and video"),
        # An id that names no family: the body's own shape says.
        ("arn:aws:bedrock:us-east-1:1:application-inference-profile/x1", MESSAGES, False,
         "messages", None),
        ("arn:aws:bedrock:us-east-1:1:application-inference-profile/x1", CONVERSE, True,
         "converse", None),
        ("arn:aws:bedrock:us-east-1:1:provisioned-model/p1", CHAT, False, "chat", None),
        ("arn:aws:bedrock:us-east-1:1:imported-model/m1", COMPLETION, True, None,
         TEXT_COMPLETIONS),
        ("arn:aws:bedrock:us-east-1:1:imported-model/m1", {"prompt": "Hi"}, False, None,
         "a text completion body"),
        ("arn:aws:bedrock:us-east-1:1:imported-model/m1", {"inputText": "Hi"}, False, None,
         "Amazon Titan Text"),
        ("qwen.qwen3-32b-v1:0", CHAT, False, "chat", None),
        ("invalid-model-id", {"x": 1}, False, None, NO_SHAPE),
    ],
)  # fmt: skip
def test_each_family_is_read_by_its_room_or_said_not_read(model, body, stream, api, why):
    operation = "invoke-with-response-stream" if stream else "invoke"
    said = reading(path(model, operation), body)
    assert (said.api, said.model) == (api, model)
    assert (said.why or "").startswith(why or "")
    if why is not None:
        assert model not in said.why  # reasons are per family, never per model: bounded
    raw = json.dumps(body).encode()
    assert detect_api("POST", HOST + path(model, operation), raw) == api


def test_without_its_body_the_id_alone_says_what_it_can():
    assert reading(path(NOVA), None).api == "converse"
    assert reading(path("anthropic.claude-3-haiku-20240307-v1:0"), None).api == "messages"
    assert reading(path("amazon.titan-text-lite-v1"), None).why is not None
    arn = "arn:aws:bedrock:us-east-1:1:application-inference-profile/x"
    profile = reading(path(arn), None)
    assert (profile.api, profile.model, profile.why) == (None, arn, None)  # the body will say
    assert (
        detect_api("POST", HOST + path("arn:aws:bedrock:us-east-1:1:provisioned-model/p")) is None
    )


PROFILE = "arn:aws:bedrock:us-east-1:1:application-inference-profile/x1"


def user(content: Any) -> list[dict[str, Any]]:
    return [{"role": "user", "content": content}]


@pytest.mark.parametrize(
    ("body", "api", "why"),
    [
        # Converse's blocks are keyed by their kind, with no `type`
        ({"messages": user([{"text": "Hi"}, {"image": {"format": "png"}}])}, "converse", None),
        # Converse's own fields say it with no block to look at
        ({"schemaVersion": "messages-v1", "messages": []}, "converse", None),
        ({"messages": [], "toolConfig": {"tools": []}}, "converse", None),
        ({"messages": [], "inferenceConfig": {"maxTokens": 10}}, "converse", None),
        # Chat's parts are typed
        ({"messages": user([{"type": "text", "text": "Hi"}])}, "chat", None),
        # parts a Chat body never has, blocks Converse never has, or the two mixed
        ({"messages": user([{"type": "text", "text": "Hi"}, {"text": "Hi"}])}, None, NO_SHAPE),
        ({"messages": user([{"body": "Hi"}])}, None, NO_SHAPE),
        # messages win over a prompt
        ({"messages": user("Hi"), "prompt": "Hi"}, "chat", None),
        # the legacy completion, by either of its signs
        ({"prompt": "\n\nHuman: Hi\n\nAssistant:"}, None, TEXT_COMPLETIONS),
        ({"prompt": "Hi", "max_tokens_to_sample": 300}, None, TEXT_COMPLETIONS),
        ({"message": "Hi", "chat_history": []}, None, "Cohere Command R"),
    ],
)  # fmt: skip
def test_an_id_that_names_no_family_is_read_by_its_bodys_shape(body, api, why):
    said = reading(path(PROFILE), body)
    assert (said.api, said.model) == (api, PROFILE)
    assert (said.why or "").startswith(why or "")


# --- whole exchanges -------------------------------------------------------------------------


def exchange(model: str, request: dict[str, Any], body: bytes, *, stream: bool = False,
             status: int = 200) -> Exchange:  # fmt: skip
    content_type = CONTENT_TYPE if stream else "application/json"
    operation = "invoke-with-response-stream" if stream else "invoke"
    return Exchange(
        method="POST",
        url=HOST + path(model, operation),
        request_body=json.dumps(request).encode(),
        status=status,
        response_headers={"content-type": content_type},
        response_body=body,
    )


NOVA_ASK = {
    "messages": [{"role": "user", "content": [{"text": "Weather in Seattle and Paris?"}]}],
    "toolConfig": {"tools": [{"toolSpec": {"name": "get_weather", "description": "w",
                                           "inputSchema": {"json": WEATHER}}}]},
}  # fmt: skip
NOVA_CALLS = [
    ("t1", "get_weather", {"location": "Seattle"}),
    ("t2", "get_weather", {"location": 3}),
]


def nova_whole() -> bytes:
    content = [{"text": "<thinking>Two cities.</thinking>"}] + [
        {"toolUse": {"toolUseId": i, "name": n, "input": a}} for i, n, a in NOVA_CALLS
    ]
    return json.dumps({"output": {"message": {"role": "assistant", "content": content}},
                       "stopReason": "tool_use",
                       "usage": {"inputTokens": 416, "outputTokens": 161}}).encode()  # fmt: skip


def nova_events(cut: int = 7) -> list[dict[str, Any]]:
    """Nova's stream as InvokeModel sends it: each chunk one Converse stream event."""
    events: list[dict[str, Any]] = [
        {"messageStart": {"role": "assistant"}},
        {"contentBlockDelta": {"delta": {"text": "<thinking>Two cities.</thinking>"},
                               "contentBlockIndex": 0}},
        {"contentBlockStop": {"contentBlockIndex": 0}},
    ]  # fmt: skip
    for index, (call_id, name, arguments) in enumerate(NOVA_CALLS, 1):
        text = json.dumps(arguments)
        events.append({"contentBlockStart": {"start": {"toolUse": {"toolUseId": call_id,
                                                                   "name": name}},
                                             "contentBlockIndex": index}})  # fmt: skip
        events += [
            {"contentBlockDelta": {"delta": {"toolUse": {"input": text[i : i + cut]}},
                                   "contentBlockIndex": index}}
            for i in range(0, len(text), cut)
        ]  # fmt: skip
        events.append({"contentBlockStop": {"contentBlockIndex": index}})
    events.append({"messageStop": {"stopReason": "tool_use"}})
    events.append({"metadata": {"usage": {"inputTokens": 416, "outputTokens": 161}},
                   "amazon-bedrock-invocationMetrics": {"inputTokenCount": 416}})  # fmt: skip
    return events


def test_nova_on_invoke_model_is_read_by_the_converse_room_streamed_or_not():
    whole = inspect(exchange(NOVA, NOVA_ASK, nova_whole()))
    streamed = inspect(exchange(NOVA, NOVA_ASK, b"".join(map(chunk, nova_events())), stream=True))
    for verdict in (whole, streamed):
        assert (verdict.api, verdict.outcome, verdict.reason) == ("converse", "inspected", None)
        assert [(c.call_id, c.name, json.loads(c.arguments_raw)) for c in verdict.calls] == [
            (i, n, a) for i, n, a in NOVA_CALLS
        ]
        # The model comes from the path; the second call breaks the declared schema.
        assert (verdict.request_model, verdict.state) == (NOVA, "fanout-no-strict")
        assert [bool(c.schema_errors) for c in verdict.calls] == [False, True]
        assert verdict.finish_reasons == ["tool_use"]
    assert streamed.stream and not whole.stream


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 30), st.data())
def test_a_nova_stream_cut_anywhere_gives_the_turn_the_body_gives(cut, data):
    from tooltap.core import StreamReader

    raw = b"".join(map(chunk, nova_events(cut)))
    cuts = sorted(data.draw(st.sets(st.integers(1, len(raw) - 1), max_size=10)))
    reader = StreamReader("converse", framing="eventstream")
    for start, end in zip([0, *cuts], [*cuts, len(raw)], strict=True):
        reader.feed(raw[start:end])
    result = reader.close()
    assert result.complete and result.bad_events == 0
    blocks = result.response["output"]["message"]["content"]
    assert [b["toolUse"]["input"] for b in blocks if "toolUse" in b] == [a for *_, a in NOVA_CALLS]


GPT_OSS = "openai.gpt-oss-120b-1:0"
GPT_ASK = {
    "messages": [{"role": "user", "content": "Weather in Paris?"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}],
}
GPT_REPLY = {
    "id": "chatcmpl-1", "object": "chat.completion", "model": "openai.gpt-oss-120b-1:0",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": "<reasoning>Paris.</reasoning>",
        "tool_calls": [{"id": "call_1", "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"location":"Paris"}'}}],
    }}],
}  # fmt: skip


def test_gpt_oss_on_invoke_model_is_read_by_the_chat_room_streamed_or_not():
    whole = inspect(exchange(GPT_OSS, GPT_ASK, json.dumps(GPT_REPLY).encode()))
    chunks = [
        {"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [
            {"index": 0, "id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"location":'}}]}}]},
        {"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": '"Paris"}'}}]}}]},
        {"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}],
         "amazon-bedrock-invocationMetrics": {"inputTokenCount": 20}},
    ]  # fmt: skip
    streamed = inspect(exchange(GPT_OSS, GPT_ASK, b"".join(map(chunk, chunks)), stream=True))
    for verdict in (whole, streamed):
        assert (verdict.api, verdict.outcome, verdict.reason) == ("chat", "inspected", None)
        assert [(c.call_id, c.arguments_raw) for c in verdict.calls] == [
            ("call_1", '{"location":"Paris"}')
        ]
        assert (verdict.request_model, verdict.state) == (GPT_OSS, "no-strict-declared")


def test_a_titan_exchange_is_not_read_and_says_which_family():
    ask = {"inputText": "What are the 4 cardinal directions?"}
    answer = {"inputTextTokenCount": 8, "results": [{"outputText": "N, S, E, W."}]}
    verdict = inspect(exchange("amazon.titan-text-express-v1", ask, json.dumps(answer).encode()))
    assert (verdict.api, verdict.outcome, verdict.status, verdict.request_model) == (
        None, "not_read", 200, "amazon.titan-text-express-v1"
    )  # fmt: skip
    assert verdict.reason.startswith("Amazon Titan Text on InvokeModel")
    assert (verdict.state, verdict.calls, verdict.repairs) == (None, [], [])


def test_the_legacy_completion_stream_is_no_messages_turn_and_no_cut_stream():
    """claude-v2 streaming Text Completions: read as Messages it looked cut short."""
    pieces = [{"completion": " The", "stop_reason": None, "stop": None},
              {"completion": " four.", "stop_reason": "stop_sequence", "stop": "\n\nHuman:",
               "amazon-bedrock-invocationMetrics": {"inputTokenCount": 19}}]  # fmt: skip
    body = b"".join(map(chunk, pieces))
    verdict = inspect(exchange("anthropic.claude-v2", COMPLETION, body, stream=True))
    assert (verdict.api, verdict.outcome, verdict.reason, verdict.stream) == (
        None, "not_read", TEXT_COMPLETIONS, True
    )  # fmt: skip
    assert verdict.stream_errors == [] and verdict.loop_errors == []


def test_a_refusal_of_a_family_read_is_the_rooms_and_of_one_not_read_is_not_read():
    refused = b'{"message": "Malformed input request: #/messages/0/content/0: required key"}'
    nova = inspect(exchange(NOVA, {"messages": [{"role": "user", "content": [
        {"inputText": "x"}]}]}, refused, status=400))  # fmt: skip
    assert (nova.api, nova.rejected.status, nova.rejected.message) == (
        "converse", 400, "Malformed input request: #/messages/0/content/0: required key"
    )  # fmt: skip
    titan = inspect(exchange("amazon.titan-text-lite-v1", {"inputText": "x"}, refused, status=403))
    assert (titan.outcome, titan.status, titan.rejected) == ("not_read", 403, None)
