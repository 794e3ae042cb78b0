"""The HTTP clients agent code uses, watched where every exchange passes and nothing is altered.

httpx and httpx2 (the openai, anthropic, google-genai and mcp SDKs use httpx2; ollama uses
httpx): `Client.send` and `AsyncClient.send`, which every request goes through whatever answers
it, a server, `MockTransport`, respx or a vcrpy cassette, since all of those sit below it.
A response read whole by send is taken as it was decoded; a streamed one is read as the code
under test reads it: its stream is wrapped, each chunk handed on the moment it comes, unchanged.

botocore (boto3's Bedrock): `Endpoint._do_get_response`, which every request goes through
whether a server, a `before-send` handler or a vcrpy cassette answers it. botocore's Stubber
answers before any request is made, so a stubbed call has no exchange to read.

A client module is watched once imported; the plugin looks again before each test.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from types import ModuleType
from typing import Any

from .watch import CUT, Pending, Watch

MARK = "__tooltap_watched__"


def watch_clients(watch: Watch) -> list[str]:
    """Watch every client library imported so far (again is a no-op); their names."""
    watched = []
    for name in ("httpx", "httpx2"):
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "Client"):
            _watch_httpx(module, watch)
            watched.append(name)
    endpoint = sys.modules.get("botocore.endpoint")
    if endpoint is not None:
        _watch_botocore(endpoint, watch)
        watched.append("botocore")
    return watched


# --- httpx and httpx2 ---------------------------------------------------------


def _watch_httpx(module: ModuleType, watch: Watch) -> None:
    """Client.send and AsyncClient.send (httpx2.alias_httpx() makes both names one module)."""
    client, async_client = module.Client, module.AsyncClient
    if getattr(client.send, MARK, False):
        return
    sync_tee, async_tee = _tees(module)
    send, async_send = client.send, async_client.send

    @functools.wraps(send)
    def watched_send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        pending = _opened(watch, request, sync_tee)
        response = send(self, request, *args, **kwargs)
        if pending is not None:
            _answered(watch, pending, response, sync_tee)
        return response

    @functools.wraps(async_send)
    async def watched_async_send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        pending = _opened(watch, request, async_tee)
        response = await async_send(self, request, *args, **kwargs)
        if pending is not None:
            _answered(watch, pending, response, async_tee)
        return response

    setattr(watched_send, MARK, True)
    setattr(watched_async_send, MARK, True)
    client.send = watched_send
    async_client.send = watched_async_send


def _opened(watch: Watch, request: Any, tee: type) -> Pending | None:
    if watch.current is None:
        return None
    try:
        try:
            body: bytes | None = request.content
        except Exception:  # noqa: BLE001 - RequestNotRead: a body still to be streamed
            body = None
        pending = watch.opened(request.method, str(request.url), request.headers.raw, body)
        if pending is not None and body is None:
            request.stream = tee(request.stream, pending, request=True)
        return pending
    except Exception as exc:  # noqa: BLE001 - the plugin's failure is never the test's
        watch.failed(watch.current, f"{request.method} {request.url}", exc)
        return None


def _answered(watch: Watch, pending: Pending, response: Any, tee: type) -> None:
    try:
        pending.respond(response.status_code, response.headers.raw)
        try:
            content = response.content  # read whole already (not streamed, or a mock's body)
        except Exception:  # noqa: BLE001 - ResponseNotRead: the code under test streams it
            response.stream = tee(response.stream, pending)
        else:
            pending.end(content)
    except Exception as exc:  # noqa: BLE001
        pending.end(cut=f"tooltap could not follow the response: {exc}")
        watch.failed(pending.ledger, f"{response.request.method} {response.request.url}", exc)


class _Teed:
    """What both tees share: the stream they wrap, where a chunk goes, how a reading ends.

    Only the first reading is kept. The openai SDK reads a stream again after [DONE], to drain
    the connection, and throws away what it gets; from a socket that is the little after the
    end, but a stream a mock or a vcrpy cassette replays starts over, and would be read twice.
    The exchange is over once that second reading ends.
    """

    def __init__(self, inner: Any, pending: Pending, *, request: bool = False) -> None:
        self._inner = inner
        self._pending = pending
        self._request = request
        self._reads = 0

    @contextlib.contextmanager
    def _reading(self) -> Iterator[Callable[[bytes], None]]:
        """One reading of the stream: yields what each chunk read is handed to."""
        self._reads += 1
        first = self._reads == 1
        try:
            yield self._chunk if first else _passed
        except GeneratorExit:  # the code under test stopped reading: close() says so
            raise
        except BaseException as exc:
            if first:
                self._failed(exc)
            raise
        self._done(cut=None)

    @contextlib.contextmanager
    def _closing(self) -> Iterator[None]:
        try:
            yield
        finally:
            self._done(cut=CUT if self._reads < 2 else None)

    def _chunk(self, chunk: bytes) -> None:
        (self._pending.request_chunk if self._request else self._pending.chunk)(chunk)

    def _failed(self, exc: BaseException) -> None:
        if not self._request:
            self._pending.failed(exc)

    def _done(self, cut: str | None) -> None:
        if not self._request:
            self._pending.end(cut=cut)


def _passed(chunk: bytes) -> None:
    """A chunk of a stream read again: handed on, not kept (see _Teed)."""


def _tees(module: ModuleType) -> tuple[type, type]:
    """A module's own SyncByteStream and AsyncByteStream, teed: the library checks the type."""

    class SyncTee(_Teed, module.SyncByteStream):  # type: ignore[name-defined,misc]
        def __iter__(self) -> Iterator[bytes]:
            with self._reading() as read:
                for chunk in self._inner:
                    read(chunk)
                    yield chunk

        def close(self) -> None:
            with self._closing():
                if hasattr(self._inner, "close"):
                    self._inner.close()

    class AsyncTee(_Teed, module.AsyncByteStream):  # type: ignore[name-defined,misc]
        async def __aiter__(self) -> AsyncIterator[bytes]:
            with self._reading() as read:
                async for chunk in self._inner:
                    read(chunk)
                    yield chunk

        async def aclose(self) -> None:
            with self._closing():
                if hasattr(self._inner, "aclose"):
                    await self._inner.aclose()

    return SyncTee, AsyncTee


# --- botocore -----------------------------------------------------------------


def _watch_botocore(module: ModuleType, watch: Watch) -> None:
    endpoint = module.Endpoint
    if getattr(endpoint._do_get_response, MARK, False):
        return
    original = endpoint._do_get_response

    @functools.wraps(original)
    def watched(self: Any, request: Any, operation_model: Any, context: Any) -> Any:
        result = original(self, request, operation_model, context)
        if watch.current is not None:
            _botocore_answered(watch, request, operation_model, result)
        return result

    setattr(watched, MARK, True)
    endpoint._do_get_response = watched


def _botocore_answered(watch: Watch, request: Any, operation: Any, result: Any) -> None:
    success, _error = result
    if success is None:
        return  # no response came: nothing was exchanged
    try:
        body = request.body if isinstance(request.body, bytes) else None
        if isinstance(request.body, str):
            body = request.body.encode()
        pending = watch.opened(request.method, request.url, request.headers.items(), body or b"")
        if pending is None:
            return
        http_response = success[0]
        pending.respond(http_response.status_code, http_response.headers.items())
        raw = http_response.raw
        if http_response.status_code < 300 and operation.has_event_stream_output:
            raw.stream = _teed_stream(raw.stream, pending)  # read by botocore's EventStream
            raw.close = _teed_close(raw.close, pending)
        elif http_response.status_code < 300 and operation.has_streaming_output:
            raw.read = _teed_read(raw.read, pending)  # read by a StreamingBody (InvokeModel)
            raw.close = _teed_close(raw.close, pending)
        else:
            pending.end(http_response.content)  # read whole by botocore, before parsing
    except Exception as exc:  # noqa: BLE001
        watch.failed(watch.current, f"{request.method} {request.url}", exc)


def _teed_stream(stream: Callable[..., Iterator[bytes]], pending: Pending) -> Any:
    def teed(*args: Any, **kwargs: Any) -> Iterator[bytes]:
        try:
            for chunk in stream(*args, **kwargs):
                pending.chunk(chunk)
                yield chunk
        except GeneratorExit:
            raise
        except BaseException as exc:
            pending.failed(exc)
            raise
        pending.end()

    return teed


def _teed_read(read: Callable[..., bytes], pending: Pending) -> Any:
    def teed(amt: int | None = None, *args: Any, **kwargs: Any) -> bytes:
        try:
            data = read(amt, *args, **kwargs)
        except BaseException as exc:
            pending.failed(exc)
            raise
        pending.chunk(data)
        if amt is None or not data:
            pending.end()
        return data

    return teed


def _teed_close(close: Callable[[], None], pending: Pending) -> Any:
    def teed() -> None:
        try:
            close()
        finally:
            pending.end(cut=CUT)

    return teed
