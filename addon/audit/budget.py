"""What fails an audit: the findings `--fail-on` names, past a baseline, and the exposure budget.

A baseline counts findings by a key that holds no id (the file, the request's
method and path, the finding, and what tells it apart: call names, schema
paths, where in the request), so that a cassette recorded again, with new ids,
still matches it. A finding fails only past the count its key has there.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from tooltap.core.findings import DEFAULT, NAMES, Finding

from .inputs import Item

FORMAT = "tooltap-baseline/1"


class Key(NamedTuple):
    source: str
    request: str
    finding: str
    detail: str


def parse_fail_on(text: str) -> frozenset[str]:
    """A comma-separated set of finding names; `default` stands for the default set."""
    names = {part.strip() for part in text.split(",") if part.strip()}
    if "default" in names:
        names = (names - {"default"}) | DEFAULT
    unknown = sorted(names - set(NAMES))
    if unknown:
        raise ValueError(
            f"unknown finding(s) {', '.join(unknown)}; known: default, {', '.join(NAMES)}"
        )
    return frozenset(names)


def parse_rate(text: str) -> float:
    """An exposure budget: a fraction (0.25) or a percentage (25%)."""
    value = float(text.removesuffix("%")) / (100 if text.endswith("%") else 1)
    if not 0 <= value <= 1:
        raise ValueError(f"{text!r} is not a rate between 0 and 1 (or 0% and 100%)")
    return value


def key_of(item: Item, finding: Finding) -> Key:
    """A finding's key: where it was found, and what tells it apart."""
    exchange = item.exchange
    request = f"{exchange.method} {urlsplit(exchange.url).path}" if exchange is not None else ""
    return Key(item.source or "", request, finding.name, finding.detail)


class Baseline:
    """Findings already known, by key, with how many times each was seen."""

    def __init__(self, counts: Counter[Key] | None = None) -> None:
        self.counts: Counter[Key] = counts or Counter()

    @classmethod
    def load(cls, path: str) -> Baseline:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ValueError(f"could not read the baseline {path}: {exc}") from exc
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"{path} is not a tooltap baseline (format {FORMAT})")
        counts: Counter[Key] = Counter()
        for row in data.get("findings", []):
            counts[Key(row["source"], row["request"], row["finding"], row["detail"])] += int(
                row["count"]
            )
        return cls(counts)

    def absorbs(self, key: Key) -> bool:
        """True when the baseline still holds one of this finding (and it is used up)."""
        if self.counts[key] > 0:
            self.counts[key] -= 1
            return True
        return False

    @staticmethod
    def write(path: str, seen: Counter[Key]) -> None:
        rows: list[dict[str, Any]] = [
            {**key._asdict(), "count": count} for key, count in sorted(seen.items())
        ]
        text = json.dumps({"format": FORMAT, "findings": rows}, indent=1, ensure_ascii=False)
        Path(path).write_text(text + "\n", encoding="utf-8")
