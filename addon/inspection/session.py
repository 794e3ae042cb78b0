"""One inspect-and-remember session: what the live proxy, audit and demo share.

tooltap.core.inspect is pure; what must carry from one exchange to the next
lives in the session's state (state.py), bounded: the calls each recent
Responses turn left for the client (for follow-ups with previous_response_id),
and the response ids already counted at a final status (a background response
is polled, and counted once). What each recent MCP session said of its server
(its name, the tools it listed, with their schemas) stays in this process: it
is more than ids, which is all the shared state holds. The tool definitions each exchange
carries are checked against their pins (pins.py).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence

from tooltap.core import (
    Exchange,
    ToolServer,
    ValidatorCache,
    Verdict,
    detect_api,
    header,
    inspect,
    served_session,
)
from tooltap.core.definitions import DefinitionCache, endpoint
from tooltap.core.dialects import Routes
from tooltap.core.dialects.mcp import list_changed
from tooltap.core.dialects.mcp_streams import ANSWERED_ON_STREAM, Changed, Channels, Said
from tooltap.core.jsontext import loads

from .clock import Clock
from .pins import Pins
from .state import REMEMBERED, LocalState, Recalled, State

DEADLINE = 60.0  # seconds a call may wait for its answer before it is late (tooltap_tool_deadline)
TOOL_SESSIONS = 1_000  # MCP sessions remembered (with their tool schemas), the newest only
TOOL_BYTES = 64 << 20  # ... and at most this many bytes of their tools/list answers and open calls
OPEN_CALL = 640  # bytes a remembered open call (a task, a call awaiting its retry) holds, measured

ServerKey = tuple[str, str | None]  # an MCP endpoint, and the session there


class ToolServers:
    """What recent MCP sessions said of their servers, newest last: at most `sessions` of them,
    holding at most `limit` bytes of the tools/list answers their lists came from and of the
    calls they keep open (tasks, calls awaiting their retry). Past either, the oldest are
    forgotten (their calls then go unchecked, and say so)."""

    def __init__(self, sessions: int = TOOL_SESSIONS, limit: int = TOOL_BYTES) -> None:
        self.sessions = sessions
        self.limit = limit
        self.held = 0
        self._servers: OrderedDict[ServerKey, ToolServer] = OrderedDict()
        self._sizes: dict[ServerKey, int] = {}  # what each session holds
        self._lists: dict[ServerKey, int] = {}  # ... of which its tools/list answers

    def __len__(self) -> int:
        return len(self._servers)

    def get(self, key: ServerKey) -> ToolServer | None:
        return self._servers.get(key)

    def keep(self, key: ServerKey, server: ToolServer, verdict: Verdict, answer: int) -> None:
        """The session after an exchange whose answer was `answer` bytes."""
        listed = self._lists.get(key, 0)
        if not server.tools:
            listed = 0
        elif verdict.listed_tools:  # a first page starts the list anew; a later one adds
            fresh = len(server.tools) == len(set(verdict.listed_tools))
            listed = answer if fresh else listed + answer
        self._hold(key, server, listed)

    def list_changed(self, key: ServerKey) -> None:
        """The server said the session's tool list changed: forgotten until it is listed again,
        and that list announced (a session tooltap knew nothing of is remembered for it)."""
        self._hold(key, list_changed(self._servers.get(key) or ToolServer()), 0)

    def _hold(self, key: ServerKey, server: ToolServer, listed: int) -> None:
        size = listed + OPEN_CALL * (len(server.tasks) + len(server.retries))
        self.held += size - self._sizes.get(key, 0)
        self._servers[key] = server
        self._sizes[key] = size
        self._lists[key] = listed
        self._servers.move_to_end(key)
        self._trim()

    def _trim(self) -> None:
        while self._servers and (len(self._servers) > self.sessions or self.held > self.limit):
            oldest, _ = self._servers.popitem(last=False)
            self.held -= self._sizes.pop(oldest)
            del self._lists[oldest]


class Session:
    """inspect(), with the memory one stream of exchanges needs. Not thread-safe: one owner.

    state: where that memory lives (this process's by default; Redis, shared by
    replicas, with tooltap_state).
    """

    def __init__(
        self,
        size: int = REMEMBERED,
        state: State | None = None,
        pins: Pins | None = None,
        deadline: float = DEADLINE,
    ) -> None:
        self.state = state if state is not None else LocalState(size)
        self.clock = Clock(self.state, deadline)  # when calls were issued, answered and run
        self.validators = ValidatorCache()
        self.definitions = DefinitionCache()
        self.routes = Routes()
        self.tool_servers = ToolServers()
        self.pins = pins if pins is not None else Pins()
        self.channels = Channels()  # MCP's legacy sessions: GET streams and their POSTs
        self._recalled = Recalled(self.state)  # the state as inspect's `prior`, read on demand

    def read(
        self, exchange: Exchange, application: str | None = None
    ) -> list[tuple[Exchange, Verdict]]:
        """inspect(), for an exchange that may be one half of another (MCP's legacy HTTP+SSE
        transport: a POST answered 202, its response on the session's GET stream): the
        exchanges it completes, each with its verdict, in order; none while it waits.
        application: who sent it (a model request's tools are pinned under it)."""
        if legacy_stream(exchange):
            return self.stream(exchange.url, exchange, ended=True)
        if exchange.status in (ANSWERED_ON_STREAM, None) and _mcp(exchange):
            value, error = loads(exchange.request_body)
            paired = self.channels.posted(exchange, value) if error is None else None
            if paired is not None:
                return self._paired(paired, exchange)
        return [(exchange, self.inspect(exchange, application=application))]

    def stream(
        self, key: str, piece: Exchange, *, ended: bool = False, lost: bool = False
    ) -> list[tuple[Exchange, Verdict]]:
        """Bytes of an MCP server's GET stream as they came (key: which stream; piece: the GET,
        its body these bytes); lost: some went by unread before them. The exchanges its
        responses complete; a tool list change it says is applied to its session."""
        said = self.channels.stream(key, piece.url, piece.response_body, ended=ended, lost=lost)
        return self._paired(said, piece)

    def finish(self) -> list[tuple[Exchange, Verdict]]:
        """What still waits for its other half, said (the end of a recording)."""
        return self._paired(self.channels.close())

    def _paired(
        self, said: list[Said], heard: Exchange | None = None
    ) -> list[tuple[Exchange, Verdict]]:
        """The exchanges completed, inspected, and the list changes said, applied, in order;
        heard: the exchange whose reading said them (whose session a change is in)."""
        done = []
        for pair in said:
            if isinstance(pair, Changed):
                # Its session: the GET's Mcp-Session-Id, else the one the POST endpoint names.
                at = (heard or Exchange(method="GET", url=pair.url)).model_copy(
                    update={"url": pair.url}
                )
                self.tool_servers.list_changed((endpoint(pair.url), served_session(at)))
                continue
            exchange = pair.exchange.model_copy(update={"api": "mcp"})
            verdict = self.inspect(exchange)
            if pair.unanswered is not None and exchange.status is None:
                verdict.outcome = "client_gone"  # it hung up on the POST, and no answer came
                verdict.reason = f"the client hung up before the answer; {pair.unanswered}"
            elif pair.unanswered is not None:
                before = [verdict.reason] if verdict.reason else []
                verdict.reason = "; ".join([*before, pair.unanswered])
            done.append((exchange, verdict))
        return done

    def inspect(
        self,
        exchange: Exchange,
        prior: Mapping[str, Sequence[str]] | None = None,
        application: str | None = None,
    ) -> Verdict:
        """inspect() with this session's memory; prior replaces the recent calls (a Realtime
        turn brings the calls its socket owed). application: who sent a model request, which
        its declared tools are pinned under (applications.py)."""
        calls = self._recalled if prior is None else prior
        # The MCP session an exchange is in, looked up only when some session is known.
        key = _server_key(exchange) if self.tool_servers else None
        verdict = inspect(
            exchange,
            calls,
            validators=self.validators,
            tool_server=self.tool_servers.get(key) if key is not None else None,
            definition_cache=self.definitions,
            routes=self.routes,
        )
        changes = self.pins.check(verdict.definitions, application)
        if changes:
            verdict.tool_changes = changes
        # Most turns hide nothing: the set is made only for those that do.
        hiding = (
            {h.tool for h in verdict.hidden_text if h.part == "definition"}
            if verdict.hidden_text
            else None
        )
        if hiding:
            new = self.pins.first_hidden(verdict.definitions, hiding, application)
            verdict.hidden_text = [
                h for h in verdict.hidden_text if h.part == "result" or h.tool in new
            ]
        if verdict.tool_server is not None:
            key = key or _server_key(exchange)
            self.tool_servers.keep(key, verdict.tool_server, verdict, len(exchange.response_body))
            self.clock.tool(" ".join(filter(None, key)), exchange, verdict)
            return verdict
        if verdict.scope == "turn":
            self.clock.turn(exchange, verdict)
        response_id = verdict.response_id
        if verdict.api != "responses" or not response_id or verdict.state is None:
            return verdict
        first = self.state.claim(response_id)
        if exchange.method.upper() == "GET" and not first:
            # Polling a finished background response again, or reading back one
            # the proxy saw created: it was counted when it first finished.
            return Verdict(
                api=verdict.api,
                outcome="inspected",
                status=verdict.status,
                stream=verdict.stream,
                model=verdict.model,
                response_id=response_id,
                reason=f"response {response_id} was already counted when it reached its final status",
            )
        if verdict.awaiting:
            self.state.remember(response_id, verdict.awaiting)
        return verdict


def _server_key(exchange: Exchange) -> ServerKey:
    return endpoint(exchange.url), served_session(exchange)


def _mcp(exchange: Exchange) -> bool:
    api = exchange.api or detect_api(exchange.method, exchange.url, exchange.request_body)
    return api == "mcp"


def legacy_stream(exchange: Exchange) -> bool:
    """A recorded GET stream of MCP's legacy transport: it opens with an `endpoint` event."""
    if exchange.method.upper() != "GET" or exchange.status != 200:
        return False
    if "text/event-stream" not in header(exchange.response_headers, "content-type").lower():
        return False
    head = exchange.response_body[:512]
    return exchange.api == "mcp" or b"event: endpoint" in head or b"event:endpoint" in head


def with_ending(verdict: Verdict, note: str | None, failure: str | None) -> Verdict:
    """What arrived is still reported; how the exchange was cut off says whose doing it was.

    failure: the upstream broke it off (the flow counts as its error). note: the
    client did (said beside the reason).
    """
    if failure is not None:
        verdict.outcome = "upstream_error"
        verdict.reason = f"the upstream failed: {failure}"
    elif note is not None and verdict.status is None:
        # No answer had come: nothing failed upstream; the client gave up first.
        verdict.outcome = "client_gone"
        verdict.reason = f"the client hung up before the answer ({note})"
    elif note is not None and verdict.reason is not None:
        verdict.reason = f"{verdict.reason} ({note})"
    return verdict
