"""The one seam between the loop and any language model: `Model.request`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from convergent.messages import Message, ModelResponse, ToolSpec
from convergent.models._prices import TokenPrice

__all__ = ["Model", "ModelSettings"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSettings:
    """Per-request options; backends ignore what they cannot honour."""

    temperature: float | None = None
    """Sampling temperature."""
    max_tokens: int | None = None
    """Upper bound on generated tokens for this request."""
    json_schema: dict[str, Any] | None = None
    """When set, ask for a reply whose content is JSON valid under this schema."""
    json_schema_name: str = "response"
    """Name given to ``json_schema`` where the provider wants one."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Provider-specific request fields, passed through unchanged."""


class Model(ABC):
    """An LLM backend: turns a conversation and tool specs into one `ModelResponse`.

    Subclasses translate to and from their provider's wire format. They raise
    `convergent.exceptions.ModelError` when the backend fails after its own retries;
    the loop turns that into the ``model_error`` stop reason.
    """

    @property
    @abstractmethod
    def name(self) -> str:
        """A short name for traces, e.g. ``openai:gpt-4o-mini``."""

    @property
    def context_window(self) -> int | None:
        """Maximum context in tokens, when known; used for context compression."""
        return None

    @property
    def price(self) -> TokenPrice | None:
        """What the model's tokens cost, when known (None: unknown).

        A backend prices each response's usage with it. A run with a cost limit refuses
        a model whose price is unknown: its cost would never count.
        """
        return None

    @abstractmethod
    async def request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        """Send one request and return the model's reply.

        Args:
            messages: The whole conversation so far, oldest first. The loop passes its
                live list to avoid a copy per cycle: read it during the call, do not keep it.
            tools: Tools the model may call in this reply.
            settings: Optional per-request options.
        """

    def position(self) -> int | None:
        """Replies given so far, for a model that replays a script; None for a live model.

        A durable run stores it, and `seek` continues from it when the run resumes.
        """
        return None

    def seek(self, position: int) -> None:  # noqa: B027  (optional hook, no-op by default)
        """Continue a replayed script after ``position`` replies (live models ignore it)."""

    async def aclose(self) -> None:  # noqa: B027  (optional hook, no-op by default)
        """Release connections or processes held by the backend."""

    async def __aenter__(self) -> Model:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
