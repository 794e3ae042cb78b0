"""Strict omitted, so the JSON schema is only a suggestion.

Structured Outputs guarantees schema adherence only when strict is true. With
strict absent or false the schema degrades to a hint the model usually follows,
and the request is accepted either way with no warning of any kind. When strict
is off the interesting question is why, and the answer is almost always that
the schema cannot satisfy the strict subset, so the walk here names every rule
that would have to be fixed before strict: true could be turned on.

Functions take the response shape (Responses `text.format` or Chat
`response_format`); the limits are parameters, OpenAI's documented ceilings by default.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .records import Limits
from .shapes import as_dict

STATES = (
    "advisory-schema",
    "no-schema",
    "free-text",
    "unknown-format",
    "advisory-tools",
    "enforced",
)

FINDINGS = ("advisory-schema", "no-schema", "advisory-tools")

# Constrained decoding ignores these entirely. A schema that carries them is
# not wrong, but the constraints they express are not enforced by anyone.
UNENFORCED_KEYWORDS = (
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "multipleOf",
    "minItems",
    "maxItems",
    "uniqueItems",
    "default",
)

# Keywords OpenAI lists as not supported in strict mode: the API refuses a
# strict schema that carries them. (Structured Outputs guide, "Supported
# schemas"; those already in UNENFORCED_KEYWORDS are reported there.)
UNSUPPORTED_KEYWORDS = (
    "allOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "patternProperties",
    "unevaluatedProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "unevaluatedItems",
    "contains",
    "minContains",
    "maxContains",
)

_GROUPS = ("anyOf", "oneOf", "allOf")


SEED_LIMITS = Limits()
"""The default ceilings: 5 levels, 5,000 properties, 1,000 enum values."""

OPENAI_LIMITS = Limits(
    max_depth=10,
    max_properties=5000,
    max_enum_values=1000,
    max_total_string_chars=120_000,
    large_enum_values=250,
    max_large_enum_chars=15_000,
)
"""The current OpenAI ceilings: 10 levels, and budgets on names and enum values."""


def declared_format(response: Any) -> tuple[str, Any, Any, Any]:
    """The output format the response was generated under. Pure.

    Returns (kind, name, strict, schema). kind is json_schema, json_object,
    text, none, or whatever unknown type was declared. Read from the response
    rather than from your source tree, because the constant in the repository
    is not necessarily what the running deploy sent.
    """
    body = as_dict(response)
    return format_declared(as_dict(body.get("text")).get("format") or body.get("response_format"))


def format_declared(fmt: Any) -> tuple[str, Any, Any, Any]:
    """declared_format, given the format object itself (Responses' text.format, Chat's
    response_format). Pure."""
    if not isinstance(fmt, dict) or not fmt:
        return ("none", None, None, None)
    kind = str(fmt.get("type") or "none")
    if kind != "json_schema":
        return (kind, None, None, None)
    # Responses flattens the schema onto the format object; Chat Completions
    # nests it under json_schema. Both shapes are stored.
    inner = fmt["json_schema"] if isinstance(fmt.get("json_schema"), dict) else fmt
    return ("json_schema", inner.get("name"), inner.get("strict"), inner.get("schema"))


def strict_state(kind: Any, strict: Any) -> str:
    """What the declared format actually promises. Pure."""
    if kind == "json_schema":
        return "enforced" if strict is True else "advisory"
    if kind == "json_object":
        return "no-schema"
    if kind in ("text", "none"):
        return "free-text"
    return "unknown-format"


def _children(schema: Mapping[str, Any]) -> list[Any]:
    """Sub-schemas one level down, in the order the walks visit them."""
    children: list[Any] = []
    properties = schema.get("properties")
    if isinstance(properties, dict):
        children.extend(properties.values())
    if isinstance(schema.get("items"), dict):
        children.append(schema["items"])
    for group in _GROUPS:
        if isinstance(schema.get(group), list):
            children.extend(x for x in schema[group] if isinstance(x, dict))
    defs = schema.get("$defs")
    if isinstance(defs, dict):
        children.extend(x for x in defs.values() if isinstance(x, dict))
    return children


def schema_size(schema: Any, depth: int = 1) -> dict[str, int]:
    """Count properties, depth and the largest enum in a schema. Pure.

    Returned as a dict rather than printed, because the interesting comparison
    is against the documented ceilings and those change more often than this
    walk does. Iterative, so no nesting depth can exhaust the stack.
    """
    totals = {"properties": 0, "depth": depth, "enum": 0}
    stack: list[tuple[Any, int]] = [(schema, depth)]
    while stack:
        node, level = stack.pop()
        totals["depth"] = max(totals["depth"], level)
        if not isinstance(node, dict):
            continue
        if isinstance(node.get("enum"), list):
            totals["enum"] = max(totals["enum"], len(node["enum"]))
        if isinstance(node.get("properties"), dict):
            totals["properties"] += len(node["properties"])
        stack.extend((child, level + 1) for child in _children(node))
    return totals


def string_budget(schema: Any, large_enum_values: int = 250) -> dict[str, int]:
    """Characters spent on property names and enum values. Pure.

    Returns the total, and the largest character count of one string enum that
    has more than large_enum_values values: OpenAI budgets both separately.
    """
    total = 0
    largest = 0
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        if isinstance(node.get("properties"), dict):
            total += sum(len(str(name)) for name in node["properties"])
        enum = node.get("enum")
        if isinstance(enum, list):
            strings = [v for v in enum if isinstance(v, str)]
            chars = sum(len(v) for v in strings)
            total += chars
            if len(strings) > large_enum_values:
                largest = max(largest, chars)
        stack.extend(_children(node))
    return {"total": total, "large_enum": largest}


def _node_blockers(schema: Mapping[str, Any], path: str, depth: int, limits: Limits) -> list[str]:
    """The rules one schema node breaks, not counting its children. Pure."""
    problems: list[str] = []
    raw = schema.get("type")
    kinds = [str(k) for k in (raw if isinstance(raw, list) else ([raw] if raw else []))]

    if depth == 1:
        if any(schema.get(group) for group in _GROUPS):
            problems.append(
                "$: the root may not be anyOf, oneOf or allOf; it must be a plain object"
            )
        elif "object" not in kinds:
            problems.append(
                "$: the root type must be object, not %s" % (", ".join(kinds) or "unset")
            )

    if "object" in kinds:
        if schema.get("additionalProperties") is not False:
            problems.append(f"{path}: needs additionalProperties: false")
        properties = as_dict(schema.get("properties"))
        listed = schema.get("required")
        required = {r for r in listed if isinstance(r, str)} if isinstance(listed, list) else set()
        missing = sorted(set(properties) - required)
        if missing:
            problems.append(
                f"{path}: every property must be listed in required; missing "
                f"{', '.join(missing)}. Use a nullable type for the optional ones "
                "rather than leaving them out."
            )

    unenforced = [k for k in UNENFORCED_KEYWORDS if k in schema]
    if unenforced:
        problems.append(
            f"{path}: {', '.join(unenforced)} are silently unenforced under "
            "constrained decoding. Keep them for your own validator if you like, "
            "but do not rely on the model honouring them."
        )
    # At the root, the composition keywords are already named by the root rule.
    unsupported = [
        k for k in UNSUPPORTED_KEYWORDS if k in schema and not (depth == 1 and k in _GROUPS)
    ]
    if unsupported:
        problems.append(
            f"{path}: {', '.join(unsupported)} are not supported in strict mode; "
            "the API refuses the schema until they are removed."
        )
    if depth > limits.max_depth:
        problems.append(f"{path}: nested {depth} levels deep, past the limit of {limits.max_depth}")
    return problems


def schema_blockers(
    schema: Any, path: str = "$", depth: int = 1, limits: Limits = SEED_LIMITS
) -> list[str]:
    """Every reason strict: true would be refused for this schema. Pure.

    This is the part of the note that pays for itself. Telling somebody to set
    strict: true is useless on its own, because they tried that, the request
    400ed, and the flag came back out. The list of rules the schema breaks is
    the actual work. The walk stops below the depth limit, and is iterative.
    """
    if not isinstance(schema, dict):
        return [f"{path}: not a schema object"] if depth == 1 else []
    problems: list[str] = []
    stack: list[tuple[Mapping[str, Any], str, int]] = [(schema, path, depth)]
    while stack:
        node, where, level = stack.pop()
        problems.extend(_node_blockers(node, where, level, limits))
        if level > limits.max_depth:
            continue
        below: list[tuple[Mapping[str, Any], str, int]] = []
        properties = node.get("properties")
        if isinstance(properties, dict):
            below.extend(
                (properties[name], f"{where}.{name}", level + 1)
                for name in sorted(properties)
                if isinstance(properties[name], dict)
            )
        if isinstance(node.get("items"), dict):
            below.append((node["items"], f"{where}[]", level + 1))
        if level > 1 and isinstance(node.get("anyOf"), list):
            below.extend(
                (branch, f"{where}.anyOf[{i}]", level + 1)
                for i, branch in enumerate(node["anyOf"])
                if isinstance(branch, dict)
            )
        defs = node.get("$defs")
        if isinstance(defs, dict):
            below.extend(
                (sub, f"{where}.$defs.{name}", level + 1)
                for name, sub in sorted(defs.items())
                if isinstance(sub, dict)
            )
        stack.extend(reversed(below))
    return problems


def limit_problems(schema: Any, limits: Limits = SEED_LIMITS) -> list[str]:
    """Size ceilings this schema passes. Pure. Empty when it fits."""
    if not isinstance(schema, dict):
        return []
    lines: list[str] = []
    size = schema_size(schema)
    if size["properties"] > limits.max_properties:
        lines.append(
            f"The schema declares {size['properties']} properties, past the limit "
            f"of {limits.max_properties}."
        )
    if size["enum"] > limits.max_enum_values:
        lines.append(
            f"The largest enum holds {size['enum']} values, past the limit of "
            f"{limits.max_enum_values}."
        )
    if limits.max_total_string_chars is None and limits.max_large_enum_chars is None:
        return lines
    budget = string_budget(schema, limits.large_enum_values)
    if (
        limits.max_total_string_chars is not None
        and budget["total"] > limits.max_total_string_chars
    ):
        lines.append(
            f"Property names and enum values total {budget['total']} characters, "
            f"past the limit of {limits.max_total_string_chars}."
        )
    if (
        limits.max_large_enum_chars is not None
        and budget["large_enum"] > limits.max_large_enum_chars
    ):
        lines.append(
            f"A string enum of more than {limits.large_enum_values} values totals "
            f"{budget['large_enum']} characters, past the limit of "
            f"{limits.max_large_enum_chars}."
        )
    return lines


def loose_tools(response: Any) -> list[str]:
    """Tools echoed on the response whose strict flag is not true. Pure.

    Per tool, because strict is declared per tool. A response can carry a
    strict text format and a function definition with no strict flag at all,
    and the guarantee covers only the half that asked for it.
    """
    loose: list[str] = []
    tools = as_dict(response).get("tools")
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict) or str(tool.get("type") or "function") != "function":
            continue
        inner = tool["function"] if isinstance(tool.get("function"), dict) else tool
        if inner.get("strict") is not True:
            loose.append(str(inner.get("name") or "unnamed"))
    return loose


def classify(response: Any) -> tuple[str, str]:
    """Classify one response's output format. Pure. Returns (state, detail).

    Nothing here reads the output text. Whether this particular call happened
    to produce a well-shaped object is not the point: the point is that no call
    made under this format was ever obliged to.
    """
    return judge(declared_format(response), lambda: loose_tools(response))


def judge(
    declared: tuple[str, Any, Any, Any], loose_tools: Callable[[], list[str]]
) -> tuple[str, str]:
    """The state of a declared format (declared_format), with the names of the loose tools
    beside it (asked only of a strict format). Pure. Returns (state, detail)."""
    kind, name, strict, _schema = declared
    state = strict_state(kind, strict)
    label = f"schema {name!r}" if name else "the declared schema"

    if state == "advisory":
        return (
            "advisory-schema",
            f"{label} was attached with strict {'false' if strict is False else 'absent'}, "
            "so it is a hint the model usually follows rather than a guarantee. Valid "
            "JSON of the wrong shape is a legal outcome here.",
        )
    if state == "no-schema":
        return (
            "no-schema",
            "Legacy json_object mode: the output is guaranteed to be valid JSON and "
            "nothing else. No schema was ever attached, so no shape was ever promised.",
        )
    if state == "free-text":
        return (
            "free-text",
            "No output format was declared, so there is no contract to enforce and "
            "nothing to report.",
        )
    if state == "unknown-format":
        return (
            "unknown-format",
            f"Format type {kind!r} is not one tooltap knows. Read the raw record "
            "before drawing a conclusion.",
        )
    loose = loose_tools()
    if loose:
        return (
            "advisory-tools",
            f"The text format is strict, but {len(loose)} tool definition(s) are not: "
            f"{', '.join(loose)}. Tool arguments are constrained per tool, and an "
            "unstrict tool is unconstrained.",
        )
    return ("enforced", f"{label} was attached with strict: true, and no tool beside it is loose.")


def repair_lines(response: Any, state: Any, limits: Limits = SEED_LIMITS) -> list[str]:
    """The repair, built from the schema this response actually carried. Pure."""
    if state not in FINDINGS:
        return []
    schema = declared_format(response)[3]
    lines: list[str] = []
    if state == "no-schema":
        lines.append(
            "Move from json_object to a json_schema format with strict: true. JSON "
            "mode promises syntax and nothing about shape, which is why your "
            "validator is the first thing that ever sees the mismatch."
        )
    if state == "advisory-tools":
        lines.append(
            "Set strict: true on every tool as well as on the text format, with "
            "additionalProperties: false and every parameter listed in required."
        )
    blockers = schema_blockers(schema, limits=limits) if schema else []
    if blockers:
        lines.append("strict: true would be refused for this schema until these are fixed:")
        lines.extend("  " + b for b in blockers)
    elif state == "advisory-schema":
        lines.append(
            "This schema already satisfies the strict subset, so setting strict: true "
            "is a one-line change. Somebody dropped the flag and the request kept "
            "succeeding."
        )
    if schema:
        lines.extend(limit_problems(schema, limits))
    return lines
