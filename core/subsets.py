"""Each API's strict subset of JSON Schema, named after the source it is read from.

A strict schema that leaves its provider's subset is refused (a 400) or
quietly loosened, and the two providers draw the line in different places:

- OpenAI Structured Outputs (the seed rules in `tooltap.core.schema`): every
  property listed in `required`, no `allOf`, and the string and number
  constraints are unenforced.
- Anthropic structured outputs, as anthropic-sdk-python's `transform_schema`
  (`lib/_parse/_transform.py`) rewrites a schema before sending it:
  `required` is kept as given (optional properties are allowed), `allOf` is
  kept, a fixed set of string formats is supported, `additionalProperties:
  false` is set on every object, and everything else is moved out of the
  schema into its description.

`blockers(api, schema)` picks the rule set by API, so a 400 from one provider
is never explained with the other's rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import parallel, schema
from .schema import SEED_LIMITS, Limits

OPENAI = "OpenAI Structured Outputs"
ANTHROPIC = "Anthropic structured outputs (anthropic-sdk-python transform_schema)"

# What transform_schema keeps. `definitions` is the older spelling of $defs,
# accepted locally by the API; oneOf is rewritten to anyOf by the SDK.
ANTHROPIC_KEYWORDS = frozenset(
    {"type", "enum", "const", "anyOf", "allOf", "$defs", "definitions", "$ref", "description",
     "title", "properties", "additionalProperties", "required", "format", "items", "minItems"}
)  # fmt: skip
ANTHROPIC_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"}
)
_TYPED = ("type", "anyOf", "oneOf", "allOf", "enum", "const", "$ref")


def _primitive(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _anthropic_node(node: Mapping[str, Any], path: str) -> list[str]:
    """The rules one node breaks under Anthropic's subset, not counting its children."""
    problems: list[str] = []
    raw = node.get("type")
    kinds = raw if isinstance(raw, list) else [raw]
    if not any(key in node for key in _TYPED):
        problems.append(f"{path}: needs a type (or anyOf, allOf, enum, const or $ref)")
    if "object" in kinds and node.get("additionalProperties") is not False:
        problems.append(f"{path}: needs additionalProperties: false")
    outside = sorted(key for key in node if key not in ANTHROPIC_KEYWORDS)
    if "oneOf" in outside:
        problems.append(f"{path}: oneOf is not in the subset; use anyOf")
        outside.remove("oneOf")
    if outside:
        problems.append(
            f"{path}: {', '.join(outside)} are not in the subset; the SDK moves them into "
            "the description, where nothing enforces them"
        )
    fmt = node.get("format")
    if (
        "format" in node
        and "string" in kinds
        and not (isinstance(fmt, str) and fmt in ANTHROPIC_FORMATS)
    ):
        problems.append(f"{path}: format {fmt!r} is not one of the supported string formats")
    if "minItems" in node and node.get("minItems") not in (0, 1):
        problems.append(f"{path}: minItems can only be 0 or 1")
    enum = node.get("enum")
    if isinstance(enum, list) and not all(_primitive(value) for value in enum):
        problems.append(f"{path}: enum values must be strings, numbers, booleans or null")
    return problems


def anthropic_blockers(root: Any, *, tool: bool = True) -> list[str]:
    """Every reason Anthropic's strict mode would refuse or loosen this schema. Pure.

    A tool's input_schema must also be an object at its root. Iterative, so no
    nesting depth can exhaust the stack.
    """
    if not isinstance(root, dict):
        return ["$: not a schema object"]
    problems: list[str] = []
    if tool and root.get("type") != "object":
        problems.append("$: a tool's input_schema must have type object at its root")
    stack: list[tuple[Mapping[str, Any], str]] = [(root, "$")]
    while stack:
        node, path = stack.pop()
        problems.extend(_anthropic_node(node, path))
        below: list[tuple[Any, str]] = []
        properties = node.get("properties")
        if isinstance(properties, dict):
            below.extend((properties[name], f"{path}.{name}") for name in sorted(properties))
        below.append((node.get("items"), f"{path}[]"))
        for group in ("anyOf", "oneOf", "allOf"):
            branches = node.get(group)
            if isinstance(branches, list):
                below.extend((b, f"{path}.{group}[{i}]") for i, b in enumerate(branches))
        for defs in ("$defs", "definitions"):
            if isinstance(node.get(defs), dict):
                below.extend((sub, f"{path}.{defs}.{name}") for name, sub in node[defs].items())
        stack.extend((sub, where) for sub, where in reversed(below) if isinstance(sub, dict))
    return problems


def blockers(api: str, value: Any, limits: Limits = SEED_LIMITS, *, tool: bool = True) -> list[str]:
    """Why this provider's strict mode would refuse this schema, by its own rules. Pure."""
    if api == "messages":
        return anthropic_blockers(value, tool=tool)
    return schema.schema_blockers(value, limits=limits) + schema.limit_problems(value, limits)


def state_repairs(api: str, state: Any) -> list[str]:
    """The repair for a parallel/strict state, in this provider's terms. Pure."""
    if api == "messages" and state == "fanout-no-strict":
        return [
            "no schema guarantee was in place to lose. Validate tool arguments in your own "
            "handler, or declare strict: true on the tools (Anthropic documents no conflict "
            "between strict tools and parallel calls)."
        ]
    if api == "realtime" and state == "fanout-no-strict":
        return [
            "Realtime function tools have no strict mode, so no schema guarantee was in place "
            "to lose. Validate the arguments in your handler before running the tool, and "
            "answer an invalid call with a function_call_output that says what was wrong."
        ]
    return parallel.repair_lines(state)


def format_repairs(
    api: str,
    response: Mapping[str, Any],
    state: Any,
    loose: list[tuple[str, Any]],
    limits: Limits = SEED_LIMITS,
) -> list[str]:
    """The repair for an output-format state, in this provider's terms. Pure.

    loose lists the non-strict tools beside the format, as (name, schema).
    """
    if api != "messages":
        return schema.repair_lines(response, state, limits)
    if state != "advisory-tools":
        return []
    lines = [
        "Set strict: true on every tool beside the strict output format. Anthropic's strict "
        "subset keeps optional properties, and needs additionalProperties: false on every object."
    ]
    for name, parameters in loose:
        found = anthropic_blockers(parameters)
        if found:
            lines.append(f"strict: true on tool {name} needs these fixed first:")
            lines.extend(f"  {line}" for line in found)
    return lines
