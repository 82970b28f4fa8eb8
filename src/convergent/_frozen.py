"""Build the frozen, slotted dataclasses the loop makes at every tool call, quickly.

A frozen dataclass's generated ``__init__`` sets each field through
``object.__setattr__`` from keyword arguments; for the messages and records the loop makes
at each call that is most of their cost. A builder makes the same object from a blank
instance and each slot's own setter (`slot_setters`), which checks when it is made that
it sets every field the class declares.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["blank", "slot_setters"]

blank = object.__new__
"""A blank instance of a class: its slots are then set by `slot_setters`."""


def slot_setters(cls: type, names: Sequence[str]) -> tuple[Callable[[Any, Any], None], ...]:
    """The setters of ``cls``'s slots ``names``, which must be all its fields, in order.

    Raises:
        TypeError: If ``names`` are not every field of the slotted dataclass ``cls``, in
            order, or the class has a ``__post_init__`` a builder would skip.
    """
    declared = tuple(field.name for field in dataclasses.fields(cls))
    if tuple(names) != declared or hasattr(cls, "__post_init__"):
        raise TypeError(f"a builder of {cls.__name__} must set its fields {declared}, in order")
    return tuple(getattr(cls, name).__set__ for name in names)
