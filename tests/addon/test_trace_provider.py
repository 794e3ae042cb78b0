"""gen_ai.provider.name: who serves the model, by host first (Bedrock and Vertex AI serve
Anthropic's Messages under their own names), else by the API."""

import pytest

from tooltap.addon.sinks.traces import provider_name


@pytest.mark.parametrize(
    ("api", "host", "provider"),
    [
        ("chat", "api.openai.com", "openai"),
        ("messages", "api.anthropic.com", "anthropic"),
        ("chat", "my-resource.openai.azure.com", "azure.ai.openai"),
        ("messages", "bedrock-runtime.us-east-1.amazonaws.com", "aws.bedrock"),
        ("converse", "bedrock-runtime.eu-west-1.amazonaws.com", "aws.bedrock"),
        ("messages", "bedrock-mantle.us-east-1.api.aws", "aws.bedrock"),
        ("messages", "us-east5-aiplatform.googleapis.com", "gcp.vertex_ai"),
        ("messages", "aiplatform.googleapis.com", "gcp.vertex_ai"),
        ("messages", "aiplatform.us.rep.googleapis.com", "gcp.vertex_ai"),
        ("gemini", "generativelanguage.googleapis.com", "gcp.gemini"),
        ("gemini", "us-central1-aiplatform.googleapis.com", "gcp.vertex_ai"),
        ("gemini", "127.0.0.1", "gcp.gemini"),  # reverse mode: the API says it
        ("chat", "generativelanguage.googleapis.com", "gcp.gemini"),  # its OpenAI-compatible API
        ("ollama", "localhost:11434", "ollama"),  # no well-known value: its own name
        ("ollama", "ollama.com", "ollama"),
        ("cohere", "api.cohere.com", "cohere"),
        ("cohere", "127.0.0.1", "cohere"),  # reverse mode: the API says it
    ],
)
def test_the_provider_is_read_from_the_host_then_the_api(api, host, provider):
    assert provider_name(api, host) == provider
