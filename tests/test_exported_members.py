"""The public surface is exactly what `__all__` lists."""

from __future__ import annotations

import convergent


def test_all_is_sorted_and_complete() -> None:
    exported = convergent.__all__
    assert exported == sorted(exported)
    public = {
        name
        for name, value in vars(convergent).items()
        if not name.startswith("_") and getattr(value, "__module__", "").startswith("convergent")
    }
    assert public <= set(exported), public - set(exported)
    for name in exported:
        assert hasattr(convergent, name), name
