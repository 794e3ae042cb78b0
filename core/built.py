"""Models made from values core typed itself, without validating them a second time.

pydantic's validation of a Verdict was the largest single cost of reading a small turn, and
every value in it was built by core to its field's type. `tests/core/test_built.py` validates
the verdict of every recorded exchange again and requires the same model, so a value of the
wrong type cannot slip in unnoticed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel


def builder[M: BaseModel](model: type[M]) -> Callable[..., M]:
    """A maker of `model` from its fields' values, given by name (maker's, with keywords)."""
    make = maker(model)

    def build(**values: Any) -> M:
        return make(values)

    return build


def maker[M: BaseModel](model: type[M]) -> Callable[[dict[str, Any]], M]:
    """A maker of `model` from a dict of its fields' values (read, not kept): the fields not
    given take their defaults (a fresh one from each default factory), in the model's order,
    as the log prints them. Nothing is validated. Pure."""
    fields = model.model_fields
    template = {name: info.default for name, info in fields.items()}  # the fields, in order
    required = [name for name, info in fields.items() if info.is_required()]
    factories = [
        (name, info.default_factory)
        for name, info in fields.items()
        if info.default_factory is not None
    ]
    new = object.__new__  # a model's own (pydantic defines none), typed where pydantic is absent
    set_attribute = object.__setattr__

    def make(values: dict[str, Any]) -> M:
        for name in required:
            if name not in values:
                raise TypeError(f"{model.__name__} needs {name}")
        made_fields = template.copy()
        made_fields.update(values)  # a key already there keeps its place
        for name, factory in factories:
            if name not in values:
                made_fields[name] = factory()  # type: ignore[call-arg]
        made = new(model)
        set_attribute(made, "__dict__", made_fields)
        set_attribute(made, "__pydantic_fields_set__", set(values))
        set_attribute(made, "__pydantic_extra__", None)
        set_attribute(made, "__pydantic_private__", None)
        return made

    return make
