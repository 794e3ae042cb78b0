"""The plugin's Watch, as the watched clients drive it: an MCP server's GET stream is read piece
by piece as the code under test reads it, so a list change cut across two pieces applies the
moment its second piece comes, before the next call is read; the stream is no exchange of its
own; bytes read after the test ended belong to no test."""

from __future__ import annotations

import json
from typing import Any

from tooltap.addon.testing.watch import Ledger, Watch

URL = "http://tools.example.com/mcp"
SESSION = [("mcp-session-id", "s1")]
SSE = [("content-type", "text/event-stream")]
NOTICE = b'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n\n'
CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def post(watch: Watch, rpc_id: int, method: str, params: Any, result: Any) -> None:
    """A POST of the session, answered on its own event stream, read whole."""
    body = {"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params}
    pending = watch.opened("POST", URL, SESSION, json.dumps(body).encode())
    assert pending is not None
    pending.respond(200, [*SSE, *SESSION])
    answer = {"jsonrpc": "2.0", "id": rpc_id, "result": result}
    pending.end(b"event: message\ndata: " + json.dumps(answer).encode() + b"\n\n")


def forecast(watch: Watch, rpc_id: int) -> None:
    arguments = {"name": "forecast", "arguments": {"town": "Oslo"}}  # off the listed schema
    post(watch, rpc_id, "tools/call", arguments, {"content": [{"type": "text", "text": "ok"}]})


def started() -> tuple[Watch, Ledger]:
    watch = Watch()
    ledger = watch.begin("test_forecast")
    server = {"name": "weather", "version": "1.0"}
    capabilities = {"tools": {"listChanged": True}}
    post(watch, 1, "initialize", {}, {"protocolVersion": "2025-11-25", "serverInfo": server,
                                      "capabilities": capabilities})  # fmt: skip
    tools = [{"name": "forecast", "inputSchema": CITY}]
    post(watch, 2, "tools/list", {}, {"tools": tools})
    return watch, ledger


def test_a_list_change_applies_once_its_last_piece_is_read_before_the_next_call():
    watch, ledger = started()
    stream = watch.opened("GET", URL, SESSION, b"")
    assert stream is not None
    stream.respond(200, SSE)
    stream.chunk(NOTICE[:30])
    forecast(watch, 3)  # the change is not said yet: held to the list
    stream.chunk(NOTICE[30:])
    forecast(watch, 4)  # said now: the list it was held to is gone
    stream.end()
    assert [j.label for j in ledger.judged] == ["POST /mcp"] * 4  # the stream is none of them
    third, fourth = (j.verdict for j in ledger.judged[2:])
    assert [f.name for f in ledger.judged[2].findings] == ["argument-schema"]
    assert third.unchecked == [] and ledger.judged[3].findings == []
    assert fourth.unchecked == [
        "call 4: arguments not validated, the server said its tool list changed "
        "(notifications/tools/list_changed), and it was not listed again since"
    ]
    assert ledger.errors == []


def test_a_stream_left_open_ends_with_the_test_and_what_it_reads_after_is_kept_by_none():
    watch, ledger = started()
    stream = watch.opened("GET", URL, SESSION, b"")
    assert stream is not None
    stream.respond(200, SSE)
    assert watch.end() is ledger and ledger.open == {}
    servers = len(ledger.session.tool_servers)
    stream.chunk(NOTICE)  # the client reads on, past its test: no session hears of it
    assert len(ledger.session.tool_servers) == servers == 1
    assert len(ledger.judged) == 2 and ledger.errors == []
