"""mitmdump -s script: the tooltap addon with a fault injected where TOOLTAP_FAULT says.

"tap" (the default): the stream tap raises on every chunk; "hook": every hook raises.
"""

import os

from tooltap.addon.proxy.addon import Tooltap

WHERE = os.environ.get("TOOLTAP_FAULT", "tap")


def _fault(where: str) -> None:
    if where == WHERE:
        raise RuntimeError(f"injected fault: {where}")


addons = [Tooltap(fault=_fault)]
