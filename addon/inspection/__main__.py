"""The inspector process: `python -m tooltap.addon.inspection`, started by the proxy.

It reads length-prefixed pickled records from a pipe, serves /metrics, writes
the log to the stdout it inherits, and folds in the counts only the proxy can
make (flows it dropped, errors in its hooks and tap), which the proxy keeps in
a small table of shared memory.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import select
import signal
import sys
import time
from collections.abc import Callable

from .. import options
from ..handover.budget import MiB, exit_at_once, map_large_allocations, return_freed_memory
from ..handover.counts import SharedCounts
from ..handover.record import FrameReader, Record
from ..sinks.log import LogSink
from ..sinks.metrics import Metrics
from .inspector import Inspector
from .state import await_first_answer, open_state

logger = logging.getLogger("tooltap")
RETURN_AFTER = 32 * MiB  # bodies inspected before freed memory is worth giving back
FOLD_EVERY = 1.0  # seconds: the proxy's counts reach the metrics at least this often
# Seconds the inspector waits once the pipe has work again after running dry, so that records
# that come close together are handled one after another on warm caches: under a steady
# sequential load a record then costs 8-20% less CPU (bench/README.md). Log lines wait, not traffic.
GATHER = 0.01


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tooltap.addon.inspection")
    parser.add_argument(
        "--records", type=int, required=True, help="fd of the pipe the proxy writes"
    )
    parser.add_argument("--status", type=int, required=True, help="fd to report 'ready PORT' on")
    parser.add_argument("--counts", type=int, required=True, help="fd of the shared count table")
    parser.add_argument(
        "--settings", type=json.loads, required=True, help="the inspection settings, as JSON"
    )
    args = parser.parse_args(argv)
    settings = options.defaults() | args.settings
    logging.basicConfig(stream=sys.stderr, format="tooltap inspector: %(message)s")
    # Ctrl-C reaches the whole process group: the proxy stops, then closes the
    # pipe, and this process finishes what it was handed before it exits.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(OSError):
        os.nice(10)  # forwarding comes first when the cores are busy
    map_large_allocations()

    metrics = Metrics(settings["tooltap_model_labels"])
    host, port = settings["tooltap_metrics_host"], settings["tooltap_metrics_port"]
    with os.fdopen(args.status, "w") as status:
        try:
            port = metrics.serve(host, port)
        except OSError as exc:
            status.write(f"error cannot serve metrics on {host}:{port}: {exc}\n")
            return 2
        status.write(f"ready {port}\n")
    counts = SharedCounts(args.counts)
    log_file = settings["tooltap_log_file"]
    stream = open(log_file, "a", encoding="utf-8") if log_file else sys.stdout  # noqa: SIM115
    sink = LogSink(settings["tooltap_log_format"], settings["tooltap_log_arguments"], stream)
    state = open_state(settings, metrics.state_error)
    await_first_answer(state)  # the proxy's records queue meanwhile
    inspector = Inspector.of(settings, sink, metrics, state)
    os.set_blocking(args.records, False)
    stopping: list[int] = []  # SIGTERM: the proxy will not wait any longer
    signal.signal(signal.SIGTERM, lambda number, _frame: stopping.append(number))
    try:
        serve(
            FrameReader(args.records), inspector.handle, counts, metrics, stopping,
            tick=inspector.tick,
        )  # fmt: skip
    finally:
        inspector.close()
        counts.fold_into(metrics)
        metrics.close()
        counts.close()
        if stream is not sys.stdout:
            stream.close()
    return 0


def serve(
    frames: FrameReader,
    handle: Callable[[Record], None],
    counts: SharedCounts,
    metrics: Metrics,
    stopping: list[int],
    *,
    tick: Callable[[float], None] = lambda _now: None,
    gather: float = GATHER,
) -> None:
    """Handle the proxy's records in order until it closes the pipe, or until `stopping`.

    One at a time: the next record is read only once this one is handled, so a
    burst waits in the pipe and the proxy's backlog rather than in a queue here;
    all of it holds the proxy's memory budget until the count table says it was
    handled. What is not handled at a stop, the proxy counts and says.
    """
    inspected = 0  # bytes since memory was last given back
    folded = time.monotonic() - FOLD_EVERY  # when the proxy's counts were last folded in
    while not frames.closed and not stopping:
        record = frames.read()
        if record is None:
            # Folded in once a second, not each time the pipe runs dry: under a steady load
            # that is after every record, and a fold costs a tenth of inspecting one.
            if time.monotonic() - folded >= FOLD_EVERY:
                counts.fold_into(metrics)
                folded = time.monotonic()
                _tick(tick, metrics)
            # Wake by the next fold at the latest, so the proxy's counts show up while idle.
            wait = max(0.0, FOLD_EVERY - (time.monotonic() - folded))
            readable, _, _ = select.select([frames.fd], [], [], wait)
            if readable:
                time.sleep(gather)  # what follows it closely is handled in the same run
            elif inspected >= RETURN_AFTER:
                return_freed_memory()  # idle after a burst: the peak goes back
                inspected = 0
            continue
        try:
            handle(record)
        except Exception:
            metrics.internal_error("worker")
            logger.exception("error while inspecting a flow")
        api, held = record.api, record.held
        inspected += len(record.request_body) + len(record.response_body)
        del record  # its bodies are freed before the proxy counts their budget free
        counts.handled(api, held)
        if time.monotonic() - folded >= FOLD_EVERY:  # busy: still folded in once a second
            counts.fold_into(metrics)
            folded = time.monotonic()
            _tick(tick, metrics)


def _tick(tick: Callable[[float], None], metrics: Metrics) -> None:
    """What waits on the clock (the calls owed past the deadline), once a second at most."""
    try:
        tick(time.time())
    except Exception:
        metrics.internal_error("worker")
        logger.exception("error while watching for overdue calls")


if __name__ == "__main__":
    exit_at_once(main())
