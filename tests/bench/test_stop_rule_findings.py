"""Cases the convergence suite found the stop rules getting wrong, as small runs.

Each test states what the loop should do. While a rule stood wrong its test was marked
``xfail`` (strictly, so that the fix showed as an unexpected pass); the fixed ones stay
here. See docs/benchmark.md, "What the stop-rule scenarios found".
"""

from __future__ import annotations

import itertools

from convergent import Agent, Limits, ScriptedModel, StopReason, tool
from convergent.testing import call, step


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
