"""Tool definitions: what the model reads of a tool, its fingerprint, and what changed in it.

A definition is read the same whichever half of the loop it crossed: an MCP server's tools/list,
a model request's declared tools (Chat, Responses, Messages, Realtime, Converse, Gemini), or
the tools a hosted MCP server listed inside a Responses turn. Its canonical form holds what the
model reads of it, under MCP's names (name, title, description, inputSchema, outputSchema,
annotations), serialised with sorted keys, compactly, in UTF-8: two declarations of one tool
in two dialects have one fingerprint, the SHA-256 of that form. Nothing else is dropped: a
changed number, string or list order is a changed definition.

The diff says in words and JSON paths what differs between two forms (a description before and
after, properties added or removed, types, required, enum values, annotations). Pins, and
whether a change was seen before, are the caller's memory (tooltap.addon.inspection.pins).
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import orjson

from .hidden import escape, json_path, scan
from .records import HiddenText, Origin
from .served import Served
from .shapes import as_dict, as_list, as_str
from .turn import Turn

KEYS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")
MAX_DIFF = 40  # lines of one diff, then a count of the rest
MAX_SHOWN = 160  # characters of a value shown in a diff line
CACHE_BYTES = 8 << 20  # bytes of definitions a DefinitionCache keeps, the least recently used out
CONTEXT = 40  # characters kept either side of what changed in a long text
# What an annotation says when true (MCP's ToolAnnotations), for the diff's words.
HINTS = {
    "readOnlyHint": "it only reads",
    "destructiveHint": "it may destroy data",
    "idempotentHint": "calling it again has no further effect",
    "openWorldHint": "it reaches outside systems",
}


# Plain data, not validated models: thousands are made a second, each of fields made here.
@dataclass(frozen=True, slots=True)
class Declared:
    """One tool definition as an exchange carried it: its name (namespace/name where the
    dialect has namespaces), the SHA-256 of its canonical form, and that form; with the
    hidden characters in it, found once, when it is read (a kept one is read once)."""

    origin: Origin
    name: str
    fingerprint: str
    canonical: str
    hidden: tuple[HiddenText, ...] = field(default=(), compare=False)


@dataclass(frozen=True, slots=True)
class ToolList:
    """A tool server's whole list, read from its first page to its last."""

    origin: Origin
    names: list[str]


# Read-only once made, not frozen: one is made per exchange, and a frozen dataclass sets each
# field through object.__setattr__. Its __init__ is written out: compiled (setup.py), a
# dataclass's generated __init__ stays interpreted.
@dataclass(slots=True, init=False)
class ToolDefinitions:
    """The definitions one exchange carried, with what its caller needs to pin them."""

    declared: list[Declared]
    whole: ToolList | None  # a server's list, read whole with this exchange
    announced: bool  # read after the server said its list changed

    def __init__(
        self,
        declared: list[Declared] | None = None,
        whole: ToolList | None = None,
        announced: bool = False,
    ) -> None:
        self.declared = [] if declared is None else declared
        self.whole = whole
        self.announced = announced


# --- the canonical form ----------------------------------------------------------------------


def definition(
    name: str,
    *,
    title: Any = None,
    description: Any = None,
    input_schema: Any = None,
    output_schema: Any = None,
    annotations: Any = None,
) -> dict[str, Any]:
    """What the model reads of a tool, under MCP's names; what is absent is left out. Pure."""
    found = {
        "name": name,
        "title": title,
        "description": description,
        "inputSchema": input_schema,
        "outputSchema": output_schema,
        "annotations": annotations,
    }
    return {key: value for key, value in found.items() if value is not None}


def of_mcp(tool: Mapping[str, Any]) -> dict[str, Any]:
    """An MCP tools/list entry (or a hosted list's, whose schema is input_schema). Pure."""
    return definition(
        as_str(tool.get("name")),
        title=tool.get("title"),
        description=tool.get("description"),
        input_schema=tool.get("inputSchema", tool.get("input_schema")),
        output_schema=tool.get("outputSchema"),
        annotations=tool.get("annotations"),
    )


def _canonical(value: Mapping[str, Any]) -> bytes:
    """Sorted keys, no whitespace, UTF-8 as is. Pure and total (a lone surrogate or a huge
    integer, which orjson refuses, goes through the standard library)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        text = json.dumps(
            value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
        )
        return text.encode("utf-8", "surrogatepass")


def canonical(value: Mapping[str, Any]) -> str:
    """A definition's canonical form, as text. Pure and total."""
    return _canonical(value).decode("utf-8", "surrogatepass")


def fingerprint(form: str) -> str:
    """The SHA-256 of a canonical form, in hex. Pure."""
    return hashlib.sha256(form.encode("utf-8", "surrogatepass")).hexdigest()


def declare(origin: Origin, value: Mapping[str, Any]) -> Declared:
    """A definition (the dict `definition` gives) as an exchange carried it. Pure."""
    form = _canonical(value)
    text = form.decode("utf-8", "surrogatepass")
    name = as_str(value.get("name"))
    hidden = () if form.isascii() else tuple(
        HiddenText(**h.model_dump(), part="definition", tool=name)
        for h in scan(parsed(text))[0]  # in the canonical form's order
    )  # fmt: skip
    return Declared(origin, name, hashlib.sha256(form).hexdigest(), text, hidden)


def endpoint(url: str) -> str:
    """A server's endpoint: its URL without query or fragment. Pure and total."""
    try:
        parts = urlsplit(url)
    except ValueError:  # an unclosed IPv6 bracket, ...
        return url
    return f"{parts.scheme}://{parts.netloc}{parts.path}"


class DefinitionCache:
    """Tool definitions already read, by the bytes they were read from: an application sends
    the same tools with every request, and an unchanged list then costs one lookup, not a
    canonical form and a SHA-256 per tool and one for the instructions.

    The key is what the definitions are made of (the endpoint, the instructions, each tool's
    name, description and schemas) as orjson writes it, unsorted: equal keys are equal values,
    so the definitions are exactly those read afresh. At most `limit` bytes are kept (keys and
    canonical forms counted), the least recently used forgotten first. The caller owns it (the
    proxy keeps one per worker), so core holds no global state; results are the same with or
    without it.
    """

    def __init__(self, limit: int = CACHE_BYTES) -> None:
        self.limit = limit
        self.held = 0
        self._entries: OrderedDict[bytes, tuple[list[Declared], int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def read(self, parts: Any, build: Callable[[], list[Declared]]) -> list[Declared]:
        """The definitions `parts` make: kept ones, else those `build` reads (then kept)."""
        try:
            key = orjson.dumps(parts, option=orjson.OPT_NON_STR_KEYS)
        except (TypeError, orjson.JSONEncodeError):  # a lone surrogate, a huge integer
            return build()
        kept = self._entries.get(key)
        if kept is not None:
            self._entries.move_to_end(key)
            return list(kept[0])  # the caller's own list: what is kept stays as it was read
        found = build()
        size = 200 + len(key) + sum(300 + _stored(d.canonical) for d in found)
        if size <= self.limit:
            self._entries[key] = (found, size)
            self.held += size
            while self.held > self.limit:
                _, (_, dropped) = self._entries.popitem(last=False)
                self.held -= dropped
        return found


def _stored(text: str) -> int:
    """Bytes a text takes in memory, at most: CPython keeps a character in 1, 2 or 4 bytes."""
    return len(text) * (1 if text.isascii() else 4)


def _agent(instructions: str) -> str:
    return hashlib.sha256(instructions.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def declared_in(
    request: Turn | None,
    turn: Turn,
    *,
    url: str = "",
    instructions: str | Callable[[], str] = "",
    cache: DefinitionCache | None = None,
) -> ToolDefinitions:
    """The definitions a model exchange carried: the tools its request declared (function and
    custom tools; a provider's own have none), by the endpoint (url) and the instructions they
    were sent with, and those hosted MCP servers listed in the turn. instructions may be given
    as a function, called only when the request declares tools. Pure."""
    tools = [
        (f"{tool.namespace}/{tool.name}" if tool.namespace else tool.name, tool)
        for tool in (request.tools if request is not None else [])
        if tool.type in ("function", "custom")
    ]
    if not tools and not turn.hosted_tools:
        return ToolDefinitions()
    said = "" if not tools else instructions() if callable(instructions) else instructions

    def build() -> list[Declared]:
        if not tools:
            found = []
        else:
            app = Origin(kind="app", endpoint=endpoint(url) if url else None, agent=_agent(said))
            found = [
                declare(app, definition(name, description=tool.description,
                                        input_schema=tool.parameters))
                for name, tool in tools
            ]  # fmt: skip
        return found + [
            declare(
                Origin(kind="mcp", server=tool.namespace),
                definition(
                    tool.name,
                    description=tool.description,
                    input_schema=tool.parameters,
                    annotations=tool.annotations,
                ),
            )
            for tool in turn.hosted_tools
        ]

    if cache is None:
        return ToolDefinitions(declared=build())
    parts = [
        url,
        said,
        [[name, tool.description, tool.parameters] for name, tool in tools],
        [[t.namespace, t.name, t.description, t.parameters, t.annotations] for t in turn.hosted_tools],
    ]  # fmt: skip
    return ToolDefinitions(declared=cache.read(parts, build))


def served_in(served: Served, url: str, cache: DefinitionCache | None = None) -> ToolDefinitions:
    """The definitions one exchange with a tool server listed, and its whole list when this
    exchange completed one. Pure."""
    origin = Origin(kind="mcp", server=served.server.name, endpoint=endpoint(url))
    whole = None
    if served.listed and served.server.complete:
        whole = ToolList(origin=origin, names=sorted(served.server.tools))

    def build() -> list[Declared]:
        return [declare(origin, of_mcp(tool)) for tool in served.definitions]

    declared = build() if cache is None or not served.definitions else cache.read(
        ["mcp", origin.endpoint, origin.server, served.definitions], build
    )  # fmt: skip
    return ToolDefinitions(declared=declared, whole=whole, announced=served.announced)


def hidden_in(declared: Iterable[Declared]) -> list[HiddenText]:
    """Hidden characters in definitions, each with its tool and path. Pure."""
    return [hidden for item in declared for hidden in item.hidden]


def short(print_: str | None) -> str | None:
    """A fingerprint as logged: its first 16 hex digits. Pure."""
    return print_[:16] if print_ else None


# --- the diff --------------------------------------------------------------------------------


def show(value: Any) -> str:
    """A value in a diff line: JSON, hidden characters written as escapes, cut to MAX_SHOWN."""
    text = value if isinstance(value, str) else canonical({"v": value})[5:-1]
    if isinstance(value, str):
        text = json.dumps(text, ensure_ascii=False)
    text = escape(text)
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 1] + "…"


def _texts(before: str, after: str) -> str:
    """Two texts, long ones cut to what changed and CONTEXT characters either side."""
    if len(before) <= MAX_SHOWN and len(after) <= MAX_SHOWN:
        return f"{show(before)} → {show(after)}"
    start = 0
    while start < min(len(before), len(after)) and before[start] == after[start]:
        start += 1
    end = 0
    while (
        end < min(len(before), len(after)) - start
        and before[len(before) - 1 - end] == after[len(after) - 1 - end]
    ):
        end += 1
    lead = max(0, start - CONTEXT)

    def middle(text: str) -> str:
        stop = min(len(text), len(text) - end + CONTEXT)
        return ("…" if lead else "") + text[lead:stop] + ("…" if stop < len(text) else "")

    return f"{show(middle(before))} → {show(middle(after))}"


def _kind_of(schema: Any) -> str:
    kind = as_dict(schema).get("type")
    return f" ({show(kind)})" if kind is not None else ""


def _walk(before: Any, after: Any, path: str, key: str, out: list[str]) -> None:
    if before == after:
        return
    if isinstance(before, dict) and isinstance(after, dict):
        for name in sorted(set(before) | set(after), key=str):
            child = json_path(path, name)
            if name not in before:
                what = "property" if key == "properties" else "key"
                out.append(
                    f"{child}: {what} added{_kind_of(after[name]) if key == 'properties' else ' ' + show(after[name])}"
                )
            elif name not in after:
                what = "property" if key == "properties" else "key"
                out.append(f"{child}: {what} removed (was {show(before[name])})")
            else:
                _walk(before[name], after[name], child, str(name), out)
        return
    if key in ("required", "enum") and isinstance(before, list) and isinstance(after, list):
        gone = [v for v in before if v not in after]
        new = [v for v in after if v not in before]
        if key == "required":
            said = [*(f"now requires {show(v)}" for v in new),
                    *(f"no longer requires {show(v)}" for v in gone)]  # fmt: skip
        else:
            said = [*(f"value {show(v)} added" for v in new),
                    *(f"value {show(v)} removed" for v in gone)]  # fmt: skip
        out.append(f"{path}: {'; '.join(said) or 'reordered'}")
        return
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        # Names of their own: compiled (mypyc), a name keeps the type of its first use above.
        for index, (was, now) in enumerate(zip(before, after, strict=True)):
            _walk(was, now, f"{path}[{index}]", key, out)
        return
    if isinstance(before, str) and isinstance(after, str):
        out.append(f"{path}: {_texts(before, after)}")
        return
    line = f"{path}: {show(before)} → {show(after)}"
    if key in HINTS and before is True and after is not True:
        line += f" (no longer says {HINTS[key]})"
    elif key in HINTS and after is True and before is not True:
        line += f" (now says {HINTS[key]})"
    out.append(line)


def diff(before: str, after: str) -> list[str]:
    """What differs between two canonical forms, a line each, by JSON path. Pure and total."""
    old, new = parsed(before), parsed(after)
    out: list[str] = []
    _walk(old, new, "$", "", out)
    if len(out) > MAX_DIFF:
        out = [*out[:MAX_DIFF], f"… and {len(out) - MAX_DIFF} more"]
    return out


def parsed(form: str) -> Any:
    """A canonical form read back. Pure and total."""
    try:
        return orjson.loads(form)
    except orjson.JSONDecodeError:  # a lone surrogate, which only the standard library writes
        try:
            return json.loads(form)
        except ValueError:
            return {}


def listed(value: Any) -> list[Mapping[str, Any]]:
    """The tool entries of a tools/list result, or of a hosted list's tools. Pure."""
    return [t for t in map(as_dict, as_list(value)) if as_str(t.get("name"))]
