"""The inspector process's loop (tooltap.addon.inspection.__main__), on a real pipe."""

import os

from support.pipes import in_the_pipe

from tooltap.addon.handover.counts import SharedCounts
from tooltap.addon.handover.record import FrameReader, Record, encode
from tooltap.addon.inspection.__main__ import serve


def test_the_inspector_reads_the_next_record_only_once_it_has_handled_this_one(metrics):
    records = [
        Record("chat", path=f"/v1/chat/completions?n={n}", request_body=b"{}" * 100 * n,
               status=200, response_body=b"x" * 1_000 * n)
        for n in range(1, 4)
    ]  # fmt: skip
    frames = [b"".join(encode(r)) for r in records]
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    os.write(write_end, b"".join(frames))  # the whole burst is waiting
    os.close(write_end)
    handled: list[tuple[str, int]] = []  # each record's path, and what was left in the pipe

    def handle(record: Record) -> None:
        handled.append((record.path, in_the_pipe(read_end)))

    counts = SharedCounts()
    try:
        serve(FrameReader(read_end), handle, counts, metrics, stopping=[])
    finally:
        counts.close()
        os.close(read_end)
    assert handled == [
        (records[0].path, len(frames[1]) + len(frames[2])),
        (records[1].path, len(frames[2])),
        (records[2].path, 0),
    ]
