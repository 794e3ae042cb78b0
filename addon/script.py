"""The file to pass to `mitmdump -s` (`tooltap script-path` prints its path)."""

import os
import sys

# mitmproxy puts a script's own folder first on sys.path, and in this folder
# tooltap.py, the addon module, would shadow the tooltap package itself.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

from tooltap.addon.tooltap import Tooltap  # noqa: E402 - after the sys.path repair above

addons = [Tooltap()]
