"""Where a run's events go: to observers as they happen, and into the run's result.

Observers get every `Event` object as it happens. When nothing observes the run, the
four events of every cycle (cycle started, model responded, tool started, tool
finished) are not built at all: the sink keeps the few values they add to what the run
keeps anyway (the response, the call, its record) in a flat list, and `EventLog`
builds the events the first time the result's ``events`` are read. A run of many
cycles, or many runs at once, then costs little time and memory for its events.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from typing import Any, overload

from convergent.clock import Clock, readers
from convergent.events import (
    CycleStarted,
    Event,
    ModelResponded,
    ToolFinished,
    ToolStarted,
)
from convergent.extensions import RunObserver
from convergent.loop.parts import settings_fields
from convergent.messages import ModelResponse, ToolCall
from convergent.models.base import ModelSettings
from convergent.state import RunState, ToolCallRecord

__all__ = ["EventLog", "EventSink"]

_NO_RESPONSE = object()
"""Stands for the response of a cycle whose model request failed."""


class _Compact:
    """A run's frequent events as plain values: one reference and a few numbers each.

    ``refs`` holds each entry's object, which also tells what the entry is: a kept
    event; the model's response, for a cycle (with the request's settings, as a pair,
    when it had some; `_NO_RESPONSE` if the request failed); a
    call, for its start; a call's record, for its end. ``numbers`` holds, packed in one
    array without an object per number, a cycle's message count, start time and model
    duration, and a call's start time. Cycle numbers count up from ``first_cycle``.
    """

    __slots__ = ("first_cycle", "numbers", "refs")

    def __init__(self, first_cycle: int) -> None:
        self.first_cycle = first_cycle
        self.numbers = array("d")
        self.refs: list[Any] = []


class EventLog(Sequence[Event]):
    """A run's events, kept compactly and built on first access."""

    __slots__ = ("_built", "_compact", "_run_id")

    def __init__(self, run_id: str, compact: _Compact) -> None:
        self._run_id = run_id
        self._compact: _Compact | None = compact
        self._built: tuple[Event, ...] | None = None

    def _events(self) -> tuple[Event, ...]:
        if self._built is None:
            assert self._compact is not None
            self._built = tuple(_expand(self._run_id, self._compact))
            self._compact = None
        return self._built

    def __len__(self) -> int:
        return len(self._events())

    @overload
    def __getitem__(self, index: int) -> Event: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Event]: ...

    def __getitem__(self, index: int | slice) -> Event | Sequence[Event]:
        return self._events()[index]

    def __iter__(self) -> Iterator[Event]:
        return iter(self._events())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, EventLog):
            return self._events() == other._events()
        if isinstance(other, Sequence):
            return list(self._events()) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        # building the events to count them would defeat the point of keeping them compact
        return "EventLog(...)" if self._built is None else f"EventLog({len(self._built)} events)"


def _expand(run_id: str, compact: _Compact) -> Iterator[Event]:
    """Turn compact entries (and events kept as they were) into events, in order."""
    numbers = iter(compact.numbers)
    cycle, cycle_time = compact.first_cycle, 0.0
    started: dict[str, float] = {}
    for item in compact.refs:
        if isinstance(item, Event):
            yield item
        elif isinstance(item, ToolCall):
            when = next(numbers)
            started[item.id] = when
            yield ToolStarted(
                run_id=run_id,
                cycle=cycle,
                call_id=item.id,
                name=item.name,
                arguments=item.arguments,
                time=when,
            )
        elif isinstance(item, ToolCallRecord):
            yield _finished(run_id, item, started.get(item.id, cycle_time) + item.duration)
        else:
            cycle += 1
            count, cycle_time, duration = int(next(numbers)), next(numbers), next(numbers)
            yield CycleStarted(run_id=run_id, cycle=cycle, message_count=count, time=cycle_time)
            settings = None
            if isinstance(item, tuple):
                item, settings = item
            if isinstance(item, ModelResponse):
                when = cycle_time + duration
                yield _responded(
                    run_id, cycle, item, duration, when, settings=settings_fields(settings)
                )


def _responded(
    run_id: str,
    cycle: int,
    response: ModelResponse,
    duration: float,
    when: float,
    first_delta: float | None = None,
    settings: dict[str, Any] | None = None,
) -> ModelResponded:
    return ModelResponded(
        run_id=run_id,
        cycle=cycle,
        content=response.content,
        tool_calls=response.tool_calls,
        finish_reason=response.finish_reason,
        usage=response.usage,
        metadata=response.metadata,
        duration=duration,
        time=when,
        first_delta=first_delta,
        settings=settings,
    )


def _finished(run_id: str, record: ToolCallRecord, when: float) -> ToolFinished:
    return ToolFinished(
        run_id=run_id,
        cycle=record.cycle,
        call_id=record.id,
        name=record.name,
        ok=record.ok,
        outcome=record.outcome,
        result=record.result,
        duration=record.duration,
        arguments=record.arguments,
        time=when,
    )


class EventSink:
    """Delivers a run's events to its observers and keeps them for its result.

    The streaming deltas (`TextDelta`, `ToolCallDelta`) go only to the observers that
    receive them (all but those with ``receives_deltas = False``) and are not kept;
    when no observer receives them, the loop does not stream at all (`streaming`).

    Args:
        state: The run's live state (observers see it with each event).
        observers: Who gets every event as it happens.
        record: Keep the events for `RunResult.events`.
        clock: Source of the events' times.
    """

    __slots__ = (
        "_compact",
        "_pending",
        "clock",
        "delta_observers",
        "first_delta",
        "now",
        "observers",
        "state",
        "streaming",
    )

    def __init__(
        self, state: RunState, observers: Sequence[RunObserver], *, record: bool, clock: Clock
    ) -> None:
        self.state = state
        self.observers = tuple(observers)
        self.delta_observers = tuple(
            observer for observer in observers if getattr(observer, "receives_deltas", True)
        )
        self.streaming = bool(self.delta_observers)
        """Whether anyone receives the deltas (then model requests are streamed)."""
        self.first_delta: float | None = None
        """Seconds to the current request's first delta, once it streamed one."""
        self._compact = _Compact(state.cycles) if record else None
        self._pending: tuple[int, float] | None = None
        self.clock = clock
        self.now, _ = readers(clock)
        """Unix time from ``clock``."""

    @property
    def active(self) -> bool:
        """Whether anyone wants the events at all."""
        return bool(self.observers) or self._compact is not None

    def emit(self, event: Event) -> None:
        """Deliver and keep one event."""
        compact = self._compact
        if compact is not None:
            if self._pending is not None:
                self._flush_cycle(_NO_RESPONSE, 0.0)
            compact.refs.append(event)
        for observer in self.observers:
            observer.on_event(event, self.state)

    def log(self) -> Sequence[Event]:
        """The kept events (built when first read)."""
        if self._compact is None:
            return EventLog(self.state.run_id, _Compact(0))
        self._flush_cycle(_NO_RESPONSE, 0.0)
        return EventLog(self.state.run_id, self._compact)

    def _flush_cycle(self, response: object, duration: float) -> None:
        """Keep a started cycle (with its response, once there is one)."""
        pending, compact = self._pending, self._compact
        if pending is None or compact is None:
            return
        self._pending = None
        count, started = pending
        compact.numbers.extend((count, started, duration))
        compact.refs.append(response)

    def cycle_started(self, cycle: int, message_count: int) -> None:
        """A model request is about to be sent."""
        if self.observers:
            self.emit(
                CycleStarted(run_id=self.state.run_id, cycle=cycle, message_count=message_count)
            )
        elif self._compact is not None:
            self._pending = (message_count, self.now())

    def delta(self, event: Event) -> None:
        """Deliver one streaming delta to the observers that receive them (never kept)."""
        for observer in self.delta_observers:
            observer.on_event(event, self.state)

    def responded(
        self,
        cycle: int,
        response: ModelResponse,
        duration: float,
        settings: ModelSettings | None = None,
    ) -> None:
        """The model replied after ``duration`` seconds (to a request with ``settings``)."""
        if self.observers:
            first, self.first_delta = self.first_delta, None
            self.emit(
                _responded(
                    self.state.run_id,
                    cycle,
                    response,
                    duration,
                    self.now(),
                    first,
                    settings_fields(settings),
                )
            )
        elif self._compact is not None:
            self._flush_cycle(response if settings is None else (response, settings), duration)

    def tool_started(self, call: ToolCall, cycle: int) -> None:
        """A call begins."""
        if self.observers:
            self.emit(
                ToolStarted(
                    run_id=self.state.run_id,
                    cycle=cycle,
                    call_id=call.id,
                    name=call.name,
                    arguments=call.arguments,
                )
            )
        elif self._compact is not None:
            compact = self._compact
            compact.numbers.append(self.now())
            compact.refs.append(call)

    def tool_finished(self, record: ToolCallRecord) -> None:
        """A call ended."""
        if self.observers:
            self.emit(_finished(self.state.run_id, record, self.now()))
        elif self._compact is not None:
            self._compact.refs.append(record)
