"""tooltap.core: the pure rules. No I/O, no mitmproxy, no logging, no clock, no globals.

`inspect(exchange) -> Verdict` is the entry point that the proxy, `audit` and
`demo` share; the classification rules live in `parallel` and `schema`.
"""

from .arguments import ValidatorCache
from .errors import ApiError
from .inspection import (
    REQUEST_HEADERS,
    RESPONSE_HEADERS,
    Exchange,
    Rejected,
    Verdict,
    header,
    inspect,
    served_session,
)
from .records import Call, Limits, LoopError, ParseError, SchemaError, ToolResult
from .schema import OPENAI_LIMITS, SEED_LIMITS
from .served import ToolServer
from .stream import StreamReader, StreamResult
from .turn import APIS, Api, Turn
from .verdict import ToolTime
from .wire import detect_api, read_turn

__all__ = [
    "APIS",
    "OPENAI_LIMITS",
    "REQUEST_HEADERS",
    "RESPONSE_HEADERS",
    "SEED_LIMITS",
    "Api",
    "ApiError",
    "Call",
    "Exchange",
    "Limits",
    "LoopError",
    "ParseError",
    "Rejected",
    "SchemaError",
    "StreamReader",
    "StreamResult",
    "ToolResult",
    "ToolServer",
    "ToolTime",
    "Turn",
    "ValidatorCache",
    "Verdict",
    "detect_api",
    "header",
    "inspect",
    "read_turn",
    "served_session",
]
