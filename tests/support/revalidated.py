"""Where a model built without validation (core/built.py) differs from the one validation builds."""

from __future__ import annotations

from pydantic import BaseModel


def revalidated(model: BaseModel) -> list[str]:
    """Where validating a model's own values again gives something else: its fields, then the
    models inside it, each by path."""
    values = {name: getattr(model, name) for name in type(model).model_fields}
    again = type(model).model_validate(values)
    found = [
        f"{type(model).__name__}.{name}: {values[name]!r} is validated into {getattr(again, name)!r}"
        for name in values
        if type(values[name]) is not type(getattr(again, name))
        or values[name] != getattr(again, name)
    ]
    for name, value in values.items():
        for inner in value if isinstance(value, list) else [value]:
            if isinstance(inner, BaseModel):
                found += [f"{name}: {problem}" for problem in revalidated(inner)]
    return found
