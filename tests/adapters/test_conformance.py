"""The same trajectories end the same way in convergent's loop and in every adapter.

Each must end with the same `StopReason`, at the same cycle, with the same output, the
same answer-after-stop behaviour, the same notes sent to the model and the same output
cap on the final request. What a host cannot express is listed in `NOT_EXPRESSIBLE`
(its adapter must refuse it with `NotExpressible`), and where a host can only end
differently, `DIFFERS` says how and why.
"""

from __future__ import annotations

import pytest

from convergent import StopReason
from convergent.adapters import NotExpressible

from .hosts import HOSTS
from .trajectories import HANDED_OFF, NEVER, TRAJECTORIES, Ending, Trajectory, expected

_ROUTER_NUDGES = "a LangGraph routing function adds no message: no nudge, no final answer"

NOT_EXPRESSIBLE: dict[tuple[str, str], str] = {
    ("openai_agents", "verified"): "the SDK ends its run at the first answer without tool calls",
    **{
        ("langgraph", trajectory.name): _ROUTER_NUDGES
        for trajectory in TRAJECTORIES
        if trajectory.policy.notes or trajectory.final_answer or trajectory.verifier
    },
}
"""(host, trajectory) pairs the host cannot express, and why."""

_NO_NOTE = "a routing function cannot tell the model that most of its budget is used"
_LATE = (
    "a routing function sees a tool's result only when it routes the next response (a "
    "read runs, and is judged on its result)"
)

DIFFERS: dict[tuple[str, str], tuple[Ending, str]] = {
    ("langgraph", "budget_plain"): (
        Ending(StopReason.BUDGET_EXHAUSTED, 8, "", False),
        _NO_NOTE,
    ),
    ("langgraph", "cost_budget_plain"): (
        Ending(StopReason.BUDGET_EXHAUSTED, 7, "", False),
        _NO_NOTE,
    ),
    ("langgraph", "max_cycles_plain"): (
        Ending(StopReason.MAX_CYCLES, 3, "", False),
        _NO_NOTE,
    ),
    ("langgraph", "tool_errors_plain"): (Ending(StopReason.TOOL_ERROR, 6, NEVER, False), _LATE),
    ("langgraph", "stalled_plain"): (Ending(StopReason.STALLED, 4, NEVER, False), _LATE),
    ("langgraph", "fatal_plain"): (Ending(StopReason.TOOL_ERROR, 2, NEVER, False), _LATE),
    ("langgraph", "handed_off_plain"): (Ending(StopReason.HANDED_OFF, 2, HANDED_OFF, False), _LATE),
}
"""(host, trajectory) pairs that a host can only end another way: that ending, and why."""


@pytest.mark.parametrize("host", sorted(HOSTS))
@pytest.mark.parametrize("trajectory", TRAJECTORIES, ids=lambda t: t.name)
async def test_every_host_ends_the_trajectory_the_same_way(
    host: str, trajectory: Trajectory
) -> None:
    if (host, trajectory.name) in NOT_EXPRESSIBLE:
        with pytest.raises(NotExpressible):
            await HOSTS[host](trajectory)
        return
    wanted, _ = DIFFERS.get((host, trajectory.name), (expected(trajectory), ""))
    assert await HOSTS[host](trajectory) == wanted


def test_the_loop_expresses_every_trajectory() -> None:
    """The suite's reference is convergent's loop: nothing is excused for it."""
    assert not [pair for pair in (*NOT_EXPRESSIBLE, *DIFFERS) if pair[0] == "loop"]
