"""mitmdump -s script: tooltap's addon as changed by TOOLTAP_BENCH_VARIANT (see bench/variants.py).

A script is loaded under a module name nobody can import; the variants live
in bench.variants so that a spawned worker process can import them.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.variants import addons as _addons

addons = _addons(os.environ.get("TOOLTAP_BENCH_VARIANT", "shipped"))
