"""What a session remembers across exchanges: in this process, or shared by replicas in Redis.

Three things carry from one exchange to the next: keyed by a response id, the calls a
Responses turn left for the client (a follow-up with previous_response_id is checked against
them) and whether the response was already counted at its final status (a background response
is polled, and counted once); and, keyed by a call's id, when the response that issued it
ended (the follow-up that answers it says how long the tool took). One replica sees them all;
several replicas behind a round-robin Service each see some, so `tooltap_state=redis://...` keeps
them in Redis, where every replica finds them.

Only the inspector uses a state, never the proxy's event loop. Redis holds ids and times only
(never names, arguments or bodies), under `tooltap:` keys that expire; the tool's name of an
issued call stays in the memory of the replica that saw it issued. When Redis is slow or down,
the replica's own memory answers for that exchange: a finding may then be missed, never
invented.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol
from urllib.parse import urlsplit

import orjson

logger = logging.getLogger("tooltap")

REMEMBERED = 10_000  # response ids each kind of memory keeps in this process
ISSUED = 50_000  # calls awaiting their answer kept in this process, the newest
UNNAMED = "unnamed:"  # a call whose API gave no id, by its tool and arguments
AMBIGUOUS = (None, -1.0)  # such a call issued twice before an answer: neither is timed
AMBIGUOUS_VALUE = b"ambiguous"  # ... as Redis holds it
NAMESPACE = "tooltap:"
TIMEOUT = 0.1  # seconds a Redis command may take before this exchange does without it
FIRST_ANSWER = 2.0  # seconds a starting inspector waits for Redis before its first record
BACKOFF = (0.25, 5.0)  # seconds before Redis is tried again after a failure: first, most


Answered = tuple[str | None, float]  # an issued call's tool (None: not known here), and when


class State(Protocol):
    """The memory a Session keeps across exchanges, by response id."""

    def open_calls(self, response_id: str) -> list[str] | None:
        """The call ids that response left for the client, or None when it is unknown."""

    def remember(self, response_id: str, call_ids: list[str]) -> None:
        """That response left these calls for the client."""

    def claim(self, response_id: str) -> bool:
        """Mark the response counted; True only for the first claim of it."""

    def issue(self, calls: Mapping[str, tuple[str, float]]) -> None:
        """These calls (call id -> its tool's name, when the response that issued it ended)
        were handed to the client; a call already issued keeps its first time (a background
        response read again), and a call with no id issued twice (two calls alike) is timed by
        neither answer. Only the id and the time are shared."""

    def answer(self, call_ids: list[str]) -> dict[str, Answered]:
        """The issued calls these ids name, each taken: a call is answered once. A call issued
        on another replica comes without its tool's name (None)."""

    def close(self) -> None:
        """Release what the state holds open."""


class RecentCalls(OrderedDict[str, list[str]]):
    """response id -> the call ids it returned, the newest `size` responses only.

    Lets a follow-up with previous_response_id be checked against calls that
    live on the server; bounded so memory does not grow with traffic.
    """

    def __init__(self, size: int = REMEMBERED) -> None:
        super().__init__()
        self.size = size

    def remember(self, response_id: str, call_ids: list[str]) -> None:
        self[response_id] = call_ids
        self.move_to_end(response_id)
        while len(self) > self.size:
            self.popitem(last=False)


class LocalState:
    """This process's memory: bounded, the newest response ids kept. The default."""

    def __init__(self, size: int = REMEMBERED, issued: int = ISSUED) -> None:
        self.recent = RecentCalls(size)
        self.counted: OrderedDict[str, None] = OrderedDict()  # response ids, newest last
        self.size = size
        self.issued: OrderedDict[str, Answered] = OrderedDict()  # by call id
        self.issued_size = issued

    def open_calls(self, response_id: str) -> list[str] | None:
        return self.recent.get(response_id)

    def remember(self, response_id: str, call_ids: list[str]) -> None:
        self.recent.remember(response_id, call_ids)

    def claim(self, response_id: str) -> bool:
        if response_id in self.counted:
            return False
        self.counted[response_id] = None
        if len(self.counted) > self.size:
            self.counted.popitem(last=False)
        return True

    def issue(self, calls: Mapping[str, tuple[str, float]]) -> None:
        for call_id, issued in calls.items():
            if call_id not in self.issued:
                self.issued[call_id] = issued
            elif call_id.startswith(UNNAMED):  # two calls alike, neither with an id
                self.issued[call_id] = AMBIGUOUS  # never told apart: neither is timed
            self.issued.move_to_end(call_id)
        while len(self.issued) > self.issued_size:
            self.issued.popitem(last=False)

    def answer(self, call_ids: list[str]) -> dict[str, Answered]:
        taken = {c: self.issued.pop(c) for c in call_ids if c in self.issued}
        return {c: issued for c, issued in taken.items() if issued != AMBIGUOUS}

    def close(self) -> None:
        pass


class Recalled(Mapping[str, list[str]]):
    """A state read as the `prior` mapping core.inspect takes: asked only for the
    previous_response_id a request names, so the store is asked only then."""

    def __init__(self, state: State) -> None:
        self.state = state

    def __getitem__(self, response_id: str) -> list[str]:
        calls = self.state.open_calls(response_id)
        if calls is None:
            raise KeyError(response_id)
        return calls

    def __iter__(self) -> Iterator[str]:
        return iter(())  # what the store holds is looked up by id, never listed

    def __len__(self) -> int:
        return 0


def location(url: str) -> str:
    """Where a state URL points, without its credentials: what a log line may say."""
    parts = urlsplit(url)
    where = parts.hostname or "localhost"
    return f"{parts.scheme}://{where}:{parts.port or 6379}{parts.path}"


class RedisState:
    """Redis, shared by the replicas, with this process's memory beside it.

    Every write goes to both; a read prefers Redis and falls back to the local
    memory when Redis does not have it or does not answer. A claim is
    `SET tooltap:counted:<id> 1 NX EX ttl`: the first replica to set it counts
    the response. Connecting (a name lookup, a handshake) happens in a thread of
    its own, never in the inspector: until Redis answers there, and from a
    failed command until it answers again, every command is skipped and counted
    (`on_error`), a failure is logged once, and the thread tries again after a
    backoff that doubles (BACKOFF).
    """

    def __init__(
        self,
        url: str,
        ttl: int,
        on_error: Callable[[], None],
        *,
        size: int = REMEMBERED,
        timeout: float = TIMEOUT,
    ) -> None:
        import redis  # noqa: PLC0415 - an optional dependency: tooltap[redis]
        from redis.backoff import NoBackoff  # noqa: PLC0415
        from redis.retry import Retry  # noqa: PLC0415

        self.local = LocalState(size)
        self.ttl = ttl
        self.where = location(url)
        self._on_error = on_error
        self._errors: tuple[type[BaseException], ...] = (redis.RedisError, OSError)
        # No retries inside the client: a failed command falls back at once, and the
        # reconnecting thread decides when Redis is tried again.
        self.client: Any = redis.Redis.from_url(
            url,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry=Retry(NoBackoff(), 0),
            retry_on_timeout=False,
            health_check_interval=0,
        )
        self.answering = threading.Event()  # set while commands go to Redis
        self._stopping = threading.Event()
        self._said = False  # the failure is in the log, and Redis has not answered since
        self._connecting = threading.Lock()
        self._connect()

    def open_calls(self, response_id: str) -> list[str] | None:
        found = self.shared(self.client.get, f"{NAMESPACE}open:{response_id}")
        shared = _call_ids(found) if isinstance(found, bytes) else None
        return shared if shared is not None else self.local.open_calls(response_id)

    def remember(self, response_id: str, call_ids: list[str]) -> None:
        self.local.remember(response_id, call_ids)
        value = orjson.dumps(call_ids)
        self.shared(self.client.set, f"{NAMESPACE}open:{response_id}", value, ex=self.ttl)

    def claim(self, response_id: str) -> bool:
        first_here = self.local.claim(response_id)
        key = f"{NAMESPACE}counted:{response_id}"
        first = self.shared(self.client.set, key, b"1", nx=True, ex=self.ttl)
        if first is FAILED:
            return first_here
        return first_here and bool(first)

    def issue(self, calls: Mapping[str, tuple[str, float]]) -> None:
        self.local.issue(calls)
        if not calls:
            return
        pipe = self.client.pipeline(transaction=False)
        for call_id, (_, at) in calls.items():
            pipe.set(f"{NAMESPACE}issued:{call_id}", repr(at), nx=True, ex=self.ttl)
        written = self.shared(pipe.execute)
        if written is FAILED:
            return
        alike = [
            c for c, new in zip(calls, written, strict=True) if not new and c.startswith(UNNAMED)
        ]
        if alike:  # issued before, by another conversation: no answer can say which it is
            pipe = self.client.pipeline(transaction=False)
            for call_id in alike:
                pipe.set(f"{NAMESPACE}issued:{call_id}", AMBIGUOUS_VALUE, ex=self.ttl)
            self.shared(pipe.execute)

    def answer(self, call_ids: list[str]) -> dict[str, Answered]:
        here = self.local.answer(call_ids)
        if not call_ids:
            return here
        pipe = self.client.pipeline(transaction=False)
        for call_id in call_ids:
            pipe.getdel(f"{NAMESPACE}issued:{call_id}")  # taken: the call is answered once
        found = self.shared(pipe.execute)
        if found is FAILED:
            return here
        taken = dict(here)
        for call_id, value in zip(call_ids, found, strict=True):
            if value == AMBIGUOUS_VALUE:  # issued by two conversations: neither is timed
                taken.pop(call_id, None)
            elif (at := _issued(value)) is not None:  # the first issue's time, wherever it was
                taken[call_id] = (here.get(call_id, (None, at))[0], at)
        return taken

    def close(self) -> None:
        self._stopping.set()
        with contextlib.suppress(*self._errors):
            self.client.close()

    def shared(self, command: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """The command's answer, or FAILED when Redis did not give one (counted)."""
        if not self.answering.is_set():
            self._on_error()
            return FAILED
        try:
            return command(*args, **kwargs)
        except self._errors as exc:
            self._on_error()
            self.answering.clear()
            self._say_down(exc)
            self._connect()
            return FAILED

    def _say_down(self, exc: BaseException) -> None:
        """Once, until Redis answers again (a failed command, or the first try failed)."""
        if not self._said:
            self._said = True
            logger.warning(
                "the shared state at %s did not answer (%s): each replica uses its own "
                "memory until it does, so a follow-up or a poll that reaches another "
                "replica may go unmatched (tooltap_state_errors_total counts the misses)",
                self.where,
                exc,
            )

    def _connect(self) -> None:
        """Try Redis in a thread of its own until it answers, waiting longer after each miss."""
        if self._connecting.acquire(blocking=False):
            threading.Thread(target=self._reconnect, name="tooltap: state", daemon=True).start()

    def _reconnect(self) -> None:
        answered = False
        try:
            for wait in backoff():
                try:
                    self.client.ping()
                except self._errors as exc:
                    if self._stopping.is_set():
                        return  # closed meanwhile: nothing to say
                    self._say_down(exc)
                    if self._stopping.wait(wait):
                        return
                    continue
                except Exception:
                    if self._stopping.is_set():
                        return  # closed under the ping: redis-py reads a socket it closed
                    raise
                answered = True
                break
        finally:
            # Free before commands resume: a command that fails next starts the next try.
            self._connecting.release()
        if answered:
            if self._said:
                self._said = False
                logger.warning(
                    "the shared state at %s answers again: replicas share their findings again",
                    self.where,
                )
            self.answering.set()


def backoff() -> Iterator[float]:
    """Seconds between tries at Redis: doubling from the first to the most, then the most."""
    wait = BACKOFF[0]
    while True:
        yield wait
        wait = min(wait * 2, BACKOFF[1])


FAILED = object()


def _call_ids(value: bytes) -> list[str] | None:
    """What RedisState.remember wrote; None for anything else under the key."""
    try:
        ids = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    if isinstance(ids, list) and all(isinstance(i, str) for i in ids):
        return ids
    return None


def _issued(value: Any) -> float | None:
    """The time RedisState.issue wrote; None for anything else. (A replica of the version
    before wrote the tool's name after it: read during a rolling update, it is left out.)"""
    if not isinstance(value, bytes):
        return None
    at = value.decode("utf-8", "replace").partition(" ")[0]
    try:
        return float(at)
    except ValueError:
        return None


def await_first_answer(state: State, timeout: float = FIRST_ANSWER) -> None:
    """Wait, at most `timeout`, for Redis to answer a starting inspector: the first exchanges
    would otherwise use this replica's memory alone (a proxy listens before Redis answers), and
    their pins and ids be missed by the other replicas. Traffic waits for none of it: its
    records queue meanwhile."""
    if isinstance(state, RedisState):
        state.answering.wait(timeout)


def open_state(settings: Mapping[str, Any], on_error: Callable[[], None]) -> State:
    """The state these settings ask for: Redis when tooltap_state names it, else local memory."""
    url = settings["tooltap_state"]
    if not url:
        return LocalState()
    return RedisState(url, settings["tooltap_state_ttl"], on_error)
