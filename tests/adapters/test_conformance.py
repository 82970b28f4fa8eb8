"""The same trajectories end the same way in convergent's loop and in every adapter.

Each must end with the same `StopReason`, at the same cycle, with the same output and
the same answer-after-stop behaviour. What a host cannot express is listed in
`NOT_EXPRESSIBLE`, and its adapter must refuse it with `NotExpressible`.
"""

from __future__ import annotations

import inspect

import pytest

from convergent import Agent
from convergent.adapters import NotExpressible

from .hosts import HOSTS
from .trajectories import TRAJECTORIES, Trajectory, expected

NOT_EXPRESSIBLE = {
    ("openai_agents", "verified"): "the SDK ends its run at the first answer without tool calls",
}
"""(host, trajectory) pairs the host cannot express, and why."""

LOOP_DECIDES = "final_answer" in inspect.signature(Agent).parameters
"""Convergent's loop takes its stops from `decide` and `RunMonitor` (nudges, progress,
a final answer after a stop); before that, its own leg of the suite cannot agree."""


@pytest.mark.parametrize("host", sorted(HOSTS))
@pytest.mark.parametrize("trajectory", TRAJECTORIES, ids=lambda t: t.name)
async def test_every_host_ends_the_trajectory_the_same_way(
    host: str, trajectory: Trajectory
) -> None:
    if host == "loop" and not LOOP_DECIDES:
        pytest.skip("convergent's loop does not take its stops from decide() yet")
    if (host, trajectory.name) in NOT_EXPRESSIBLE:
        with pytest.raises(NotExpressible):
            await HOSTS[host](trajectory)
        return
    assert await HOSTS[host](trajectory) == expected(trajectory)
