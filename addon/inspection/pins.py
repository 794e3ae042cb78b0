"""Pins: the tool definitions trusted on first use or approved in a tools lock, and the changes
already said.

Every definition an exchange carries is compared with its pin: the one a tools lock approved
(`tooltap_tools_lock`), else the first one seen from the same source under the same name (trust
on first use). A definition that differs is a `tool-changed`, said once: the fingerprints
already seen under a pin (trusted, approved or said) are remembered beside it. A server's whole
list is pinned too (or taken from the lock), so that a tool that appears in it or disappears
from it is said, once.

Where a definition comes from (its source) is an MCP server (its endpoint and the name it gives
itself), a hosted MCP server inside an application's turns, or the application that declared
it (applications.py says how one is told apart).

Pins live in this process (bounded in bytes, the least recently used forgotten past it), or in
Redis beside the shared state (`tooltap_state`), where every replica finds them: keys
`tooltap:pin:<hash>` (the pinned definition, at most MAX_DEFINITION bytes of it, else its
fingerprint alone), `tooltap:pins:<hash>` (a whole list's names) and `tooltap:seen:<hash>` (the
fingerprints already seen), each expiring `tooltap_pins_ttl` seconds after it was last
refreshed. A change is claimed with SADD, so one replica says it. When Redis does not answer,
this process's pins answer: a change may then be said by two replicas, never one invented.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from tooltap.core.definitions import (
    Declared,
    ToolDefinitions,
    ToolList,
    canonical,
    diff,
    parsed,
    short,
    show,
)
from tooltap.core.lock import Lock, read_lock
from tooltap.core.records import Origin, ToolChange
from tooltap.core.shapes import as_dict

from ..options import BY_NAME
from ..sinks.redaction import hash_key_shared
from .state import FAILED, NAMESPACE, RedisState, State

logger = logging.getLogger("tooltap")

MAX_DEFINITION = 256 << 10  # bytes of one pinned definition kept; past it, its fingerprint only
PINS_BYTES = 32 << 20  # bytes of pins this process keeps
MAX_SEEN = 64  # fingerprints remembered per tool as seen; the oldest forgotten past it
PINS_TTL = BY_NAME["tooltap_pins_ttl"].default  # seconds a shared pin lives once refreshed
APPEARED, GONE = "appeared", "disappeared"  # marks beside the fingerprints
HIDDEN = "hidden:"  # ... and before a fingerprint whose hidden text was said


@dataclass(slots=True)
class Pin:
    fingerprint: str
    canonical: str | None  # None: larger than MAX_DEFINITION, kept by fingerprint only


@dataclass(slots=True)
class _Entry:
    pin: Pin | None = None
    names: list[str] | None = None  # a whole list's, for a source's entry
    seen: dict[str, None] = field(default_factory=dict)  # marks, oldest first
    size: int = 0
    refreshed: float = 0.0  # when the shared copy's expiry was last pushed back (monotonic)


class PinStore(Protocol):
    def known(self, key: str, mark: str) -> bool:
        """Was this mark seen under key, as far as this process knows? (No I/O.)"""

    def mark(self, key: str, mark: str) -> bool:
        """Note the mark under key: True when no one had noted it."""

    def pin(self, key: str, pin: Pin) -> Pin | None:
        """Pin under key unless something is pinned there: None when this became the pin,
        else the pin."""

    def pin_list(self, key: str, names: list[str]) -> list[str] | None:
        """A whole list's names, pinned the same way."""


def _size(key: str, entry: _Entry) -> int:
    form = entry.pin.canonical if entry.pin is not None and entry.pin.canonical else ""
    names = sum(len(n) for n in entry.names or ())
    return 200 + len(key) + len(form) + names + 80 * len(entry.seen)


class LocalPins:
    """Pins in this process's memory: at most `limit` bytes, the least recently used forgotten."""

    def __init__(self, limit: int = PINS_BYTES) -> None:
        self.limit = limit
        self.held = 0
        self._entries: OrderedDict[str, _Entry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def entry(self, key: str) -> _Entry:
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry()
        self._entries.move_to_end(key)
        return entry

    def resize(self, key: str, entry: _Entry) -> None:
        size = _size(key, entry)
        self.held += size - entry.size
        entry.size = size
        while self.held > self.limit and len(self._entries) > 1:
            oldest, dropped = self._entries.popitem(last=False)
            self.held -= dropped.size
            if oldest == key:  # never forget the entry being written
                self._entries[key] = dropped
                self.held += dropped.size
                break

    def known(self, key: str, mark: str) -> bool:
        entry = self._entries.get(key)
        return entry is not None and mark in entry.seen

    def mark(self, key: str, mark: str) -> bool:
        entry = self.entry(key)
        if mark in entry.seen:
            return False
        entry.seen[mark] = None
        if len(entry.seen) > MAX_SEEN:
            del entry.seen[next(iter(entry.seen))]
        self.resize(key, entry)
        return True

    def pin(self, key: str, pin: Pin) -> Pin | None:
        entry = self.entry(key)
        if entry.pin is not None:
            return entry.pin
        entry.pin = pin
        self.resize(key, entry)
        return None

    def pin_list(self, key: str, names: list[str]) -> list[str] | None:
        entry = self.entry(key)
        if entry.names is not None:
            return entry.names
        entry.names = names
        self.resize(key, entry)
        return None

    def hold(self, key: str, pin: Pin | None = None, names: list[str] | None = None) -> None:
        """Keep what the shared store holds, so this process answers the same when it must."""
        entry = self.entry(key)
        entry.pin = pin if pin is not None else entry.pin
        entry.names = names if names is not None else entry.names
        self.resize(key, entry)


class RedisPins:
    """Pins in Redis, shared by the replicas, with this process's pins beside them."""

    def __init__(self, state: RedisState, ttl: int = PINS_TTL, limit: int = PINS_BYTES) -> None:
        self.state = state
        self.client = state.client
        self.ttl = ttl
        self.local = LocalPins(limit)

    def _keys(self, key: str) -> tuple[str, str, str]:
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        return (
            f"{NAMESPACE}pin:{digest}",
            f"{NAMESPACE}pins:{digest}",
            f"{NAMESPACE}seen:{digest}",
        )

    def known(self, key: str, mark: str) -> bool:
        if not self.local.known(key, mark):
            return False
        entry = self.local.entry(key)
        now = time.monotonic()
        if now - entry.refreshed > self.ttl / 2:  # in use: push the shared copy's expiry back
            entry.refreshed = now
            self.state.shared(self._refresh, self._keys(key))
        return True

    def _refresh(self, keys: tuple[str, ...]) -> Any:
        pipe = self.client.pipeline(transaction=False)
        for name in keys:
            pipe.expire(name, self.ttl)
        return pipe.execute()

    def mark(self, key: str, mark: str) -> bool:
        here = self.local.mark(key, mark)
        self.local.entry(key).refreshed = time.monotonic()
        seen = self._keys(key)[2]
        added = self.state.shared(self._add, seen, mark)
        return here if added is FAILED else bool(added)

    def _add(self, name: str, mark: str) -> Any:
        pipe = self.client.pipeline(transaction=True)
        pipe.sadd(name, mark)
        pipe.expire(name, self.ttl)
        return pipe.execute()[0]

    def pin(self, key: str, pin: Pin) -> Pin | None:
        name = self._keys(key)[0]
        value = orjson.dumps({"sha256": pin.fingerprint, "definition": pin.canonical})
        pinned = self._first(name, value)
        if pinned is FAILED:
            return self.local.pin(key, pin)
        if pinned is None:
            self.local.hold(key, pin)
            return None
        held = _pin_of(pinned)
        if held is None:  # something else under the key: this process's own pin answers
            return self.local.pin(key, pin)
        self.local.hold(key, held)
        return held

    def pin_list(self, key: str, names: list[str]) -> list[str] | None:
        name = self._keys(key)[1]
        pinned = self._first(name, orjson.dumps(names))
        if pinned is FAILED:
            return self.local.pin_list(key, names)
        if pinned is None:
            self.local.hold(key, names=names)
            return None
        held = _names_of(pinned)
        if held is None:
            return self.local.pin_list(key, names)
        self.local.hold(key, names=held)
        return held

    def _first(self, name: str, value: bytes) -> Any:
        """None when value became the key's; else what the key holds (or FAILED)."""
        if self.state.shared(self.client.set, name, value, nx=True, ex=self.ttl) is True:
            return None
        held = self.state.shared(self.client.get, name)
        return held if isinstance(held, bytes) or held is FAILED else FAILED


def _pin_of(value: bytes) -> Pin | None:
    try:
        body = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(body, dict) or not isinstance(body.get("sha256"), str):
        return None
    form = body.get("definition")
    return Pin(body["sha256"], form if isinstance(form, str) else None)


def _names_of(value: bytes) -> list[str] | None:
    try:
        body = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    return body if isinstance(body, list) and all(isinstance(n, str) for n in body) else None


def source_of(origin: Origin, application: str | None) -> str:
    """Where a definition comes from, as the log says it and as its pins are keyed."""
    app = application or "(unnamed)"
    if origin.kind == "mcp" and origin.endpoint:
        return f"mcp {origin.server or '(unnamed)'} at {origin.endpoint}"
    if origin.kind == "mcp":
        return f"mcp {origin.server or '(unnamed)'} hosted for app {app}"
    return f"app {app} at {origin.endpoint or '(unknown)'}, instructions {origin.agent or '-'}"


class Pins:
    """Definitions against their pins: the changes to say, each once."""

    def __init__(self, store: PinStore | None = None, lock: Lock | None = None) -> None:
        self.store: PinStore = store if store is not None else LocalPins()
        self.lock = lock

    def check(
        self, definitions: ToolDefinitions | None, application: str | None = None
    ) -> list[ToolChange]:
        """The changes these definitions make against their pins, said for the first time."""
        if definitions is None:
            return []
        changes: list[ToolChange] = []
        origin, source = None, ""
        for declared in definitions.declared:
            if declared.origin is not origin:  # the many tools of one list share one origin
                origin = declared.origin
                source = source_of(origin, application)
            changes += self._definition(declared, source, application, definitions.announced)
        if definitions.whole is not None:
            changes += self._list(definitions.whole, application, definitions.announced)
        return changes

    def first_hidden(
        self, definitions: ToolDefinitions | None, hiding: set[str], application: str | None
    ) -> set[str]:
        """Of the tools whose definitions hide text (hiding, by name), those whose definition
        has not been said before: hidden text in a definition is said once, as a change is,
        not on every request that declares it again."""
        if definitions is None:
            return set()
        return {
            d.name
            for d in definitions.declared
            if d.name in hiding
            and self.store.mark(
                f"{source_of(d.origin, application)}\n{d.name}", f"{HIDDEN}{d.fingerprint}"
            )
        }

    def _definition(
        self, declared: Declared, source: str, application: str | None, announced: bool
    ) -> list[ToolChange]:
        key = f"{source}\n{declared.name}"
        store, print_ = self.store, declared.fingerprint
        if store.known(key, print_):
            return []
        server = declared.origin.server if declared.origin.kind == "mcp" else None
        said = _Said(source, server, announced)
        locked = self.lock.find(declared.origin, application, declared.name) if self.lock else None
        if locked is not None:
            if store.mark(key, print_) and locked.sha256 != print_:
                return [said.changed(declared, "lock", locked.sha256, canonical(locked.definition))]
            return []
        changes = []
        covered = self.lock is not None and self.lock.matching(declared.origin, application)
        if covered and store.mark(key, APPEARED):  # the lock approves this source's tools, but
            changes.append(said.appeared(declared, "lock"))  # not this one
        if not store.mark(key, print_):
            return changes
        form = declared.canonical if len(declared.canonical) <= MAX_DEFINITION else None
        pinned = store.pin(key, Pin(print_, form))
        if pinned is not None and pinned.fingerprint != print_:
            changes.append(
                said.changed(declared, "first-seen", pinned.fingerprint, pinned.canonical)
            )
        return changes

    def _list(self, whole: ToolList, application: str | None, announced: bool) -> list[ToolChange]:
        source = source_of(whole.origin, application)
        locked = (
            {e.name for e in self.lock.matching(whole.origin, application)} if self.lock else set()
        )
        against = "lock" if locked else "first-seen"
        first = None if locked else self.store.pin_list(source, whole.names)
        pinned = locked or set(whole.names if first is None else first)
        names = set(whole.names)
        said = _Said(source, whole.origin.server, announced)
        changes = [
            said.listed(name, APPEARED, against)
            for name in sorted(names - pinned)
            if self.store.mark(f"{source}\n{name}", APPEARED)
        ]
        changes += [
            said.listed(name, GONE, against)
            for name in sorted(pinned - names)
            if self.store.mark(f"{source}\n{name}", GONE)
        ]
        return changes


@dataclass(slots=True)
class _Said:
    """How one source's changes are said."""

    source: str
    server: str | None
    announced: bool

    def changed(
        self, declared: Declared, against: str, before: str, form: str | None
    ) -> ToolChange:
        details = (
            diff(form, declared.canonical)
            if form is not None
            else [f"the first definition was larger than {MAX_DEFINITION} bytes: only its "
                  "fingerprint was kept, so what changed cannot be said"]
        )  # fmt: skip
        return self._change(
            declared.name,
            "changed",
            against=against,
            before=before,
            declared=declared,
            details=details,
        )

    def appeared(self, declared: Declared, against: str) -> ToolChange:
        description = as_dict(parsed(declared.canonical)).get("description")
        details = [f"$.description: {show(description)}"] if description is not None else []
        return self._change(
            declared.name,
            APPEARED,
            against=against,
            before=None,
            declared=declared,
            details=details,
        )

    def listed(self, name: str, change: str, against: str) -> ToolChange:
        where = "the lock" if against == "lock" else "the first whole list"
        said = "is not in" if change == APPEARED else "was in"
        return self._change(
            name,
            change,
            against=against,
            before=None,
            declared=None,
            details=[f"{name} {said} {where}"],
        )

    def _change(
        self,
        tool: str,
        change: str,
        *,
        against: str,
        before: str | None,
        declared: Declared | None,
        details: list[str],
    ) -> ToolChange:
        return ToolChange(
            source=self.source,
            server=self.server,
            tool=tool,
            change=change,  # type: ignore[arg-type]
            against=against,  # type: ignore[arg-type]
            before=short(before),
            after=short(declared.fingerprint) if declared is not None else None,
            announced=self.announced,
            details=details,
        )


def load_lock(path: str) -> Lock | None:
    """The tools lock at path (already checked by lock_problem); None for no path."""
    if not path:
        return None
    with open(path, encoding="utf-8") as handle:
        return read_lock(handle.read())


def open_pins(settings: Mapping[str, Any], state: State) -> Pins:
    """The pins these settings ask for: beside the shared state when there is one."""
    if isinstance(state, RedisState) and not hash_key_shared():
        logger.warning(
            "the tool-definition pins are shared in Redis, but TOOLTAP_HASH_KEY is unset: this "
            "replica hashes the applications' credentials under a key of its own, so it shares "
            "no pin of an application told apart by its credential; set one TOOLTAP_HASH_KEY "
            "in every replica"
        )
    store: PinStore = (
        RedisPins(state, settings["tooltap_pins_ttl"])
        if isinstance(state, RedisState)
        else LocalPins()
    )
    return Pins(store, load_lock(settings["tooltap_tools_lock"]))
