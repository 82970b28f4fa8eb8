"""Scripted trajectories every host runs the same way, and what each must end with.

A trajectory is a list of model responses (a tuple of tool calls, or a text answer),
each with the usage it reports, run against the same four tools: ``read_file``
(read-only, same result every time), ``poll`` (read-only, its result changes each
call), ``write_file`` (changes state) and ``flaky`` (always fails the same way), plus
``transfer`` (a terminal tool). After a stop that asks for a final answer, the next
scripted response is that answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from convergent import Limits, StopReason
from convergent.exceptions import ToolError
from convergent.extensions import Verification

Call = tuple[str, dict[str, object]]
Step = tuple[Call, ...] | str

READ_ONLY: dict[str, bool | None] = {
    "read_file": True,
    "poll": True,
    "write_file": False,
    "flaky": None,
    "transfer": False,
}
"""The tools' ``read_only`` flags, the same for every host."""

TERMINAL = ("transfer",)
USAGE = (1000, 100)
"""Input and output tokens every scripted response reports."""


class World:
    """The tools' state for one run."""

    def __init__(self) -> None:
        self.polls = 0
        self.files: dict[str, str] = {}

    def read_file(self, path: str) -> str:
        """Read a file."""
        return self.files.get(path, f"contents of {path}")

    def poll(self, job: str) -> str:
        """Report a job's progress."""
        self.polls += 1
        return f"{job}: {min(25 * self.polls, 100)}% done"

    def write_file(self, path: str, text: str) -> str:
        """Write a file."""
        self.files[path] = text
        return f"wrote {len(text)} characters to {path}"

    def flaky(self, item: int) -> str:
        """Call a service that is down."""
        raise ToolError("service unavailable")

    def transfer(self, reason: str) -> str:
        """Hand the conversation to a human."""
        return f"transferred to a human: {reason}"


def needs_citation(answer: str) -> Verification:
    """A verifier: an answer must cite its source."""
    if "[source]" in answer:
        return Verification(passed=True)
    return Verification(passed=False, feedback="cite the source as [source]")


@dataclass(frozen=True)
class Trajectory:
    """One scripted run and the end every host must reach."""

    name: str
    steps: list[Step]
    reason: StopReason
    cycles: int
    output: str
    after_stop: bool
    limits: Limits = field(default_factory=Limits)
    verifier: bool = False


def _read(path: str) -> tuple[Call, ...]:
    return (("read_file", {"path": path}),)


TRAJECTORIES = [
    Trajectory(
        "repeated_reads",
        [*[_read("a.txt")] * 4, "best answer"],
        StopReason.STALLED,
        cycles=4,
        output="best answer",
        after_stop=True,
    ),
    Trajectory(
        "polling",
        [*[(("poll", {"job": "build"}),)] * 5, "the build finished"],
        StopReason.COMPLETED,
        cycles=6,
        output="the build finished",
        after_stop=False,
    ),
    Trajectory(
        "verify_after_write",
        [
            *[
                step
                for n in range(3)
                for step in (
                    _read("a.txt"),
                    (("write_file", {"path": "a.txt", "text": f"v{n}"}),),
                )
            ],
            _read("a.txt"),
            "a.txt now holds v2",
        ],
        StopReason.COMPLETED,
        cycles=8,
        output="a.txt now holds v2",
        after_stop=False,
    ),
    Trajectory(
        "parallel_failures",
        [
            *[(("flaky", {"item": 2 * n}), ("flaky", {"item": 2 * n + 1})) for n in range(4)],
            "best answer",
        ],
        StopReason.TOOL_ERROR,
        cycles=4,
        output="best answer",
        after_stop=True,
    ),
    Trajectory(
        "budget",
        [*[_read(f"part{n}.txt") for n in range(7)], "best answer"],
        StopReason.BUDGET_EXHAUSTED,
        cycles=7,
        output="best answer",
        after_stop=True,
        limits=Limits(max_total_tokens=10_000),
    ),
    Trajectory(
        "max_cycles",
        [*[_read(f"part{n}.txt") for n in range(3)], "best answer"],
        StopReason.MAX_CYCLES,
        cycles=3,
        output="best answer",
        after_stop=True,
        limits=Limits(max_cycles=3),
    ),
    Trajectory(
        "completed",
        [_read("a.txt"), "a.txt holds the contents"],
        StopReason.COMPLETED,
        cycles=2,
        output="a.txt holds the contents",
        after_stop=False,
    ),
    Trajectory(
        "verified",
        ["a draft", "the answer [source]"],
        StopReason.COMPLETED,
        cycles=2,
        output="the answer [source]",
        after_stop=False,
        verifier=True,
    ),
    Trajectory(
        "handed_off",
        [(("transfer", {"reason": "refund over the limit"}),), "never asked"],
        StopReason.HANDED_OFF,
        cycles=1,
        output="transferred to a human: refund over the limit",
        after_stop=False,
    ),
]


@dataclass(frozen=True)
class Ending:
    """How a host's run ended."""

    reason: StopReason
    cycles: int
    output: str
    after_stop: bool


def expected(trajectory: Trajectory) -> Ending:
    return Ending(trajectory.reason, trajectory.cycles, trajectory.output, trajectory.after_stop)
