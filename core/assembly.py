"""Stream assembly: a dialect's stream events put together into the response the same call
returns unstreamed, so that a streamed turn gets the same Verdict as the same turn unstreamed.

What every JSON-chunk stream does alike lives here: the errors it carried and whether it
reached its end (StreamAssembler), blocks that open by index and whose text comes in pieces
(Blocks: a call's arguments, a content block's text), and a tool input joined from its pieces
(json_or_text). A dialect's assembler says only what its events are and where their fields sit.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from .errors import ApiError, api_error
from .jsontext import loads


class StreamAssembler:
    """The base of every dialect's assembler: feed it the stream's events, in order, with
    event(); result() is the response they make. `complete` says whether the stream reached
    its final event; `errors` holds the errors the API sent inside it; `said` whether an
    event so far carried model output (text, reasoning, or a call's name or arguments): the
    first that did is the stream's first token."""

    def __init__(self) -> None:
        self.errors: list[ApiError] = []
        self.done = False  # the final event came
        self.said = False  # an event carried model output

    @property
    def complete(self) -> bool:
        return self.done

    def done_marker(self) -> None:
        """A `data: [DONE]` line, which is not JSON: only some streams end with it, and where
        a stream's end is its own final event it says nothing."""

    def error(self, event: Mapping[str, Any]) -> None:
        """An error the API sent inside the stream."""
        self.errors.append(api_error(event))

    def event(self, event: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def result(self) -> dict[str, Any]:
        raise NotImplementedError


class Blocks:
    """Parts of a response that arrive by index: each opens with what it starts with (a call's
    id and name, a content block's type), then its text comes in pieces (the arguments, the
    text). Kept in index order; a block no piece came for has no text, which is not empty text:
    a call whose arguments never came had none."""

    def __init__(self) -> None:
        self._blocks: dict[int, dict[str, Any]] = {}
        self._pieces: dict[int, list[str]] = {}

    def __len__(self) -> int:
        return len(self._blocks)

    def open(self, index: int, block: Mapping[str, Any]) -> dict[str, Any]:
        """Start the block at this index (again, if it had started: what came before is lost,
        as the API restarted it)."""
        self._blocks[index] = opened = dict(block)
        self._pieces.pop(index, None)
        return opened

    def get(self, index: int) -> dict[str, Any] | None:
        return self._blocks.get(index)

    def add(self, index: int, piece: Any) -> None:
        """A piece of the text of the block at this index; one that is no string, or for a
        block that never opened, is dropped."""
        if index in self._blocks and isinstance(piece, str):
            self._pieces.setdefault(index, []).append(piece)

    def __iter__(self) -> Iterator[tuple[int, dict[str, Any], str | None]]:
        """(index, block, its text joined, or None when no piece came), in index order."""
        for index, block in sorted(self._blocks.items()):
            pieces = self._pieces.get(index)
            yield index, block, None if pieces is None else "".join(pieces)


def json_or_text(text: str | None, started: Any = None) -> Any:
    """A tool input put together from its pieces: the JSON it parses to, or the text itself when
    it does not parse (a stream cut mid-argument keeps what came, for the argument check to
    report). No text, or only white space, is the input the block started with when that was an
    object, else {}. Pure."""
    if text is None or not text.strip():
        return started if isinstance(started, dict) else {}
    value, error = loads(text)
    return text if error else value
