"""A file of recorded exchanges read once, as the corpus tests read each: its records, and the
verdicts tooltap gives them in file order, in one session (the memory the proxy and audit keep).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tooltap.addon.audit.inputs import RecordedExchange
from tooltap.addon.inspection.session import Session
from tooltap.core import Exchange, Verdict

FOLDER = Path(__file__).parents[1] / "corpus"


def exchange(record: dict[str, Any]) -> Exchange:
    """A recording as the audit reads a JSONL line (binary bodies from their base64)."""
    return RecordedExchange.model_validate(record).exchange()


@dataclass
class Corpus:
    path: Path
    records: list[dict[str, Any]]
    verdicts: list[Verdict]

    def where(self, index: int) -> str:
        """An exchange named for a failure message: its file, its index among those read, and
        where it was recorded."""
        return f"{self.path.name} #{index} {self.records[index]['source']}"

    def accepted(self, index: int) -> bool:
        return 200 <= self.records[index]["status"] < 300


def read(path: Path, keep: Callable[[dict[str, Any]], bool] = lambda record: True) -> Corpus:
    """The records of a file that `keep` takes, and tooltap's verdicts on them."""
    lines = path.read_text(encoding="utf-8").splitlines()
    records = [record for record in map(json.loads, filter(str.strip, lines)) if keep(record)]
    session = Session()
    return Corpus(path, records, [inspected(session, record, path) for record in records])


def inspected(session: Session, record: dict[str, Any], path: Path) -> Verdict:
    """A record's verdict, its declared tools pinned as the audit pins them: under its
    application, else its recording (the `source` before its `#`), else the file."""
    recorded = RecordedExchange.model_validate(record)
    pinned = recorded.application or recorded.recording or str(path)
    return session.inspect(recorded.exchange(), application=pinned)
