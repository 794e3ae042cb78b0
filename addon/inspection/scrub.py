"""Credentials out of a verdict: every echo of a request's credential header values."""

from __future__ import annotations

from typing import Any

import orjson

from tooltap.core import Verdict

from ..sinks.redaction import REDACTED


def scrub(verdict: Verdict, credentials: tuple[str, ...]) -> Verdict:
    """The verdict with every occurrence of a credential replaced, in any string at any depth."""
    text = verdict.model_dump_json()
    if not any(orjson.dumps(c).decode()[1:-1] in text for c in credentials):
        return verdict

    def clean(value: str) -> str:
        for credential in credentials:
            value = value.replace(credential, REDACTED)
        return value

    root: list[Any] = [verdict.model_dump()]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        parent, key = stack.pop()
        node = parent[key]
        if isinstance(node, str):
            parent[key] = clean(node)
        elif isinstance(node, list):
            stack.extend((node, i) for i in range(len(node)))
        elif isinstance(node, dict):
            for name in list(node):
                new = clean(name) if isinstance(name, str) else name
                if new != name:
                    node[new] = node.pop(name)
                stack.append((node, new))
    return Verdict.model_validate(root[0])
