"""mitmdump -s script: the tooltap addon with a stream tap that raises on every chunk."""

from tooltap.addon.proxy.addon import Tooltap


def _fault(where: str) -> None:
    if where == "tap":
        raise RuntimeError("injected fault in the stream tap")


addons = [Tooltap(fault=_fault)]
