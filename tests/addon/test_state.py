"""The session's state: this process's memory, and Redis shared by replicas (a real redis-server).

A RedisState stands for one replica; two on one server are two replicas. Its
connecting thread tries again after a backoff made short here; tests wait on
its events (answering, a log line), bounded in time.
"""

from __future__ import annotations

import json
import logging
import threading
import time

import pytest
import redis
from support.captures import exchange_of

from tooltap.addon.harness.redis_server import RedisServer
from tooltap.addon.inspection import state as state_module
from tooltap.addon.inspection.session import Session
from tooltap.addon.inspection.state import (
    FIRST_ANSWER,
    LocalState,
    Recalled,
    RedisState,
    await_first_answer,
    backoff,
    location,
    open_state,
)
from tooltap.core import Exchange

TOOLS = [{"type": "function", "name": "f"}]
DOWN = "did not answer"
BACK = "answers again"
WAIT = 10.0  # seconds any wait on the connecting thread may take


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch):
    monkeypatch.setattr(state_module, "BACKOFF", (0.02, 0.1))


class Replica:
    """A RedisState and the failures it counted; answering: wait until Redis answers it."""

    def __init__(self, url: str, ttl: int = 60, answering: bool = True) -> None:
        self.errors = 0
        self.state = RedisState(url, ttl, self._count)
        if answering:
            assert self.state.answering.wait(WAIT)

    def _count(self) -> None:
        self.errors += 1


class Said(logging.Handler):
    """The tooltap logger's lines, and an event for the first that holds `words`."""

    def __init__(self, words: str) -> None:
        super().__init__()
        self.words = words
        self.lines: list[str] = []
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        line = record.getMessage()
        self.lines.append(line)
        if self.words in line:
            self.seen.set()


@pytest.fixture
def said():
    """said(words): a handler on the tooltap logger, removed after the test."""
    logger = logging.getLogger("tooltap")
    handlers = []

    def attach(words: str) -> Said:
        handler = Said(words)
        logger.addHandler(handler)
        handlers.append(handler)
        return handler

    yield attach
    for handler in handlers:
        logger.removeHandler(handler)


class Commands:
    """The client's get and set, counted: whether a command was sent to Redis at all."""

    def __init__(self, state: RedisState) -> None:
        self.sent = 0
        for name in ("get", "set"):
            setattr(state.client, name, self._counting(getattr(state.client, name)))

    def _counting(self, command):
        def send(*args, **kwargs):
            self.sent += 1
            return command(*args, **kwargs)

        return send


def calls(response_id: str, *call_ids: str) -> Exchange:
    """A Responses turn that leaves these calls for the client."""
    output = [
        {"type": "function_call", "call_id": c, "name": "f", "arguments": "{}"} for c in call_ids
    ]
    return exchange_of(
        "responses",
        {"model": "gpt-4o", "input": "go", "tools": TOOLS},
        {"id": response_id, "status": "completed", "output": output, "tools": TOOLS},
    )


def follow_up(previous: str, answered: str, response_id: str) -> Exchange:
    """A follow-up with previous_response_id that answers one call only."""
    result = {"type": "function_call_output", "call_id": answered, "output": "ok"}
    text = {"type": "message", "role": "assistant", "content": [{"type": "output_text"}]}
    return exchange_of(
        "responses",
        {"model": "gpt-4o", "previous_response_id": previous, "input": [result], "tools": TOOLS},
        {"id": response_id, "status": "completed", "output": [text], "tools": TOOLS},
    )


def findings(session_a: Session, session_b: Session) -> list[tuple[str, list[str], str]]:
    """A turn leaving call_1 and call_2 on one session, a follow-up answering call_1 on the other."""
    session_a.inspect(calls("resp_1", "call_1", "call_2"))
    verdict = session_b.inspect(follow_up("resp_1", "call_1", "resp_2"))
    return [(e.rule, e.ids, e.where) for e in verdict.loop_errors]


UNANSWERED = [("unanswered-call", ["call_2"], "previous_response_id resp_1")]


def test_local_state_claims_a_response_once_and_forgets_the_oldest_past_its_size():
    state = LocalState(size=2)
    assert (state.claim("resp_a"), state.claim("resp_a")) == (True, False)
    state.claim("resp_b")
    state.claim("resp_c")  # resp_a is pushed out
    assert state.claim("resp_a") is True
    state.remember("resp_a", ["call_1"])
    assert (state.open_calls("resp_a"), state.open_calls("resp_x")) == (["call_1"], None)


def test_a_state_read_as_prior_answers_a_lookup_by_id_and_lists_nothing():
    state = LocalState()
    state.remember("resp_a", ["call_1"])
    prior = Recalled(state)
    assert (prior.get("resp_a"), prior.get("resp_x")) == (["call_1"], None)
    assert (list(prior), len(prior)) == ([], 0)


def test_one_session_finds_the_call_a_follow_up_left_unanswered():
    session = Session()
    assert findings(session, session) == UNANSWERED


def test_two_sessions_each_with_its_own_memory_cannot_prove_it():
    # What two replicas without a shared state do: no finding, and none invented.
    assert findings(Session(), Session()) == []


def test_two_replicas_sharing_redis_find_what_one_session_finds(redis_server):
    a, b = Replica(redis_server.url), Replica(redis_server.url)
    assert findings(Session(state=a.state), Session(state=b.state)) == UNANSWERED
    assert (a.errors, b.errors) == (0, 0)


def test_a_response_is_claimed_once_across_replicas(redis_server):
    a, b = Replica(redis_server.url), Replica(redis_server.url)
    assert a.state.claim("resp_bg") is True
    assert b.state.claim("resp_bg") is False
    assert a.state.claim("resp_bg") is False
    assert b.state.claim("resp_other") is True


def test_keys_are_namespaced_expire_and_hold_ids_only(redis_server):
    a = Replica(redis_server.url, ttl=60)
    a.state.remember("resp_1", ["call_1", "call_2"])
    a.state.claim("resp_1")
    client = redis.Redis.from_url(redis_server.url)
    try:
        assert sorted(client.keys("*")) == [b"tooltap:counted:resp_1", b"tooltap:open:resp_1"]
        assert client.get("tooltap:open:resp_1") == b'["call_1","call_2"]'
        assert client.get("tooltap:counted:resp_1") == b"1"
        for key in ("tooltap:open:resp_1", "tooltap:counted:resp_1"):
            assert 0 < client.ttl(key) <= 60
    finally:
        client.close()


def test_a_value_under_the_key_that_is_not_a_list_of_ids_is_unknown(redis_server):
    client = redis.Redis.from_url(redis_server.url)
    try:
        client.set("tooltap:open:resp_1", b'{"call": 1}')
        client.set("tooltap:open:resp_2", b"not json")
    finally:
        client.close()
    a = Replica(redis_server.url)
    assert (a.state.open_calls("resp_1"), a.state.open_calls("resp_2")) == (None, None)


def test_an_unreachable_redis_falls_back_to_this_replicas_memory_counts_each_miss_and_logs_once(
    free_port, said
):
    log = said(DOWN)
    a = Replica(f"redis://:s3cret@127.0.0.1:{free_port}/0", answering=False)  # nothing listens
    assert log.seen.wait(WAIT)
    commands = Commands(a.state)
    a.state.remember("resp_1", ["call_1"])
    assert a.state.open_calls("resp_1") == ["call_1"]
    assert a.state.open_calls("resp_unknown") is None
    assert (a.state.claim("resp_1"), a.state.claim("resp_1")) == (True, False)
    assert (a.errors, commands.sent) == (5, 0)  # each counted, none sent: no wait for Redis
    down = [line for line in log.lines if DOWN in line and f":{free_port}/0 " in line]
    assert len(down) == 1
    assert down[0].startswith(f"the shared state at redis://127.0.0.1:{free_port}/0 {DOWN} (")
    assert not any("s3cret" in line for line in log.lines)
    a.state.close()


def test_a_session_on_an_unreachable_redis_invents_no_finding(free_port):
    # The turn was seen by another replica; Redis, which knew it, is down.
    b = Replica(f"redis://127.0.0.1:{free_port}/0", answering=False)
    verdict = Session(state=b.state).inspect(follow_up("resp_1", "call_1", "resp_2"))
    assert verdict.loop_errors == []
    assert b.errors == 2  # the lookup and the claim
    b.state.close()


def test_redis_is_tried_again_in_its_own_thread_and_used_once_it_answers(free_port, said):
    if RedisServer.missing():
        pytest.skip("redis-server is not installed (./dev test installs Debian's redis-server)")
    down, back = said(DOWN), said(BACK)
    a = Replica(f"redis://127.0.0.1:{free_port}/0", answering=False)
    assert down.seen.wait(WAIT)
    assert a.state.claim("resp_0") is True  # counted here, alone
    server = RedisServer(free_port).start()
    client = redis.Redis.from_url(server.url)
    try:
        assert a.state.answering.wait(WAIT) and back.seen.wait(WAIT)
        a.state.remember("resp_2", ["call_2"])
        assert client.exists("tooltap:open:resp_2") == 1
        mine = f"redis://127.0.0.1:{free_port}/0 "  # not a line of another test's state
        assert [line for line in down.lines if mine in line and (DOWN in line or BACK in line)] == [
            next(line for line in down.lines if DOWN in line),
            next(line for line in down.lines if BACK in line),
        ]
    finally:
        a.state.close()
        client.close()
        server.stop()


def test_a_starting_inspector_waits_for_redis_to_answer_before_its_first_record(
    free_port, said, monkeypatch
):
    if RedisServer.missing():
        pytest.skip("redis-server is not installed (./dev test installs Debian's redis-server)")
    monkeypatch.setattr(state_module, "BACKOFF", (0.5, 0.5))  # the next try comes late
    down = said(DOWN)
    a = Replica(f"redis://127.0.0.1:{free_port}/0", answering=False)
    assert down.seen.wait(WAIT)  # the first try missed: Redis was not up yet
    server = RedisServer(free_port).start()
    try:
        await_first_answer(a.state, WAIT)
        assert a.state.answering.is_set()  # the first record goes to Redis
    finally:
        a.state.close()
        server.stop()


def test_a_starting_inspector_waits_no_longer_than_its_bound_for_a_redis_that_is_down(
    free_port,
):
    a = Replica(f"redis://127.0.0.1:{free_port}/0", answering=False)  # nothing listens
    started = time.monotonic()
    await_first_answer(a.state, 0.2)
    assert not a.state.answering.is_set() and time.monotonic() - started < FIRST_ANSWER
    a.state.close()
    await_first_answer(LocalState(), WAIT)  # one replica's memory: nothing to wait for


def test_the_tries_wait_longer_each_time_up_to_the_most():
    waits = backoff()
    assert [next(waits) for _ in range(6)] == [0.02, 0.04, 0.08, 0.1, 0.1, 0.1]


def test_a_stalled_redis_times_out_and_the_exchange_uses_local_memory(redis_server, said):
    back = said(BACK)
    a, b = Replica(redis_server.url), Replica(redis_server.url)
    a.state.remember("resp_1", ["call_1"])
    assert b.state.open_calls("resp_1") == ["call_1"]
    redis_server.pause()
    try:
        assert b.state.open_calls("resp_1") is None  # b never saw it; Redis does not answer
        assert b.errors == 1
    finally:
        redis_server.resume()
    assert back.seen.wait(WAIT) and b.state.answering.wait(WAIT)
    assert b.state.open_calls("resp_1") == ["call_1"]
    assert b.errors == 1


def test_shared_findings_resume_when_a_killed_redis_is_back(redis_server):
    a, b = Replica(redis_server.url), Replica(redis_server.url)
    redis_server.kill()
    assert findings(Session(state=a.state), Session(state=b.state)) == []
    redis_server.start()  # the same port, empty
    for replica in (a, b):
        assert replica.state.answering.wait(WAIT)
    session_a, session_b = Session(state=a.state), Session(state=b.state)
    session_a.inspect(calls("resp_3", "call_1", "call_2"))
    verdict = session_b.inspect(follow_up("resp_3", "call_1", "resp_4"))
    assert [(e.rule, e.ids) for e in verdict.loop_errors] == [("unanswered-call", ["call_2"])]


def test_no_url_is_this_process_memory_and_a_redis_url_is_redis():
    assert isinstance(open_state({"tooltap_state": ""}, lambda: None), LocalState)
    state = open_state(
        {"tooltap_state": "redis://127.0.0.1:1/0", "tooltap_state_ttl": 7}, lambda: None
    )
    assert isinstance(state, RedisState)
    assert state.ttl == 7
    state.close()


def test_a_state_url_is_named_in_the_log_without_its_credentials():
    assert location("redis://user:pw@cache:6380/2") == "redis://cache:6380/2"
    assert location("rediss://cache") == "rediss://cache:6379"


# --- tool time: when each call was issued, by its id -----------------------------------------

T0 = 1_764_480_000.0


def timed(exchange: Exchange, start: float, end: float) -> Exchange:
    return exchange.model_copy(update={"request_start": start, "response_end": end})


def answer_both(previous: str, response_id: str) -> Exchange:
    results = [{"type": "function_call_output", "call_id": c, "output": "ok"}
               for c in ("call_1", "call_2")]  # fmt: skip
    text = {"type": "message", "role": "assistant", "content": [{"type": "output_text"}]}
    return exchange_of(
        "responses",
        {"model": "gpt-4o", "previous_response_id": previous, "input": results, "tools": TOOLS},
        {"id": response_id, "status": "completed", "output": [text], "tools": TOOLS},
    )


def tool_times(session_a: Session, session_b: Session, answered_at: float) -> list[tuple]:
    session_a.inspect(timed(calls("resp_1", "call_1", "call_2"), T0, T0 + 1.5))
    verdict = session_b.inspect(timed(answer_both("resp_1", "resp_2"), answered_at, T0 + 9))
    return [(t.call_id, t.name, t.waited_ms, t.late) for t in verdict.tool_times] + [
        verdict.tool_wait_ms
    ]


def test_a_follow_up_times_each_call_it_answers_from_the_end_of_the_response_that_issued_it():
    session = Session(deadline=60)
    assert tool_times(session, session, T0 + 4.0) == [
        ("call_1", "f", 2500.0, False),
        ("call_2", "f", 2500.0, False),
        2500.0,
    ]


def test_an_answer_past_the_deadline_is_late_and_each_call_is_timed_once():
    session = Session(deadline=60)
    times = tool_times(session, session, T0 + 91.5)
    assert times[:2] == [("call_1", "f", 90000.0, True), ("call_2", "f", 90000.0, True)]
    again = session.inspect(timed(answer_both("resp_1", "resp_3"), T0 + 95, T0 + 96))
    assert again.tool_times == [] and again.tool_wait_ms is None  # taken by the first answer


def test_without_times_or_without_the_issuing_response_nothing_is_timed():
    session = Session()
    session.inspect(calls("resp_1", "call_1", "call_2"))  # no times: nothing remembered
    verdict = session.inspect(timed(answer_both("resp_1", "resp_2"), T0 + 4, T0 + 5))
    assert (verdict.tool_times, verdict.tool_wait_ms) == ([], None)


def test_a_call_issued_on_one_replica_is_timed_by_the_other_through_redis(redis_server):
    a, b = Replica(redis_server.url), Replica(redis_server.url)
    times = tool_times(Session(state=a.state), Session(state=b.state), T0 + 2.0)
    # A Responses follow-up with previous_response_id names no tool, and the tool's name stays
    # on the replica that saw the call issued: timed, its tool not known here.
    assert times == [("call_1", None, 500.0, False), ("call_2", None, 500.0, False), 500.0]
    client = redis.Redis.from_url(redis_server.url)
    try:
        assert client.keys("tooltap:issued:*") == []  # answered: taken from Redis too
    finally:
        client.close()


def chat_turn(messages: list, response_message: dict, start: float, end: float) -> Exchange:
    tools = [{"type": "function", "function": {"name": n}} for n in ("get_weather", "get_time")]
    choice = {"index": 0, "message": response_message, "finish_reason": "stop"}
    request = {"model": "gpt-4o", "messages": messages, "tools": tools}
    response = {"id": "chatcmpl-1", "model": "gpt-4o", "choices": [choice]}
    return timed(exchange_of("chat", request, response), start, end)


def test_on_another_replica_a_chat_follow_up_names_each_call_from_its_own_history(redis_server):
    a, b = Replica(redis_server.url), Replica(redis_server.url)
    asked = [{"role": "user", "content": "Weather and time in Paris?"}]
    made = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_w", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
        {"id": "call_t", "type": "function",
         "function": {"name": "get_time", "arguments": '{"city": "Paris"}'}},
    ]}  # fmt: skip
    Session(state=a.state).inspect(chat_turn(asked, made, T0, T0 + 1.0))
    results = [{"role": "tool", "tool_call_id": c, "content": "ok"} for c in ("call_w", "call_t")]
    answer = chat_turn([*asked, made, *results], {"role": "assistant", "content": "12C, noon."},
                       T0 + 1.75, T0 + 3)  # fmt: skip
    verdict = Session(state=b.state).inspect(answer)
    assert [(t.call_id, t.name, t.waited_ms) for t in verdict.tool_times] == [
        ("call_w", "get_weather", 750.0),
        ("call_t", "get_time", 750.0),
    ]


def test_issued_calls_in_redis_hold_the_time_only_and_expire(redis_server):
    a = Replica(redis_server.url, ttl=60)
    a.state.issue({"call_1": ("get_weather", T0 + 1.25)})
    a.state.issue({"call_1": ("get_weather", T0 + 9)})  # read again: the first time stays
    client = redis.Redis.from_url(redis_server.url)
    try:
        assert client.get("tooltap:issued:call_1") == repr(T0 + 1.25).encode()
        assert 0 < client.ttl("tooltap:issued:call_1") <= 60
        client.set("tooltap:issued:call_2", b"garbage")
        client.set("tooltap:issued:call_3", f"{T0 + 2!r} get_time".encode())  # the version before
    finally:
        client.close()
    assert a.state.answer(["call_2", "call_9"]) == {}  # unreadable or unknown: not timed
    assert a.state.answer(["call_3"]) == {"call_3": (None, T0 + 2)}  # its time read, not its name
    assert a.state.answer(["call_1"]) == {"call_1": ("get_weather", T0 + 1.25)}  # issued here
    b = Replica(redis_server.url, ttl=60)
    b.state.issue({"call_4": ("get_weather", T0 + 5)})
    assert a.state.answer(["call_4"]) == {"call_4": (None, T0 + 5)}  # issued on another replica


GEMINI = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"


def gemini(contents: list, parts: list, start: float, end: float) -> Exchange:
    """A generateContent exchange, its response's parts these."""
    body = {"candidates": [{"content": {"role": "model", "parts": parts},
                            "finishReason": "STOP"}], "modelVersion": "gemini-2.5-flash"}  # fmt: skip
    tools = [{"functionDeclarations": [{"name": "get_weather"}]}]
    return Exchange(
        method="POST", url=GEMINI, status=200, response_headers={"content-type": "application/json"},
        request_body=json.dumps({"contents": contents, "tools": tools}).encode(),
        response_body=json.dumps(body).encode(), request_start=T0 + start, response_end=T0 + end,
    )  # fmt: skip


ASK = {"role": "user", "parts": [{"text": "Weather in Paris?"}]}
CALL = {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}  # no id


def answer_by_name(at: float) -> Exchange:
    response = {"functionResponse": {"name": "get_weather", "response": {"temp": 12}}}
    history = [ASK, {"role": "model", "parts": [CALL]}, {"role": "user", "parts": [response]}]
    return gemini(history, [{"text": "12C."}], at, at + 1)


def test_a_call_with_no_id_is_timed_by_its_name_and_arguments_in_the_history():
    session = Session()
    session.inspect(gemini([ASK], [CALL], 0, 1))
    verdict = session.inspect(answer_by_name(3.5))
    assert [(t.call_id, t.name, t.waited_ms) for t in verdict.tool_times] == [
        ("get_weather", "get_weather", 2500.0)
    ]


def test_two_calls_alike_with_no_id_before_an_answer_are_timed_by_neither():
    # Two conversations ask the same: no answer can say which call it answers.
    for state in (LocalState(), None):
        session = Session(state=state) if state is not None else Session()
        session.inspect(gemini([ASK], [CALL], 0, 1))
        session.inspect(gemini([ASK], [CALL], 0.5, 1.5))
        assert session.inspect(answer_by_name(3.5)).tool_times == []


def test_two_replicas_do_not_time_calls_alike_with_no_id(redis_server):
    a, b = Replica(redis_server.url), Replica(redis_server.url)
    Session(state=a.state).inspect(gemini([ASK], [CALL], 0, 1))
    Session(state=b.state).inspect(gemini([ASK], [CALL], 0.5, 1.5))
    assert Session(state=a.state).inspect(answer_by_name(3.5)).tool_times == []
