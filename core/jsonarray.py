"""A JSON array read element by element as its bytes arrive: Gemini's stream without `alt=sse`
is one array of whole responses, sent a piece at a time. Sans-I/O, on ijson's C parser.

Totality: bytes that are not JSON end the reading (`broken`, said once); an array cut off
before its `]` is `cut`, and what was whole before the cut is kept.
"""

from __future__ import annotations

from typing import Any

import ijson


class ArrayDecoder:
    """feed(bytes) -> the elements completed so far; close() -> the rest."""

    def __init__(self) -> None:
        self._items = ijson.sendable_list()
        self._parser = ijson.items_coro(self._items, "item", use_float=True)
        self.broken: str | None = None
        self.cut = False

    def feed(self, data: bytes) -> list[Any]:
        if self.broken is None and data:
            try:
                self._parser.send(data)
            except ijson.JSONError as exc:
                self.broken = str(exc).splitlines()[0]
        return self._taken()

    def close(self) -> list[Any]:
        if self.broken is None:
            try:
                self._parser.close()
            except ijson.IncompleteJSONError:
                self.cut = True
            except ijson.JSONError as exc:
                self.broken = str(exc).splitlines()[0]
        return self._taken()

    def _taken(self) -> list[Any]:
        items = list(self._items)
        del self._items[:]
        return items
