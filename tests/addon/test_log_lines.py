"""The log's lines, byte for byte: every event's fields, their values, their order and level,
as the sink writes them (the timestamp aside, held to its format). What a change to how the
sink writes its lines must leave as it is."""

from __future__ import annotations

import datetime
import io
import json
import re

import pytest
from structlog.testing import LogCapture

from tooltap.addon.sinks.log import ExchangeIds, LogSink
from tooltap.core import Verdict

FLOW = "5a3c1e2f-9b7d-4c11-8e2a-0d6f1b2c3d4e"
# TimeStamper(fmt="iso", utc=True): microseconds unless they are 0, then none.
STAMP = re.compile(r'"timestamp":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{6})?Z"')
CALL = {"call_id": "call_1", "name": "login", "type": "function", "arguments_raw": "{}"}
SCHEMA_ERROR = {"path": "$.password", "message": '"hunter2-SECRET" is not of type "integer"'}
PARSE_ERROR = {"type": "JSONDecodeError", "message": "Expecting value", "position": 9}
TIMED = {"call_id": "call_0", "name": "f", "waited_ms": 900.0, "issued_at": 1.0, "answered_at": 2.0}

MODEL_TURN = Verdict(
    api="chat",
    outcome="inspected",
    status=200,
    stream=True,
    model="gpt-4o",
    response_id="chatcmpl-9",
    state="fanout-no-strict",
    format_state="free-text",
    calls=[
        CALL | {"arguments_raw": '{"user": "ann", "password": "hunter2-SECRET"}',
                "schema_errors": [SCHEMA_ERROR]},
        CALL | {"call_id": "call_2", "arguments_raw": '{"user": ', "parse_error": PARSE_ERROR},
        CALL | {"call_id": "mcp_1", "name": "search", "type": "mcp_call", "hosted": True,
                "server": "google_calendar"},
    ],
    duplicates={"login": 2},
    repairs=["set parallel_tool_calls false", "key every handler on call_id"],
    usage={"input_tokens": 149, "output_tokens": 60, "cached_input_tokens": 12},
    duration_ms=640.5,
    first_token_ms=120.25,
    tool_wait_ms=75000.0,
    tool_times=[TIMED, TIMED | {"call_id": "call_00", "waited_ms": 75000.0, "late": True}],
    stream_errors=[{"type": "overloaded_error", "message": "Overloaded"}],
    tool_changes=[{
        "source": "request tools", "tool": "login", "change": "changed", "against": "first-seen",
        "before": "a1", "after": "b2", "details": ["$.description"],
    }],
    hidden_text=[{
        "part": "definition", "tool": "login", "where": "$.description", "kind": "tag", "at": 4,
        "count": 1, "chars": ["U+E0041"], "spelled": "A",
    }],
    unchecked=["history past 200 messages"],
)  # fmt: skip
TOOL_SERVER = Verdict(
    api="mcp",
    outcome="inspected",
    scope="tool",
    status=200,
    server="weather 1.2.0",
    session="0123456789abcdef",
    rpc=["tools/call", "tools/list"],
    listed_tools=["forecast"],
    calls=[CALL | {"call_id": "7", "name": "forecast", "arguments_raw": '{"city": "Oslo"}'}],
    tool_results=[
        {"call_id": "7", "where": "result", "outcome": "ok"},
        {"call_id": "8", "where": "result", "outcome": "error", "name": "radar",
         "schema_errors": [{"path": "$.image", "message": "required"}]},
    ],
    tool_times=[TIMED | {"call_id": "7", "name": "forecast", "ran_ms": 12.5, "server": "weather 1.2.0"}],
    tool_wait_ms=900.0,
)  # fmt: skip
SOCKET_TURN = Verdict(
    api="responses",
    outcome="inspected",
    transport="websocket",
    model="gpt-4.1",
    response_id="resp_3",
    state="no-strict-declared",
    output_types=["message"],
    usage={"input_tokens": 30, "output_tokens": 2, "reasoning_tokens": 0},
)
SESSION = Verdict(
    api="realtime",
    outcome="inspected",
    transport="websocket",
    scope="session",
    session_errors=[{"type": "input_audio_buffer_commit_empty", "message": "too small"}],
    loop_errors=[
        {"rule": "unanswered-call", "ids": ["call_b"], "where": "w", "repair": "r"},
        {"rule": "unanswered-at-close", "ids": ["call_c"], "where": "w", "repair": "r"},
    ],
)
LOOP_ERROR = Verdict(
    api="messages",
    outcome="inspected",
    status=200,
    model="claude-sonnet-4-5",
    response_id="msg_1",
    state="no-tools",
    loop_errors=[
        {"rule": "orphan-result", "ids": ["toolu_x"], "where": "messages.3", "repair": "drop it"}
    ],
    tool_results=[{"call_id": "toolu_y", "where": "messages.5", "outcome": "error"}],
)
REJECTED = Verdict(
    api="responses",
    outcome="upstream_error",
    status=400,
    model="gpt-4o",
    reason="the API refused the request",
    rejected={
        "status": 400,
        "type": "invalid_request_error",
        "message": "Invalid schema for function 'login': sk-abcdefghijkl12 is bad",
        "blockers": ["$.properties.user: format"],
    },
)
REFUSED = Verdict(api=None, outcome="upstream_error", reason="connection refused")


def written(sink: LogSink, stream: io.StringIO) -> None:
    """Every verdict above through one sink, then the two kinds of overdue line."""
    for verdict, path, ids in (
        (MODEL_TURN, "/v1/chat/completions", ExchangeIds.of_flow(FLOW)),
        (TOOL_SERVER, "/mcp", ExchangeIds.of_flow(FLOW)),
        (SOCKET_TURN, "/v1/responses", ExchangeIds.of_socket(FLOW, 3)),
        (SESSION, "/v1/realtime", ExchangeIds.of_socket(FLOW, None)),
        (LOOP_ERROR, "/v1/messages", ExchangeIds.of_flow(FLOW)),
        (REJECTED, "/v1/responses", ExchangeIds.of_flow(FLOW)),
        (REFUSED, "/v1/chat/completions", ExchangeIds.of_flow(FLOW)),
    ):
        sink.emit(verdict, "api.example.com", path, 0.1234, ids)
    overdue = {"call_id": "7", "name": "f", "waited_ms": 61000.0, "deadline_s": 60, "path": "/mcp"}
    sink.tool_overdue(ExchangeIds.of_flow(FLOW), api="mcp", transport="http", **overdue,
                      server="s 1.0", session="487f27619b6d6703")  # fmt: skip
    sink.tool_overdue(ExchangeIds.of_socket(FLOW, None), api="realtime", transport="websocket",
                      **overdue, response_id="resp_1")  # fmt: skip


def json_lines(arguments: str = "raw") -> list[str]:
    stream = io.StringIO()
    written(LogSink("json", arguments, stream), stream)
    text = stream.getvalue()
    assert text.endswith("\n")
    lines = text.splitlines()
    assert all(len(STAMP.findall(line)) == 1 for line in lines)
    return [STAMP.sub('"timestamp":"T"', line) for line in lines]


# What main wrote before the sink was made leaner (timestamps normalised), literally.
JSON_LINES = [
    '{"exchange":"5a3c1e2f9b7d","response_id":"chatcmpl-9","model":"gpt-4o","path":"/v1/chat/completions","api":"chat","transport":"http","call_id":"call_1","name":"login","arguments_raw":"{\\"user\\": \\"ann\\", \\"password\\": \\"hunter2-SECRET\\"}","parse_error":null,"schema_errors":[{"path":"$.password","message":"\\"hunter2-SECRET\\" is not of type \\"integer\\""}],"schema_problem":null,"event":"tool_call","level":"warning","timestamp":"T"}',
    '{"exchange":"5a3c1e2f9b7d","response_id":"chatcmpl-9","model":"gpt-4o","path":"/v1/chat/completions","api":"chat","transport":"http","call_id":"call_2","name":"login","arguments_raw":"{\\"user\\": ","parse_error":{"type":"JSONDecodeError","message":"Expecting value","position":9},"schema_errors":[],"schema_problem":null,"event":"tool_call","level":"warning","timestamp":"T"}',
    '{"exchange":"5a3c1e2f9b7d","response_id":"chatcmpl-9","model":"gpt-4o","path":"/v1/chat/completions","api":"chat","transport":"http","call_id":"mcp_1","name":"search","arguments_raw":"{}","parse_error":null,"schema_errors":[],"schema_problem":null,"hosted":true,"server":"google_calendar","event":"tool_call","level":"info","timestamp":"T"}',
    '{"exchange":"5a3c1e2f9b7d","response_id":"chatcmpl-9","model":"gpt-4o","path":"/v1/chat/completions","api":"chat","type":"overloaded_error","message":"Overloaded","event":"stream_error","level":"warning","timestamp":"T"}',
    '{"exchange":"5a3c1e2f9b7d","response_id":"chatcmpl-9","model":"gpt-4o","path":"/v1/chat/completions","api":"chat","transport":"http","call_id":"call_0","name":"f","waited_ms":900.0,"ran_ms":null,"server":null,"late":false,"event":"tool_time","level":"info","timestamp":"T"}',
    '{"exchange":"5a3c1e2f9b7d","response_id":"chatcmpl-9","model":"gpt-4o","path":"/v1/chat/completions","api":"chat","transport":"http","call_id":"call_00","name":"f","waited_ms":75000.0,"ran_ms":null,"server":null,"late":true,"event":"tool_time","level":"warning","timestamp":"T"}',
    '{"exchange":"5a3c1e2f9b7d","response_id":"chatcmpl-9","model":"gpt-4o","path":"/v1/chat/completions","api":"chat","source":"request tools","server":null,"tool":"login","change":"changed","against":"first-seen","before":"a1","after":"b2","announced":false,"details":["$.description"],"event":"tool_changed","level":"warning","timestamp":"T"}',
    '{"exchange":"5a3c1e2f9b7d","response_id":"chatcmpl-9","model":"gpt-4o","path":"/v1/chat/completions","api":"chat","where":"$.description","kind":"tag","at":4,"count":1,"chars":["U+E0041"],"spelled":"A","part":"definition","tool":"login","event":"hidden_text","level":"warning","timestamp":"T"}',
    '{"exchange":"5a3c1e2f9b7d","response_id":"chatcmpl-9","model":"gpt-4o","path":"/v1/chat/completions","api":"chat","transport":"http","host":"api.example.com","status":200,"stream":true,"outcome":"inspected","reason":null,"state":"fanout-no-strict","format_state":"free-text","findings":["fanout-no-strict","argument-schema","argument-parse","tool-changed","hidden-text"],"calls":2,"duplicates":{"login":2},"repairs":["set parallel_tool_calls false","key every handler on call_id"],"unchecked":["history past 200 messages"],"inspect_ms":0.123,"duration_ms":640.5,"first_token_ms":120.25,"input_tokens":149,"output_tokens":60,"cached_input_tokens":12,"tool_wait_ms":75000.0,"event":"turn","level":"warning","timestamp":"T"}',
    '{"exchange":"5a3c1e2f9b7d","response_id":null,"model":null,"path":"/mcp","api":"mcp","transport":"http","call_id":"7","name":"forecast","arguments_raw":"{\\"city\\": \\"Oslo\\"}","parse_error":null,"schema_errors":[],"schema_problem":null,"server":"weather 1.2.0","session":"0123456789abcdef","event":"tool_call","level":"info","timestamp":"T"}',
    '{"exchange":"5a3c1e2f9b7d","response_id":null,"model":null,"path":"/mcp","api":"mcp","call_id":"7","name":"forecast","outcome":"ok","schema_errors":[],"schema_problem":null,"server":"weather 1.2.0","session":"0123456789abcdef","event":"tool_result","level":"info","timestamp":"T"}',
    '{"exchange":"5a3c1e2f9b7d","response_id":null,"model":null,"path":"/mcp","api":"mcp","call_id":"8","name":"radar","outcome":"error","schema_errors":[{"path":"$.image","message":"required"}],"schema_problem":null,"server":"weather 1.2.0","session":"0123456789abcdef","event":"tool_result","level":"warning","timestamp":"T"}',
    '{"exchange":"5a3c1e2f9b7d","response_id":null,"model":null,"path":"/mcp","api":"mcp","transport":"http","call_id":"7","name":"forecast","waited_ms":900.0,"ran_ms":12.5,"server":"weather 1.2.0","late":false,"event":"tool_time","level":"info","timestamp":"T"}',
    '{"exchange":"5a3c1e2f9b7d","response_id":null,"model":null,"path":"/mcp","api":"mcp","transport":"http","host":"api.example.com","status":200,"stream":false,"outcome":"inspected","reason":null,"state":null,"format_state":null,"findings":["result-schema"],"calls":1,"duplicates":{},"repairs":[],"unchecked":[],"inspect_ms":0.123,"duration_ms":null,"first_token_ms":null,"input_tokens":null,"output_tokens":null,"tool_wait_ms":900.0,"server":"weather 1.2.0","session":"0123456789abcdef","rpc":["tools/call","tools/list"],"listed_tools":["forecast"],"event":"turn","level":"warning","timestamp":"T"}',
    '{"exchange":"5a3c1e2f9b7d.3","response_id":"resp_3","model":"gpt-4.1","path":"/v1/responses","session":"5a3c1e2f9b7d","turn":3,"api":"responses","output_types":["message"],"event":"no_tool_call","level":"info","timestamp":"T"}',
    '{"exchange":"5a3c1e2f9b7d.3","response_id":"resp_3","model":"gpt-4.1","path":"/v1/responses","session":"5a3c1e2f9b7d","turn":3,"api":"responses","transport":"websocket","host":"api.example.com","status":null,"stream":false,"outcome":"inspected","reason":null,"state":"no-strict-declared","format_state":null,"findings":[],"calls":0,"duplicates":{},"repairs":[],"unchecked":[],"inspect_ms":0.123,"duration_ms":null,"first_token_ms":null,"input_tokens":30,"output_tokens":2,"reasoning_tokens":0,"event":"turn","level":"info","timestamp":"T"}',
    '{"exchange":"5a3c1e2f9b7d","response_id":null,"model":null,"path":"/v1/realtime","session":"5a3c1e2f9b7d","turn":null,"api":"realtime","rule":"unanswered-call","ids":["call_b"],"where":"w","repair":"r","event":"loop_error","level":"warning","timestamp":"T"}',
    '{"exchange":"5a3c1e2f9b7d","response_id":null,"model":null,"path":"/v1/realtime","session":"5a3c1e2f9b7d","turn":null,"api":"realtime","rule":"unanswered-at-close","ids":["call_c"],"where":"w","repair":"r","event":"loop_error","level":"info","timestamp":"T"}',
    '{"exchange":"5a3c1e2f9b7d","response_id":null,"model":null,"path":"/v1/realtime","session":"5a3c1e2f9b7d","turn":null,"api":"realtime","transport":"websocket","type":"input_audio_buffer_commit_empty","message":"too small","event":"session_error","level":"info","timestamp":"T"}',
    '{"exchange":"5a3c1e2f9b7d","response_id":"msg_1","model":"claude-sonnet-4-5","path":"/v1/messages","api":"messages","rule":"orphan-result","ids":["toolu_x"],"where":"messages.3","repair":"drop it","event":"loop_error","level":"warning","timestamp":"T"}',
    '{"exchange":"5a3c1e2f9b7d","response_id":"msg_1","model":"claude-sonnet-4-5","path":"/v1/messages","api":"messages","call_id":"toolu_y","where":"messages.5","event":"tool_result_error","level":"warning","timestamp":"T"}',
    '{"exchange":"5a3c1e2f9b7d","response_id":"msg_1","model":"claude-sonnet-4-5","path":"/v1/messages","api":"messages","transport":"http","host":"api.example.com","status":200,"stream":false,"outcome":"inspected","reason":null,"state":"no-tools","format_state":null,"findings":["orphan-result"],"calls":0,"duplicates":{},"repairs":[],"unchecked":[],"inspect_ms":0.123,"duration_ms":null,"first_token_ms":null,"input_tokens":null,"output_tokens":null,"event":"turn","level":"warning","timestamp":"T"}',
    '{"exchange":"5a3c1e2f9b7d","response_id":null,"model":"gpt-4o","path":"/v1/responses","api":"responses","status":400,"type":"invalid_request_error","message":"Invalid schema for function \'login\': sk-abcdefghijkl12 is bad","blockers":["$.properties.user: format"],"event":"request_rejected","level":"warning","timestamp":"T"}',
    '{"exchange":"5a3c1e2f9b7d","response_id":null,"model":"gpt-4o","path":"/v1/responses","api":"responses","transport":"http","host":"api.example.com","status":400,"stream":false,"outcome":"upstream_error","reason":"the API refused the request","state":null,"format_state":null,"findings":["rejected"],"calls":0,"duplicates":{},"repairs":[],"unchecked":[],"inspect_ms":0.123,"duration_ms":null,"first_token_ms":null,"input_tokens":null,"output_tokens":null,"event":"turn","level":"warning","timestamp":"T"}',
    '{"exchange":"5a3c1e2f9b7d","response_id":null,"model":null,"path":"/v1/chat/completions","api":null,"transport":"http","host":"api.example.com","status":null,"stream":false,"outcome":"upstream_error","reason":"connection refused","state":null,"format_state":null,"findings":[],"calls":0,"duplicates":{},"repairs":[],"unchecked":[],"inspect_ms":0.123,"duration_ms":null,"first_token_ms":null,"input_tokens":null,"output_tokens":null,"event":"turn","level":"warning","timestamp":"T"}',
    '{"exchange":"5a3c1e2f9b7d","api":"mcp","transport":"http","call_id":"7","name":"f","waited_ms":61000.0,"deadline_s":60,"path":"/mcp","server":"s 1.0","session":"487f27619b6d6703","event":"tool_overdue","level":"warning","timestamp":"T"}',
    '{"exchange":"5a3c1e2f9b7d","session":"5a3c1e2f9b7d","turn":null,"api":"realtime","transport":"websocket","call_id":"7","name":"f","waited_ms":61000.0,"deadline_s":60,"path":"/mcp","response_id":"resp_1","event":"tool_overdue","level":"warning","timestamp":"T"}',
]
# With tooltap_log_arguments=redact, these lines (by index) read instead:
REDACTED_LINES = {
    0: '{"exchange":"5a3c1e2f9b7d","response_id":"chatcmpl-9","model":"gpt-4o","path":"/v1/chat/completions","api":"chat","transport":"http","call_id":"call_1","name":"login","arguments_raw":"{\\"user\\":\\"ann\\",\\"password\\":\\"[redacted]\\"}","parse_error":null,"schema_errors":[{"path":"$.password","message":"[redacted]"}],"schema_problem":null,"event":"tool_call","level":"warning","timestamp":"T"}',
    9: '{"exchange":"5a3c1e2f9b7d","response_id":null,"model":null,"path":"/mcp","api":"mcp","transport":"http","call_id":"7","name":"forecast","arguments_raw":"{\\"city\\":\\"Oslo\\"}","parse_error":null,"schema_errors":[],"schema_problem":null,"server":"weather 1.2.0","session":"0123456789abcdef","event":"tool_call","level":"info","timestamp":"T"}',
    22: '{"exchange":"5a3c1e2f9b7d","response_id":null,"model":"gpt-4o","path":"/v1/responses","api":"responses","status":400,"type":"invalid_request_error","message":"Invalid schema for function \'login\': [redacted] is bad","blockers":["$.properties.user: format"],"event":"request_rejected","level":"warning","timestamp":"T"}',
}
CONSOLE_LINES = [
    'T [warning  ] tool_call                      api=chat arguments_raw=\'{"user": "ann", "password": "hunter2-SECRET"}\' call_id=call_1 exchange=5a3c1e2f9b7d model=gpt-4o name=login parse_error=None path=/v1/chat/completions response_id=chatcmpl-9 schema_errors=[{\'path\': \'$.password\', \'message\': \'"hunter2-SECRET" is not of type "integer"\'}] schema_problem=None transport=http',
    "T [warning  ] tool_call                      api=chat arguments_raw='{\"user\": ' call_id=call_2 exchange=5a3c1e2f9b7d model=gpt-4o name=login parse_error={'type': 'JSONDecodeError', 'message': 'Expecting value', 'position': 9} path=/v1/chat/completions response_id=chatcmpl-9 schema_errors=[] schema_problem=None transport=http",
    "T [info     ] tool_call                      api=chat arguments_raw={} call_id=mcp_1 exchange=5a3c1e2f9b7d hosted=True model=gpt-4o name=search parse_error=None path=/v1/chat/completions response_id=chatcmpl-9 schema_errors=[] schema_problem=None server=google_calendar transport=http",
    "T [warning  ] stream_error                   api=chat exchange=5a3c1e2f9b7d message=Overloaded model=gpt-4o path=/v1/chat/completions response_id=chatcmpl-9 type=overloaded_error",
    "T [info     ] tool_time                      api=chat call_id=call_0 exchange=5a3c1e2f9b7d late=False model=gpt-4o name=f path=/v1/chat/completions ran_ms=None response_id=chatcmpl-9 server=None transport=http waited_ms=900.0",
    "T [warning  ] tool_time                      api=chat call_id=call_00 exchange=5a3c1e2f9b7d late=True model=gpt-4o name=f path=/v1/chat/completions ran_ms=None response_id=chatcmpl-9 server=None transport=http waited_ms=75000.0",
    "T [warning  ] tool_changed                   after=b2 against=first-seen announced=False api=chat before=a1 change=changed details=['$.description'] exchange=5a3c1e2f9b7d model=gpt-4o path=/v1/chat/completions response_id=chatcmpl-9 server=None source='request tools' tool=login",
    "T [warning  ] hidden_text                    api=chat at=4 chars=['U+E0041'] count=1 exchange=5a3c1e2f9b7d kind=tag model=gpt-4o part=definition path=/v1/chat/completions response_id=chatcmpl-9 spelled=A tool=login where=$.description",
    "T [warning  ] turn                           api=chat cached_input_tokens=12 calls=2 duplicates={'login': 2} duration_ms=640.5 exchange=5a3c1e2f9b7d findings=['fanout-no-strict', 'argument-schema', 'argument-parse', 'tool-changed', 'hidden-text'] first_token_ms=120.25 format_state=free-text host=api.example.com input_tokens=149 inspect_ms=0.123 model=gpt-4o outcome=inspected output_tokens=60 path=/v1/chat/completions reason=None repairs=['set parallel_tool_calls false', 'key every handler on call_id'] response_id=chatcmpl-9 state=fanout-no-strict status=200 stream=True tool_wait_ms=75000.0 transport=http unchecked=['history past 200 messages']",
    "T [info     ] tool_call                      api=mcp arguments_raw='{\"city\": \"Oslo\"}' call_id=7 exchange=5a3c1e2f9b7d model=None name=forecast parse_error=None path=/mcp response_id=None schema_errors=[] schema_problem=None server='weather 1.2.0' session=0123456789abcdef transport=http",
    "T [info     ] tool_result                    api=mcp call_id=7 exchange=5a3c1e2f9b7d model=None name=forecast outcome=ok path=/mcp response_id=None schema_errors=[] schema_problem=None server='weather 1.2.0' session=0123456789abcdef",
    "T [warning  ] tool_result                    api=mcp call_id=8 exchange=5a3c1e2f9b7d model=None name=radar outcome=error path=/mcp response_id=None schema_errors=[{'path': '$.image', 'message': 'required'}] schema_problem=None server='weather 1.2.0' session=0123456789abcdef",
    "T [info     ] tool_time                      api=mcp call_id=7 exchange=5a3c1e2f9b7d late=False model=None name=forecast path=/mcp ran_ms=12.5 response_id=None server='weather 1.2.0' transport=http waited_ms=900.0",
    "T [warning  ] turn                           api=mcp calls=1 duplicates={} duration_ms=None exchange=5a3c1e2f9b7d findings=['result-schema'] first_token_ms=None format_state=None host=api.example.com input_tokens=None inspect_ms=0.123 listed_tools=['forecast'] model=None outcome=inspected output_tokens=None path=/mcp reason=None repairs=[] response_id=None rpc=['tools/call', 'tools/list'] server='weather 1.2.0' session=0123456789abcdef state=None status=200 stream=False tool_wait_ms=900.0 transport=http unchecked=[]",
    "T [info     ] no_tool_call                   api=responses exchange=5a3c1e2f9b7d.3 model=gpt-4.1 output_types=['message'] path=/v1/responses response_id=resp_3 session=5a3c1e2f9b7d turn=3",
    "T [info     ] turn                           api=responses calls=0 duplicates={} duration_ms=None exchange=5a3c1e2f9b7d.3 findings=[] first_token_ms=None format_state=None host=api.example.com input_tokens=30 inspect_ms=0.123 model=gpt-4.1 outcome=inspected output_tokens=2 path=/v1/responses reason=None reasoning_tokens=0 repairs=[] response_id=resp_3 session=5a3c1e2f9b7d state=no-strict-declared status=None stream=False transport=websocket turn=3 unchecked=[]",
    "T [warning  ] loop_error                     api=realtime exchange=5a3c1e2f9b7d ids=['call_b'] model=None path=/v1/realtime repair=r response_id=None rule=unanswered-call session=5a3c1e2f9b7d turn=None where=w",
    "T [info     ] loop_error                     api=realtime exchange=5a3c1e2f9b7d ids=['call_c'] model=None path=/v1/realtime repair=r response_id=None rule=unanswered-at-close session=5a3c1e2f9b7d turn=None where=w",
    "T [info     ] session_error                  api=realtime exchange=5a3c1e2f9b7d message='too small' model=None path=/v1/realtime response_id=None session=5a3c1e2f9b7d transport=websocket turn=None type=input_audio_buffer_commit_empty",
    "T [warning  ] loop_error                     api=messages exchange=5a3c1e2f9b7d ids=['toolu_x'] model=claude-sonnet-4-5 path=/v1/messages repair='drop it' response_id=msg_1 rule=orphan-result where=messages.3",
    "T [warning  ] tool_result_error              api=messages call_id=toolu_y exchange=5a3c1e2f9b7d model=claude-sonnet-4-5 path=/v1/messages response_id=msg_1 where=messages.5",
    "T [warning  ] turn                           api=messages calls=0 duplicates={} duration_ms=None exchange=5a3c1e2f9b7d findings=['orphan-result'] first_token_ms=None format_state=None host=api.example.com input_tokens=None inspect_ms=0.123 model=claude-sonnet-4-5 outcome=inspected output_tokens=None path=/v1/messages reason=None repairs=[] response_id=msg_1 state=no-tools status=200 stream=False transport=http unchecked=[]",
    "T [warning  ] request_rejected               api=responses blockers=['$.properties.user: format'] exchange=5a3c1e2f9b7d message=\"Invalid schema for function 'login': sk-abcdefghijkl12 is bad\" model=gpt-4o path=/v1/responses response_id=None status=400 type=invalid_request_error",
    "T [warning  ] turn                           api=responses calls=0 duplicates={} duration_ms=None exchange=5a3c1e2f9b7d findings=['rejected'] first_token_ms=None format_state=None host=api.example.com input_tokens=None inspect_ms=0.123 model=gpt-4o outcome=upstream_error output_tokens=None path=/v1/responses reason='the API refused the request' repairs=[] response_id=None state=None status=400 stream=False transport=http unchecked=[]",
    "T [warning  ] turn                           api=None calls=0 duplicates={} duration_ms=None exchange=5a3c1e2f9b7d findings=[] first_token_ms=None format_state=None host=api.example.com input_tokens=None inspect_ms=0.123 model=None outcome=upstream_error output_tokens=None path=/v1/chat/completions reason='connection refused' repairs=[] response_id=None state=None status=None stream=False transport=http unchecked=[]",
    "T [warning  ] tool_overdue                   api=mcp call_id=7 deadline_s=60 exchange=5a3c1e2f9b7d name=f path=/mcp server='s 1.0' session=487f27619b6d6703 transport=http waited_ms=61000.0",
    "T [warning  ] tool_overdue                   api=realtime call_id=7 deadline_s=60 exchange=5a3c1e2f9b7d name=f path=/mcp response_id=resp_1 session=5a3c1e2f9b7d transport=websocket turn=None waited_ms=61000.0",
]


def test_every_json_line_is_as_main_wrote_it_field_value_order_and_level():
    assert json_lines() == JSON_LINES


def test_the_argument_policy_changes_only_what_it_hides():
    assert json_lines("redact") == [
        REDACTED_LINES.get(i, line) for i, line in enumerate(JSON_LINES)
    ]


def test_an_exchange_is_one_write_and_the_stream_sees_only_text():
    class Writes(io.StringIO):
        def __init__(self) -> None:
            super().__init__()
            self.writes: list[str] = []

        def write(self, text: str) -> int:
            assert isinstance(text, str)
            self.writes.append(text)
            return super().write(text)

    stream = Writes()
    sink = LogSink("json", "raw", stream)
    sink.emit(
        MODEL_TURN, "api.example.com", "/v1/chat/completions", 0.1234, ExchangeIds.of_flow(FLOW)
    )
    sink.emit(
        SOCKET_TURN, "api.example.com", "/v1/responses", 0.1234, ExchangeIds.of_socket(FLOW, 3)
    )
    sink.tool_overdue(ExchangeIds.of_flow(FLOW), api="mcp", call_id="7")
    assert [text.count("\n") for text in stream.writes] == [9, 2, 1]
    assert all(text.endswith("\n") for text in stream.writes)


def test_the_console_lines_are_as_main_wrote_them(monkeypatch):
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    stream = io.StringIO()
    written(LogSink("console", "raw", stream), stream)
    lines = stream.getvalue().splitlines()
    assert all(re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{6})?Z ", line) for line in lines)
    assert [re.sub(r"^\S+Z ", "T ", line) for line in lines] == CONSOLE_LINES


def test_processors_see_the_event_dicts_the_json_lines_render():
    capture = LogCapture()
    stream = io.StringIO()
    written(LogSink(stream=stream, processors=[capture]), stream)
    assert stream.getvalue() == ""
    assert len(capture.entries) == len(JSON_LINES)
    for entry, line in zip(capture.entries, JSON_LINES, strict=True):
        rendered = json.loads(line)
        assert list(entry) == [*rendered, "log_level"]  # the same keys, in the same order
        assert STAMP.fullmatch(f'"timestamp":"{entry["timestamp"]}"')
        assert {**entry, "timestamp": "T"} == {**rendered, "log_level": rendered["level"]}


@pytest.mark.parametrize("microsecond", [0, 7, 999_999])
def test_the_timestamp_is_iso_utc_with_microseconds_unless_none(monkeypatch, microsecond):
    # 2026-12-05T18:07:50 UTC and a fraction of a second (and 999 ns, below the microsecond):
    # TimeStamper(fmt="iso", utc=True) writes no fraction at all on the second. The clock is
    # frozen wherever a stamper may read it: datetime.now, time.time_ns, time.time.
    second = 1_796_494_070
    ns = second * 1_000_000_000 + microsecond * 1000 + 999
    monkeypatch.setattr("time.time_ns", lambda: ns)
    monkeypatch.setattr("time.time", lambda: ns / 1e9)

    class Frozen(datetime.datetime):
        @classmethod
        def now(cls, tz=None):  # type: ignore[override]
            return datetime.datetime.fromtimestamp(second, tz).replace(microsecond=microsecond)

    monkeypatch.setattr(datetime, "datetime", Frozen)
    stream = io.StringIO()
    LogSink("json", "raw", stream).tool_overdue(ExchangeIds.of_flow(FLOW), api="mcp")
    fraction = f".{microsecond:06d}" if microsecond else ""
    assert json.loads(stream.getvalue())["timestamp"] == f"2026-12-05T18:07:50{fraction}Z"
