"""The sockets being followed, on the inspection side: one reader each, bounded.

Bounded in number (the least recently used reader is let go) and in bytes:
when the readers together hold more than the memory budget, the least
recently used ones let go of their turns in flight, which are counted as
skipped. A socket whose reader was let go is read on as one joined late.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Sequence
from typing import NamedTuple

from tooltap.core import Api, Verdict
from tooltap.core.dialects import socket_reader
from tooltap.core.sockets import Overdue, SocketReader, SocketTurn

from ..handover.record import SocketBatch
from .session import Session, with_ending

MAX_SOCKETS = 10_000


class Numbered(NamedTuple):
    """A turn read off a socket, with which socket (its flow's id) and its number there."""

    key: str
    number: int | None  # from 1; None: what the session said outside its turns
    turn: SocketTurn


class Sockets:
    """Readers by socket, the newest used last."""

    def __init__(self, max_turn: int, limit: int, size: int = MAX_SOCKETS) -> None:
        self.max_turn = max_turn
        self.limit = limit  # bytes all readers may hold
        self.size = size
        self.held = 0
        self.skipped: Counter[tuple[str, str]] = Counter()  # (api, reason): messages not used
        self._readers: OrderedDict[str, SocketReader] = OrderedDict()
        # Turns read per socket, kept when its reader is let go (it is read on, joined late).
        self._numbers: OrderedDict[str, int] = OrderedDict()

    def __len__(self) -> int:
        return len(self._readers)

    def read(
        self,
        api: Api,
        url: str,
        batch: SocketBatch,
        messages: list[bytes],
        times: Sequence[float | None] = (),
    ) -> list[Numbered]:
        """Feed one batch of a socket's messages (each at its time, when known); the turns it
        finished, in order, numbered (turns of other sockets whose readers this batch pushed
        out come with their own key)."""
        key = batch.key
        reader = self._readers.get(key)
        if reader is None:
            # Joining after the socket's first message: its start went by unread.
            late = batch.first > 0
            reader = self._readers[key] = socket_reader(api, url, self.max_turn, late=late)
        self._readers.move_to_end(key)
        before = reader.held
        turns = reader.lost() if batch.lost else []
        times = times if len(times) == len(messages) else [None] * len(messages)
        for message, source, at in zip(messages, batch.sources, times, strict=True):
            turns += reader.feed(message, bool(source), at)
        if batch.ended:
            turns += reader.close(batch.close)
            del self._readers[key]
        elif batch.let_go is not None:  # what is in flight will not be seen to its end
            turns += reader.lost(batch.let_go)
            del self._readers[key]
        self.held += reader.held - before
        self._count(reader)
        numbered = self._number(key, turns)
        for other, lost in self._trim(key):
            numbered += self._number(other, lost)
        if batch.ended or batch.let_go is not None:
            self._numbers.pop(key, None)
        return numbered

    def _number(self, key: str, turns: list[SocketTurn]) -> list[Numbered]:
        numbered = []
        for turn in turns:
            number = None
            if turn.said is None:  # a turn, not what the session said outside one
                number = self._numbers.get(key, 0) + 1
                self._numbers[key] = number
                self._numbers.move_to_end(key)
                if len(self._numbers) > self.size:
                    self._numbers.popitem(last=False)
            numbered.append(Numbered(key, number, turn))
        return numbered

    def overdue(self, now: float, deadline: float) -> list[tuple[str, SocketReader, Overdue]]:
        """The calls the open sockets owe past the deadline, each said once, with each
        socket's key (its flow's id)."""
        return [
            (key, reader, found)
            for key, reader in self._readers.items()
            for found in reader.overdue(now, deadline)
        ]

    def _count(self, reader: SocketReader) -> None:
        for reason, count in reader.skipped.items():
            self.skipped[reader.api, reason] += count
        reader.skipped.clear()

    def _trim(self, keep: str) -> list[tuple[str, list[SocketTurn]]]:
        """Over the byte limit or the count: the least recently used readers let go (the turns
        in flight each lost, by socket)."""
        turns: list[tuple[str, list[SocketTurn]]] = []
        for key in list(self._readers):
            if self.held <= self.limit and len(self._readers) <= self.size:
                break
            if key == keep:
                continue
            reader = self._readers.pop(key)
            self.held -= reader.held
            turns.append((key, reader.lost()))
            self._count(reader)
        kept = self._readers.get(keep)
        if kept is not None and self.held > self.limit:
            # This socket alone holds too much: it lets go of its turns in flight.
            self.held -= kept.held
            turns.append((keep, kept.lost()))
            self._count(kept)
        return turns


def ending(
    closed_by_client: bool | None, code: int | None, reason: str, error: str | None = None
) -> tuple[str | None, str | None]:
    """How a socket ended, as (note, failure): the client's doing, or the server's."""
    how = f"code {code}" + (f": {reason}" if reason else "")
    if closed_by_client:
        return f"the client closed the socket ({how})", None
    if error is not None:
        return None, f"the socket failed: {error}"
    return None, f"the server closed the socket ({how})"


def socket_verdict(
    session: Session,
    turn: SocketTurn,
    note: str | None = None,
    failure: str | None = None,
    application: str | None = None,
) -> Verdict:
    """A socket's turn inspected; one its socket's end cut off says how it ended, as for HTTP."""
    if turn.said is not None:
        return turn.said
    exchange = turn.exchange
    if turn.skipped is not None:
        return Verdict(
            api=exchange.api, outcome="skipped", reason=turn.skipped, transport="websocket"
        )
    verdict = session.inspect(exchange, turn.prior, application)
    return with_ending(verdict, note, failure) if turn.cut else verdict
