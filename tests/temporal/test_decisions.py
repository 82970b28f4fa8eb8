"""The same trajectories end the same way in process and on Temporal: one `decide`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from convergent import Limits, StopPolicy, StopReason, build_agent
from convergent.testing import answer, call

from .conftest import scripted_spec

if TYPE_CHECKING:
    from convergent.temporal import TemporalRunner

pytestmark = [pytest.mark.usefixtures("effects"), pytest.mark.temporal, pytest.mark.slow]

BROKEN = '''
from convergent import ToolError, tool


@tool(timeout=30)
def lookup(customer: str) -> str:
    """Look a customer up; the database is down.

    Args:
        customer: Customer id.
    """
    raise ToolError("database unreachable")
'''

DECLARED = '''
from convergent import tool


@tool(read_only=False, timeout=30)
def voucher(customer: str) -> str:
    """Issue a voucher: each call issues one more.

    Args:
        customer: Customer id.
    """
    return f"a voucher for {customer} was issued"


@tool(read_only=False, idempotent=True, timeout=30)
def set_status(value: str) -> str:
    """Set the status: the same value again changes nothing.

    Args:
        value: The status.
    """
    return f"the status is {value}"
'''


DEFAULTS = StopPolicy()
"""The default rules (the shared spec allows more repeats)."""
FAILING = DEFAULTS.max_failing_steps or 0
"""Failing steps in a row that get the note (a new failure each time)."""
MISTAKES = DEFAULTS.max_mistakes or 0
"""Steps of nothing but mistakes in a row that get the note."""


def comparable(result: Any) -> dict[str, Any]:
    data = result.to_dict()
    data.pop("run_id")
    for record in data["tool_calls"]:
        record.pop("duration", None)
    return data


TRAJECTORIES: dict[str, tuple[list[Any], dict[str, Any], StopReason]] = {
    "stalled after a nudge": (
        [call("calculator", expression="6*7")] * 4 + ["42, I think"],
        {"policy": DEFAULTS},
        StopReason.STALLED,
    ),
    "a two-call cycle": (
        [call("calculator", expression="1+1"), call("look", n=1)] * 2
        + [call("calculator", expression="1+1")] * 2
        + ["stuck"],
        {"policy": DEFAULTS},
        StopReason.STALLED,
    ),
    "a broken tool, nudged then stopped": (
        [call("lookup", customer=f"c{n}") for n in range(FAILING + 1)] + ["cannot look it up"],
        {"tools": ("calculator", "fx:look", "broken:lookup")},
        StopReason.TOOL_ERROR,
    ),
    "max_cycles with an answer after it": (
        [call("calculator", expression=f"{n}+1") for n in range(2)] + ["1, 2"],
        {"limits": Limits(max_cycles=2)},
        StopReason.MAX_CYCLES,
    ),
    "calls to tools that do not exist, a new name each time": (
        [call(f"search_{n}", q="x") for n in range(MISTAKES + 1)] + ["no such tool"],
        {"policy": DEFAULTS},
        StopReason.STALLED,
    ),
    "a reply cut at the token limit, then its end": (
        [answer("The answer is ", finish_reason="length"), answer("forty-two.")],
        {},
        StopReason.COMPLETED,
    ),
    "a write repeated: noted before its third run": (
        [call("voucher", customer="c1")] * 4 + ["issued twice"],
        {"tools": ("calculator", "declared:voucher"), "policy": DEFAULTS},
        StopReason.STALLED,
    ),
    "an idempotent call repeated: it runs after its note": (
        [call("set_status", value="done")] * 4 + ["set"],
        {"tools": ("calculator", "declared:set_status"), "policy": DEFAULTS},
        StopReason.STALLED,
    ),
    "distinct reads": (
        [call("calculator", expression=f"{n}*0+{n}") for n in range(5)] + ["done"],
        {},
        StopReason.COMPLETED,
    ),
}


@pytest.mark.parametrize("name", list(TRAJECTORIES))
async def test_a_trajectory_ends_with_the_same_reason_and_cycle_on_both_backends(
    name: str, tmp_path: Path, runner: TemporalRunner, worker: None
) -> None:
    (tmp_path / "broken.py").write_text(BROKEN)
    (tmp_path / "declared.py").write_text(DECLARED)
    responses, changes, expected = TRAJECTORIES[name]
    made = scripted_spec(tmp_path, responses, **changes)
    local = await build_agent(made).run("task", run_id="same")
    run = await runner.start(made, "task", run_id="same-" + name.replace(" ", "-").replace(",", ""))
    remote = await run.result()
    assert local.stop_reason is expected, local.stop_detail
    assert comparable(remote) == comparable(local)
    if name.startswith("a write repeated"):
        assert [record.name for record in local.tool_calls] == ["voucher", "voucher"]
    if name.startswith("an idempotent"):
        assert len(local.tool_calls) == 4
