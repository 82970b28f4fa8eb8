"""Scripted trajectories every host runs the same way, and what each must end with.

A trajectory is a list of model responses (a tuple of tool calls, or a text answer),
each with the usage it reports, run against the same tools, each declaring its `Effect`
(`EFFECTS`): ``read_file`` (a read, same result every time), ``poll`` (a read, its
result changes each call), ``write_file`` (a write), ``set_status`` (idempotent: the
same status set again changes nothing more), ``run_tests`` (its result changes with
each write),
``flaky`` (always fails the same way), ``pay`` (fails fatally), ``status`` (read-only,
the same status with a new clock time each call), ``transfer`` (a terminal tool), ``job``
(read-only, a job's status: running until its seventh poll), ``wait`` (read-only, waits),
``wait_job`` (read-only, waits, then gives the job's status), and three tools that
declare nothing: ``deploy_status`` (queued, running, running, succeeded), ``pause``
(waits, as a shell's ``sleep``) and ``ci`` (in progress for three polls, then done). A
step that names another tool calls a tool the run does not have. Waits advance the
run's `TestClock`, which every host's driver reads, so no test waits for real. After a
stop that asks for a final answer, the next scripted response is that answer; a `Cut`
reply is one the provider cut at the output token limit.

Most trajectories declare the end convergent's loop must reach; the ones whose end is
the loop's to decide (answers that never pass, an alternation) declare none, and every
host is held to whatever the loop does with them.

Besides the reason, the cycle, the output and whether it was asked for after the stop,
an ending records the notes the model was sent (a stall or tool-error nudge, the budget
note, the verifier's feedback, the final request) and the output cap the final request
carried, read from what each host's test double received.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import BaseModel

from convergent import Effect, Limits, StopPolicy, StopReason
from convergent.clock import Clock
from convergent.exceptions import ToolError
from convergent.extensions import Verification
from convergent.loop.budget import FINAL_ANSWER_TOKENS

Call = tuple[str, dict[str, object]]


class Cut(str):
    """A reply the provider cut at the output token limit (finish reason ``length``)."""

    __slots__ = ()


Step = tuple[Call, ...] | str

EFFECTS: dict[str, Effect] = {
    "read_file": Effect.READ,
    "poll": Effect.READ,
    "write_file": Effect.WRITE,
    "set_status": Effect.IDEMPOTENT,
    "run_tests": Effect.UNDECLARED,
    "flaky": Effect.UNDECLARED,
    "pay": Effect.WRITE,
    "status": Effect.READ,
    "transfer": Effect.WRITE,
    "job": Effect.READ,
    "wait": Effect.READ,
    "wait_job": Effect.READ,
    "deploy_status": Effect.UNDECLARED,
    "pause": Effect.UNDECLARED,
    "ci": Effect.UNDECLARED,
}
"""What each tool declares, the same for every host."""

TERMINAL = ("transfer",)
FAILING = StopPolicy().max_failing_steps or 0
"""Failing steps in a row that get the note (without notes: that stop the run)."""
MISTAKES = StopPolicy().max_mistakes or 0
"""Steps of nothing but mistakes in a row that get the note."""
REPEATED_MISTAKES = StopPolicy().max_repeated_mistakes or 0
"""Times the same mistaken call is made in a streak before the note."""
USAGE = (1000, 100)
"""Input and output tokens every scripted response reports."""
PRICE = (1.0, 10.0)
"""A price per million tokens at which each scripted response costs $0.002."""


WAIT = 0.6
"""Seconds a waiting tool waits (more than the timed trajectories' ``poll_gap``)."""
DONE_AT = 7
"""The poll of a job that finds it done."""


class TestClock(Clock):
    """Time that passes only when a tool waits, and counted ids: runs are replayable."""

    __test__ = False  # not a test class, whatever its name

    def __init__(self) -> None:
        self.seconds = 0.0
        self.ids = 0

    def now(self) -> float:
        return 1_700_000_000.0 + self.seconds

    def monotonic(self) -> float:
        return self.seconds

    def new_id(self) -> str:
        self.ids += 1
        return f"{self.ids:012x}"

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` pass."""
        self.seconds += seconds


class World:
    """The tools' state for one run, waiting on ``clock``; it counts the calls that ran."""

    def __init__(self, clock: TestClock | None = None) -> None:
        self.clock = clock or TestClock()
        self.ran = 0
        """Calls of its tools that ran (whether they failed or not)."""
        self.polls = 0
        self.checks = 0
        self.jobs = 0
        self.deploys = 0
        self.ci_polls = 0
        self.files: dict[str, str] = {}
        self.statuses: dict[str, str] = {}

    def read_file(self, path: str) -> str:
        """Read a file."""
        self.ran += 1
        return self.files.get(path, f"contents of {path}")

    def poll(self, job: str) -> str:
        """Report a job's progress."""
        self.ran += 1
        self.polls += 1
        return f"{job}: {min(25 * self.polls, 100)}% done"

    def write_file(self, path: str, text: str) -> str:
        """Write a file."""
        self.ran += 1
        self.files[path] = text
        return f"wrote {len(text)} characters to {path}"

    def set_status(self, ticket: str, status: str) -> str:
        """Set a ticket's status (setting it again changes nothing more)."""
        self.ran += 1
        self.statuses[ticket] = status
        return f"{ticket} is {status}"

    def run_tests(self, suite: str) -> str:
        """Run the tests: one fewer fails after each write."""
        self.ran += 1
        failing = max(6 - len(self.files), 0)
        return f"{suite}: {failing} failing" if failing else f"{suite}: all passed"

    def flaky(self, item: int) -> str:
        """Call a service that is down."""
        self.ran += 1
        raise ToolError("service unavailable")

    def pay(self, amount: int) -> str:
        """Charge the customer's card."""
        self.ran += 1
        raise ToolError("the card was cancelled", fatal=True)

    def status(self, service: str) -> str:
        """Report whether a service is up."""
        self.ran += 1
        self.checks += 1
        return f"{service}: starting (as of 12:00:{self.checks:02d})"

    def transfer(self, reason: str) -> str:
        """Hand the conversation to a human."""
        self.ran += 1
        return f"transferred to a human: {reason}"

    def job(self, name: str) -> str:
        """Report a job's status."""
        self.ran += 1
        return self._job(name)

    def wait(self, seconds: float) -> str:
        """Wait before looking again."""
        self.ran += 1
        self.clock.advance(seconds)
        return f"waited {seconds:g}s"

    def wait_job(self, name: str) -> str:
        """Wait for a job a while, then report its status."""
        self.ran += 1
        self.clock.advance(WAIT)
        return self._job(name)

    def _job(self, name: str) -> str:
        self.jobs += 1
        return f"{name}: done" if self.jobs >= DONE_AT else f"{name}: running"

    def deploy_status(self, name: str) -> str:
        """Report a deployment's state (the tool declares nothing)."""
        self.ran += 1
        self.deploys += 1
        return f"{name}: " + ("queued", "running", "running", "succeeded")[min(self.deploys, 4) - 1]

    def pause(self, seconds: float) -> str:
        """Wait (the tool declares nothing, as a shell's sleep)."""
        self.ran += 1
        self.clock.advance(seconds)
        return ""

    def ci(self, run: str) -> str:
        """Report a CI run's state: in progress for three polls, then done."""
        self.ran += 1
        self.ci_polls += 1
        return f"run {run}: " + ("in_progress" if self.ci_polls <= 3 else "success")


def needs_citation(answer: str) -> Verification:
    """A verifier: an answer must cite its source."""
    if "[source]" in answer:
        return Verification(passed=True)
    return Verification(passed=False, feedback="cite the source as [source]")


class Report(BaseModel):
    """The typed answer of the typed-output trajectories."""

    files: int
    summary: str


VALID = '{"files": 2, "summary": "two files"}'
"""An answer that validates as a `Report`."""
INVALID = '{"files": "two"}'
"""An answer that does not."""


@dataclass(frozen=True)
class Trajectory:
    """One scripted run and the end every host must reach."""

    name: str
    steps: list[Step]
    reason: StopReason | None
    """The end the loop must reach; None: the loop's to decide (never ``completed``)."""
    cycles: int = 0
    output: str = ""
    after_stop: bool = False
    limits: Limits = field(default_factory=Limits)
    policy: StopPolicy = field(default_factory=StopPolicy)
    verifier: bool = False
    typed: bool = False
    """Answers must validate as a `Report`."""
    notes: tuple[str, ...] = ()
    """The kinds of note (see `NOTES`) the model is sent, in the order it first sees them."""
    final_cap: int | None = None
    """The output cap of the final request, if one is made with a cap."""
    price: tuple[float, float] | None = None
    """The model's price, ``(input, output)`` per million tokens: the hosts report
    tokens only, and each response is costed at it."""
    usage: tuple[int, int] = USAGE
    """Input and output tokens the first scripted response reports."""
    growth: int = 0
    """Input tokens each response reports more than the one before: what the provider
    counts beyond what the text shows (tool definitions resent, hidden reasoning)."""

    declared: tuple[str, ...] | None = None
    """The tools whose effects the caller declares to a host (None: every one); the
    others declare nothing, in the loop too."""

    def usage_at(self, step: int) -> tuple[int, int]:
        """Input and output tokens the ``step``-th scripted response reports (from 0)."""
        return self.usage[0] + self.growth * step, self.usage[1]

    def effects(self) -> dict[str, Effect]:
        """Each tool's effect, as the caller declares it (undeclared where it does not)."""
        declared = self.declared
        return {
            name: effect if declared is None or name in declared else Effect.UNDECLARED
            for name, effect in EFFECTS.items()
        }

    def declarations(self) -> dict[str, Effect]:
        """What the caller gives a host's ``tools``: the tools it declares."""
        return {name: EFFECTS[name] for name in self.declared or EFFECTS}


def _read(path: str) -> tuple[Call, ...]:
    return (("read_file", {"path": path}),)


UNKNOWN = (
    "search_web",
    "lookup_record",
    "fetch_page",
    "query_db",
    "grep_docs",
    "open_ticket",
    "list_policies",
    "read_wiki",
    "ask_expert",
    "find_refund",
    "get_rules",
    "browse",
    "check_terms",
    "scan_inbox",
)
"""Names of tools the run does not have (one more than the mistakes streak needs)."""
NEVER = "never asked"
"""A scripted answer the run must stop before."""
HANDED_OFF = "transferred to a human: refund over the limit"
_TRANSFER: tuple[Call, ...] = (("transfer", {"reason": "refund over the limit"}),)


TRAJECTORIES = [
    Trajectory(
        "repeated_reads",
        [*[_read("a.txt")] * 4, "best answer"],
        StopReason.STALLED,
        cycles=4,
        output="best answer",
        after_stop=True,
        notes=("stall", "wait", "final"),
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
            *[
                (("flaky", {"item": 2 * n}), ("flaky", {"item": 2 * n + 1}))
                for n in range(FAILING + 1)
            ],
            "best answer",
        ],
        StopReason.TOOL_ERROR,
        cycles=FAILING + 1,
        output="best answer",
        after_stop=True,
        notes=("tool_error", "final"),
    ),
    Trajectory(
        "budget",
        [*[_read(f"part{n}.txt") for n in range(7)], "best answer"],
        StopReason.BUDGET_EXHAUSTED,
        cycles=7,
        output="best answer",
        after_stop=True,
        limits=Limits(max_total_tokens=10_000),
        notes=("budget", "final"),
        final_cap=FINAL_ANSWER_TOKENS,
    ),
    Trajectory(
        "cost_budget",
        [*[_read(f"part{n}.txt") for n in range(5)], "best answer"],
        StopReason.BUDGET_EXHAUSTED,
        cycles=5,
        output="best answer",
        after_stop=True,
        limits=Limits(max_cost=0.015),
        notes=("budget", "final"),
        final_cap=378,
        price=PRICE,
    ),
    Trajectory(
        "max_cycles",
        [*[_read(f"part{n}.txt") for n in range(3)], "best answer"],
        StopReason.MAX_CYCLES,
        cycles=3,
        output="best answer",
        after_stop=True,
        limits=Limits(max_cycles=3),
        notes=("budget", "final"),
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
        notes=("verifier",),
    ),
    Trajectory(
        "handed_off",
        [_TRANSFER, NEVER],
        StopReason.HANDED_OFF,
        cycles=1,
        output=HANDED_OFF,
        after_stop=False,
    ),
    Trajectory(
        "fatal_tool_error",
        [(("pay", {"amount": 120}),), "best answer"],
        StopReason.TOOL_ERROR,
        cycles=1,
        output="best answer",
        after_stop=True,
        notes=("final",),
    ),
    Trajectory(
        "tool_error_nudge",
        [
            (("flaky", {"item": 1}),),
            (("flaky", {"item": 2}), ("flaky", {"item": 1})),
            (("flaky", {"item": 3}), ("flaky", {"item": 1})),
            _read("a.txt"),
            "a.txt holds it",
        ],
        StopReason.COMPLETED,
        cycles=5,
        output="a.txt holds it",
        after_stop=False,
        notes=("tool_error",),
    ),
    Trajectory(
        "typed_valid",
        [_read("a.txt"), VALID],
        StopReason.COMPLETED,
        cycles=2,
        output=VALID,
        typed=True,
    ),
    Trajectory(
        "typed_invalid_then_valid",
        [INVALID, VALID],
        StopReason.COMPLETED,
        cycles=2,
        output=VALID,
        typed=True,
        notes=("output",),
    ),
    Trajectory(
        "typed_never_valid",
        [*[INVALID] * 8, "best answer"],
        None,
        limits=Limits(max_cycles=5),
        typed=True,
    ),
    Trajectory(
        "verifier_never_passes",
        [*[f"draft {n}" for n in range(8)], "best answer"],
        None,
        limits=Limits(max_cycles=5),
        verifier=True,
    ),
    Trajectory(
        "alternation",
        [*[_read("a.txt"), _read("b.txt")] * 3, "best answer", _read("a.txt")],
        None,
        limits=Limits(max_cycles=12),
    ),
    # a result that differs only in its clock time is the same result
    Trajectory(
        "timestamped_status",
        [*[(("status", {"service": "db"}),)] * 4, "best answer"],
        StopReason.STALLED,
        cycles=4,
        output="best answer",
        after_stop=True,
        notes=("stall", "wait", "final"),
    ),
    Trajectory(
        "cycle_of_four",
        [
            *[_read(f"{name}.txt") for name in "abcd"] * 2,
            *[_read(f"{name}.txt") for name in "ab"],
            "best answer",
        ],
        StopReason.STALLED,
        cycles=10,
        output="best answer",
        after_stop=True,
        notes=("stall", "wait", "final"),
    ),
    Trajectory(
        "tool_call_cap",
        [*[(*_read(f"part{n}a.txt"), *_read(f"part{n}b.txt")) for n in range(3)], "best answer"],
        StopReason.BUDGET_EXHAUSTED,
        cycles=3,
        output="best answer",
        after_stop=True,
        limits=Limits(max_tool_calls=5),
        notes=("budget", "final"),
    ),
    Trajectory(
        "edit_then_test",
        [
            *[
                step
                for n in range(6)
                for step in (
                    (("write_file", {"path": f"fix{n}.py", "text": f"fix {n}"}),),
                    (("run_tests", {"suite": "unit"}),),
                )
            ],
            "all tests pass after six fixes",
        ],
        StopReason.COMPLETED,
        cycles=13,
        output="all tests pass after six fixes",
    ),
    # time between polls is progress: the job waits, or the model waits between polls
    Trajectory(
        "slow_poll",
        [*[(("wait_job", {"name": "build"}),)] * DONE_AT, "the build is done"],
        StopReason.COMPLETED,
        cycles=DONE_AT + 1,
        output="the build is done",
        policy=StopPolicy(poll_gap=WAIT - 0.1),
    ),
    Trajectory(
        "polls_with_waits",
        [
            *[(("wait", {"seconds": WAIT}), ("job", {"name": "build"}))] * DONE_AT,
            "the build is done",
        ],
        StopReason.COMPLETED,
        cycles=DONE_AT + 1,
        output="the build is done",
        policy=StopPolicy(poll_gap=WAIT - 0.1),
    ),
    Trajectory(
        "polls_without_waits",
        [*[(("job", {"name": "build"}),)] * 4, "best answer", NEVER],
        StopReason.STALLED,
        cycles=4,
        output="best answer",
        after_stop=True,
        notes=("stall", "wait", "final"),
        policy=StopPolicy(poll_gap=WAIT - 0.1),
    ),
    # calls of tools the run does not have: a new name each time is a search, noted after
    # max_mistakes steps; the same call again is a loop, noted at its max_repeated_mistakes-th
    Trajectory(
        "unknown_tools",
        [
            *[((name, {"about": "refund rules"}),) for name in UNKNOWN[: MISTAKES + 1]],
            "best answer",
            NEVER,
        ],
        StopReason.STALLED,
        cycles=MISTAKES + 1,
        output="best answer",
        after_stop=True,
        notes=("mistakes", "final"),
    ),
    Trajectory(
        "unknown_tool_repeated",
        [
            (("search_web", {"query": "refund rules"}),),
            (("fetch_page", {"url": "https://example.com/rules"}),),
            *[(("search_web", {"query": "refund rules"}),)] * REPEATED_MISTAKES,
            "best answer",
            NEVER,
        ],
        StopReason.STALLED,
        cycles=REPEATED_MISTAKES + 2,
        output="best answer",
        after_stop=True,
        notes=("mistake_repeated", "final"),
    ),
    # replies that are not answers
    Trajectory(
        "empty_reply",
        ["", "the answer"],
        StopReason.COMPLETED,
        cycles=2,
        output="the answer",
    ),
    Trajectory(
        "always_empty",
        ["", "", "", NEVER],
        StopReason.MODEL_ERROR,
        cycles=3,
        output="",
    ),
    Trajectory(
        "cut_reply",
        [Cut("The answer is forty"), "-two."],
        StopReason.COMPLETED,
        cycles=2,
        output="The answer is forty-two.",
    ),
    # call caps: per tool and in all
    Trajectory(
        "per_tool_cap",
        [*[_read(f"part{n}.txt") for n in range(3)], "best answer", NEVER],
        StopReason.BUDGET_EXHAUSTED,
        cycles=3,
        output="best answer",
        after_stop=True,
        limits=Limits(max_calls_per_tool={"read_file": 2}),
        notes=("budget", "final"),
    ),
    Trajectory(
        "total_cap",
        [*[_read(f"part{n}.txt") for n in range(5)], "best answer", NEVER],
        StopReason.BUDGET_EXHAUSTED,
        cycles=5,
        output="best answer",
        after_stop=True,
        limits=Limits(max_tool_calls=4),
        notes=("budget", "final"),
    ),
    # a small cost budget: the room kept for the answer is sized from the run's replies
    # (with 512 tokens kept, it stopped after one cycle, 20 % spent)
    Trajectory(
        "small_cost_budget",
        [*[_read(f"part{n}.txt") for n in range(2)], "best answer", NEVER],
        StopReason.BUDGET_EXHAUSTED,
        cycles=2,
        output="best answer",
        after_stop=True,
        limits=Limits(max_cost=0.002),
        notes=("budget", "final"),
        final_cap=87,
        price=PRICE,
        usage=(200, 20),
    ),
    Trajectory(
        "typed_third_try",
        [INVALID, INVALID, VALID],
        StopReason.COMPLETED,
        cycles=3,
        output=VALID,
        typed=True,
        notes=("output",),
    ),
    # a write repeated: the note replaces the third call, whatever the results say
    Trajectory(
        "repeated_write",
        [*[(("write_file", {"path": "a.txt", "text": "v1"}),)] * 4, "best answer"],
        StopReason.STALLED,
        cycles=4,
        output="best answer",
        after_stop=True,
        notes=("stall", "final"),
    ),
    # a poll of a tool that declares nothing runs, and is judged on its result
    Trajectory(
        "undeclared_poll",
        [*[(("deploy_status", {"name": "web"}),)] * 4, "web succeeded"],
        StopReason.COMPLETED,
        cycles=5,
        output="web succeeded",
    ),
    # edits A, B, B, A failing: no call failed three times, nothing is repeated
    Trajectory(
        "failed_calls_a_b_b_a",
        [*[(("flaky", {"item": item}),) for item in (1, 2, 2, 1)], _read("a.txt"), "a.txt"],
        StopReason.COMPLETED,
        cycles=6,
        output="a.txt",
    ),
    # the same failing call: one note in the stretch, whichever rule sees it first
    Trajectory(
        "one_note",
        [*[(("flaky", {"item": 1}),)] * 3, "best answer"],
        StopReason.TOOL_ERROR,
        cycles=3,
        output="best answer",
        after_stop=True,
        policy=StopPolicy(max_repeated_failures=2),
        notes=("tool_error", "final"),
    ),
    # a call cap that refuses and goes on: the other call of the batch runs
    Trajectory(
        "cap_continues",
        [
            (*_read("a.txt"), *_read("b.txt")),
            (*_read("c.txt"), ("poll", {"job": "build"})),
            "a and b, and the build is at 25%",
        ],
        StopReason.COMPLETED,
        cycles=3,
        output="a and b, and the build is at 25%",
        limits=Limits(max_calls_per_tool={"read_file": 2}, on_max_calls_per_tool="continue"),
        notes=("budget", "cap"),
    ),
    # a wait between polls makes the next poll a fresh look
    Trajectory(
        "sleep_between_polls",
        [
            (("ci", {"run": "7"}),),
            *[
                step
                for _ in range(3)
                for step in ((("pause", {"seconds": 0.3}),), (("ci", {"run": "7"}),))
            ],
            "run 7 succeeded",
        ],
        StopReason.COMPLETED,
        cycles=8,
        output="run 7 succeeded",
        policy=StopPolicy(wait_gap=0.2),
    ),
    # an idempotent call runs each time and is judged on its result, as a read is
    Trajectory(
        "idempotent_repeat",
        [*[(("set_status", {"ticket": "T-1", "status": "done"}),)] * 4, "best answer"],
        StopReason.STALLED,
        cycles=4,
        output="best answer",
        after_stop=True,
        notes=("stall", "wait", "final"),
    ),
    # a total cap that refuses and goes on: the batch's call within it runs
    Trajectory(
        "total_cap_continues",
        [
            (*_read("a.txt"), *_read("b.txt")),
            (*_read("c.txt"), ("poll", {"job": "build"})),
            "a, b and c",
        ],
        StopReason.COMPLETED,
        cycles=3,
        output="a, b and c",
        limits=Limits(max_tool_calls=3, on_max_tool_calls="continue"),
        notes=("budget", "cap_total"),
    ),
    # a model that keeps calling past a cap that goes on: the same refused call again
    Trajectory(
        "past_a_cap_again",
        [*[_read("a.txt")] * (REPEATED_MISTAKES + 2), "best answer", NEVER],
        StopReason.STALLED,
        cycles=REPEATED_MISTAKES + 2,
        output="best answer",
        after_stop=True,
        limits=Limits(max_calls_per_tool={"read_file": 1}, on_max_calls_per_tool="continue"),
        notes=("budget", "cap", "mistake_repeated", "final"),
    ),
    # the provider counts more input each request than the text shows: the budget note
    # comes from its count, before the stop
    Trajectory(
        "provider_growth",
        [*[_read(f"part{n}.txt") for n in range(4)], "best answer", NEVER],
        StopReason.BUDGET_EXHAUSTED,
        cycles=4,
        output="best answer",
        after_stop=True,
        limits=Limits(max_cost=0.05),
        notes=("budget", "final"),
        final_cap=96,
        price=PRICE,
        growth=4000,
    ),
    # a tool the caller does not declare to the host is the run's all the same: its repeat
    # (a write, undeclared) runs, gets the note, then is refused
    Trajectory(
        "partly_declared",
        [*[(("write_file", {"path": "a.txt", "text": "v1"}),)] * 4, "best answer", NEVER],
        StopReason.STALLED,
        cycles=4,
        output="best answer",
        after_stop=True,
        notes=("stall", "wait", "final"),
        declared=("read_file",),
    ),
    # without nudges and final answers (what a routing function can express)
    *(
        Trajectory(
            f"{name}_plain",
            steps,
            reason,
            cycles,
            output,
            after_stop=False,
            limits=Limits(**limits),
            policy=StopPolicy(notes=0, final_answer=False),
            notes=notes,
            price=PRICE if "max_cost" in limits else None,
        )
        for name, steps, reason, cycles, output, limits, notes in [
            (
                "polling",
                [*[(("poll", {"job": "build"}),)] * 5, "the build finished"],
                StopReason.COMPLETED,
                6,
                "the build finished",
                {},
                (),
            ),
            (
                "verify_after_write",
                [
                    _read("a.txt"),
                    (("write_file", {"path": "a.txt", "text": "v1"}),),
                    *[_read("a.txt")] * 2,
                    "a.txt now holds v1",
                ],
                StopReason.COMPLETED,
                5,
                "a.txt now holds v1",
                {},
                (),
            ),
            ("stalled", [*[_read("a.txt")] * 3, NEVER], StopReason.STALLED, 3, "", {}, ()),
            (
                "max_cycles",
                [*[_read(f"part{n}.txt") for n in range(3)], NEVER],
                StopReason.MAX_CYCLES,
                3,
                "",
                {"max_cycles": 3},
                ("budget",),
            ),
            (
                "budget",
                [*[_read(f"part{n}.txt") for n in range(11)], NEVER],
                StopReason.BUDGET_EXHAUSTED,
                8,
                "",
                {"max_total_tokens": 10_000},
                ("budget",),
            ),
            (
                "cost_budget",
                [*[_read(f"part{n}.txt") for n in range(9)], NEVER],
                StopReason.BUDGET_EXHAUSTED,
                7,
                "",
                {"max_cost": 0.015},
                ("budget",),
            ),
            (
                "tool_errors",
                [
                    *[
                        (("flaky", {"item": 2 * n}), ("flaky", {"item": 2 * n + 1}))
                        for n in range(FAILING)
                    ],
                    NEVER,
                ],
                StopReason.TOOL_ERROR,
                FAILING,
                "",
                {},
                (),
            ),
            ("fatal", [(("pay", {"amount": 120}),), NEVER], StopReason.TOOL_ERROR, 1, "", {}, ()),
            ("handed_off", [_TRANSFER, NEVER], StopReason.HANDED_OFF, 1, HANDED_OFF, {}, ()),
        ]
    ),
]


NOTES = {
    "stall": "you have requested",
    "mistakes": "steps in a row were calls the run cannot make",
    "mistake_repeated": "and the run cannot make it",
    "cap": "(max_calls_per_tool), and it has been",
    "cap_total": "(max_tool_calls), and it has made them all",
    "wait": "If you are waiting for it to change, wait at least",
    "tool_error": "Note: tool calls have failed",
    "budget": "Budget note:",
    "verifier": "Verification failed:",
    "output": "Your final answer does not match the required output schema",
    "final": "The run has stopped (",
}
"""Each kind of note convergent sends the model, by how its text begins."""

Seen = tuple[str, int | None]
"""One request as a host's test double received it: its messages as text, and the
output cap (``max_tokens``) it carried."""


@dataclass(frozen=True)
class Ending:
    """How a host's run ended."""

    reason: StopReason
    cycles: int
    output: str
    after_stop: bool
    notes: tuple[str, ...] = ()
    final_cap: int | None = None
    ran: int | None = None
    """Calls of the run's tools that ran; None: not compared."""


def ending(
    reason: StopReason,
    cycles: int,
    output: str,
    after_stop: bool,
    requests: Sequence[Seen],
    ran: int | None = None,
) -> Ending:
    """An ending, with the notes and the final cap read from the requests the model got."""
    notes: list[str] = []
    final_cap = None
    for text, cap in requests:
        found = sorted((text.find(prefix), kind) for kind, prefix in NOTES.items())
        notes.extend(kind for at, kind in found if at >= 0 and kind not in notes)
        if NOTES["final"] in text:
            final_cap = cap
    return Ending(reason, cycles, output, after_stop, tuple(notes), final_cap, ran)


def same(got: Ending, wanted: Ending) -> bool:
    """Whether ``got`` is ``wanted`` (the calls that ran compared only where it says)."""
    return got == (dataclasses.replace(wanted, ran=got.ran) if wanted.ran is None else wanted)


def expected(trajectory: Trajectory) -> Ending:
    """The end the trajectory declares (it must declare one)."""
    assert trajectory.reason is not None, f"{trajectory.name}: the loop decides its end"
    return Ending(
        trajectory.reason,
        trajectory.cycles,
        trajectory.output,
        trajectory.after_stop,
        trajectory.notes,
        trajectory.final_cap,
    )


QUICK = frozenset(
    {
        "completed",
        "verified",
        "handed_off",
        "max_cycles",
        "budget",
        "cost_budget",
        "fatal_tool_error",
        "tool_error_nudge",
        "cycle_of_four",
        "polls_with_waits",
        "unknown_tools",
        "unknown_tool_repeated",
        "per_tool_cap",
        "cut_reply",
        "typed_invalid_then_valid",
        "verifier_never_passes",
    }
)
"""Trajectories every host runs in the quick suite: one for each way a run ends and each
excuse the suite allows; every other host run is ``slow`` (the loop runs them all)."""


def on_hosts(trajectories: list[Trajectory]) -> list[Any]:
    """The trajectories as parameters of a test that runs them on a host: those outside
    `QUICK` are marked ``slow``."""
    return [
        pytest.param(t, id=t.name, marks=() if t.name in QUICK else pytest.mark.slow)
        for t in trajectories
    ]
