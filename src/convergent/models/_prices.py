"""What model tokens cost: `TokenPrice`, and prices looked up in the genai-prices table.

A backend turns each response's token counts into a cost with its `TokenPrice`: a price
given by the user, or the one `known_price` finds in the price table of the
``genai-prices`` package (the table PydanticAI uses). The table is loaded once per
process, on the first look-up (about half a second), and each model's price is looked
up once: pricing a response is then a few float operations.

Token counts follow the table's convention: ``input_tokens`` counts every prompt token,
cached or not; ``cache_read_tokens`` and ``cache_write_tokens`` are the parts of it read
from or written to the provider's prompt cache.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from convergent.exceptions import UserError
from convergent.messages import CURRENCY, Usage

__all__ = [
    "CURRENCY",
    "FREE",
    "PriceLike",
    "TokenPrice",
    "client_url",
    "dump_price",
    "format_cost",
    "known_price",
    "load_price",
    "parse_price",
    "priced",
    "priced_for_limit",
    "token_price",
]

_PER = 1_000_000
"""Prices are per million tokens."""


@dataclass(frozen=True, slots=True)
class TokenPrice:
    """What a model's tokens cost, in US dollars per million tokens.

    Example:
        >>> TokenPrice(0.15, 0.60).cost(input_tokens=1000, output_tokens=100)
        0.00021
    """

    input: float
    """Price of a million input (prompt) tokens."""
    output: float
    """Price of a million output (generated) tokens."""
    cache_read: float | None = None
    """Price of a million input tokens read from the prompt cache; None: as ``input``."""
    cache_write: float | None = None
    """Price of a million input tokens written to the prompt cache; None: as ``input``."""
    tiers: tuple[tuple[int, TokenPrice], ...] = ()
    """Long-context prices, by ascending threshold: a request with more input tokens than
    a threshold pays that tier's prices for all its tokens."""

    def __post_init__(self) -> None:
        for name in ("input", "output", "cache_read", "cache_write"):
            value = getattr(self, name)
            if value is None and name.startswith("cache"):
                continue
            if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise UserError(f"a price must be a number >= 0, got {name}={value!r}")

    def cost(
        self,
        input_tokens: int,
        output_tokens: int,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
    ) -> float:
        """The cost of one request's tokens (``input_tokens`` includes the cached ones)."""
        price = self
        for threshold, tier in self.tiers:
            if input_tokens > threshold:
                price = tier
        uncached = input_tokens
        total = output_tokens * price.output
        if price.cache_read is not None and cache_read_tokens:
            uncached -= cache_read_tokens
            total += cache_read_tokens * price.cache_read
        if price.cache_write is not None and cache_write_tokens:
            uncached -= cache_write_tokens
            total += cache_write_tokens * price.cache_write
        return (total + max(uncached, 0) * price.input) / _PER

    @property
    def free(self) -> bool:
        """Whether input and output tokens cost nothing."""
        return self.input == 0 and self.output == 0


FREE = TokenPrice(0.0, 0.0)
"""The price of a model that runs on this machine."""

PriceLike = TokenPrice | tuple[float, float]
"""A price, or ``(input, output)`` in US dollars per million tokens."""


def token_price(value: PriceLike | None) -> TokenPrice | None:
    """``value`` as a `TokenPrice` (a pair is ``(input, output)`` per million tokens).

    Raises:
        UserError: For a value that is not a price.
    """
    if value is None or isinstance(value, TokenPrice):
        return value
    if isinstance(value, tuple | list) and len(value) == 2:
        return TokenPrice(*value)
    raise UserError(f"a price is TokenPrice(input, output) or (input, output), got {value!r}")


def priced(usage: Usage, price: TokenPrice | None) -> Usage:
    """``usage`` with the cost of its tokens at ``price``, when it reports no cost of its own."""
    if price is None or usage.cost or not (usage.input_tokens or usage.output_tokens):
        return usage
    return dataclasses.replace(usage, cost=price.cost(usage.input_tokens, usage.output_tokens))


def priced_for_limit(
    price: PriceLike | None, max_cost: float | None, where: str
) -> TokenPrice | None:
    """``price`` as a `TokenPrice`, refusing a cost limit that no price can make hold.

    Args:
        price: The price the caller gave, if any.
        max_cost: The cost limit, if one is set.
        where: Who takes the price (named in the error), e.g. ``ConvergenceMiddleware``.

    Raises:
        UserError: If ``max_cost`` is set and no price is given, or the price is not one.
    """
    found = token_price(price)
    if max_cost is not None and found is None:
        raise UserError(
            f"max_cost needs the model's price: give {where} price=(IN, OUT), in US dollars "
            "per million input and output tokens"
        )
    return found


def format_cost(cost: float, *, free: bool = False) -> str:
    """A cost for people: ``$0.00264``, ``$1.25``, and ``$0`` or ``-`` for none.

    None is ``$0`` when the model is ``free`` (known to cost nothing), else ``-`` (no
    price known).
    """
    if not cost:
        return "$0" if free else "-"
    digits = 2 if cost >= 1 else 4 if cost >= 0.01 else 6
    shown = f"{cost:.{digits}f}".rstrip("0").rstrip(".")
    return f"${shown}" if shown != "0" else f"<${10**-digits:.{digits}f}"


def dump_price(price: TokenPrice | None) -> dict[str, Any] | None:
    """``price`` as plain JSON data (`load_price` reads it back)."""
    return None if price is None else dataclasses.asdict(price)


def load_price(data: Mapping[str, Any] | None) -> TokenPrice | None:
    """The price `dump_price` wrote."""
    return None if data is None else _loaded(data)


def _loaded(data: Mapping[str, Any]) -> TokenPrice:
    return TokenPrice(
        data["input"],
        data["output"],
        data.get("cache_read"),
        data.get("cache_write"),
        tuple((int(start), _loaded(tier)) for start, tier in data.get("tiers", ())),
    )


_NUMBER = r"\s*(\d+(?:\.\d*)?|\.\d+)\s*"
_PAIR = re.compile(f"{_NUMBER},{_NUMBER}")


def parse_price(text: str, option: str = "--price") -> tuple[float, float]:
    """``IN,OUT`` (US dollars per million input and output tokens) as ``(input, output)``.

    Raises:
        UserError: For text that is not two numbers >= 0 separated by a comma.
    """
    match = _PAIR.fullmatch(text)
    if match is None:
        raise UserError(
            f"{option} must be IN,OUT: US dollars per million input and output tokens, "
            f"e.g. 0.15,0.60; got {text!r}"
        )
    return float(match[1]), float(match[2])


def known_price(model: str, provider: str, base_url: str | None = None) -> TokenPrice | None:
    """The price table's price of ``model`` at ``provider`` (None when it has none).

    Args:
        model: The model's name, as the provider's API knows it.
        provider: ``openai`` or ``anthropic``: whose price applies when ``base_url`` is
            the provider's own API or None.
        base_url: Another server's URL: the price of the provider the table finds at that
            URL, if any (a self-hosted server has no price of its own).
    """
    own = base_url is None or f"api.{provider}.com" in base_url
    return _looked_up(model.lower(), provider if own else None, None if own else base_url)


def client_url(client: Any) -> str | None:
    """The base URL of a ready SDK client (None for none): where its model's price applies."""
    url = getattr(client, "base_url", None)
    return str(url) if url is not None else None


@cache
def _looked_up(model: str, provider: str | None, url: str | None) -> TokenPrice | None:
    try:
        from genai_prices import Usage, calc_price
    except ImportError:  # the table is in the openai and anthropic extras
        return None
    try:
        if provider is not None:
            found = calc_price(Usage(), model, provider_id=provider)
        else:
            found = calc_price(Usage(), model, provider_api_url=url)
    except LookupError:
        return None
    return _from_table(found.model_price)


_KEYS = ("input_mtok", "output_mtok", "cache_read_mtok", "cache_write_mtok")


def _from_table(prices: Any) -> TokenPrice | None:
    """A `TokenPrice` from the table's prices of one model (tiers included)."""
    from genai_prices.types import TieredPrices

    values = {key: getattr(prices, key, None) for key in _KEYS}
    if values["input_mtok"] is None or values["output_mtok"] is None:
        return None  # not priced by the token (audio, images...)
    thresholds = sorted(
        {
            tier.start
            for value in values.values()
            if isinstance(value, TieredPrices)
            for tier in value.tiers
        }
    )

    def at(tokens: int | None) -> TokenPrice:
        def one(value: Any) -> float | None:
            if value is None:
                return None
            if isinstance(value, TieredPrices):
                chosen = value.base
                for tier in value.tiers:
                    if tokens is not None and tokens > tier.start:
                        chosen = tier.price
                return float(chosen)
            return float(value)

        return TokenPrice(
            input=one(values["input_mtok"]) or 0.0,
            output=one(values["output_mtok"]) or 0.0,
            cache_read=one(values["cache_read_mtok"]),
            cache_write=one(values["cache_write_mtok"]),
        )

    base = at(None)
    if not thresholds:
        return base
    tiers = tuple((start, at(start + 1)) for start in thresholds)
    return TokenPrice(base.input, base.output, base.cache_read, base.cache_write, tiers)
