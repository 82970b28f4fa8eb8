"""Turn a ``--model`` string into a `Model`."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from convergent.exceptions import UserError
from convergent.models._prices import PriceLike
from convergent.models.base import Model

__all__ = ["build_model", "costs_nothing", "default_model_spec", "model_from_string"]

_FORMS = "scripted:PATH, openai:MODEL, anthropic:MODEL, local or local:PATH.gguf"


def default_model_spec() -> str:
    """The model used when none is given: a configured provider, else the embedded one."""
    if os.environ.get("OPENAI_API_KEY"):
        return "openai:gpt-4o-mini"
    if os.environ.get("ANTHROPIC_API_KEY"):
        return "anthropic:claude-haiku-5-5"
    return "local"


def costs_nothing(recipe: Mapping[str, Any] | None) -> bool:
    """Whether a stored run's model is known to be free.

    It is when its spec's price is zero, or it is a local model without one (llama.cpp
    on this machine costs nothing per token).

    A zero cost means "free" only then; for any other model it means "no price known".
    """
    if not recipe:
        return False
    price = recipe.get("price")
    if price is not None:
        return isinstance(price, Sequence) and not any(price)
    model = recipe.get("model")
    return isinstance(model, str) and model.partition(":")[0] == "local"


def model_from_string(
    spec: str, *, base_url: str | None = None, price: PriceLike | None = None
) -> Model:
    """Build the model a ``--model`` value names (``price``: its price, if given).

    Raises:
        UserError: For an unknown prefix or a missing argument.
    """
    prefix, _, rest = spec.partition(":")
    if prefix == "scripted":
        from convergent.models.scripted import ScriptedModel

        if not rest:
            raise UserError("scripted model needs a path: scripted:PATH")
        return ScriptedModel.from_file(rest, price=price)
    if prefix == "openai":
        from convergent.models.openai import OpenAIChatModel

        if not rest:
            raise UserError("openai model needs a name: openai:MODEL")
        return OpenAIChatModel(rest, base_url=base_url, price=price)
    if prefix == "anthropic":
        from convergent.models.anthropic import AnthropicModel

        if not rest:
            raise UserError("anthropic model needs a name: anthropic:MODEL")
        return AnthropicModel(rest, base_url=base_url, price=price)
    if prefix == "local":
        from convergent.models.local import LocalModel

        if base_url is not None:
            raise UserError(
                "--base-url does not apply to local models; for a running server use "
                "openai:MODEL --base-url URL"
            )
        return LocalModel(rest or None) if price is None else LocalModel(rest or None, price=price)
    raise UserError(f"unknown model {spec!r}; use {_FORMS}")


def build_model(
    spec: str | None,
    *,
    base_url: str | None = None,
    protocol: str | None = None,
    price: PriceLike | None = None,
) -> Model:
    """The model ``spec`` names (default: `default_model_spec`), set up for ``protocol``.

    Without a protocol each backend uses its own default: native tool calling for
    providers, the measured best protocol for the embedded model.

    Raises:
        UserError: For an unknown model or protocol.
    """
    from convergent.models.local import LocalModel
    from convergent.models.structured import StructuredToolCalling

    if protocol not in (None, "native", "structured"):
        raise UserError(f"the protocol must be native or structured, got {protocol!r}")
    model = model_from_string(spec or default_model_spec(), base_url=base_url, price=price)
    if isinstance(model, LocalModel):
        if protocol is not None:
            model.protocol = "native" if protocol == "native" else "structured"
        return model
    return StructuredToolCalling(model) if protocol == "structured" else model
