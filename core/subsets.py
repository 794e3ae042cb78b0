"""Each API's strict subset of JSON Schema, and its repairs, asked of its dialect.

A strict schema that leaves its provider's subset is refused (a 400) or quietly loosened, and
the providers draw the line in different places: OpenAI Structured Outputs (the rules in
`tooltap.core.schema`) and Anthropic structured outputs (tooltap.core.dialects.messages) among
them. A 400 from one provider is never explained with another's rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .dialects import DIALECTS, Dialect
from .dialects.messages import ANTHROPIC, ANTHROPIC_FORMATS, ANTHROPIC_KEYWORDS, anthropic_blockers
from .records import Limits
from .schema import SEED_LIMITS

__all__ = [
    "ANTHROPIC",
    "ANTHROPIC_FORMATS",
    "ANTHROPIC_KEYWORDS",
    "anthropic_blockers",
    "blockers",
    "format_repairs",
    "state_repairs",
]


def _reading(api: str) -> Dialect:
    """The API's dialect; for an exchange of no known API, OpenAI's rules."""
    return DIALECTS.get(api) or DIALECTS["responses"]


def blockers(api: str, value: Any, limits: Limits = SEED_LIMITS, *, tool: bool = True) -> list[str]:
    """Why this provider's strict mode would refuse this schema, by its own rules. Pure."""
    return _reading(api).blockers(value, limits, tool=tool)


def state_repairs(api: str, state: Any) -> list[str]:
    """The repair for a parallel/strict state, in this provider's terms. Pure."""
    return _reading(api).state_repairs(state)


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
    return _reading(api).format_repairs(response, state, loose, limits)
