"""Prices: the genai-prices table, looked up once per model, and costs computed from it."""

from __future__ import annotations

import json

import pytest
from genai_prices import Usage as TableUsage
from genai_prices import calc_price
from hypothesis import given, settings
from hypothesis import strategies as st

from convergent import UserError
from convergent.models import TokenPrice
from convergent.models._prices import (
    FREE,
    dump_price,
    format_cost,
    known_price,
    load_price,
    parse_price,
    token_price,
)

PRICED = [
    ("openai", "gpt-4o-mini"),
    ("openai", "gpt-4.1-nano"),
    ("openai", "gpt-5.4"),  # long-context tier above 272,000 input tokens
    ("anthropic", "claude-sonnet-4-5"),  # long-context tier above 200,000
    ("anthropic", "claude-haiku-4-5"),
    ("anthropic", "claude-haiku-5-5"),
]


def test_known_models_have_the_tables_prices() -> None:
    assert known_price("gpt-4o-mini", "openai") == TokenPrice(0.15, 0.6, cache_read=0.075)
    sonnet = known_price("claude-sonnet-4-5", "anthropic")
    assert sonnet is not None
    assert (sonnet.input, sonnet.output, sonnet.cache_read, sonnet.cache_write) == (
        3.0,
        15.0,
        0.3,
        3.75,
    )
    assert sonnet.tiers[0][0] == 200_000 and sonnet.tiers[0][1].input == 6.0
    # a dated snapshot is the same model
    assert known_price("gpt-4o-mini-2024-07-18", "openai") == known_price("gpt-4o-mini", "openai")


def test_an_unknown_model_or_a_self_hosted_server_has_no_price() -> None:
    assert known_price("no-such-model-anywhere", "openai") is None
    assert known_price("claude-nonexistent-9", "anthropic") is None
    # the same name on a server of one's own: what it costs is not in any table
    assert known_price("gpt-4o-mini", "openai", "http://127.0.0.1:8000/v1") is None
    # a provider the table knows by its URL prices its own models
    found = known_price(
        "meta-llama/llama-3.3-70b-instruct", "openai", "https://openrouter.ai/api/v1"
    )
    assert found is not None and found.input > 0


@settings(max_examples=200, deadline=None)
@given(
    model=st.sampled_from(PRICED),
    uncached=st.integers(0, 400_000),
    read=st.integers(0, 200_000),
    written=st.integers(0, 50_000),
    output=st.integers(0, 64_000),
)
def test_a_cost_is_the_tables_own_calculation(
    model: tuple[str, str], uncached: int, read: int, written: int, output: int
) -> None:
    provider, name = model
    price = known_price(name, provider)
    assert price is not None
    prompt = uncached + read + written
    ours = price.cost(prompt, output, cache_read_tokens=read, cache_write_tokens=written)
    usage = TableUsage(
        input_tokens=prompt,
        output_tokens=output,
        cache_read_tokens=read,
        cache_write_tokens=written,
    )
    theirs = float(calc_price(usage, name, provider_id=provider).total_price)
    assert ours == pytest.approx(theirs, rel=1e-9, abs=1e-15)


def test_a_long_prompt_pays_the_long_context_tier_for_all_its_tokens() -> None:
    price = TokenPrice(3.0, 15.0, tiers=((200_000, TokenPrice(6.0, 22.5)),))
    assert price.cost(200_000, 1_000) == pytest.approx((200_000 * 3 + 1_000 * 15) / 1e6)
    assert price.cost(200_001, 1_000) == pytest.approx((200_001 * 6 + 1_000 * 22.5) / 1e6)


def test_cache_tokens_without_a_cache_price_cost_as_input() -> None:
    price = TokenPrice(2.0, 8.0)
    assert price.cost(1_000, 0, cache_read_tokens=600, cache_write_tokens=100) == pytest.approx(
        1_000 * 2.0 / 1e6
    )


def test_prices_are_validated_and_parsed() -> None:
    assert parse_price("0.15,0.60") == (0.15, 0.6)
    assert parse_price(" 3 , 15 ") == (3.0, 15.0)
    for bad in ("0.15", "a,b", "-1,2", "1,2,3", "nan,1", ""):
        with pytest.raises(UserError, match="--price must be IN,OUT"):
            parse_price(bad)
    with pytest.raises(UserError, match="a price must be a number >= 0"):
        TokenPrice(-1.0, 1.0)
    with pytest.raises(UserError, match="a price must be a number >= 0"):
        TokenPrice(float("inf"), 1.0)
    assert token_price((1, 2)) == TokenPrice(1, 2)
    with pytest.raises(UserError, match="a price is TokenPrice"):
        token_price((1, 2, 3))  # type: ignore[arg-type]


def test_a_price_survives_json() -> None:
    price = known_price("claude-sonnet-4-5", "anthropic")
    assert load_price(json.loads(json.dumps(dump_price(price)))) == price
    assert load_price(dump_price(FREE)) == FREE and dump_price(None) is None


def test_costs_read_as_dollars() -> None:
    assert format_cost(0) == "-"
    assert format_cost(0, free=True) == "$0"
    assert format_cost(0.00264) == "$0.00264"
    assert format_cost(0.0123456) == "$0.0123"
    assert format_cost(12.3456) == "$12.35"
    assert format_cost(1e-9) == "<$0.000001"
