"""`CycleDriver` costs usage that reports none at the model's price."""

from __future__ import annotations

import pytest

from convergent import Limits
from convergent.loop.driver import CycleDriver
from convergent.messages import Usage
from convergent.models import TokenPrice

PRICE = TokenPrice(1.0, 10.0)
"""$0.002 for 1000 input and 100 output tokens."""
TOKENS = Usage(input_tokens=1000, output_tokens=100, requests=1)


def test_a_response_without_a_cost_is_costed_at_the_price() -> None:
    driver = CycleDriver(Limits(max_cost=1.0), price=PRICE)
    driver.requested(TOKENS)
    driver.requested(TOKENS)
    assert driver.usage.cost == pytest.approx(0.004)
    assert driver.budget.last.cost == pytest.approx(0.002)


def test_a_reported_cost_is_kept() -> None:
    driver = CycleDriver(Limits(max_cost=1.0), price=PRICE)
    driver.requested(Usage(input_tokens=1000, output_tokens=100, requests=1, cost=0.5))
    assert driver.usage.cost == 0.5


def test_a_final_answer_is_costed_and_a_child_run_counts_as_reported() -> None:
    driver = CycleDriver(Limits(max_cost=1.0), price=PRICE)
    driver.add_usage(TOKENS)
    driver.add_usage(TOKENS, cycles=2)
    assert driver.usage.cost == pytest.approx(0.002)
    assert driver.budget.cycles_used() == 2


def test_without_a_price_only_reported_costs_count() -> None:
    driver = CycleDriver(Limits(max_cost=1.0))
    driver.requested(TOKENS)
    assert driver.usage.cost == 0.0


def test_the_policy_options_are_validated_on_the_adapter_path_too() -> None:
    from convergent import StopPolicy, UserError

    with pytest.raises(UserError, match="on_tool_error must be"):
        CycleDriver(policy=StopPolicy(on_tool_error="bogus"))  # type: ignore[arg-type]
    with pytest.warns(DeprecationWarning), pytest.raises(UserError, match="on_tool_error"):
        CycleDriver(on_tool_error="bogus")  # type: ignore[typeddict-item]
    with pytest.warns(DeprecationWarning), pytest.raises(UserError, match="must be >= 1"):
        CycleDriver(max_consecutive_tool_errors=-5)
