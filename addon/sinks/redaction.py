"""What of the tool arguments (and of text that could echo them) reaches the log.

`raw` logs them as received; `redact` masks values under secret-looking keys
and credential-shaped strings; `hash` logs a keyed HMAC; `omit` logs nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Mapping
from typing import Any

import orjson

from tooltap.core import SchemaError, Verdict
from tooltap.core.jsontext import loads
from tooltap.core.records import HiddenText

ARGUMENT_MODES = ("raw", "redact", "hash", "omit")

SECRET_KEY = re.compile(
    r"pass(word|wd|phrase)?|secret|token|api[_-]?key|apikey|auth|credential|private[_-]?key"
    r"|session|cookie|bearer|access[_-]?key|signature|ssn|card[_-]?number|cvv",
    re.IGNORECASE,
)
# Credentials that look like credentials wherever they appear in free text.
SECRET_TEXT = re.compile(
    r"(sk-[A-Za-z0-9_\-]{8,}|sk-ant-[A-Za-z0-9_\-]{8,}|Bearer\s+[A-Za-z0-9._\-]{8,}|eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-.]+)"
)
REDACTED = "[redacted]"


def _redact_value(value: Any) -> Any:
    """Replace the values under secret-looking keys, at any depth (iteratively)."""
    root: list[Any] = [value]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        parent, key = stack.pop()
        node = parent[key]
        if isinstance(node, dict):
            for name in node:
                if SECRET_KEY.search(str(name)):
                    node[name] = REDACTED
                else:
                    stack.append((node, name))
        elif isinstance(node, list):
            stack.extend((node, i) for i in range(len(node)))
        elif isinstance(node, str):
            parent[key] = SECRET_TEXT.sub(REDACTED, node)
    return root[0]


def redact_text(text: str) -> str:
    """Arguments with secret-looking fields masked; unparseable text is scrubbed by pattern."""
    value, error = loads(text)
    if error is not None:
        masked = re.sub(
            r'("(?:[^"\\]|\\.)*"\s*:\s*)"(?:[^"\\]|\\.)*"?',
            lambda m: m.group(1) + f'"{REDACTED}"' if SECRET_KEY.search(m.group(1)) else m.group(0),
            text,
        )
        return SECRET_TEXT.sub(REDACTED, masked)
    return orjson.dumps(_redact_value(value)).decode()


class HashKeyError(ValueError):
    """TOOLTAP_HASH_KEY_FILE names a key that cannot be read."""


def _key_file(path: str) -> bytes:
    try:
        with open(path, "rb") as file:
            key = file.read(4096).strip()
    except OSError as exc:
        raise HashKeyError(
            f"TOOLTAP_HASH_KEY_FILE={path}: the hash key cannot be read ({exc.strerror})"
        ) from None
    if not key:
        raise HashKeyError(f"TOOLTAP_HASH_KEY_FILE={path}: the file holds no key")
    return key


def hash_key() -> bytes:
    """The key hashes are made with: TOOLTAP_HASH_KEY, else the key in the file
    TOOLTAP_HASH_KEY_FILE names (a mounted secret), either of which makes them comparable
    across replicas; else one drawn for this process. Keyed, so that a short secret cannot be
    recovered, nor a guess confirmed, by hashing guesses. A key file named but unreadable is
    an error (HashKeyError), never a key drawn in its place: replicas would stop agreeing."""
    env = os.environ.get("TOOLTAP_HASH_KEY")
    if env:
        return env.encode()
    path = os.environ.get("TOOLTAP_HASH_KEY_FILE")
    return _key_file(path) if path else secrets.token_bytes(32)


def hash_key_problem() -> str | None:
    """Why hash_key() would fail, or None. Asked when the proxy starts."""
    try:
        hash_key()
    except HashKeyError as exc:
        return str(exc)
    return None


def hash_key_shared() -> bool:
    """Whether hash_key() is one other processes can share (TOOLTAP_HASH_KEY or its file)."""
    return bool(os.environ.get("TOOLTAP_HASH_KEY") or os.environ.get("TOOLTAP_HASH_KEY_FILE"))


def keyed(key: bytes, text: str) -> str:
    """The HMAC-SHA256 of a text under a key, in hex."""
    return hmac.new(key, text.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


class ArgumentPolicy:
    """How much of the arguments (and of text that could echo them) reaches the log."""

    def __init__(self, mode: str, key: bytes | None = None) -> None:
        self.mode = mode
        self._key = key or hash_key()

    def arguments(self, raw: str) -> str | None:
        if self.mode == "raw":
            return raw
        if self.mode == "omit":
            return None
        if self.mode == "hash":
            return "hmac-sha256:" + keyed(self._key, raw)[:32]
        return redact_text(raw)

    def message(self, text: str) -> str:
        return text if self.mode == "raw" else SECRET_TEXT.sub(REDACTED, text)

    def schema_error(self, error: Mapping[str, Any]) -> dict[str, Any]:
        # Validator messages quote the offending value: keep only the path
        # unless the arguments themselves may be logged.
        if self.mode == "raw":
            return dict(error)
        if self.mode == "redact" and not SECRET_KEY.search(str(error["path"])):
            return {"path": error["path"], "message": self.message(str(error["message"]))}
        return {"path": error["path"], "message": REDACTED}

    def hidden(self, found: list[HiddenText]) -> list[HiddenText]:
        """Hidden text with what a result's characters spell masked as arguments are: a
        result may echo what a user said. A definition's is shown as it is."""
        if self.mode == "raw":
            return found
        return [
            h.model_copy(update={"spelled": self.arguments(h.spelled)})
            if h.part == "result" and h.spelled is not None
            else h
            for h in found
        ]

    def verdict(self, verdict: Verdict) -> Verdict:
        """The verdict with what the log would not show masked: for views beside the log."""
        if self.mode == "raw":
            return verdict
        calls = [
            call.model_copy(
                update={
                    "arguments_raw": self.arguments(call.arguments_raw) or "",
                    "schema_errors": [
                        SchemaError(**self.schema_error(e.model_dump())) for e in call.schema_errors
                    ],
                }
            )
            for call in verdict.calls
        ]
        rejected = verdict.rejected
        if rejected is not None:
            rejected = rejected.model_copy(update={"message": self.message(rejected.message)})
        errors = [
            e.model_copy(update={"message": self.message(e.message)}) for e in verdict.stream_errors
        ]
        results = [
            result.model_copy(
                update={
                    "schema_errors": [
                        SchemaError(**self.schema_error(e.model_dump()))
                        for e in result.schema_errors
                    ]
                }
            )
            for result in verdict.tool_results
        ]
        return verdict.model_copy(
            update={
                "calls": calls,
                "rejected": rejected,
                "stream_errors": errors,
                "tool_results": results,
                "hidden_text": self.hidden(verdict.hidden_text),
            }
        )
