"""A tools lock: the tool definitions a team approved, by where they come from and name.

Written by `tooltap audit --write-tools-lock`, read by the proxy (option tooltap_tools_lock): a
definition that differs from its approved one is a changed definition (tooltap.core.definitions).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .definitions import Declared, canonical, fingerprint, parsed
from .records import Origin
from .shapes import as_dict

LOCK_VERSION = 1


class Locked(BaseModel):
    """One approved definition in a tools lock."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: Origin
    application: str | None = None  # an app's label (or key hash); None: any application
    name: str
    sha256: str
    definition: dict[str, Any]


class Lock(BaseModel):
    """A tools lock: the approved definitions, by where they come from and name.

    An MCP entry matches a server by the name it gives itself, and by its endpoint when the
    entry names one; an app entry matches the application it names, or any when it names none.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    tooltap_tools_lock: int = LOCK_VERSION  # the format's version; its name says what the file is
    tools: list[Locked] = Field(default_factory=list)

    def find(self, origin: Origin, application: str | None, name: str) -> Locked | None:
        """The approved definition for a tool, if the lock holds one. Pure."""
        return next((e for e in self.matching(origin, application) if e.name == name), None)

    def matching(self, origin: Origin, application: str | None) -> list[Locked]:
        """The entries for one source. Pure."""
        return [e for e in self.tools if _matches(e, origin, application)]

    def dumps(self) -> str:
        body = self.model_dump(mode="json")
        return json.dumps(body, indent=2, ensure_ascii=False, sort_keys=False) + "\n"


def _matches(entry: Locked, origin: Origin, application: str | None) -> bool:
    if entry.source.kind != origin.kind:
        return False
    # An app's tools, and a hosted server's, are the application's. An entry's null matches
    # anything there.
    scoped = origin.kind == "app" or origin.endpoint is None
    if scoped and entry.application not in (None, application):
        return False
    return (
        entry.source.endpoint in (None, origin.endpoint)
        and entry.source.agent in (None, origin.agent)
        and (origin.kind == "app" or entry.source.server == origin.server)
    )


def read_lock(text: str) -> Lock:
    """A tools lock from its JSON text; ValueError says what is wrong with it. Pure."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    body = as_dict(value)
    version = body.get("tooltap_tools_lock")
    if version != LOCK_VERSION:
        raise ValueError(
            f"not a tooltap tools lock of version {LOCK_VERSION} "
            f"(its tooltap_tools_lock is {version!r})"
        )
    try:
        lock = Lock.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"{where}: {first['msg']}") from None
    for entry in lock.tools:
        form = canonical(entry.definition)
        if fingerprint(form) != entry.sha256:
            raise ValueError(
                f"tool {entry.name}: its sha256 is not that of its definition "
                "(edit the definition, then write the lock again)"
            )
    return lock


def lock_of(entries: Iterable[tuple[Declared, str | None]]) -> Lock:
    """A lock holding these definitions (with their application), the last of each kept. Pure."""
    kept: dict[tuple[Any, ...], Locked] = {}
    for declared, recorded in entries:
        origin = declared.origin
        application = None if origin.kind == "mcp" and origin.endpoint else recorded
        key = (
            origin.kind,
            origin.server,
            origin.endpoint,
            origin.agent,
            application,
            declared.name,
        )
        kept[key] = Locked(
            source=origin,
            application=application,
            name=declared.name,
            sha256=declared.fingerprint,
            definition=dict(as_dict(parsed(declared.canonical))),
        )
    ordered = sorted(kept.values(), key=lambda e: (e.source.kind, e.source.server or "",
                                                  e.source.endpoint or "", e.application or "", e.name))  # fmt: skip
    return Lock(tools=ordered)
