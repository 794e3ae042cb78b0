"""One inspect-and-remember session: bounded memory of the calls and of the counted responses."""

import json

from support.captures import JSON, URLS

from tooltap.addon.inspection.session import Session
from tooltap.addon.inspection.state import RecentCalls
from tooltap.core import Exchange


def responses(response_id, calls=(), method="POST", status="completed"):
    body = {
        "id": response_id,
        "status": status,
        "output": [
            {"type": "function_call", "call_id": c, "name": "f", "arguments": "{}"} for c in calls
        ],
        "tools": [{"type": "function", "name": "f"}],
    }
    url = URLS["responses"] + ("" if method == "POST" else f"/{response_id}")
    return Exchange(
        method=method,
        url=url,
        request_body=b"{}" if method == "POST" else b"",
        status=200,
        response_headers=JSON,
        response_body=json.dumps(body).encode(),
    )


def test_recent_calls_keep_the_newest_responses_only():
    recent = RecentCalls(size=2)
    for n in range(3):
        recent.remember(f"resp_{n}", [f"call_{n}"])
    assert list(recent) == ["resp_1", "resp_2"]
    recent.remember("resp_1", ["call_x"])  # seen again: the newest now
    assert list(recent.items()) == [("resp_2", ["call_2"]), ("resp_1", ["call_x"])]


def test_the_session_remembers_calls_for_follow_ups_and_counts_a_response_once():
    session = Session(size=2)
    assert session.inspect(responses("resp_a", ["call_1"])).state == "no-strict-declared"
    assert session.state.open_calls("resp_a") == ["call_1"]
    again = session.inspect(responses("resp_a", ["call_1"], method="GET"))
    assert (again.state, again.calls) == (None, [])
    for n in range(2):  # resp_a is pushed out of the bounded memory
        session.inspect(responses(f"resp_{n}"))
    assert session.inspect(responses("resp_a", method="GET")).state == "no-strict-declared"
