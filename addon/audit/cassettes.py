"""VCR cassettes (vcrpy, pytest-recording) read as exchanges, with vcrpy's own loading.

vcrpy's safe YAML loader and its `deserialize` (format versions, old cassettes
refused with its own message, bodies as bytes) do the reading. Before that, the
bodies some projects' serialisers store parsed (`parsed_body`) are written back
as compact JSON, as a client would have sent or received them. Each interaction
is one exchange; its line in the file is kept for reports that point at it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml
from vcr.serialize import deserialize
from vcr.serializers import jsonserializer, yamlserializer

from tooltap.core import REQUEST_HEADERS, Exchange

from .inputs import Item

SUFFIXES = (".yaml", ".yml", ".json")


def cassette_files(paths: Iterable[str]) -> Iterator[Path]:
    """The files named, and every cassette-looking file under the folders named, sorted."""
    for name in paths:
        path = Path(name)
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*") if p.suffix in SUFFIXES and p.is_file())
        elif path.exists():
            yield path
        else:
            raise FileNotFoundError(f"no such file or folder: {name}")


def cassette_items(path: Path) -> Iterator[Item]:
    """One item per interaction; one unreadable item when the file is not a cassette."""
    try:
        text = path.read_text(encoding="utf-8")  # OSError: a read error, which stops the audit
    except UnicodeDecodeError as exc:
        yield Item(str(path), unreadable=f"not a VCR cassette: {exc}", source=str(path))
        return
    try:
        requests, responses = _load(path, text)
    except (ValueError, TypeError, KeyError, AttributeError, IndexError, yaml.YAMLError) as exc:
        yield Item(str(path), unreadable=f"not a VCR cassette: {_why(exc)}", source=str(path))
        return
    lines = _json_lines(text) if path.suffix == ".json" else _interaction_lines(text)
    for index, (request, response) in enumerate(zip(requests, responses, strict=True)):
        line = lines[index] if index < len(lines) else None
        label = f"{path}:{line}" if line else f"{path}#{index + 1}"
        try:
            exchange = _exchange(request, response)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            yield Item(
                label,
                unreadable=f"interaction {index + 1} cannot be rebuilt: {_why(exc)}",
                source=str(path),
                line=line,
            )
            continue
        yield Item(label, exchange, source=str(path), line=line)


def _why(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"it has no {exc.args[0]!r}"
    text = str(exc).splitlines()[0] if str(exc) else ""
    return text or type(exc).__name__


class _Parsed:
    """Hands vcrpy's `deserialize` a cassette already parsed (and its bodies normalised)."""

    def __init__(self, data: Any) -> None:
        self.data = data

    def deserialize(self, _text: str) -> Any:
        return self.data


def _load(path: Path, text: str) -> tuple[list[Any], list[dict[str, Any]]]:
    serializer = jsonserializer if path.suffix == ".json" else yamlserializer
    data = serializer.deserialize(text)
    if isinstance(data, dict):
        for interaction in data.get("interactions") or ():
            _unparse(interaction)
    elif not isinstance(data, list):
        raise ValueError("no interactions in it")
    loaded = deserialize(text, _Parsed(data))
    return loaded[0], loaded[1]


def _unparse(interaction: dict[str, Any]) -> None:
    """A body stored parsed (`parsed_body`) back as compact JSON, where vcrpy expects it."""
    if not isinstance(interaction, dict):
        return  # vcrpy says what is wrong with it
    request, response = interaction.get("request"), interaction.get("response")
    if isinstance(request, dict) and "parsed_body" in request:
        request["body"] = _compact(request.pop("parsed_body"))
    if isinstance(response, dict) and "parsed_body" in response:
        response["body"] = {"string": _compact(response.pop("parsed_body"))}
        # What the serialiser stored is the decoded body: no encoding applies to it now.
        headers = response.get("headers") or {}
        response["headers"] = {k: v for k, v in headers.items() if k.lower() != "content-encoding"}


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _exchange(request: Any, response: dict[str, Any]) -> Exchange:
    body = request.body
    if isinstance(body, str):
        body = body.encode()
    status = response["status"]["code"]
    content = (response.get("body") or {}).get("string") or b""
    if isinstance(content, str):
        content = content.encode()
    return Exchange(
        method=request.method,
        url=request.uri,
        request_body=body or b"",
        request_headers={name: _header(request.headers, name) for name in REQUEST_HEADERS},
        status=int(status),
        response_headers={
            name.lower(): _joined(values)
            for name, values in (response.get("headers") or {}).items()
        },
        response_body=content,
    )


def _header(headers: Any, name: str) -> str:
    for key, value in (headers or {}).items():
        if key.lower() == name:
            return _joined(value)
    return ""


def _joined(values: Any) -> str:
    return ", ".join(map(str, values)) if isinstance(values, list) else str(values)


def _interaction_lines(text: str) -> list[int]:
    """The 1-based line where each interaction starts, read from the YAML's node marks."""
    try:
        root = yaml.compose(
            text, Loader=yaml.CSafeLoader if hasattr(yaml, "CSafeLoader") else yaml.SafeLoader
        )
    except yaml.YAMLError:
        return []
    if not isinstance(root, yaml.MappingNode):
        return []
    for key, value in root.value:
        if getattr(key, "value", None) == "interactions" and isinstance(value, yaml.SequenceNode):
            return [item.start_mark.line + 1 for item in value.value]
    return []


def _json_lines(text: str) -> list[int]:
    """The same for a JSON cassette: each element of its top-level "interactions" array."""
    decoder = json.JSONDecoder()
    try:
        data, _ = decoder.raw_decode(text)
        key = text.find('"interactions"') if isinstance(data, dict) else -1
        if key < 0:
            return []
        at, line, counted = text.index("[", key) + 1, 1, 0
        lines: list[int] = []
        while True:
            while at < len(text) and text[at] in " \t\r\n,":
                at += 1
            if at >= len(text) or text[at] == "]":
                return lines
            line += text.count("\n", counted, at)
            counted = at
            lines.append(line)
            _, at = decoder.raw_decode(text, at)
    except ValueError:
        return []
