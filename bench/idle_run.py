"""`tooltap run` whose addon does nothing with the flows: the shell alone, for `--only apart`.

Run as a program, it is `tooltap run` with this file as the mitmdump script; loaded as that
script, it gives the addons `tooltap run` loads, with tooltap's flow hooks made to return at
once. Everything else stays: the options, the inspector process (idle), the metrics and health
endpoints, the sub-addons and the process settings. Not shipped.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.variants import EmptyHooks
from tooltap.addon.proxy.addon import Tooltap
from tooltap.addon.web.annotate import WebAnnotations


class Idle(EmptyHooks, Tooltap):
    """tooltap's addon with its per-flow hooks doing nothing: no record, no hand-over."""

    name = Tooltap.name  # as `tooltap run` has it, not the experiment's


if __name__ == "__main__":
    from tooltap.addon.commands import run
    from tooltap.addon.commands.cli import main

    run.SCRIPT = Path(__file__).resolve()
    sys.exit(main())
else:
    addons = [WebAnnotations(), Idle()]
