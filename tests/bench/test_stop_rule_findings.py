"""Cases the convergence suite found the stop rules getting wrong, as small runs.

Each test states what the loop should do. While a rule stands wrong its test is marked
``xfail`` (strictly, so that the fix shows as an unexpected pass); the fixed ones stay
here. See docs/benchmark.md, "What the stop-rule scenarios found".
"""

from __future__ import annotations

import itertools

from convergent import Agent, Limits, ScriptedModel, StopReason, tool
from convergent.events import Event, Nudged, RunStopped
from convergent.messages import Usage
from convergent.testing import answer, call, step


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

    model = ScriptedModel([step(call("pay", to="ACME", amount=15))] * 10 + ["done", "answer"])
    result = Agent(model, [pay], limits=Limits(max_cycles=10)).run_sync("Pay ACME 15 EUR once.")
    sent = [record for record in result.tool_calls if record.ok]
    assert result.stop_reason is StopReason.STALLED
    assert len(sent) <= 3


def _notes_and_stop(events: list[Event]) -> list[str]:
    """The budget notes and the stop, in the order the run emitted them."""
    return [
        "note" if isinstance(event, Nudged) else "stop"
        for event in events
        if (isinstance(event, Nudged) and event.about == "budget") or isinstance(event, RunStopped)
    ]


def test_the_model_is_told_before_a_cap_on_one_tools_calls_stops_the_run() -> None:
    @tool(read_only=True)
    def weather(city: str) -> str:
        """Current temperature.

        Args:
            city: City name.
        """
        return f"{city}: 20 °C"

    model = ScriptedModel([step(call("weather", city=c)) for c in "ABCDE"] + [answer("best")])
    events: list[Event] = []
    result = Agent(model, [weather], limits=Limits(max_calls_per_tool=3)).run_sync(
        "Which of A to E is warmest?", on_event=events.append
    )
    assert result.stop_reason is StopReason.BUDGET_EXHAUSTED
    assert _notes_and_stop(events) == ["note", "stop"]


def test_the_model_is_told_before_a_cost_budget_stops_a_growing_run() -> None:
    @tool(read_only=True)
    def report(region: str) -> str:
        """A region's sales report.

        Args:
            region: Region name.
        """
        return f"{region}: " + "store 001 | 412 kEUR, " * 1000

    def usage(cycle: int) -> Usage:  # each request resends the reports read so far
        return Usage(input_tokens=300 + 8000 * cycle, output_tokens=20, requests=1)

    script = [step(call("report", region=f"r{n}"), usage=usage(n)) for n in range(12)]
    model = ScriptedModel([*script, answer("best", usage=usage(12))], price=(3.0, 15.0))
    events: list[Event] = []
    result = Agent(model, [report], limits=Limits(max_cost=0.5)).run_sync(
        "Which region sold most?", on_event=events.append
    )
    assert result.stop_reason is StopReason.BUDGET_EXHAUSTED
    assert result.usage.cost <= 0.5
    assert _notes_and_stop(events) == ["note", "stop"]
