"""The stream tap: the callable set on flow.response.stream.

mitmproxy forwards whatever it returns, and an exception raised here leaves
the client with headers and no body, hanging. So the tap returns its input,
always, and only keeps a copy (up to a byte limit) for the worker to parse.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable


class StreamTap:
    def __init__(
        self,
        limit: int,
        on_error: Callable[[BaseException], None],
        fault: Callable[[str], None] | None = None,
    ) -> None:
        self.limit = limit
        self.chunks: list[bytes] = []
        self.size = 0
        self.overflow = False
        self.failed = False
        self._on_error = on_error
        self._fault = fault

    def __call__(self, data: bytes) -> bytes:
        try:
            if self._fault is not None:
                self._fault("tap")
            if data and not self.overflow:
                self.size += len(data)
                if self.size > self.limit:
                    # Past the body cap: stop copying and let it all go by.
                    self.overflow = True
                    self.chunks = []
                else:
                    self.chunks.append(data)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # noqa: BLE001 - nothing else may escape into mitmproxy here
            self.failed = True
            # Counting must not break the stream either.
            with contextlib.suppress(BaseException):
                self._on_error(exc)
        return data
