"""Every adapter whose host reports tokens but no cost needs the model's price for ``max_cost``.

Without one, a cost limit would never be reached; the adapter refuses it when it is built.
How a priced run stops is in the conformance suite (the ``cost_budget`` trajectories).
"""

from __future__ import annotations

import pytest

from convergent import Limits
from convergent.exceptions import UserError

from .builders import PRICED

ADAPTERS = PRICED

COST_LIMIT = Limits(max_cost=0.5)


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
def test_a_cost_limit_without_a_price_is_refused_in_one_line(adapter: str) -> None:
    build, name = ADAPTERS[adapter]
    with pytest.raises(UserError) as raised:
        build(limits=COST_LIMIT)
    message = str(raised.value)
    assert "\n" not in message
    assert f"give {name} price=(IN, OUT)" in message


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
def test_a_price_that_is_not_one_is_refused(adapter: str) -> None:
    build, _ = ADAPTERS[adapter]
    with pytest.raises(UserError, match="a price is TokenPrice"):
        build(limits=COST_LIMIT, price=(1.0,))


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
def test_no_cost_limit_needs_no_price(adapter: str) -> None:
    build, _ = ADAPTERS[adapter]
    assert build(limits=Limits(max_cycles=3)) is not None
