"""The memory budget: taking never waits, and what was freed elsewhere is counted back first."""

import subprocess
import sys

from tooltap.addon.handover.budget import Budget


def test_a_take_that_does_not_fit_is_refused_and_holds_nothing():
    budget = Budget(100)
    assert budget.take(60) and not budget.take(41)
    assert (budget.used, budget.peak) == (60, 60)
    budget.give(60)
    assert (budget.used, budget.peak) == (0, 60)


def test_before_refusing_a_take_the_budget_reclaims_what_the_inspector_freed():
    budget = Budget(100)
    freed = [0, 50]  # what the inspector process had handled, on each look

    def reclaim() -> None:
        budget.give(freed.pop(0))

    budget.reclaim = reclaim
    assert budget.take(80)
    assert freed == [0, 50]  # it fitted: not asked
    assert not budget.take(30)  # asked, nothing freed yet: refused
    assert budget.take(30)  # asked again: 50 freed, so it fits
    assert (budget.used, budget.peak, freed) == (60, 80, [])


def test_socket_reads_stay_below_the_mmap_threshold():
    # asyncio allocates its receive buffer on every read: at the threshold or above it, each
    # read would cost the proxy an mmap, an mremap and a munmap.
    from asyncio.selector_events import _SelectorSocketTransport

    from tooltap.addon.handover.budget import MMAP_THRESHOLD

    assert _SelectorSocketTransport.max_size < MMAP_THRESHOLD


def test_a_process_that_exits_at_once_runs_its_exit_handlers_and_loses_no_output():
    """stdout to a pipe is block-buffered: what is still in the buffer, and what the handlers
    print, reach the pipe, and the exit code is the one given."""
    code = (
        "import atexit, sys\n"
        "from tooltap.addon.handover.budget import exit_at_once\n"
        "atexit.register(lambda: print('the handler ran', file=sys.stderr))\n"
        "sys.stdout.write('a line still in the buffer\\n')\n"
        "exit_at_once(3)\n"
        "print('never')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout, done.stderr) == (
        3, "a line still in the buffer\n", "the handler ran\n",
    )  # fmt: skip
