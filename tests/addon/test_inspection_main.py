"""The inspector process's loop (tooltap.addon.inspection.__main__), on a real pipe."""

import os
import threading
import time

from support.pipes import in_the_pipe

from tooltap.addon.handover.counts import SharedCounts
from tooltap.addon.handover.record import FrameReader, Record, encode
from tooltap.addon.inspection.__main__ import serve


def test_the_inspector_reads_the_next_record_only_once_it_has_handled_this_one(metrics):
    records = [
        Record("chat", path=f"/v1/chat/completions?n={n}", request_body=b"{}" * 100 * n,
               status=200, response_body=b"x" * 1_000 * n, held=1_200 * n)
        for n in range(1, 4)
    ]  # fmt: skip
    frames = [b"".join(encode(r)) for r in records]
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    os.write(write_end, b"".join(frames))  # the whole burst is waiting
    os.close(write_end)
    counts = SharedCounts()
    # Each record's path, what was left in the pipe, and the budget counted handled before it.
    handled: list[tuple[str, int, int]] = []

    def handle(record: Record) -> None:
        handled.append((record.path, in_the_pipe(read_end), counts.handled_bytes()))

    try:
        serve(FrameReader(read_end), handle, counts, metrics, stopping=[])
        assert counts.handled_bytes() == 1_200 + 2_400 + 3_600
    finally:
        counts.close()
        os.close(read_end)
    assert handled == [
        (records[0].path, len(frames[1]) + len(frames[2]), 0),
        (records[1].path, len(frames[2]), 1_200),
        (records[2].path, 0, 1_200 + 2_400),
    ]


class _CountedFolds(SharedCounts):
    def __init__(self) -> None:
        super().__init__()
        self.folds = 0

    def fold_into(self, metrics) -> None:
        self.folds += 1
        super().fold_into(metrics)


def test_the_proxys_counts_are_folded_in_once_a_second_not_after_every_record(metrics):
    """A steady load empties the pipe after every record; folding then costs a tenth of
    inspecting one, so it waits for its second."""
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    counts = _CountedFolds()
    handled = threading.Semaphore(0)
    sent = 20

    def feed() -> None:  # one record at a time, the next once this one is handled
        for n in range(sent):
            os.write(
                write_end, b"".join(encode(Record("chat", path=f"/v1/chat/completions?n={n}")))
            )
            handled.acquire(timeout=10)
        os.close(write_end)

    writer = threading.Thread(target=feed)
    started = time.monotonic()
    writer.start()
    try:
        serve(FrameReader(read_end), lambda _record: handled.release(), counts, metrics, [])
        took = time.monotonic() - started
        writer.join(timeout=10)
        assert counts.handled_records() == sent
    finally:
        counts.close()
        os.close(read_end)
    # The first at once, then at most one a second (and one on the way out, by main()).
    assert 1 <= counts.folds <= 1 + int(took)


def test_records_that_come_close_together_after_a_pause_are_handled_in_one_run(metrics):
    """Once the pipe has work again, the inspector waits `gather` before reading it: a record
    that follows the first within that time is already there when the first is handled."""
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    counts = SharedCounts()
    waiting: list[int] = []  # bytes in the pipe behind each record, as it is handled
    second = b"".join(encode(Record("chat", path="/v1/chat/completions?n=2")))

    def feed() -> None:
        time.sleep(0.05)  # the inspector finds the pipe empty first
        os.write(write_end, b"".join(encode(Record("chat", path="/v1/chat/completions?n=1"))))
        time.sleep(0.05)  # well inside the gather below
        os.write(write_end, second)
        os.close(write_end)

    writer = threading.Thread(target=feed)
    writer.start()
    try:
        serve(
            FrameReader(read_end), lambda _r: waiting.append(in_the_pipe(read_end)), counts,
            metrics, [], gather=1.0,
        )  # fmt: skip
        writer.join(timeout=10)
    finally:
        counts.close()
        os.close(read_end)
    assert waiting == [len(second), 0]  # read at once, without gathering, the first was alone
