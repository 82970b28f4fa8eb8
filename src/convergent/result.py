"""`RunResult`: what a finished run reports."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter

from convergent.events import Event
from convergent.exceptions import UserError
from convergent.messages import CURRENCY, Message, Usage
from convergent.output import OutputSpec
from convergent.state import RunState, ToolCallRecord
from convergent.stop import StopReason

__all__ = ["AFTER_STOP_LABEL", "RunResult", "output_label"]

AFTER_STOP_LABEL = "best answer after the stop"
"""How every view names an output that is the answer asked for after a stop
(``output_after_stop``): the command line, the console and telemetry say it alike, so
that nobody takes it for a completed answer."""


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class RunResult:
    """The outcome of one run."""

    run_id: str
    """Unique id of the run."""
    output: str
    """The model's final text (for ``completed``: its answer; after a stop for
    ``max_cycles``, ``stalled``, ``budget_exhausted`` or ``tool_error``: the answer to a
    last request with no tools, when ``output_after_stop``)."""
    stop_reason: StopReason
    """The one objective reason the run ended."""
    stop_detail: str
    """Human-readable detail of the stop."""
    cycles: int
    """Model requests made (a cycle is one request plus the tools it asked for)."""
    tool_calls: tuple[ToolCallRecord, ...]
    """Every executed tool call, in order."""
    usage: Usage
    """Total usage of the run."""
    messages: tuple[Message, ...]
    """The final conversation."""
    output_after_stop: bool = False
    """``output`` is the best answer the model gave after the stop, not a completion."""
    stop_rule: str = ""
    """The rule that gave the stop (`convergent.stop.Stop.rule`): the setting's name
    (``max_repeated_calls``, ``max_failing_steps``, ``max_tool_calls``...) or, for a stop
    no setting gives, the fact (``answered``, ``handed_off``, ``fatal``...); "" for a
    run stored before runs named it."""
    output_data: Any = None
    """The output as a value of the agent's ``output_type`` (the JSON data, for an
    ``output_schema``), once the run is ``completed``; None otherwise, and for agents
    without a declared output type."""
    events: Sequence[Event] = ()
    """Every event of the run, in order (built when first read when nothing observed
    the run); empty for a run another process ran (a Temporal workflow's), whose
    events its ``progress`` query gives."""

    @classmethod
    def from_state(
        cls,
        state: RunState,
        *,
        output: OutputSpec | None = None,
        events: Sequence[Event] = (),
    ) -> RunResult:
        """The result of a stopped run, from its final state: the one way a result is made.

        The loop makes it at the stop, and a Temporal client from the state its workflow
        returned, so that a trajectory has the same result wherever it ran.

        Args:
            state: The run's final state (with its stop reason).
            output: The output type its answer was checked against: ``output_data`` is
                the state's JSON data as a value of it; None: the JSON data itself (an
                ``output_schema``'s value, or None without a declared output).
            events: The run's events, when they were kept.

        Raises:
            UserError: If the state has no stop reason (the run has not stopped).
        """
        if state.stop_reason is None:
            raise UserError(f"run {state.run_id!r} has no stop reason in its final state")
        data = state.output_json
        return cls(
            run_id=state.run_id,
            output=state.output,
            output_after_stop=state.output_after_stop,
            output_data=output.value_of(data) if output is not None else data,
            stop_reason=state.stop_reason,
            stop_detail=state.stop_detail,
            stop_rule=state.stop_rule,
            cycles=state.cycles,
            tool_calls=tuple(state.tool_calls),
            usage=state.usage,
            messages=tuple(state.messages),
            events=events,
        )

    def __repr__(self) -> str:
        # short: a long run's full history would make every log line (and asyncio.run's
        # own bookkeeping, which formats its result) cost time proportional to the run
        output = self.output if len(self.output) <= 60 else self.output[:59] + "…"
        return (
            f"RunResult(run_id={self.run_id!r}, stop_reason={self.stop_reason.value!r}, "
            f"cycles={self.cycles}, output={output!r}, tool_calls={len(self.tool_calls)}, "
            f"messages={len(self.messages)})"
        )

    @property
    def output_json(self) -> Any:
        """`output_data` as plain JSON data (None when there is none)."""
        if self.output_data is None:
            return None
        return _json_adapter().dump_python(self.output_data, mode="json")

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape printed by ``convergent run --json``."""
        return {
            "run_id": self.run_id,
            "stop_reason": self.stop_reason.value,
            "stop_detail": self.stop_detail,
            "stop_rule": self.stop_rule,
            "output": self.output,
            "output_after_stop": self.output_after_stop,
            "output_data": self.output_json,
            "cycles": self.cycles,
            "tool_calls": [
                {
                    "name": record.name,
                    "arguments": record.arguments,
                    "ok": record.ok,
                    "outcome": record.outcome,
                    "result": record.result,
                    "cycle": record.cycle,
                }
                for record in self.tool_calls
            ],
            "usage": {
                "input_tokens": self.usage.input_tokens,
                "output_tokens": self.usage.output_tokens,
                "total_tokens": self.usage.total_tokens,
                "requests": self.usage.requests,
                "cost": self.usage.cost,
                "currency": CURRENCY,
            },
        }


def output_label(reason: StopReason | None, *, after_stop: bool) -> str:
    """What a run's output is, when it is not simply its answer ("" when it is).

    After a stop the output is the answer asked for then (`AFTER_STOP_LABEL`), or else
    the model's last text, which may be the thinking it wrote before calling tools.
    """
    if after_stop:
        return AFTER_STOP_LABEL
    if reason in (StopReason.COMPLETED, StopReason.HANDED_OFF):
        return ""
    return "the model's last text before the stop (not an answer)"


@functools.cache
def _json_adapter() -> TypeAdapter[Any]:
    """Turns a typed answer into plain JSON data; built on first use, not on import."""
    return TypeAdapter(Any)
