"""The public surface is exactly what `__all__` lists."""

from __future__ import annotations

from types import ModuleType

import convergent


def test_all_is_sorted_and_complete() -> None:
    exported = convergent.__all__
    assert exported == sorted(exported)
    public = {
        name
        for name, value in vars(convergent).items()
        if not name.startswith("_")
        and not isinstance(value, ModuleType)  # a submodule someone imported
        and getattr(value, "__module__", "").startswith("convergent")
    }
    assert public <= set(exported), public - set(exported)
    for name in exported:
        assert hasattr(convergent, name), name


PROBE = """
import sys
import convergent.coordinator.decide, convergent.edit_tools   # the submodules first
from convergent import edit_tools
from convergent.coordinator import decide, metrics
assert callable(edit_tools) and edit_tools.__name__ == "edit_tools"
assert callable(decide) and callable(metrics)
import convergent
assert "convergent.agent" not in sys.modules     # exports load on first use
assert convergent.Agent.__module__ == "convergent.agent"
"""


def test_exports_load_on_first_use_and_keep_their_meaning() -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr


def test_every_coordinator_export_resolves() -> None:
    from convergent import coordinator

    for name in coordinator.__all__:
        assert getattr(coordinator, name) is not None, name
    assert callable(coordinator.decide) and callable(coordinator.metrics)
