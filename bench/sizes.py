"""How big a run is: `full` (the figures bench/README.md publishes), `quick` (a first look, a
few minutes: `--quick`) or `smoke` (each step once at a tiny size, waiting for no quiet machine:
`--smoke`; it proves the benchmarks still run end to end, and its figures mean nothing)."""

from __future__ import annotations

from typing import Literal

Size = Literal["full", "quick", "smoke"]
