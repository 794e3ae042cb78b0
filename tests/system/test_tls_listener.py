"""TLS on the listener: a real `tooltap run --tls-cert --tls-key` (a certificate and its key apart,
as a Kubernetes TLS Secret mounts them) reached by the official openai client that trusts only
a test CA (trustme), streamed and not. The client gets the upstream's bytes, tooltap logs its
turns, a plain-HTTP request is refused before it goes upstream, and a certificate that does not
fit stops the proxy with the reason.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
from pathlib import Path

import httpx
import openai
import pytest
import trustme
from support.flows import CHAT_REQUEST
from support.scenarios import route

from tooltap.addon.harness.launch import Proxy
from tooltap.addon.harness.replay import ReplayServer

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def pems(ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("tls")
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    paths = {
        "ca": folder / "ca.crt",
        "cert": folder / "tls.crt",
        "key": folder / "tls.key",
        "other_key": folder / "other.key",
    }
    ca.cert_pem.write_to_path(str(paths["ca"]))
    # The leaf, then its chain: what cert-manager writes into tls.crt.
    paths["cert"].write_bytes(b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
    leaf.private_key_pem.write_to_path(str(paths["key"]))
    trustme.CA().issue_cert("127.0.0.1").private_key_pem.write_to_path(str(paths["other_key"]))
    return paths


@pytest.fixture(scope="module")
def served(pems: dict[str, Path]):
    with (
        ReplayServer(route) as upstream,
        Proxy.tooltap(
            [upstream.url],
            "--log-format",
            "json",
            "--tls-cert",
            str(pems["cert"]),
            "--tls-key",
            str(pems["key"]),
        ) as proxy,
    ):
        yield upstream, proxy


def client(proxy: Proxy, pems: dict[str, Path], scenario: str) -> openai.OpenAI:
    return openai.OpenAI(
        api_key="sk-test-tls-listener-0000",
        base_url=f"https://127.0.0.1:{proxy.ports[0]}/v1",
        # The test CA, and nothing else.
        http_client=httpx.Client(verify=ssl.create_default_context(cafile=pems["ca"])),
        default_headers={"x-scenario": scenario},
        max_retries=0,
    )


def test_the_openai_client_reaches_tooltap_over_https_and_its_turn_is_logged(served, pems):
    upstream, proxy = served
    mark = proxy.mark()
    with client(proxy, pems, "chat-json") as api:
        completion = api.chat.completions.create(**CHAT_REQUEST)
    sent = json.loads(upstream.seen[-1].reply.body)["choices"][0]["message"]["tool_calls"]
    calls = completion.choices[0].message.tool_calls or []
    assert [c.function.name for c in calls] == [c["function"]["name"] for c in sent]
    (turn,) = proxy.wait_for("turn", 1, since=mark)
    assert (turn["api"], turn["outcome"], turn["status"]) == ("chat", "inspected", 200)
    assert turn["calls"] == len(calls)
    # Forwarded upstream as the client sent it, its key included.
    assert upstream.seen[-1].headers["authorization"] == "Bearer sk-test-tls-listener-0000"


def test_a_stream_over_https_arrives_whole_and_is_read(served, pems):
    _upstream, proxy = served
    mark = proxy.mark()
    with client(proxy, pems, "chat-sse") as api:
        chunks = list(api.chat.completions.create(**CHAT_REQUEST, stream=True))
    names = [
        call.function.name
        for chunk in chunks
        for choice in chunk.choices
        for call in choice.delta.tool_calls or []
        if call.function and call.function.name
    ]
    assert len(names) >= 2
    (turn,) = proxy.wait_for("turn", 1, since=mark)
    assert (turn["stream"], turn["outcome"]) == (True, "inspected")
    assert turn["calls"] == len(names)


def test_the_listener_presents_the_given_certificate_and_trusts_nothing_else(served, pems):
    _upstream, proxy = served
    untrusting = openai.OpenAI(
        api_key="sk-x",
        base_url=f"https://127.0.0.1:{proxy.ports[0]}/v1",
        max_retries=0,
        default_headers={"x-scenario": "chat-json"},
    )
    # The system's roots do not know the test CA.
    with untrusting, pytest.raises(openai.APIConnectionError):
        untrusting.chat.completions.create(**CHAT_REQUEST)


def test_plain_http_to_a_tls_listener_is_refused_and_never_sent_upstream(served):
    upstream, proxy = served
    before = len(upstream.seen)
    mark = proxy.mark()
    answer = httpx.post(
        f"http://127.0.0.1:{proxy.ports[0]}/v1/chat/completions",
        json=CHAT_REQUEST,
        headers={"authorization": "Bearer sk-cleartext", "x-scenario": "chat-json"},
        timeout=10,
    )
    assert answer.status_code == 400
    assert "HTTPS only" in answer.text
    assert len(upstream.seen) == before
    # Not traffic: no turn, no flow counted.
    assert proxy.wait_for("turn", 1, since=mark, timeout=1.5) == []


def run_with(*flags: str, confdir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tooltap.addon.commands.cli", "run", "--listen", "127.0.0.1:0",
         "--metrics", "127.0.0.1:0", "--health", "off", *flags, "--", "--set",
         f"confdir={confdir}"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (("--tls-cert", "{cert}", "--tls-key", "{other_key}"), "is not the key of"),
        (("--tls-cert", "{cert}"), "holds no unencrypted PEM private key"),
        (("--tls-cert", "{missing}"), "cannot read"),
        (("--tls-cert", "{ca}", "--tls-key", "{key}"), "is not the key of"),
        (("--tls-key", "{key}"), "tooltap_tls_key needs tooltap_tls_cert"),
    ],
)
def test_a_certificate_that_does_not_fit_stops_the_proxy_with_the_reason(
    pems, tmp_path, flags, said
):
    paths = {name: str(path) for name, path in pems.items()} | {"missing": "/nonexistent.pem"}
    result = run_with(*(flag.format(**paths) for flag in flags), confdir=tmp_path)
    assert result.returncode != 0
    assert said in result.stderr


def test_regular_mode_refuses_a_listener_certificate(pems, tmp_path):
    result = run_with("--regular", "--tls-cert", str(pems["cert"]), confdir=tmp_path)
    assert result.returncode != 0
    assert "--tls-cert is for reverse mode" in result.stderr


def test_the_key_given_apart_is_kept_private_in_the_confdir(served):
    _upstream, proxy = served
    combined = Path(proxy.confdir) / "tooltap-listener.pem"
    assert combined.stat().st_mode & 0o777 == 0o600
    assert b"PRIVATE KEY" in combined.read_bytes()
    assert json.dumps(proxy.text)  # the proxy's own lines never quote the key
    assert not any("PRIVATE KEY" in line for line in proxy.text)
