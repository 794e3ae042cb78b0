"""The demo's scripted agent: the official SDKs it drives, the tools it declares, and what one
step is (a real SDK call, and the reply the upstream replays for it). Each API's steps are in a
module of their own (demo_openai, demo_anthropic, demo_converse, demo_gemini, demo_live,
demo_ollama, demo_mcp); demo_steps lists them in the order the demo runs them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..harness.replay import Reply

JSON = [("content-type", "application/json"), ("x-request-id", "req_demo")]
SSE = [("content-type", "text/event-stream; charset=utf-8"), ("cache-control", "no-cache")]

WEATHER = {
    "type": "object",
    "additionalProperties": False,
    "required": ["city", "country", "units"],
    "properties": {
        "city": {"type": "string"},
        "country": {"type": "string"},
        "units": {"type": "string", "enum": ["c", "f"]},
    },
}
STOCK = {
    "type": "object",
    "additionalProperties": False,
    "required": ["ticker", "exchange"],
    "properties": {"ticker": {"type": "string"}, "exchange": {"type": "string"}},
}
# Not strict-compatible: no additionalProperties, a property left out of required, minLength.
TICKET = {
    "type": "object",
    "required": ["title"],
    "properties": {"title": {"type": "string", "minLength": 5}, "priority": {"type": "string"}},
}


def json_reply(body: dict[str, Any], status: int = 200) -> Reply:
    return Reply(status=status, headers=JSON, chunks=[json.dumps(body).encode()])


def sse_reply(chunks: list[bytes]) -> Reply:
    return Reply(headers=SSE, chunks=chunks, delay=0.01)


BEDROCK_API_KEY = "ABSKZGVtby1ub3QtYS1yZWFsLWtleQ=="  # a Bedrock API key's shape: any works here


class Clients:
    """The official SDKs, all pointed at one base URL and sending the same extra headers.

    Each SDK's client is made once and shared by every copy `with_headers` makes, as
    `with_options` shares its connections.
    """

    def __init__(
        self,
        base_url: str,
        headers: Mapping[str, str] | None = None,
        made: Mapping[str, Any] | None = None,  # SDK clients made elsewhere, by property name
        ca: str | None = None,  # the proxy's CA, for a client that speaks TLS to it
    ) -> None:
        self.base_url = base_url
        self.headers = dict(headers or {})
        self._made: dict[str, Any] = dict(made or {})
        self.ca = ca

    def with_headers(self, headers: Mapping[str, str]) -> Clients:
        copy = Clients(self.base_url, {**self.headers, **headers}, ca=self.ca)
        copy._made = self._made
        return copy

    def _sdk(self, name: str, make: Callable[[], Any]) -> Any:
        if name not in self._made:
            self._made[name] = make()
        return self._made[name].with_options(default_headers=self.headers)

    @property
    def openai(self) -> Any:
        import openai  # noqa: PLC0415 - the SDKs are the demo extra

        return self._sdk(
            "openai",
            lambda: openai.OpenAI(
                base_url=self.base_url + "/v1", api_key="sk-demo-not-a-real-key", max_retries=0
            ),
        )

    @property
    def anthropic(self) -> Any:
        import anthropic  # noqa: PLC0415

        return self._sdk(
            "anthropic",
            lambda: anthropic.Anthropic(
                base_url=self.base_url, api_key="sk-ant-demo-not-a-real-key", max_retries=0
            ),
        )

    @property
    def bedrock(self) -> Any:
        """Claude on Bedrock through anthropic's own client, with a Bedrock API key: a bearer
        token signs nothing, so a reverse proxy in front of Bedrock breaks nothing."""
        import anthropic  # noqa: PLC0415

        return self._sdk(
            "bedrock",
            lambda: anthropic.AnthropicBedrock(
                base_url=self.base_url,
                api_key=BEDROCK_API_KEY,
                aws_region="us-east-1",
                max_retries=0,
            ),
        )

    @property
    def gemini(self) -> Any:
        """google-genai's client for the Gemini API, with an API key (any works here)."""
        from google import genai  # noqa: PLC0415
        from google.genai import types  # noqa: PLC0415

        # One client per set of headers, kept: a genai.Client closes its connections when
        # it is collected, even while its `models` are in use.
        key = "gemini " + json.dumps(self.headers, sort_keys=True)
        if key not in self._made:
            options = types.HttpOptions(
                base_url=self.base_url, api_version="v1beta", headers=dict(self.headers)
            )
            self._made[key] = genai.Client(api_key="AIza-demo-not-a-real-key", http_options=options)
        return self._made[key]

    @property
    def gemini_live(self) -> Any:
        """google-genai's client for the Live API. It always speaks wss://, so it connects to
        the proxy's port over TLS (mitmproxy answers TLS there too) and trusts the proxy's CA."""
        import ssl  # noqa: PLC0415

        from google import genai  # noqa: PLC0415
        from google.genai import types  # noqa: PLC0415

        key = "gemini_live " + json.dumps(self.headers, sort_keys=True)
        if key not in self._made:
            options = types.HttpOptions(
                base_url=self.base_url,
                headers=dict(self.headers),
                async_client_args={"ssl": ssl.create_default_context(cafile=self.ca)},
            )
            self._made[key] = genai.Client(api_key="AIza-demo-not-a-real-key", http_options=options)
        return self._made[key]

    @property
    def bedrock_runtime(self) -> Any:
        """boto3's bedrock-runtime client. It signs with SigV4 and dummy keys, which the demo's
        upstream does not check (boto3 sends a Bedrock API key to https endpoints only); real
        Bedrock checks the signed Host, so there tooltap runs in regular mode."""
        import boto3  # noqa: PLC0415
        from botocore.config import Config  # noqa: PLC0415

        client = boto3.client(
            "bedrock-runtime",
            region_name="us-east-1",
            endpoint_url=self.base_url,
            aws_access_key_id="AKIADEMONOTAREALKEY0",
            aws_secret_access_key="demo-not-a-real-secret",  # noqa: S106 - a dummy
            config=Config(retries={"total_max_attempts": 1}),  # one attempt, as the SDKs above
        )
        extra = dict(self.headers)
        client.meta.events.register(
            "before-send.bedrock-runtime.*", lambda request, **_: request.headers.update(extra)
        )
        return client


def client_errors() -> tuple[type[Exception], ...]:
    """What the SDKs raise for an HTTP error status."""
    import anthropic  # noqa: PLC0415
    import openai  # noqa: PLC0415
    from botocore.exceptions import ClientError  # noqa: PLC0415
    from google.genai.errors import APIError  # noqa: PLC0415

    return (openai.APIStatusError, anthropic.APIStatusError, ClientError, APIError)


def status_of(error: Exception) -> int:
    """The HTTP status an SDK's error carries."""
    status = getattr(error, "status_code", None) or getattr(error, "code", None)
    if status is None:  # botocore's ClientError
        status = getattr(error, "response", {}).get("ResponseMetadata", {}).get("HTTPStatusCode")
    return int(status or 0)


@dataclass
class Step:
    name: str
    shows: str
    reply: Reply | None  # None: SOCKET_STEPS has its script, or the MCP tool server answers
    call: Callable[[Clients], Any]
    expect_error: bool = False
    turns: int = 1  # the turns it makes


def consume(stream: Any) -> Any:
    for _ in stream:
        pass
    return stream
