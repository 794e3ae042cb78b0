"""WebSocket messages, picked and batched on the proxy's event loop.

Bookkeeping only. A look at the head of each text message decides whether it
is held: audio, images and text deltas never are. Held messages are
mitmproxy's own bytes, kept by reference, and go to the inspection side in
batches: after a response's last event, when a batch is full, and when the
socket closes. Turns are split there, by the dialect's socket reader.
"""

from __future__ import annotations

from collections import Counter

from mitmproxy import http

from tooltap.core import Api
from tooltap.core.dialects import socket_reading

from ..handover.budget import Budget, MiB
from ..handover.record import Record, SocketBatch
from ..inspection.flows import socket_close, socket_ending

BATCH_MESSAGES = 256  # a batch goes at this many messages, or bytes, if no response ends first
BATCH_BYTES = MiB


class SocketTap:
    """One socket's messages on their way to inspection, a batch at a time."""

    def __init__(self, api: Api, flow: http.HTTPFlow) -> None:
        self.api = api
        self.reading = socket_reading(api)  # its cheap look at each message
        self.flow = flow
        self.messages: list[bytes] = []
        self.times: list[float] = []  # per held message, when it crossed the socket (epoch s)
        self.sources = bytearray()  # per held message, 1 when the client sent it
        self.seen = 0  # messages the socket carried so far
        self.first = 0  # ... before the current batch
        self.held = 0  # bytes of the batch, taken from the budget
        self.lost = False  # a message inspection needed went by unread before this batch
        self._losing = False  # ... after it: the next batch says so
        self.skipped: Counter[str] = Counter()
        self.started = self.ended = 0.0  # the batch's first and last held message (epoch s)

    def take(self, budget: Budget) -> bool:
        """Hold the newest message if inspection needs it; True when the batch should go now."""
        websocket = self.flow.websocket
        if websocket is None or not websocket.messages:
            return False
        message = websocket.messages[-1]
        self.seen += 1
        reading = self.reading
        if not reading.readable(message.is_text):
            self.skipped["binary"] += 1
            return False
        content = message.content
        kind = reading.kind(content)
        if not reading.needed(content, kind):
            return False
        if not budget.take(len(content)):
            self.skipped["over_budget"] += 1
            if self.messages:  # what came before the loss goes now, unaffected by it
                self._losing = True
                return True
            self.lost = True
            return False
        if not self.messages:
            self.started = message.timestamp
        self.ended = message.timestamp
        self.messages.append(content)
        self.times.append(message.timestamp)
        self.sources.append(message.from_client)
        self.held += len(content)
        return (
            reading.ends_turn(content, kind)
            or len(self.messages) >= BATCH_MESSAGES
            or self.held >= BATCH_BYTES
        )

    def batch(self, ended: bool = False, let_go: str | None = None) -> Record:
        """The held messages as a record, which now owns them and their budget.

        ended: the socket closed after them. let_go: tooltap stops following it, and why.
        """
        flow = self.flow
        record = Record.of(
            self.api,
            flow.request,
            flow=flow.id,
            chunks=self.messages,
            held=self.held,
            started=self.started,
            ended=self.ended,
            arrived=self.times,
            socket=SocketBatch(
                flow.id,
                bytes(self.sources),
                self.first,
                self.lost,
                ended,
                socket_close(flow) if ended else None,
                dict(self.skipped),
                let_go,
            ),
        )
        if ended and flow.websocket is not None:
            record.note, record.failure = socket_ending(flow)
        self.messages, self.times, self.sources, self.held = [], [], bytearray(), 0
        self.first, self.lost, self._losing = self.seen, self._losing, False
        self.skipped.clear()
        return record

    def refused(self, record: Record) -> None:
        """The batch could not be handed over: what it held went by unread."""
        if record.socket is not None:
            self.skipped.update(record.socket.skipped)
        self.skipped["queue_full"] += len(record.chunks)
        self.lost = True
