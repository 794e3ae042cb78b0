"""A real `tooltap run` process between the official SDKs and a loopback upstream replaying real captures."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import anthropic
import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.scenarios import SCENARIOS, route
from support.tls import regular_proxy, upstream_tls

from tooltap.addon.harness.launch import Proxy
from tooltap.addon.harness.replay import ReplayServer

SECRET = "sk-test-SECRET-0123456789"
API_KEY_SECRET = "sk-ant-test-SECRET-ABCDEFGH"
ORG_SECRET = "org-SECRETORG123456"


@pytest.fixture(scope="module")
def upstream():
    with ReplayServer(route) as server:
        yield server


@pytest.fixture(scope="module")
def proxy(upstream):
    with Proxy.tooltap([upstream.url], "--log-format", "json") as running:
        yield running


def metrics(proxy) -> dict[tuple[str, tuple], float]:
    text = httpx.get(proxy.metrics_url, timeout=5).text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def sample(values, name, **labels):
    return values.get((name, tuple(sorted(labels.items()))), 0.0)


def openai_client(proxy, scenario):
    return openai.OpenAI(
        base_url=proxy.url + "/v1",
        api_key=SECRET,
        max_retries=0,
        default_headers={"x-scenario": scenario, "OpenAI-Organization": ORG_SECRET},
    )


def anthropic_client(proxy, scenario):
    return anthropic.Anthropic(
        base_url=proxy.url,
        api_key=API_KEY_SECRET,
        max_retries=0,
        default_headers={"x-scenario": scenario},
    )


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "GetWeatherArgs",
            "strict": True,
            "parameters": {
                "type": "object",
                "additionalProperties": False,
                "required": ["city", "country", "units"],
                "properties": {
                    "city": {"type": "string"},
                    "country": {"type": "string"},
                    "units": {"type": "string", "enum": ["c", "f"]},
                },
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_stock_price",
            "strict": True,
            "parameters": {
                "type": "object",
                "additionalProperties": False,
                "required": ["ticker", "exchange"],
                "properties": {"ticker": {"type": "string"}, "exchange": {"type": "string"}},
            },
        },
    },
]
MESSAGES = [{"role": "user", "content": "What's the weather in Edinburgh and AAPL's price?"}]


def last_seen(upstream, scenario):
    return [s for s in upstream.seen if s.headers.get("x-scenario") == scenario][-1]


def test_openai_chat_through_reverse_mode_arrives_byte_for_byte(proxy, upstream):
    raw = openai_client(proxy, "chat-json").chat.completions.with_raw_response.create(
        model="gpt-4o", messages=MESSAGES, tools=TOOLS
    )
    completion = raw.parse()
    assert [c.id for c in completion.choices[0].message.tool_calls] == [
        "call_fdNz3vOBKYgOIpMdWotB9MjY",
        "call_h1DWI1POMJLb0KwIyQHWXD4p",
    ]
    assert raw.http_response.content == SCENARIOS["chat-json"].body
    assert raw.http_response.status_code == 200
    assert raw.http_response.headers["x-request-id"] == "req_test"
    assert raw.http_response.headers["content-type"] == "application/json"
    seen = last_seen(upstream, "chat-json")
    assert (
        seen.headers["authorization"] == f"Bearer {SECRET}"
    )  # the proxy passes keys, it never holds one


def test_the_exact_log_and_metrics_of_one_strict_void_chat_turn_with_three_calls(upstream):
    with Proxy.tooltap([upstream.url], "--log-format", "json") as fresh:
        openai_client(fresh, "chat-3-calls").chat.completions.create(
            model="gpt-4o", messages=MESSAGES, tools=TOOLS
        )
        turns = fresh.wait_for("turn")
        calls = fresh.wait_for("tool_call", 3)
        values = metrics(fresh)
    assert len(turns) == 1
    assert (turns[0]["api"], turns[0]["state"], turns[0]["calls"], turns[0]["model"]) == (
        "chat",
        "strict-void",
        3,
        "gpt-4o-2024-08-06",
    )
    assert turns[0]["repairs"][0].startswith("set parallel_tool_calls false")
    assert [(c["call_id"], c["name"], c["arguments_raw"]) for c in calls] == [
        (
            "call_fdNz3vOBKYgOIpMdWotB9MjY",
            "GetWeatherArgs",
            '{"city": "Edinburgh", "country": "GB", "units": "c"}',
        ),
        (
            "call_h1DWI1POMJLb0KwIyQHWXD4p",
            "get_stock_price",
            '{"ticker": "AAPL", "exchange": "NASDAQ"}',
        ),
        (
            "call_3rdLookupOrder00000000",
            "GetWeatherArgs",
            '{"city": "Lisbon", "country": "PT", "units": "c"}',
        ),
    ]
    assert all(c["parse_error"] is None and c["schema_errors"] == [] for c in calls)
    model = "gpt-4o-2024-08-06"
    assert sample(values, "tooltap_turns_total", api="chat", model=model, state="strict-void") == 1
    assert sample(values, "tooltap_unguaranteed_arguments_total", api="chat", model=model) == 3
    assert sample(values, "tooltap_tool_calls_total", api="chat", model=model) == 3
    assert sample(values, "tooltap_duplicate_calls_total", api="chat", model=model) == 1
    assert sample(values, "tooltap_flows_total", api="chat", outcome="inspected") == 1
    assert sample(values, "tooltap_calls_per_turn_bucket", api="chat", le="3.0") == 1
    assert sample(values, "tooltap_calls_per_turn_bucket", api="chat", le="2.0") == 0
    assert sample(values, "tooltap_internal_errors_total", where="worker") == 0


def test_a_chat_stream_reaches_the_sdk_event_by_event(proxy, upstream):
    client = openai_client(proxy, "chat-sse")
    stream = client.chat.completions.create(
        model="gpt-4o", messages=MESSAGES, tools=TOOLS, stream=True
    )
    first_at = None
    ids = []
    for chunk in stream:
        first_at = first_at or time.perf_counter()
        for choice in chunk.choices:
            ids += [c.id for c in choice.delta.tool_calls or [] if c.id]
    seen = last_seen(upstream, "chat-sse")
    assert ids == ["call_JMW1whyEaYG438VE1OIflxA2", "call_DNYTawLBoN8fj3KN6qU9N1Ou"]
    # The first event was in the client's hands before the upstream wrote its last one.
    assert first_at < seen.sent_at[-1]
    turns = proxy.wait_for(where=lambda t: t["stream"] and t["api"] == "chat" and t["calls"] == 2)
    assert turns[-1]["state"] == "strict-void"


def test_raw_bytes_of_every_scenario_equal_what_the_upstream_sent(proxy):
    with httpx.Client(base_url=proxy.url, timeout=10) as client:
        for name, reply in SCENARIOS.items():
            path = "/v1/messages" if name.startswith("messages") else "/v1/chat/completions"
            with client.stream(
                "POST", path, json={"model": "m", "messages": []}, headers={"x-scenario": name}
            ) as response:
                received = b"".join(response.iter_raw())
                assert response.status_code == reply.status, name
                assert received == reply.body, name
                for header, value in reply.headers:
                    assert response.headers[header] == value, (name, header)


def test_openai_responses_streaming_and_not(proxy):
    start = proxy.mark()
    client = openai_client(proxy, "responses-json")
    response = client.responses.create(model="gpt-5.4", input="weather in Boston?")
    assert response.output[0].call_id == "call_unLAR8MvFNptuiZK6K6HCy5k"
    stream = openai_client(proxy, "responses-sse").responses.create(
        model="gpt-5.1", input="weather", stream=True
    )
    kinds = [event.type for event in stream]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    # The earlier tests' exchanges (Chat and Messages) may still be logging: only Responses here.
    turns = proxy.wait_for(count=2, where=lambda t: t["api"] == "responses", since=start)
    assert [(t["api"], t["stream"], t["state"], t["calls"]) for t in turns] == [
        ("responses", False, "strict-at-risk", 1),
        ("responses", True, "strict-at-risk", 1),
    ]


def test_anthropic_sdk_streaming_and_not(proxy):
    start = proxy.mark()
    message = anthropic_client(proxy, "messages-json").messages.create(
        model="claude-haiku-4-5",
        max_tokens=100,
        messages=[{"role": "user", "content": "weather in SF?"}],
    )
    assert message.content[0].id == "toolu_011bpynHqFZ9P4u5rSaXsTJQ"
    with anthropic_client(proxy, "messages-sse").messages.stream(
        model="claude-sonnet-4",
        max_tokens=100,
        messages=[{"role": "user", "content": "weather in Paris?"}],
    ) as stream:
        final = stream.get_final_message()
    assert final.content[1].input == {"location": "Paris"}
    calls = proxy.wait_for("tool_call", 2, since=start)
    assert [(c["call_id"], c["name"]) for c in calls] == [
        ("toolu_011bpynHqFZ9P4u5rSaXsTJQ", "get_weather"),
        ("toolu_01NRLabsLyVHZPKxbKvkfSMn", "get_weather"),
    ]


def test_a_rejected_anthropic_request_is_logged_with_the_apis_words(proxy):
    start = proxy.mark()
    rejected_before = sample(
        metrics(proxy), "tooltap_rejected_requests_total", api="messages", status="400"
    )
    with pytest.raises(anthropic.BadRequestError):
        anthropic_client(proxy, "messages-400").messages.create(
            model="claude-haiku-4-5",
            max_tokens=100,
            messages=[
                {"role": "user", "content": "x"},
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_01GHndag5wQmbzNihYmV2UBj",
                            "content": "20C",
                        }
                    ],
                },
            ],
        )
    (rejected,) = proxy.wait_for("request_rejected", since=start)
    assert rejected["status"] == 400
    assert "unexpected `tool_use_id` found in `tool_result` blocks" in rejected["message"]
    (loop,) = proxy.wait_for("loop_error", since=start)
    assert (loop["rule"], loop["ids"]) == ("orphan-result", ["toolu_01GHndag5wQmbzNihYmV2UBj"])
    proxy.wait_for("turn", since=start)
    assert (
        sample(metrics(proxy), "tooltap_rejected_requests_total", api="messages", status="400")
        == rejected_before + 1
    )


def test_no_secret_reaches_the_log_or_the_metrics(upstream):
    with Proxy.tooltap(
        [upstream.url], "--log-format", "json", "--log-arguments", "redact"
    ) as fresh:
        body = {
            "model": "m",
            "messages": [],
            "tools": [{"type": "function", "function": {"name": "login"}}],
        }
        headers = {
            "x-scenario": "chat-json",
            "authorization": f"Bearer {SECRET}",
            "x-api-key": API_KEY_SECRET,
            "api-key": SECRET,
            "openai-organization": ORG_SECRET,
        }
        httpx.post(
            fresh.url + "/v1/chat/completions?api-key=" + SECRET,
            json=body,
            headers=headers,
            timeout=10,
        )
        fresh.wait_for("turn")
        text = httpx.get(fresh.metrics_url, timeout=5).text
        logged = "\n".join(map(str, fresh.events)) + "\n".join(fresh.text)
    for secret in (SECRET, API_KEY_SECRET, ORG_SECRET):
        assert secret not in logged
        assert secret not in text
    assert fresh.wait_for("turn")[0]["path"] == "/v1/chat/completions"


def test_redact_masks_secret_looking_argument_keys(upstream):
    scenario = "chat-secret-args"
    body = SCENARIOS["chat-json"].body.replace(
        b'{\\"ticker\\": \\"AAPL\\"',
        b'{\\"password\\": \\"hunter2-SECRET\\", \\"ticker\\": \\"AAPL\\"',
    )
    SCENARIOS[scenario] = SCENARIOS["chat-json"].__class__(
        headers=SCENARIOS["chat-json"].headers, chunks=[body]
    )
    try:
        for mode, shown in (("raw", True), ("redact", False), ("hash", False), ("omit", False)):
            with Proxy.tooltap(
                [upstream.url], "--log-arguments", mode, "--log-format", "json"
            ) as fresh:
                openai_client(fresh, scenario).chat.completions.create(model="m", messages=MESSAGES)
                calls = fresh.wait_for("tool_call", 2)
            logged = " ".join(str(c["arguments_raw"]) for c in calls)
            assert ("hunter2-SECRET" in logged) is shown, mode
            if mode == "redact":
                assert '"password":"[redacted]"' in logged and '"ticker":"AAPL"' in logged
            if mode == "hash":
                assert all(c["arguments_raw"].startswith("hmac-sha256:") for c in calls)
            if mode == "omit":
                assert all(c["arguments_raw"] is None for c in calls)
    finally:
        del SCENARIOS[scenario]


def test_faults_in_the_inspector_and_the_tap_leave_every_flow_intact(upstream):
    # The tap raises through the addon's fault seam; the inspector process cannot
    # write its log (a full disk), so handling the one unstreamed flow fails.
    script = Path(__file__).parents[1] / "support" / "faulty_tap.py"
    with Proxy.mitmdump(
        upstream.url,
        "-s",
        str(script),
        "--set",
        "tooltap_metrics_port=0",
        "--set",
        "tooltap_log_file=/dev/full",
        has_metrics=True,
    ) as faulty:
        with httpx.Client(base_url=faulty.url, timeout=10) as client:
            for name in ("chat-json", "chat-sse", "messages-sse"):
                response = client.post(
                    "/v1/chat/completions", json={"model": "m"}, headers={"x-scenario": name}
                )
                assert response.content == SCENARIOS[name].body
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            values = metrics(faulty)
            worker = sample(values, "tooltap_internal_errors_total", where="worker")
            if worker >= 1 and sample(values, "tooltap_internal_errors_total", where="tap") >= 4:
                break
            time.sleep(0.05)
        assert sample(values, "tooltap_internal_errors_total", where="worker") == 1
        # The tap raises on every piece of the two streams and on both ends: a piece per event
        # when each arrives alone (they are sent 20 ms apart), fewer when some arrive together.
        pieces = len(SCENARIOS["chat-sse"].chunks) + len(SCENARIOS["messages-sse"].chunks) + 2
        assert 4 <= sample(values, "tooltap_internal_errors_total", where="tap") <= pieces
        assert faulty.alive()


def test_regular_mode_with_a_tls_upstream_and_the_mitmproxy_ca_trusted(tmp_path):
    import os

    upstream_ca, server_tls = upstream_tls(tmp_path)
    with (
        ReplayServer(route, tls=server_tls) as tls_upstream,
        regular_proxy(upstream_ca) as (regular, trusted),
    ):
        assert (
            oct(os.stat(os.path.join(regular.confdir, "mitmproxy-ca.pem")).st_mode & 0o777)
            == "0o600"
        )
        with httpx.Client(proxy=regular.url, verify=trusted, timeout=10) as client:
            response = client.post(
                tls_upstream.url + "/v1/chat/completions",
                json={"model": "m", "tools": TOOLS},
                headers={"x-scenario": "chat-json"},
            )
        assert response.content == SCENARIOS["chat-json"].body
        turn = regular.wait_for("turn")[0]
    assert (turn["host"], turn["state"], turn["calls"]) == ("127.0.0.1", "strict-void", 2)


def test_plain_mitmdump_with_the_script_path_loads_tooltap_and_inspects(upstream):
    # Regression: mitmproxy puts the script's folder first on sys.path, where
    # addon/tooltap.py shadowed the tooltap package ("'tooltap' is not a
    # package"), so `mitmdump -s $(tooltap script-path)` exited at startup.
    import os
    import shutil
    import subprocess
    import sys

    script = subprocess.run(
        [sys.executable, "-m", "tooltap.addon.commands.cli", "script-path"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    mitmdump = shutil.which("mitmdump", path=os.path.dirname(sys.executable))
    argv = [mitmdump, "--listen-host", "127.0.0.1", "-p", "0", "--mode", f"reverse:{upstream.url}"]
    argv += ["-s", script, "--set", "tooltap_metrics_port=0", "--set", "tooltap_log_format=json"]
    # mitmdump's own flow lines share stdout with the JSON events: keep them off.
    argv += ["--set", "flow_detail=0"]
    with Proxy(argv, modes=1) as plain:
        response = httpx.post(
            plain.url + "/v1/chat/completions",
            json={"model": "m", "tools": TOOLS},
            headers={"x-scenario": "chat-json"},
            timeout=10,
        )
        assert response.content == SCENARIOS["chat-json"].body
        turn = plain.wait_for("turn")[0]
    assert (turn["state"], turn["calls"]) == ("strict-void", 2)


def test_the_log_can_go_to_a_file_for_plain_mitmdump_users(upstream, tmp_path):
    log = tmp_path / "tooltap.jsonl"
    with Proxy.tooltap([upstream.url], extra=("--set", f"tooltap_log_file={log}")) as proxy:
        httpx.post(
            proxy.url + "/v1/chat/completions",
            json={"model": "m", "tools": TOOLS},
            headers={"x-scenario": "chat-json"},
            timeout=10,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and '"event":"turn"' not in (
            log.read_text() if log.exists() else ""
        ):
            time.sleep(0.05)
        assert proxy.events == []  # nothing on stdout
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["event"] for e in events] == ["tool_call", "tool_call", "turn"]
    assert events[-1]["state"] == "strict-void"


@pytest.mark.parametrize("inspector", ["process", "thread"])
def test_a_taken_metrics_port_stops_tooltap_run_with_one_clear_line(inspector):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        argv = ["run", "--listen", "127.0.0.1:0", "--metrics", f"127.0.0.1:{port}", "--"]
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "tooltap.addon.commands.cli",
                *argv,
                "--set",
                f"tooltap_inspector={inspector}",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode != 0
    (line,) = [line for line in done.stderr.splitlines() if "cannot serve metrics" in line]
    assert line.endswith(
        f"tooltap: cannot start: cannot serve metrics on 127.0.0.1:{port}: [Errno 98] Address already in use"
    )
