"""Two cases the convergence suite finds the stop rules getting wrong, as small runs.

Each test states what the loop should do; both are expected to fail until the rule
changes (``xfail`` is strict, so a fix makes them fail as unexpectedly passing, and the
marker goes). See docs/benchmark.md, "What the stop-rule scenarios found".
"""

from __future__ import annotations

import itertools

import pytest

from convergent import Agent, Limits, ScriptedModel, StopReason, tool
from convergent.events import Event, Nudged


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"content": "", "tool_calls": [{"name": name, "arguments": arguments}]}


@pytest.mark.xfail(
    strict=True,
    reason="a write repeated with the same arguments counts afresh whenever its result "
    "differs, so a new receipt id each time hides the loop",
)
def test_the_same_payment_with_a_new_receipt_each_time_is_stopped() -> None:
    receipts = itertools.count(1001)

    @tool(read_only=False)
    def pay(to: str, amount: float) -> str:
        """Send a payment.

        Args:
            to: Payee.
            amount: Amount in EUR.
        """
        return f"payment P-{next(receipts)} of {amount:.2f} EUR to {to} sent"

    model = ScriptedModel([call("pay", to="ACME", amount=15)] * 10 + ["done", "answer"])
    result = Agent(model, [pay], limits=Limits(max_cycles=10)).run_sync("Pay ACME 15 EUR once.")
    sent = [record for record in result.tool_calls if record.ok]
    assert result.stop_reason is StopReason.STALLED
    assert len(sent) <= 3


@pytest.mark.xfail(
    strict=True,
    reason="a read-only call repeated with the same result counts while only other calls' "
    "results change, so the wait between polls is replaced by a note from the third on",
)
def test_a_wait_between_polls_always_runs() -> None:
    status = iter(["running, 20% done", "running, 40%", "running, 60%", "running, 80%", "done"])

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
        return f"waited {seconds} s"

    script = [call("job_status", job="j1")]
    for _ in range(4):
        script += [call("wait", seconds=10), call("job_status", job="j1")]
    nudges: list[Event] = []

    def keep_nudges(event: Event) -> None:
        if isinstance(event, Nudged):
            nudges.append(event)

    agent = Agent(ScriptedModel([*script, "j1 is done"]), [job_status, wait])
    result = agent.run_sync("Poll j1 until done.", on_event=keep_nudges)
    assert result.stop_reason is StopReason.COMPLETED
    assert [r.name for r in result.tool_calls].count("wait") == 4
    assert nudges == []
