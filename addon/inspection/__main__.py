"""The inspector process: `python -m tooltap.addon.inspection`, started by the proxy.

It reads length-prefixed pickled records from a pipe, serves /metrics, writes
the log to the stdout it inherits, and folds in the counts only the proxy can
make (flows it dropped, errors in its hooks and tap), which the proxy keeps in
a small table of shared memory.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import select
import signal
import sys

from ..handover.counts import SharedCounts
from ..handover.record import _frames
from ..sinks.log import ARGUMENT_MODES, LOG_FORMATS, LogSink
from ..sinks.metrics import Metrics
from .inspector import Inspector

logger = logging.getLogger("tooltap")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tooltap.addon.inspection")
    parser.add_argument(
        "--records", type=int, required=True, help="fd of the pipe the proxy writes"
    )
    parser.add_argument("--status", type=int, required=True, help="fd to report 'ready PORT' on")
    parser.add_argument("--counts", type=int, required=True, help="fd of the shared count table")
    parser.add_argument("--metrics-host", default="127.0.0.1")
    parser.add_argument("--metrics-port", type=int, default=9464)
    parser.add_argument("--log-format", choices=LOG_FORMATS, default="auto")
    parser.add_argument("--log-file", default="", help="append the log here instead of stdout")
    parser.add_argument("--log-arguments", choices=ARGUMENT_MODES, default="raw")
    parser.add_argument("--model-labels", type=int, default=50)
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, format="tooltap inspector: %(message)s")
    # Ctrl-C reaches the whole process group: the proxy stops, then closes the
    # pipe, and this process finishes what it was handed before it exits.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(OSError):
        os.nice(10)  # forwarding comes first when the cores are busy

    metrics = Metrics(args.model_labels)
    with os.fdopen(args.status, "w") as status:
        try:
            port = metrics.serve(args.metrics_host, args.metrics_port)
        except OSError as exc:
            status.write(
                f"error cannot serve metrics on {args.metrics_host}:{args.metrics_port}: {exc}\n"
            )
            return 2
        status.write(f"ready {port}\n")
    counts = SharedCounts(args.counts)
    faults = os.environ.get("TOOLTAP_INJECT_FAULT", "").split(",")
    stream = open(args.log_file, "a", encoding="utf-8") if args.log_file else sys.stdout  # noqa: SIM115
    inspector = Inspector(LogSink(args.log_format, args.log_arguments, stream), metrics, faults)
    buffer = bytearray()
    try:
        while True:
            # Wake at least once a second, so the proxy's counts show up while idle.
            readable, _, _ = select.select([args.records], [], [], 1.0)
            if readable:
                data = os.read(args.records, 1 << 20)
                if not data:
                    break  # the proxy closed the pipe: everything is handled
                buffer += data
                for record in _frames(buffer):
                    try:
                        inspector.handle(record)
                    except Exception:
                        metrics.internal_error("worker")
                        logger.exception("error while inspecting a flow")
            counts.fold_into(metrics)
    finally:
        counts.fold_into(metrics)
        metrics.close()
        counts.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
