"""What a session remembers across exchanges: in this process, or shared by replicas in Redis.

Two things carry from one exchange to the next, both keyed by a response id:
the calls a Responses turn left for the client (a follow-up with
previous_response_id is checked against them) and whether the response was
already counted at its final status (a background response is polled, and
counted once). One replica sees them all; several replicas behind a
round-robin Service each see some, so `tooltap_state=redis://...` keeps them
in Redis, where every replica finds them.

Only the inspector uses a state, never the proxy's event loop. Redis holds
ids only (never arguments or bodies), under `tooltap:` keys that expire. When
it is slow or down, the replica's own memory answers for that exchange: a
finding may then be missed, never invented.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol
from urllib.parse import urlsplit

import orjson

logger = logging.getLogger("tooltap")

REMEMBERED = 10_000  # response ids each kind of memory keeps in this process
NAMESPACE = "tooltap:"
TIMEOUT = 0.1  # seconds a Redis command may take before this exchange does without it
BACKOFF = (0.25, 5.0)  # seconds before Redis is tried again after a failure: first, most


class State(Protocol):
    """The memory a Session keeps across exchanges, by response id."""

    def open_calls(self, response_id: str) -> list[str] | None:
        """The call ids that response left for the client, or None when it is unknown."""

    def remember(self, response_id: str, call_ids: list[str]) -> None:
        """That response left these calls for the client."""

    def claim(self, response_id: str) -> bool:
        """Mark the response counted; True only for the first claim of it."""

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

    def __init__(self, size: int = REMEMBERED) -> None:
        self.recent = RecentCalls(size)
        self.counted: OrderedDict[str, None] = OrderedDict()  # response ids, newest last
        self.size = size

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
    the response. A failed command is counted (`on_error`) and logged once
    until Redis answers again; after it, Redis is left alone for a backoff
    that doubles (BACKOFF), and each command skipped meanwhile is counted too.
    """

    def __init__(
        self,
        url: str,
        ttl: int,
        on_error: Callable[[], None],
        *,
        size: int = REMEMBERED,
        timeout: float = TIMEOUT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        import redis  # noqa: PLC0415 - an optional dependency: tooltap[redis]
        from redis.backoff import NoBackoff  # noqa: PLC0415
        from redis.retry import Retry  # noqa: PLC0415

        self.local = LocalState(size)
        self.ttl = ttl
        self.where = location(url)
        self._on_error = on_error
        self._clock = clock
        self._errors: tuple[type[BaseException], ...] = (redis.RedisError, OSError)
        # No retries inside the client: a failed command falls back at once, and the
        # backoff here decides when Redis is tried again.
        self.client: Any = redis.Redis.from_url(
            url,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry=Retry(NoBackoff(), 0),
            retry_on_timeout=False,
            health_check_interval=0,
        )
        self.down = False
        self._retry_at = 0.0
        self._backoff = BACKOFF[0]

    def open_calls(self, response_id: str) -> list[str] | None:
        found = self._shared(self.client.get, f"{NAMESPACE}open:{response_id}")
        shared = _call_ids(found) if isinstance(found, bytes) else None
        return shared if shared is not None else self.local.open_calls(response_id)

    def remember(self, response_id: str, call_ids: list[str]) -> None:
        self.local.remember(response_id, call_ids)
        value = orjson.dumps(call_ids)
        self._shared(self.client.set, f"{NAMESPACE}open:{response_id}", value, ex=self.ttl)

    def claim(self, response_id: str) -> bool:
        first_here = self.local.claim(response_id)
        key = f"{NAMESPACE}counted:{response_id}"
        first = self._shared(self.client.set, key, b"1", nx=True, ex=self.ttl)
        if first is _FAILED:
            return first_here
        return first_here and bool(first)

    def close(self) -> None:
        with contextlib.suppress(*self._errors):
            self.client.close()

    def _shared(self, command: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """The command's answer, or _FAILED when Redis did not give one (counted)."""
        if self.down and self._clock() < self._retry_at:
            self._on_error()
            return _FAILED
        try:
            answer = command(*args, **kwargs)
        except self._errors as exc:
            self._failed(exc)
            return _FAILED
        if self.down:
            self.down = False
            self._backoff = BACKOFF[0]
            logger.warning(
                "the shared state at %s answers again: replicas share their findings again",
                self.where,
            )
        return answer

    def _failed(self, exc: BaseException) -> None:
        self._on_error()
        self._retry_at = self._clock() + self._backoff
        self._backoff = min(self._backoff * 2, BACKOFF[1])
        if not self.down:
            self.down = True
            logger.warning(
                "the shared state at %s did not answer (%s): each replica uses its own memory "
                "until it does, so a follow-up or a poll that reaches another replica may go "
                "unmatched (tooltap_state_errors_total counts the misses)",
                self.where,
                exc,
            )


_FAILED = object()


def _call_ids(value: bytes) -> list[str] | None:
    """What RedisState.remember wrote; None for anything else under the key."""
    try:
        ids = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    if isinstance(ids, list) and all(isinstance(i, str) for i in ids):
        return ids
    return None


def open_state(settings: Mapping[str, Any], on_error: Callable[[], None]) -> State:
    """The state these settings ask for: Redis when tooltap_state names it, else local memory."""
    url = settings["tooltap_state"]
    if not url:
        return LocalState()
    return RedisState(url, settings["tooltap_state_ttl"], on_error)
