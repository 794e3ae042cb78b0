"""How the proxy's hooks read a response's framing: the one pass over its headers says what
mitmproxy's own reading of them says, for every framing, the odd ones included."""

from __future__ import annotations

import pytest
from mitmproxy.net.http.http1.read import expected_http_body_size
from mitmproxy.test import tflow

from tooltap.addon.proxy.flows import Framing, unbounded

CASES = {
    "a Content-Length": [(b"content-type", b"application/json"), (b"content-length", b"42")],
    "no length at all": [(b"content-type", b"application/json")],
    "chunked": [(b"Transfer-Encoding", b"chunked")],
    "chunked beside a length": [(b"content-length", b"42"), (b"transfer-encoding", b"chunked")],
    "gzip to the close": [(b"transfer-encoding", b"gzip"), (b"content-length", b"42")],
    "two lengths": [(b"content-length", b"42"), (b"Content-Length", b"42")],
    "a length that is no number": [(b"content-length", b"4 2")],
    "a negative length": [(b"content-length", b"-1")],
    "an event stream with a length": [
        (b"content-type", b"text/event-stream"),
        (b"content-length", b"42"),
    ],
    "NDJSON in a second Content-Type": [
        (b"content-type", b"text/plain"),
        (b"content-type", b"application/x-ndjson"),
    ],
    "AWS's event stream": [(b"Content-Type", b"application/vnd.amazon.eventstream")],
}


def mitmproxy_says(flow) -> bool:
    """The reading before the one pass: mitmproxy's header lookups, one by one."""
    if any(
        kind in flow.response.headers.get("content-type", "")
        for kind in (
            "text/event-stream",
            "application/vnd.amazon.eventstream",
            "application/x-ndjson",
        )
    ):
        return True
    try:
        return expected_http_body_size(flow.request, flow.response) in (None, -1)
    except ValueError:
        return False


@pytest.mark.parametrize("method", ["POST", "HEAD"])
@pytest.mark.parametrize("status", [200, 204])
@pytest.mark.parametrize("case", CASES)
def test_a_response_is_unbounded_exactly_when_mitmproxy_reads_it_so(case, status, method):
    flow = tflow.tflow(resp=True)
    flow.request.method = method
    flow.response.status_code = status
    flow.response.headers.fields = tuple(CASES[case])
    expected = mitmproxy_says(flow)
    assert unbounded(flow) is expected
    assert unbounded(flow, Framing.of(flow.response)) is expected


def test_framing_keeps_one_length_and_joins_the_content_types():
    flow = tflow.tflow(resp=True)
    flow.response.headers.fields = (
        (b"Content-Type", b"text/plain"),
        (b"content-type", b"charset=utf-8"),
        (b"Content-Length", b"7"),
    )
    assert Framing.of(flow.response) == (b"text/plain, charset=utf-8", b"7", False)
    flow.response.headers.fields += ((b"content-length", b"7"), (b"Transfer-Encoding", b"chunked"))
    assert Framing.of(flow.response) == (b"text/plain, charset=utf-8", b"", True)
