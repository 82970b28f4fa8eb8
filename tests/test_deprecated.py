"""Old spellings: each still works, warns through one place, and says when it goes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import convergent
from convergent import Agent, AgentSpec, Limits, ScriptedModel, StopPolicy
from convergent.durability import JournaledRun, RunStore

SOURCE = Path(convergent.__file__).parent
CHANGELOG = (SOURCE.parents[1] / "CHANGELOG.md").read_text(encoding="utf-8")
DEPRECATED = CHANGELOG.split("### Deprecated", 1)[1].split("\n### ", 1)[0]


def _removed_in() -> str:
    found = re.search(r"goes in convergent (\d+\.\d+\.\d+)", DEPRECATED)
    assert found is not None, "the CHANGELOG says in which version the old spellings go"
    return found.group(1)


REMOVED_IN = _removed_in()
GOES = re.escape(f"it goes in convergent {REMOVED_IN}")


def test_no_module_but_one_warns_of_a_deprecation() -> None:
    def warns(text: str) -> bool:
        calls = text.split("warnings.warn(")[1:]
        return any("DeprecationWarning" in call.split("\n    )")[0][:600] for call in calls)

    warners = sorted(
        str(path.relative_to(SOURCE))
        for path in SOURCE.rglob("*.py")
        if warns(path.read_text(encoding="utf-8"))
    )
    assert warners == ["_deprecated.py"]


def test_the_changelog_names_every_old_spelling_the_code_reads() -> None:
    for old in ("Limits(max_repeated_calls=", "on_tool_error", "max_consecutive_tool_errors"):
        assert old in DEPRECATED, old
    for old in ("convergent.durability.resume", "RunSummary.recipe", "RunStore.journal"):
        assert old in DEPRECATED, old


@pytest.mark.parametrize(
    "use",
    [
        lambda tmp: Limits(max_repeated_calls=3),
        lambda tmp: Limits(stall_nudges=1),
        lambda tmp: Agent(ScriptedModel([]), on_tool_error="stop"),
        lambda tmp: Agent(ScriptedModel([]), max_consecutive_tool_errors=2),
        lambda tmp: AgentSpec.model_validate({"on_tool_error": "stop"}),
        lambda tmp: convergent.durability.resume,
        lambda tmp: __import__("convergent.durability.resuming", fromlist=["x"]).resume,
        lambda tmp: RunStore(tmp / "runs.db").journal("r"),
    ],
    ids=[
        "limits-repeats",
        "limits-nudges",
        "agent-on-tool-error",
        "agent-max-errors",
        "spec",
        "durability-resume",
        "durability-resuming",
        "journal",
    ],
)
def test_each_old_spelling_still_works_and_says_when_it_goes(use: object, tmp_path: Path) -> None:
    with pytest.warns(DeprecationWarning, match=GOES):
        assert use(tmp_path) is not None  # type: ignore[operator]


def test_the_policy_of_an_old_spelling_is_the_new_ones() -> None:
    with pytest.warns(DeprecationWarning, match=GOES):
        old = Agent(ScriptedModel([]), limits=Limits(max_repeated_calls=4, stall_nudges=0))
    assert old.policy == StopPolicy(max_repeated_calls=4, notes=0)
    assert JournaledRun(run_id="r").run_id == "r"
