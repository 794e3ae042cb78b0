"""One inspect-and-remember session: what the live proxy, audit and demo share.

tooltap.core.inspect is pure; what must carry from one exchange to the next
lives in the session's state (state.py), bounded: the calls each recent
Responses turn left for the client (for follow-ups with previous_response_id),
and the response ids already counted at a final status (a background response
is polled, and counted once). What each recent MCP session said of its server
(its name, the tools it listed, with their schemas) stays in this process: it
is more than ids, which is all the shared state holds.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

from tooltap.core import Exchange, ToolServer, ValidatorCache, Verdict, inspect, served_session

from .state import REMEMBERED, LocalState, Recalled, State

TOOL_SESSIONS = 1_000  # MCP sessions remembered (with their tool schemas), the newest only


class Session:
    """inspect(), with the memory one stream of exchanges needs. Not thread-safe: one owner.

    state: where that memory lives (this process's by default; Redis, shared by
    replicas, with tooltap_state).
    """

    def __init__(self, size: int = REMEMBERED, state: State | None = None) -> None:
        self.state = state if state is not None else LocalState(size)
        self.validators = ValidatorCache()
        # (endpoint, session) -> what the MCP session said of its server, newest last
        self.tool_servers: OrderedDict[tuple[str, str | None], ToolServer] = OrderedDict()

    def inspect(
        self, exchange: Exchange, prior: Mapping[str, Sequence[str]] | None = None
    ) -> Verdict:
        """inspect() with this session's memory; prior replaces the recent calls (a Realtime
        turn brings the calls its socket owed)."""
        calls = Recalled(self.state) if prior is None else prior
        key = (_endpoint(exchange.url), served_session(exchange))
        verdict = inspect(
            exchange, calls, validators=self.validators, tool_server=self.tool_servers.get(key)
        )
        if verdict.tool_server is not None:
            self.tool_servers[key] = verdict.tool_server
            self.tool_servers.move_to_end(key)
            if len(self.tool_servers) > TOOL_SESSIONS:
                self.tool_servers.popitem(last=False)
            return verdict
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


def _endpoint(url: str) -> str:
    """An MCP server's endpoint: the URL without its query."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path}"


def with_ending(verdict: Verdict, note: str | None, failure: str | None) -> Verdict:
    """What arrived is still reported; how the exchange was cut off says whose doing it was.

    failure: the upstream broke it off (the flow counts as its error). note: the
    client did (said beside the reason).
    """
    if failure is not None:
        verdict.outcome = "upstream_error"
        verdict.reason = f"the upstream failed: {failure}"
    elif note is not None and verdict.reason is not None:
        verdict.reason = f"{verdict.reason} ({note})"
    return verdict
