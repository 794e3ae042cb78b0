"""`pytest --tooltap` as a team uses it, each run a pytest subprocess (pytester): off unless
asked for, the fixture, the marker, strict mode, the summary, JUnit XML properties, the
plugin's own errors, what of a request is kept, streams from a real loopback server that
reach the code under test unchanged and event by event, and boto3's Bedrock answered by a
loopback server, a before-send handler, and a vcrpy cassette recorded then replayed."""

from __future__ import annotations

from xml.etree import ElementTree

import pytest

# The inner suites' helpers: a Chat turn asking for two calls, and the request answering them.
HELPERS = '''
import json

import httpx2

CALLS = [("c1", "get_weather"), ("c2", "get_traffic")]
TOOLS = [
    {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
    for _, n in CALLS
]


def turn(calls=CALLS, arguments='{"city": "Lisbon"}'):
    message = {"role": "assistant", "content": None, "tool_calls": [
        {"id": i, "type": "function", "function": {"name": n, "arguments": arguments}}
        for i, n in calls
    ]}
    return {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4.1", "choices": [
        {"index": 0, "finish_reason": "tool_calls", "message": message}]}


def answered(ids):
    messages = [{"role": "user", "content": "Lisbon?"}, turn()["choices"][0]["message"]]
    messages += [{"role": "tool", "tool_call_id": i, "content": "{}"} for i in ids]
    return {"model": "gpt-4.1", "messages": messages, "tools": TOOLS}


def mock(*replies, status=200):
    script = iter(replies)
    return httpx2.Client(transport=httpx2.MockTransport(
        lambda request: httpx2.Response(status, json=next(script))))


def loop(answer_ids, key="sk-test-0123456789abcdef"):
    """Two requests: the model asks for c1 and c2; the loop answers answer_ids."""
    client = mock(turn(), turn(calls=[]))
    headers = {"authorization": f"Bearer {key}"}
    url = "http://model.test/v1/chat/completions"
    client.post(url, json={"model": "gpt-4.1", "messages": [], "tools": TOOLS}, headers=headers)
    client.post(url, json=answered(answer_ids), headers=headers)
'''


@pytest.fixture
def suite(pytester):
    pytester.makepyfile(helpers=HELPERS)
    return pytester


def run(pytester, *args: str):
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=120)


def junit(pytester) -> dict[str, list[tuple[str, str]]]:
    root = ElementTree.parse(pytester.path / "report.xml").getroot()
    return {
        c.get("name", ""): [(p.get("name", ""), p.get("value", "")) for p in c.iter("property")]
        for c in root.iter("testcase")
    }


def test_without_the_option_nothing_is_watched_and_tooltap_is_not_even_imported(suite):
    suite.makepyfile(
        test_off="""
        import sys
        from helpers import loop

        def test_first_only():
            loop(["c1"])
            assert not [m for m in sys.modules if m.startswith("tooltap.core")]
        """
    )
    result = run(suite, "--junitxml=report.xml")
    result.assert_outcomes(passed=1)
    assert " tooltap " not in result.stdout.str()
    assert junit(suite) == {"test_first_only": []}


def test_strict_fails_the_test_that_caused_a_finding_with_the_repair_and_the_marker_allows_it(
    suite,
):
    suite.makepyfile(
        test_strict="""
        import pytest
        from helpers import loop

        def test_correct():
            loop(["c1", "c2"])

        def test_first_only():
            loop(["c1"])

        @pytest.mark.tooltap(allow=["unanswered-call"])
        def test_first_only_allowed():
            loop(["c1"])

        @pytest.mark.tooltap(allow=["unanswered-calls"])
        def test_a_misspelt_allowance():
            pass
        """
    )
    result = run(suite, "--tooltap=strict", "--junitxml=report.xml")
    result.assert_outcomes(passed=2, failed=1, errors=1)
    out = result.stdout.str()
    assert "FAILED test_strict.py::test_first_only" in out
    result.stdout.fnmatch_lines(
        [
            "tooltap: 1 finding(s) in this test's exchanges (--tooltap=strict)",
            "POST /v1/chat/completions",
            "  unanswered-call: c2 at messages.1. Repair: answer every call with exactly one "
            "result carrying its tool_call_id, *",
        ]
    )
    result.stdout.fnmatch_lines(
        ["*'unanswered-calls' is not a tooltap finding; the findings are strict-void, *"]
    )
    # The summary: exchanges, findings by name with the tests that caused them.
    result.stdout.fnmatch_lines(
        [
            "*= tooltap =*",
            "6 exchange(s) read in 3 test(s); 4 finding(s), 1 more allowed by a marker",
            "  fanout-no-strict  test_strict.py::test_correct",
            "                    test_strict.py::test_first_only",
            "                    test_strict.py::test_first_only_allowed",
            "  unanswered-call   test_strict.py::test_first_only",
        ]
    )
    properties = junit(suite)
    assert ("tooltap_allowed", properties["test_first_only_allowed"][-1][1]) in properties[
        "test_first_only_allowed"
    ]
    assert [v for k, v in properties["test_first_only"] if k == "tooltap_finding"][1].startswith(
        "unanswered-call: c2 at messages.1. Repair: "
    )


def test_report_mode_fails_nothing_and_the_fixture_gives_each_test_its_own_exchanges(suite):
    suite.makepyfile(
        test_fixture="""
        import pytest
        from helpers import loop

        def test_first_only(tooltap):
            loop(["c1"])
            assert [v.outcome for v in tooltap.verdicts] == ["inspected", "inspected"]
            assert [v.to_dict()["calls"][0]["name"] for v in tooltap.verdicts[:1]] == ["get_weather"]
            assert sorted(tooltap.findings) == ["fanout-no-strict", "unanswered-call"]
            assert tooltap.findings["unanswered-call"][0].startswith("c2 at messages.1. Repair:")
            with pytest.raises(AssertionError) as failed:
                tooltap.assert_clean()
            assert str(failed.value).splitlines()[:3] == [
                "tooltap: 1 finding(s) in this test's exchanges",
                "POST /v1/chat/completions",
                "  " + "unanswered-call: " + tooltap.findings["unanswered-call"][0],
            ]
            tooltap.assert_clean(allow=["unanswered-call"])

        def test_correct_after_it(tooltap):
            loop(["c1", "c2"])  # the same ids as the test before: its session is its own
            assert len(tooltap.verdicts) == 2
            tooltap.assert_clean()

        def test_loop_without_the_fixture():
            loop(["c1"])
        """
    )
    # With the option: every test is watched, nothing fails for a finding.
    result = run(suite, "--tooltap")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["6 exchange(s) read in 3 test(s); 5 finding(s)"])
    # Without it: the tests that ask for the fixture are watched, the others are not.
    result = run(suite)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["4 exchange(s) read in 2 test(s); 3 finding(s)"])
    assert "test_loop_without_the_fixture" not in result.stdout.str()


def test_a_failure_inside_the_plugin_fails_no_test_and_is_reported_as_its_own(suite):
    suite.makeconftest(
        """
        from tooltap.addon.inspection.session import Session

        def broken(self, exchange, application=None):
            raise RuntimeError("the rules broke")

        Session.read = broken
        """
    )
    suite.makepyfile(
        test_broken="""
        from helpers import loop

        def test_first_only(tooltap):
            loop(["c1"])
            assert tooltap.verdicts == []
        """
    )
    result = run(suite, "--tooltap=strict", "--junitxml=report.xml")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "tooltap's own errors (2); no test failed for them:",
            "  test_broken.py::test_first_only: tooltap could not read POST "
            "/v1/chat/completions: Traceback (most recent call last):*",
        ]
    )
    assert "RuntimeError: the rules broke" in result.stdout.str()
    errors = [v for k, v in junit(suite)["test_first_only"] if k == "tooltap_error"]
    assert len(errors) == 2 and "RuntimeError: the rules broke" in errors[0]


def test_no_header_is_kept_and_arguments_are_shown_as_tooltap_log_arguments_says(suite):
    suite.makeini("[pytest]\ntooltap_log_arguments = redact\n")
    suite.makepyfile(
        test_secrets="""
        import json
        from helpers import mock, turn

        KEY = "sk-live-0123456789abcdefXYZ"

        def test_secrets(tooltap):
            bad = turn(arguments='{"api_key": "hunter2-hunter2", "city": ')
            refused = {"error": {"type": "invalid_request_error",
                                 "message": f"Incorrect API key provided: {KEY}"}}
            client = mock(bad)
            client.post("http://model.test/v1/chat/completions", json={"model": "m"},
                        headers={"authorization": f"Bearer {KEY}"})
            mock(refused, status=401).post(
                "http://model.test/v1/chat/completions", json={"model": "m"},
                headers={"authorization": f"Bearer {KEY}"})
            said = json.dumps([v.to_dict() for v in tooltap.verdicts])
            assert KEY not in said and "hunter2" not in said and "Bearer" not in said
            assert '"[redacted]"' in tooltap.verdicts[0].calls[0].arguments_raw
        """
    )
    result = run(suite, "--tooltap", "--junitxml=report.xml")
    result.assert_outcomes(passed=1)
    report = (suite.path / "report.xml").read_text()
    assert "argument-parse" in report
    assert "sk-live-0123456789abcdefXYZ" not in report and "hunter2" not in report


SERVER = '''
import threading

import pytest
from tooltap.addon.harness.replay import ReplayServer, Reply

EVENTS = [
    b'data: {"id":"chatcmpl-9","object":"chat.completion.chunk","model":"gpt-4.1","choices":'
    b'[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"c1","type":'
    b'"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}\\n\\n',
    b'data: {"id":"chatcmpl-9","object":"chat.completion.chunk","model":"gpt-4.1","choices":'
    b'[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\\\\"city\\\\":'
    b'\\\\"Lisbon\\\\"}"}}]},"finish_reason":null}]}\\n\\n',
    b'data: {"id":"chatcmpl-9","object":"chat.completion.chunk","model":"gpt-4.1","choices":'
    b'[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\\n\\n',
    b"data: [DONE]\\n\\n",
]


class Paced(list):
    """The events as a reply's chunks, each sent once the client has the one before."""

    def __init__(self, events):
        super().__init__(events)
        self.received = [threading.Event() for _ in events]  # set by the client, one an event
        self.waited = []  # whether each wait ended in time

    def __iter__(self):
        for event, got in zip(list.__iter__(self), self.received):
            yield event
            self.waited.append(got.wait(timeout=5))


@pytest.fixture
def upstream():
    paced = Paced(EVENTS)
    reply = Reply(headers=[("content-type", "text/event-stream")], chunks=paced)
    with ReplayServer(lambda seen: reply) as server:
        yield server.url, paced
'''


def test_a_stream_from_a_real_server_reaches_the_code_unchanged_and_event_by_event(suite):
    suite.makeconftest(SERVER)
    suite.makepyfile(
        test_stream="""
        import asyncio
        import httpx
        import httpx2
        import pytest
        from conftest import EVENTS

        BODY = {"model": "gpt-4.1", "stream": True, "messages": [], "tools": [
            {"type": "function", "function": {"name": "get_weather", "parameters": {}}}]}

        def read(response, paced):
            got = []
            for event in response.iter_raw():
                got.append(event)
                paced.received[len(got) - 1].set()  # the server sends the next one now
            return got

        async def aread(response, paced):
            got = []
            async for event in response.aiter_raw():
                got.append(event)
                paced.received[len(got) - 1].set()
            return got

        @pytest.mark.parametrize("library", [httpx, httpx2])
        @pytest.mark.parametrize("asynchronous", [False, True])
        def test_stream(tooltap, upstream, library, asynchronous):
            url, paced = upstream
            url += "/v1/chat/completions"
            if asynchronous:
                async def go():
                    async with library.AsyncClient() as client:
                        async with client.stream("POST", url, json=BODY) as response:
                            return await aread(response, paced)
                got = asyncio.run(go())
            else:
                with library.Client() as client, client.stream("POST", url, json=BODY) as r:
                    got = read(r, paced)
            assert got == EVENTS  # each event on its own, as sent
            assert paced.waited == [True] * len(EVENTS)  # none held back: no wait timed out
            (verdict,) = tooltap.verdicts
            assert verdict.stream and verdict.outcome == "inspected"
            assert [(c.name, c.arguments_raw) for c in verdict.calls] == [
                ("get_weather", '{"city":"Lisbon"}')]
        """
    )
    result = run(suite, "--tooltap")
    result.assert_outcomes(passed=4)


BEDROCK = '''
import json

import pytest
from tooltap.addon.harness.eventstream import CONTENT_TYPE, converse_event
from tooltap.addon.harness.replay import ReplayServer, Reply

CALLS = [("t1", "get_weather"), ("t2", "get_traffic")]
USAGE = {"inputTokens": 20, "outputTokens": 9, "totalTokens": 29}


def reply(calls):
    content = [{"toolUse": {"toolUseId": i, "name": n, "input": {"city": "Lisbon"}}}
               for i, n in calls] or [{"text": "Mild."}]
    stop = "tool_use" if calls else "end_turn"
    return {"output": {"message": {"role": "assistant", "content": content}},
            "stopReason": stop, "usage": USAGE, "metrics": {"latencyMs": 5}}


def events(calls):
    out = [converse_event("messageStart", {"role": "assistant"})]
    for index, (i, n) in enumerate(calls):
        out += [
            converse_event("contentBlockStart", {"contentBlockIndex": index,
                           "start": {"toolUse": {"toolUseId": i, "name": n}}}),
            converse_event("contentBlockDelta", {"contentBlockIndex": index,
                           "delta": {"toolUse": {"input": json.dumps({"city": "Lisbon"})}}}),
            converse_event("contentBlockStop", {"contentBlockIndex": index}),
        ]
    out += [converse_event("messageStop", {"stopReason": "tool_use" if calls else "end_turn"}),
            converse_event("metadata", {"usage": USAGE, "metrics": {"latencyMs": 5}})]
    return out


def converse(seen):
    """Converse and ConverseStream: calls first, then an answer, per path."""
    calls = [] if len(json.loads(seen.body)["messages"]) > 1 else CALLS
    if seen.path.endswith("/converse-stream"):
        return Reply(headers=[("content-type", CONTENT_TYPE)], chunks=[b"".join(events(calls))])
    return Reply(chunks=[json.dumps(reply(calls)).encode()])


@pytest.fixture
def bedrock_url():
    with ReplayServer(converse) as server:
        yield server.url
'''


def test_boto3_converse_and_its_stream_from_a_local_server_a_before_send_handler_and_a_cassette(
    suite,
):
    suite.makeconftest(BEDROCK)
    suite.makepyfile(
        test_bedrock="""
        import json

        import boto3
        import pytest
        import vcr
        from botocore.awsrequest import AWSResponse
        from conftest import CALLS, converse, reply
        from tooltap.addon.harness.replay import ReplayServer
        from tooltap.core.findings import DEFAULT, findings

        TOOLS = {"tools": [{"toolSpec": {"name": n, "inputSchema": {"json": {"type": "object"}}}}
                           for _, n in CALLS]}

        class Raw:
            def __init__(self, body):
                self.body = body

            def stream(self, **kwargs):
                yield self.body

        def failing(tooltap):
            return {name for name in tooltap.findings if name in DEFAULT}

        def bedrock(url):
            return boto3.client("bedrock-runtime", region_name="us-east-1", endpoint_url=url,
                                aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret")

        def loop(client, answer, stream):
            messages = [{"role": "user", "content": [{"text": "Lisbon?"}]}]
            if stream:
                said = [e for e in client.converse_stream(modelId="m", messages=messages,
                                                          toolConfig=TOOLS)["stream"]]
                ids = [e["contentBlockStart"]["start"]["toolUse"]["toolUseId"]
                       for e in said if "contentBlockStart" in e]
            else:
                said = client.converse(modelId="m", messages=messages, toolConfig=TOOLS)
                ids = [b["toolUse"]["toolUseId"] for b in said["output"]["message"]["content"]]
            content = [{"toolUse": {"toolUseId": i, "name": n, "input": {"city": "Lisbon"}}}
                       for i, n in CALLS]
            messages += [{"role": "assistant", "content": content}, {"role": "user", "content": [
                {"toolResult": {"toolUseId": i, "content": [{"json": {}}]}} for i in ids[:answer]]}]
            client.converse(modelId="m", messages=messages, toolConfig=TOOLS)

        @pytest.mark.parametrize("stream", [False, True])
        @pytest.mark.parametrize("answer", [2, 1])
        def test_server(tooltap, bedrock_url, answer, stream):
            loop(bedrock(bedrock_url), answer, stream)
            assert [v.api for v in tooltap.verdicts] == ["converse", "converse"]
            assert [len(v.calls) for v in tooltap.verdicts] == [2, 0]
            assert failing(tooltap) == (set() if answer == 2 else {"unanswered-call"})

        @pytest.mark.parametrize("answer", [2, 1])
        def test_before_send(tooltap, answer):
            client = bedrock("https://bedrock-runtime.us-east-1.amazonaws.com")
            turns = iter([reply(CALLS), reply([])])
            def answered(request, **kwargs):
                body = json.dumps(next(turns)).encode()
                return AWSResponse(request.url, 200, {"content-type": "application/json"}, Raw(body))
            client.meta.events.register("before-send.bedrock-runtime.Converse", answered)
            loop(client, answer, stream=False)
            assert [len(v.calls) for v in tooltap.verdicts] == [2, 0]
            assert failing(tooltap) == (set() if answer == 2 else {"unanswered-call"})

        def read(verdicts):
            return [(v.api, v.outcome, v.stream, [(c.call_id, c.name) for c in v.calls],
                     [n for n in findings(v) if n in DEFAULT]) for v in verdicts]

        @pytest.mark.parametrize("stream", [False, True])
        @pytest.mark.parametrize("answer", [2, 1])
        def test_cassette(tooltap, tmp_path, answer, stream):
            cassette = str(tmp_path / "bedrock.yaml")
            with ReplayServer(converse) as server, vcr.use_cassette(cassette, record_mode="all"):
                url = server.url
                loop(bedrock(url), answer, stream)  # recorded from the server
            recorded = read(tooltap.verdicts)
            with vcr.use_cassette(cassette, record_mode="none") as played:  # the server is gone
                loop(bedrock(url), answer, stream)
            assert played.play_count == 2 and played.all_played
            replayed = read(tooltap.verdicts[len(recorded):])
            assert replayed == recorded
            assert [(api, stream_, len(calls)) for api, _, stream_, calls, _ in replayed] == [
                ("converse", stream, 2), ("converse", False, 0)]
            said = [n for *_, names in replayed for n in names]
            assert said == ([] if answer == 2 else ["unanswered-call"])
        """
    )
    result = run(suite, "--tooltap")
    result.assert_outcomes(passed=10)
