"""Progress-aware stalls and nudges in the loop, on the trajectories real agents follow."""

from __future__ import annotations

from typing import Any

from convergent import (
    Agent,
    AnthropicModel,
    ModelResponse,
    OpenAIChatModel,
    ScriptedModel,
    StopPolicy,
    StopReason,
    ToolError,
    tool,
)
from convergent.clock import Clock, use_clock
from convergent.events import Nudged
from convergent.messages import ToolResultMessage, UserMessage
from convergent.testing import call, step


class Workspace:
    """A tiny world with files, tests that pass as edits land, and a job that finishes."""

    def __init__(self) -> None:
        self.files = {"a.txt", "b.txt"}
        self.failing = 3
        self.polls = 0
        self.payments = 0

    def tools(self) -> list[Any]:
        @tool
        def edit(patch: str) -> str:
            """Apply a patch.

            Args:
                patch: The patch.
            """
            self.failing -= 1
            return "edited"

        @tool
        def run_tests() -> str:
            """Run the test suite."""
            return f"{self.failing} failing"

        @tool(read_only=True)
        def job_status(job: str) -> str:
            """Report a job's progress.

            Args:
                job: The job.
            """
            self.polls += 1
            return "done" if self.polls > 4 else f"running ({self.polls} of 5 steps)"

        @tool(read_only=True)
        def list_files() -> str:
            """List the files."""
            return " ".join(sorted(self.files))

        @tool
        def delete_file(path: str) -> str:
            """Delete a file.

            Args:
                path: The file.
            """
            self.files.discard(path)
            return f"deleted {path}"

        @tool(read_only=True)
        def read(path: str) -> str:
            """Read a file.

            Args:
                path: The file.
            """
            return f"contents of {path}"

        @tool
        def send_payment(amount: int, to: str) -> str:
            """Send money.

            Args:
                amount: How much.
                to: To whom.
            """
            self.payments += 1
            return "payment sent"

        @tool(read_only=False)
        def write(path: str, text: str) -> str:
            """Write a file.

            Args:
                path: The file.
                text: Its text.
            """
            return "written"

        return [edit, run_tests, job_status, list_files, delete_file, read, send_payment, write]


async def run(script: list[Any], **options: Any) -> Any:
    world = Workspace()
    model = ScriptedModel(script)
    result = await Agent(model, world.tools(), **options).run("task")
    return result, model, world


# --- progress is never a stall ------------------------------------------------------


async def test_edit_then_test_loops_complete() -> None:
    script = []
    for n in range(3):
        script += [step(call("edit", patch=f"fix {n}")), step(call("run_tests"))]
    result, model, world = await run([*script, "all tests pass"])
    assert result.stop_reason is StopReason.COMPLETED
    assert world.failing == 0
    model.assert_consumed()


async def test_polling_a_job_until_it_finishes_completes() -> None:
    script = [step(call("job_status", job="j1")) for _ in range(5)]
    result, model, _ = await run([*script, "the job is done"])
    assert result.stop_reason is StopReason.COMPLETED
    assert result.tool_calls[-1].result == "done"


async def test_checking_a_write_completes() -> None:
    script: list[ModelResponse | str] = []
    for path in ("tmp1", "tmp2", "tmp3"):
        script += [step(call("list_files")), step(call("delete_file", path=path))]
    script += [step(call("list_files")), "cleaned up"]
    result, _, _ = await run(script)
    assert result.stop_reason is StopReason.COMPLETED


async def test_the_same_read_far_apart_with_changes_between_completes() -> None:
    script = []
    for n in range(4):
        script += [step(call("read", path="a")), step(call("write", path="b", text=str(n)))]
    result, _, _ = await run([*script, "done"])
    assert result.stop_reason is StopReason.COMPLETED


async def test_the_answer_right_after_the_third_identical_read_is_kept() -> None:
    # the old hard stop came one cycle before this answer; the nudge lets it arrive
    script = [step(call("read", path="a"))] * 3 + ["a says: contents of a"]
    result, model, _ = await run(script)
    assert result.stop_reason is StopReason.COMPLETED
    assert result.output == "a says: contents of a"
    model.assert_consumed()


# --- loops still stop ----------------------------------------------------------------


async def test_the_same_read_four_times_stalls_after_a_nudge() -> None:
    script = [step(call("read", path="a"))] * 4 + ["a holds its contents"]
    result, model, _ = await run(script)
    assert result.stop_reason is StopReason.STALLED
    # a read runs: the note follows the third, the fourth ends the run once it ran
    assert result.cycles == 4 and len(result.tool_calls) == 4
    assert result.stop_detail == (
        'read(path="a") was requested 4 times with the same result and nothing changed in between'
    )
    assert result.output == "a holds its contents" and result.output_after_stop


async def test_one_payment_sent_again_and_again_stalls() -> None:
    script = [step(call("send_payment", amount=100, to="acct-1"))] * 15 + ["sent"]
    result, _, world = await run(script)
    assert result.stop_reason is StopReason.STALLED
    # undeclared, it runs and is judged on its result: the third gets the note after it,
    # the fourth is refused (it may be a write)
    assert world.payments == 3
    assert result.cycles == 4


async def test_a_declared_payment_sent_again_is_refused_before_its_third_run() -> None:
    sent = []

    @tool(read_only=False)
    def issue_voucher(customer: str, amount: int) -> str:
        """Issue a voucher.

        Args:
            customer: Who gets it.
            amount: How much.
        """
        sent.append(amount)
        return f"voucher V-{len(sent)} of {amount} issued to {customer}"

    script = [step(call("issue_voucher", customer="c1", amount=200))] * 5 + ["done"]
    result = await Agent(ScriptedModel(script), [issue_voucher]).run("compensate c1")
    assert result.stop_reason is StopReason.STALLED and result.cycles == 4
    assert sent == [200, 200]  # the new id each time does not make it new
    assert "each call does it again" in result.stop_detail


async def test_a_two_call_cycle_gets_a_note_then_its_next_call_stops_the_run() -> None:
    delete = step(call("delete_file", path="gone"))
    cycle = [delete, step(call("run_tests"))]
    # the third repetition starts with a note instead of the delete; the tests again stop
    result, model, _ = await run([*cycle, *cycle, *cycle, "stuck"])
    assert result.stop_reason is StopReason.STALLED and result.cycles == 6
    nudges = [e for e in result.events if isinstance(e, Nudged)]
    assert [(e.about, e.cycle) for e in nudges] == [("stalled", 5)]
    assert result.output == "stuck" and result.output_after_stop
    model.assert_consumed()


async def test_the_same_write_with_checks_between_stalls_at_its_third() -> None:
    cycle = [step(call("write", path="a", text="x")), step(call("run_tests"))]
    result, _, _ = await run(cycle * 8 + ["stuck"])
    assert result.stop_reason is StopReason.STALLED
    # the first check said something new (it may have changed something): the writes
    # count from the second; the note replaces the fourth write, the fifth ends the run
    assert result.cycles == 9 and len(result.tool_calls) == 7


async def test_calls_to_tools_the_agent_lacks_form_a_streak_whatever_their_names() -> None:
    streak = (StopPolicy().max_mistakes or 0) + 1
    names = [step(call(f"search_{n}", query=f"q{n}")) for n in range(streak)]
    result, _, _ = await run([*names, "no search here"])
    # a new name each step is a search: the streak's threshold gets the note, then a stop
    assert result.stop_reason is StopReason.STALLED and result.cycles == streak
    assert f"in {streak} steps in a row" in result.stop_detail
    assert [r.outcome for r in result.tool_calls] == ["invalid"] * streak


async def test_the_same_call_to_a_tool_the_agent_lacks_is_a_loop() -> None:
    script = [step(call("search", query="q"))] * 4 + ["no search here"]
    result, _, _ = await run(script)
    # the third gets the note, the fourth stops the run
    assert result.stop_reason is StopReason.STALLED and result.cycles == 4
    assert result.stop_detail.startswith('the model made search(query="q"), a call the run')


# --- the nudge ---------------------------------------------------------------------------


async def test_a_stall_nudge_replaces_only_the_repeated_call_of_a_batch() -> None:
    write = call("write", path="a", text="x")
    script = [step(write)] * 2 + [step(call("read", path="b"), write), "done"]
    result, model, _ = await run(script)
    assert result.stop_reason is StopReason.COMPLETED
    third = [m for m in model.requests[3].messages if isinstance(m, ToolResultMessage)][-2:]
    assert third[0].content == "contents of b" and not third[0].is_error
    assert third[1].is_error and third[1].content.startswith("Not run: you have requested")
    assert "do it another way" in third[1].content
    assert [r.name for r in result.tool_calls] == ["write", "write", "read"]


async def test_a_tool_error_nudge_follows_the_results_in_a_valid_sequence() -> None:
    @tool
    def lookup(customer: str) -> str:
        """Look a customer up.

        Args:
            customer: Customer id.
        """
        raise ToolError("database unreachable")

    model = ScriptedModel([step(call("lookup", customer=f"c{n}")) for n in range(3)] + ["sorry"])
    policy = StopPolicy(max_failing_steps=3)
    result = await Agent(model, [lookup], policy=policy).run("find them")
    assert result.stop_reason is StopReason.COMPLETED
    sent = model.requests[3].messages
    assert isinstance(sent[-2], ToolResultMessage) and isinstance(sent[-1], UserMessage)
    assert "3 steps in a row" in sent[-1].content
    # Anthropic: one user turn, the tool results first, then the note
    turns = AnthropicModel("claude", api_key="k").build_request(sent, [], None)["messages"]
    assert [block["type"] for block in turns[-1]["content"]] == ["tool_result", "text"]
    assert [turn["role"] for turn in turns[-2:]] == ["assistant", "user"]
    # OpenAI: the tool message answers the call, the note follows as a user message
    request = OpenAIChatModel("gpt", api_key="k").build_request(sent[-3:], [], None)
    assert [m["role"] for m in request["messages"]] == ["assistant", "tool", "user"]
    nudges = [(e.about, e.cycle) for e in result.events if isinstance(e, Nudged)]
    assert nudges == [("tool_error", 3)]


async def test_zero_nudges_keeps_the_hard_stop() -> None:
    script = [step(call("read", path="a"))] * 3
    result, model, _ = await run(script, policy=StopPolicy(notes=0, final_answer=False))
    assert result.stop_reason is StopReason.STALLED and result.cycles == 3
    model.assert_consumed()


async def test_a_redirect_starts_a_fresh_stretch() -> None:
    from convergent.steering import SteeringQueue

    steering = SteeringQueue()
    script: list[Any] = [step(call("read", path="a"))] * 4 + ["done"]
    model = ScriptedModel(script)
    world = Workspace()

    original = model.request

    async def request(messages: Any, tools: Any, settings: Any = None) -> Any:
        if len(model.requests) == 1:
            steering.send("read it once more")
        return await original(messages, tools, settings)

    model.request = request  # type: ignore[method-assign]
    result = await Agent(model, world.tools()).run("task", steering=steering)
    assert result.stop_reason is StopReason.COMPLETED
    assert len(result.tool_calls) == 4


def test_a_wait_between_polls_always_runs() -> None:
    # each wait lets time pass: the poll after it is a fresh look, and every count starts
    # again, so the identical waits are no loop
    status = iter(["running, 20% done", "running, 40%", "running, 60%", "running, 80%", "done"])
    clock = ManualClock()

    @tool(read_only=True)
    def job_status(job: str) -> str:
        """A job's status.

        Args:
            job: Job id.
        """
        return next(status)

    @tool(read_only=True)
    def wait(seconds: int) -> str:
        """Wait.

        Args:
            seconds: How long.
        """
        clock.seconds += seconds
        return f"waited {seconds} s"

    script = [step(call("job_status", job="j1"))]
    for _ in range(4):
        script += [step(call("wait", seconds=10)), step(call("job_status", job="j1"))]
    nudges: list[Nudged] = []

    def keep_nudges(event: object) -> None:
        if isinstance(event, Nudged):
            nudges.append(event)

    agent = Agent(ScriptedModel([*script, "j1 is done"]), [job_status, wait])
    with use_clock(clock):
        result = agent.run_sync("Poll j1 until done.", on_event=keep_nudges)
    assert result.stop_reason is StopReason.COMPLETED
    assert [r.name for r in result.tool_calls].count("wait") == 4
    assert nudges == []


def test_a_read_whose_result_moves_does_not_hide_another_read_repeated() -> None:
    # SWE-agent's viewer: scroll_down shows other lines each time (the model moved it),
    # while the same search comes back the same between the scrolls
    lines = iter(f"lines {10 * n}-{10 * n + 9}" for n in range(20))

    @tool(read_only=True)
    def search_dir(term: str) -> str:
        """Search the repository.

        Args:
            term: What to look for.
        """
        return f"Found 66 matches for {term}"

    @tool(read_only=True)
    def scroll_down() -> str:
        """Show the next lines of the open file."""
        return next(lines)

    script = [step(call("search_dir", term="@JsonAnySetter")), step(call("scroll_down"))] * 4
    nudges: list[Nudged] = []
    agent = Agent(ScriptedModel([*script, "stuck"]), [search_dir, scroll_down])
    agent.run_sync(
        "find where any-setters are handled",
        on_event=lambda e: nudges.append(e) if isinstance(e, Nudged) else None,
    )
    # the third identical search gets the note: the scrolls' new lines changed nothing
    assert [e.cycle for e in nudges] == [5, 7]
    assert all('search_dir(term="@JsonAnySetter")' in e.note for e in nudges)


# --- waiting --------------------------------------------------------------------------


class ManualClock(Clock):
    """Time that passes only when a tool says so."""

    __slots__ = ("seconds",)

    def __init__(self) -> None:
        self.seconds = 0.0

    def monotonic(self) -> float:
        return self.seconds


def ci_shell(clock: ManualClock, done_after: float) -> Any:
    """An undeclared shell tool: ``sleep N`` takes N seconds; the CI job ends after a while."""

    @tool
    def shell(command: str) -> str:
        """Run a shell command.

        Args:
            command: The command.
        """
        if command.startswith("sleep "):
            clock.seconds += float(command.split()[1])
            return ""
        if command == "pytest":
            clock.seconds += 5.0  # a slow command: it takes time itself, between nothing
            return "3 failed, 40 passed"
        state = "completed success" if clock.seconds >= done_after else "in_progress"
        return f"run 42: {state}"

    return shell


async def run_shell(script: list[Any], done_after: float = 30.0) -> Any:
    clock = ManualClock()
    with use_clock(clock):
        agent = Agent(ScriptedModel(script), [ci_shell(clock, done_after)])
        return await agent.run("wait for CI run 42")


async def test_a_five_second_sleep_between_polls_lets_a_ci_poll_finish() -> None:
    poll, sleep = (
        step(call("shell", command="gh run view 42")),
        step(call("shell", command="sleep 5")),
    )
    script = [poll]
    for _ in range(7):
        script += [sleep, poll]
    result = await run_shell([*script, "CI run 42 succeeded"])
    assert result.stop_reason is StopReason.COMPLETED
    assert result.tool_calls[-1].result == "run 42: completed success"
    assert [e for e in result.events if isinstance(e, Nudged)] == []


async def test_a_slow_command_repeated_back_to_back_is_still_a_loop() -> None:
    # five seconds in the command itself, nothing waited between: the same result again
    result = await run_shell([step(call("shell", command="pytest"))] * 5 + ["stuck"])
    assert result.stop_reason is StopReason.STALLED and result.cycles == 4


async def test_the_note_on_a_repeated_poll_says_how_to_wait() -> None:
    poll = step(call("shell", command="gh run view 42"))
    result = await run_shell([poll] * 4 + ["still running"])
    assert result.stop_reason is StopReason.STALLED
    [nudge] = [e for e in result.events if isinstance(e, Nudged)]
    assert "If you are waiting for it to change, wait at least 10 seconds" in nudge.note


async def test_a_model_that_waits_as_the_note_says_goes_on_polling() -> None:
    poll = step(call("shell", command="gh run view 42"))
    script = [poll] * 3 + [step(call("shell", command="sleep 10")), poll]
    script += [step(call("shell", command="sleep 10")), poll, "CI run 42 succeeded"]
    result = await run_shell(script, done_after=20.0)
    assert result.stop_reason is StopReason.COMPLETED


# --- one note per stretch without progress ----------------------------------------------


async def test_an_identical_failing_call_gets_one_note_whichever_rule_sees_it() -> None:
    @tool
    def fetch(url: str) -> str:
        """Fetch a page.

        Args:
            url: The page.
        """
        raise ToolError("connection refused")

    script = [step(call("fetch", url="http://x.example"))] * 5 + ["it is down"]
    policy = StopPolicy(max_repeated_failures=2)
    result = await Agent(ScriptedModel(script), [fetch], policy=policy).run("fetch x")
    assert result.stop_reason is StopReason.TOOL_ERROR
    assert [e.about for e in result.events if isinstance(e, Nudged)] == ["tool_error"]
    assert result.cycles == 3
