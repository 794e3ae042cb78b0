"""The hand-over record: one finished exchange, as the proxy passes it to the inspection side.

On the pipe to the inspector process a record is framed as its pickled length,
then the pickle.
"""

from __future__ import annotations

import pickle
import struct
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode

from tooltap.core import Api, Exchange

FRAME = struct.Struct(">I")  # a record on the pipe: its pickled length, then the pickle


# Request headers whose values are credentials. They are never logged, and
# neither is any echo of them: an API error that quotes the key, or a model
# that repeats it in an argument, is scrubbed before the sinks see it.
CREDENTIAL_HEADERS = frozenset(
    {b"authorization", b"proxy-authorization", b"api-key", b"x-api-key", b"x-goog-api-key",
     b"openai-organization", b"openai-project"}
)  # fmt: skip
MIN_CREDENTIAL = 8  # shorter values are not scrubbed: they would mangle ordinary text
# Query parameters worth keeping in the logged path; anything else might be a key.
SAFE_QUERY = ("api-version", "beta")

Fields = tuple[tuple[bytes, bytes], ...]


def _header(fields: Fields, name: bytes) -> str:
    for key, value in fields:
        if key.lower() == name:
            return value.decode("latin-1")
    return ""


@dataclass(slots=True)
class Record:
    """One finished exchange, as the proxy hands it over: only references it already holds.

    Everything derived from them (the Exchange, the logged host and path, the
    credentials to scrub) is built here, on the inspection side, off the proxy's
    event loop.
    """

    api: Api | None  # None: the upstream was unreachable before any request
    method: str = ""
    scheme: str = "http"
    host: str = ""
    port: int = 0
    path: str = ""
    request_headers: Fields = ()
    request_body: bytes = b""
    status: int | None = None  # None: no response
    response_headers: Fields = ()
    response_body: bytes = b""
    chunks: list[bytes] = field(default_factory=list)  # a tapped stream's body
    skipped: str | None = None
    failure: str | None = None  # the upstream broke the exchange off: mitmproxy's words
    note: str | None = None  # the client broke it off: mitmproxy's words

    def exchange(self) -> Exchange:
        return Exchange(
            method=self.method,
            url=f"{self.scheme}://{self.host}:{self.port}{self.path}",
            request_body=self.request_body,
            request_headers={
                "content-encoding": _header(self.request_headers, b"content-encoding")
            },
            status=self.status,
            response_headers={
                "content-type": _header(self.response_headers, b"content-type"),
                "content-encoding": _header(self.response_headers, b"content-encoding"),
            },
            response_body=b"".join(self.chunks) if self.chunks else self.response_body,
        )

    def logged_host(self) -> str:
        """The Host header without its port (as mitmproxy's pretty_host), else the address."""
        authority = _header(self.request_headers, b"host")
        if authority.startswith("["):
            return authority[1:].partition("]")[0]
        name, colon, port = authority.rpartition(":")
        return (name if colon and port.isdigit() else authority) or self.host

    def logged_path(self) -> str:
        base, _, query = self.path.partition("?")
        kept = [(k, v) for k, v in parse_qsl(query) if k in SAFE_QUERY]
        return base + ("?" + urlencode(kept) if kept else "")

    def credentials(self) -> tuple[str, ...]:
        """The credential header values, and for `Scheme token` the bare token, longest first."""
        found: set[str] = set()
        for key, raw in self.request_headers:
            if key.lower() in CREDENTIAL_HEADERS:
                value = raw.decode("latin-1").strip()
                found.update((value, value.partition(" ")[2].strip()))
        return tuple(sorted((v for v in found if len(v) >= MIN_CREDENTIAL), key=len, reverse=True))


def encode(record: Record) -> bytes:
    """A record as one frame for the pipe."""
    data = pickle.dumps(record, protocol=5)
    return FRAME.pack(len(data)) + data


def decode(buffer: bytearray) -> list[Record]:
    """Take every complete frame off the front of the buffer, as records."""
    records = []
    while len(buffer) >= FRAME.size:
        (size,) = FRAME.unpack_from(buffer)
        if len(buffer) < FRAME.size + size:
            break
        records.append(pickle.loads(bytes(buffer[FRAME.size : FRAME.size + size])))  # noqa: S301 - our own pipe
        del buffer[: FRAME.size + size]
    return records
