"""The same trajectories end the same way in convergent's loop and in every adapter.

convergent's loop is the reference. It must end each trajectory that declares an end
that way; every host must then end each trajectory as the loop does: with the same
`StopReason`, at the same cycle, with the same output, the same answer-after-stop
behaviour, the same notes sent to the model and the same output cap on the final
request. A host that adapts the policy to what it can deliver (the LangGraph routing
function sends no nudges) is compared with the loop run under that adapted policy.
What a host cannot express is listed in `NOT_EXPRESSIBLE` (its adapter must refuse it
with `NotExpressible` when it is built), and where a host can only end differently,
`DIFFERS` says how and why.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

import pytest

from convergent import StopReason
from convergent.adapters import NotExpressible, PolicyAdapted

from .hosts import HOSTS, run_loop
from .trajectories import QUICK, TRAJECTORIES, Ending, Trajectory, expected, on_hosts, same

_ROUTER = "a LangGraph routing function cannot deliver a verifier's or a schema's feedback"

NOT_EXPRESSIBLE: dict[tuple[str, str], str] = {
    **{
        ("langgraph", trajectory.name): _ROUTER
        for trajectory in TRAJECTORIES
        if trajectory.verifier or trajectory.typed
    },
}
"""(host, trajectory) pairs the host cannot express, and why."""


def _without_notes(trajectory: Trajectory) -> Trajectory:
    return dataclasses.replace(trajectory, policy=dataclasses.replace(trajectory.policy, notes=0))


ADAPTED: dict[str, Callable[[Trajectory], Trajectory]] = {"langgraph": _without_notes}
"""Hosts that adapt the policy to what they can deliver: the trajectory as they run it."""

UNSENT_NOTES: dict[str, tuple[tuple[str, ...], str]] = {
    "langgraph": (
        ("budget",),
        "a routing function cannot tell the model that most of its budget is used",
    ),
}
"""Kinds of note a host cannot send (it otherwise ends as the loop does), and why."""

_PYDANTIC_RETRIES = (
    "PydanticAI counts each mistaken call of one tool name against that tool's retries "
    "(``retries``, 1 by default) and gives up when they run out: the run ends stalled there, "
    "with the answer after the stop"
)

DIFFERS: dict[tuple[str, str], tuple[Ending, str]] = {
    ("pydantic_ai", "unknown_tool_repeated"): (
        Ending(StopReason.STALLED, 3, "", False, ("final",), ran=0),
        _PYDANTIC_RETRIES,
    ),
}
"""(host, trajectory) pairs that a host can only end another way: that ending, and why."""

_ADAPTERS = sorted(host for host in HOSTS if host != "loop")


@pytest.mark.parametrize("trajectory", TRAJECTORIES, ids=lambda t: t.name)
async def test_the_loop_ends_each_trajectory_as_declared(trajectory: Trajectory) -> None:
    ending = await run_loop(trajectory)
    if trajectory.reason is None:  # answers that never pass, or a pattern: never completed
        assert ending.reason is not StopReason.COMPLETED
    else:
        assert same(ending, expected(trajectory))


@pytest.mark.parametrize("host", _ADAPTERS)
@pytest.mark.parametrize("trajectory", on_hosts(TRAJECTORIES))
async def test_every_host_ends_the_trajectory_as_the_loop_does(
    host: str, trajectory: Trajectory
) -> None:
    if (host, trajectory.name) in NOT_EXPRESSIBLE:
        with pytest.raises(NotExpressible):
            await HOSTS[host](trajectory)
        return
    adapted = ADAPTED.get(host, lambda t: t)(trajectory)
    warns: AbstractContextManager[object] = (
        pytest.warns(PolicyAdapted) if adapted != trajectory else nullcontext()
    )
    with warns:
        ending = await HOSTS[host](trajectory)
    difference = DIFFERS.get((host, trajectory.name))
    wanted = difference[0] if difference else await run_loop(adapted)
    unsent, _ = UNSENT_NOTES.get(host, ((), ""))
    notes = tuple(kind for kind in wanted.notes if kind not in unsent)
    cap = wanted.final_cap
    if notes != wanted.notes and cap is not None:
        # the scripted usage counts the unsent note's tokens all the same: the host takes
        # them for what the provider counts beyond the text, and keeps less room
        assert ending.final_cap is not None and ending.final_cap <= cap
        cap = ending.final_cap
    wanted = dataclasses.replace(wanted, notes=notes, final_cap=cap)
    assert same(ending, wanted), f"{ending}\n!=\n{wanted}"


def test_the_quick_host_runs_are_trajectories_that_exist() -> None:
    assert QUICK <= {trajectory.name for trajectory in TRAJECTORIES}
    assert {name for _, name in (*NOT_EXPRESSIBLE, *DIFFERS)} & QUICK


def test_the_loop_expresses_every_trajectory() -> None:
    """The suite's reference is convergent's loop: nothing is excused for it."""
    assert not [pair for pair in (*NOT_EXPRESSIBLE, *DIFFERS) if pair[0] == "loop"]
    assert "loop" not in ADAPTED


def _documented() -> list[tuple[str, str]]:
    """The rows of docs/adapters.md's table of documented differences: (host, trajectories)."""
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "adapters.md").read_text()
    table = page[page.index("### Documented differences") :].split("\n\n")[1]
    rows = [line.split(" | ") for line in table.splitlines()[2:]]
    return [(row[0].removeprefix("| "), row[1]) for row in rows]


def test_every_difference_the_suites_allow_is_documented() -> None:
    """Each host's excused trajectories are in the docs' table, each with its why, and
    the table names no other."""
    from claude_code.test_conformance import DIFFERS as CLAUDE_DIFFERS
    from claude_code.test_conformance import NOT_EXPRESSIBLE as CLAUDE_REFUSED

    names = {
        "langgraph": "LangGraph",
        "pydantic_ai": "PydanticAI",
        "claude_agent_sdk": "Claude Agent SDK",
    }
    excused = {(names[host], name) for host, name in (*NOT_EXPRESSIBLE, *DIFFERS)}
    excused |= {(names["claude_agent_sdk"], name) for name in (*CLAUDE_REFUSED, *CLAUDE_DIFFERS)}
    listed = {
        (host, name.strip())
        for host, cell in _documented()
        if not cell.startswith("every ")
        for name in cell.split(",")
    }
    assert listed == excused
    everywhere = {host for host, cell in _documented() if cell.startswith("every ")}
    assert {names[host] for host in (*ADAPTED, *UNSENT_NOTES)} <= everywhere
