"""Which application sent a model request: what its declared tools are pinned under.

A model request names no application. What tells one apart is the credential it sends, so an
application is its credential's keyed hash: `key:` and 16 hex digits of an HMAC-SHA256 under
the process's hash key (TOOLTAP_HASH_KEY, as `tooltap_log_arguments=hash` uses; random per
process when unset, so set it where replicas share pins). The credential itself is never kept,
logged or stored: a hash under a key cannot be reversed, nor confirmed by hashing a guess.
Where several applications share a credential, or one rotates it (short-lived OAuth tokens),
the operator names the application instead, in a request header (`tooltap_app_header`); its
value is the application.

The credential is read as the provider sends it: x-api-key (Anthropic), api-key (Azure),
x-goog-api-key or ?key= (Gemini), a bearer token, an AWS signature's access key id (never the
signature, which changes with every request), or the Realtime API's key subprotocol.
Recordings (`tooltap audit`) are told apart by their label only: what credential they kept is a
placeholder that every test shares, and their tools are pinned per recording instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import parse_qsl, urlsplit

from ..handover.record import KEY_PROTOCOL
from ..options import BY_NAME
from ..sinks.redaction import hash_key, keyed

DEFAULT_HEADER = BY_NAME["tooltap_app_header"].default
MAX_LABEL = 64  # characters of an operator's label kept
KEY_HEADERS = ("x-api-key", "api-key", "x-goog-api-key")
_AWS_KEY = re.compile(r"Credential=([A-Z0-9]+)/")
_LABEL = re.compile(r"[^\x21-\x7e ]")  # printable ASCII only: a label is shown and labelled


class Applications:
    """Application names from request headers: an operator's label, else a credential's hash."""

    def __init__(
        self, header: str = DEFAULT_HEADER, key: bytes | None = None, *, credentials: bool = True
    ) -> None:
        self.header = header.lower()
        self._key = key if key is not None else hash_key()
        # Recordings keep no credential worth telling apart by: placeholders, shared by tests.
        self.credentials = credentials

    def of(self, headers: Iterable[tuple[str, str]], url: str = "") -> str | None:
        """The application a request came from; None when it carries neither a label nor a
        credential."""
        found: dict[str, str] = {}
        for name, value in headers:
            found.setdefault(name.lower(), value)
        label = found.get(self.header, "").strip() if self.header else ""
        if label:
            return _LABEL.sub("", label)[:MAX_LABEL] or None
        credential = _credential(found, url) if self.credentials else ""
        return f"key:{keyed(self._key, credential)[:16]}" if credential else None


def _credential(headers: dict[str, str], url: str) -> str:
    for name in KEY_HEADERS:
        if headers.get(name, "").strip():
            return headers[name].strip()
    scheme, _, token = headers.get("authorization", "").strip().partition(" ")
    if scheme.upper().startswith("AWS4-HMAC"):
        found = _AWS_KEY.search(token)
        return found.group(1) if found else ""
    if token.strip():
        return token.strip()
    for protocol in headers.get("sec-websocket-protocol", "").split(","):
        if protocol.strip().startswith(KEY_PROTOCOL):
            return protocol.strip().removeprefix(KEY_PROTOCOL)
    query = dict(parse_qsl(urlsplit(url).query)) if "?" in url else {}
    return query.get("key", "")
