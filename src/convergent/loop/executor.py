"""Runs one tool call and classifies how it ended; runs a response's batch of calls.

Classification is one function (`invoke`) used by the loop and by durable workers, so a
call ends the same way wherever it runs: ``ok``, ``invalid`` (the model's mistake: an
unknown tool, arguments that are not JSON or fail validation), ``failed`` (the tool's
own failure or timeout), or ``needs_user``.

An async tool runs on the loop's task until it first suspends; only a tool that
actually waits gets its timeout armed, so the common quick tool costs no timer.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import types
from collections.abc import Callable, Coroutine, Generator, Mapping, Sequence
from typing import Any, TypeVar

from convergent.exceptions import ConvergentError, NeedsUserInput, ToolArgumentsError, ToolError
from convergent.messages import CallOutcome, ToolCall
from convergent.tools import Tool, to_text

__all__ = [
    "Classified",
    "ClassifiedOutcome",
    "execute_batch",
    "failure_result",
    "invoke",
    "start",
    "wait_for_stragglers",
]

T = TypeVar("T")


class ClassifiedOutcome(ConvergentError):  # noqa: N818  (a carrier, not an error)
    """Raised by a tool whose call was already run and classified elsewhere (a worker).

    `invoke` passes it through unchanged, so a call run remotely ends exactly as it
    would have locally.
    """

    def __init__(self, kind: CallOutcome, text: str, *, fatal: bool = False) -> None:
        super().__init__(text)
        self.kind = kind
        self.text = text
        self.fatal = fatal


_stragglers: set[asyncio.Future[Any]] = set()
"""Threads of timed-out sync tools that modify files and are still running."""


async def wait_for_stragglers() -> None:
    """Wait until no timed-out file-modifying sync tool is still running in its thread.

    Python cannot stop a thread: a sync tool that timed out goes on in the background.
    Before another file-modifying call (and its rollback snapshot) the loop waits here,
    so the snapshot never catches a file half-written by the earlier call.
    """
    while _stragglers:
        await asyncio.gather(*list(_stragglers), return_exceptions=True)


@types.coroutine
def _resume(coro: Coroutine[Any, Any, Any], pending: Any) -> Generator[Any, Any, Any]:
    """Continue driving ``coro`` from its first suspension, as ``await`` would."""
    while True:
        try:
            sent = yield pending
        except BaseException as exc:  # a cancellation or timeout goes into the tool
            try:
                pending = coro.throw(exc)
            except StopIteration as done:
                return done.value
        else:
            try:
                pending = coro.send(sent)
            except StopIteration as done:
                return done.value


async def _finish_async(tool: Tool, coro: Coroutine[Any, Any, Any], pending: Any) -> Any:
    """Drive a tool that has suspended once, under its timeout."""
    if tool.timeout is None:
        return await _resume(coro, pending)
    async with asyncio.timeout(tool.timeout):
        return await _resume(coro, pending)


async def _call_sync(tool: Tool, values: dict[str, Any]) -> Any:
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    thread = loop.run_in_executor(None, functools.partial(context.run, tool.function, **values))
    if tool.timeout is None:
        return await thread
    try:
        async with asyncio.timeout(tool.timeout):
            return await asyncio.shield(thread)
    except TimeoutError:
        if tool.modifies_files and not thread.done():
            _stragglers.add(thread)
            thread.add_done_callback(_stragglers.discard)
        raise


Classified = tuple[CallOutcome, str, bool]
"""How a call ended: ``(outcome, text, fatal)``."""


def _classify(call: ToolCall, tool: Tool, exc: BaseException) -> Classified:
    """The outcome a tool's exception means (a model mistake, a failure, a question)."""
    match exc:
        case ClassifiedOutcome():
            return exc.kind, exc.text, exc.fatal
        case ToolArgumentsError():
            return CallOutcome.INVALID, str(exc), False
        case NeedsUserInput():
            return CallOutcome.NEEDS_USER, exc.question, False
        case TimeoutError():
            return CallOutcome.FAILED, f"{call.name} timed out after {tool.timeout:g}s", False
        case _:  # the tool's own failure, worded as every adapter words it too
            text, fatal = failure_result(call.name, exc)
            return CallOutcome.FAILED, text, fatal


async def _rest(call: ToolCall, tool: Tool, work: Coroutine[Any, Any, Any]) -> Classified:
    try:
        return CallOutcome.OK, to_text(await work), False
    except Exception as exc:  # a tool's own bug is its failure, reported to policy, not a crash
        return _classify(call, tool, exc)


def start(
    call: ToolCall, tools: Mapping[str, Tool]
) -> Classified | Coroutine[Any, Any, Classified]:
    """Run a call as far as it goes without waiting.

    Returns how it ended when it never had to wait (the common quick tool: no task, no
    timer, no coroutine of ours), otherwise the rest of it to await.
    """
    if call.parse_error is not None:
        text = f"arguments for {call.name} are not valid JSON: {call.parse_error}"
        return CallOutcome.INVALID, text, False
    selected = tools.get(call.name)
    if selected is None:
        available = ", ".join(sorted(tools)) or "none"
        return (
            CallOutcome.INVALID,
            f"unknown tool {call.name!r}; available tools: {available}",
            False,
        )
    try:
        values = selected.validate(call.arguments)
        if not selected.is_async:
            return _rest(call, selected, _call_sync(selected, values))
        coro = selected.function(**values)
        try:
            pending = coro.send(None)
        except StopIteration as done:
            return CallOutcome.OK, to_text(done.value), False
        return _rest(call, selected, _finish_async(selected, coro, pending))
    except Exception as exc:  # a tool's own bug is its failure, reported to policy, not a crash
        return _classify(call, selected, exc)


async def invoke(call: ToolCall, tools: Mapping[str, Tool]) -> Classified:
    """Run one call and classify it: ``(outcome, text, fatal)``; never raises for the tool."""
    started = start(call, tools)
    return started if isinstance(started, tuple) else await started


async def execute_batch(
    calls: Sequence[ToolCall],
    run_one: Callable[[ToolCall, int], Coroutine[Any, Any, T]],
    *,
    concurrent: bool = True,
) -> list[T]:
    """Run all calls of one response; return their outcomes in call order.

    ``run_one(call, position)`` runs and reports one call. A failing call does not
    cancel its siblings: every call of the batch gets a result, so no request goes
    unanswered. With ``concurrent=False`` the calls run one after another, in order.
    """
    if len(calls) == 1:
        return [await run_one(calls[0], 0)]
    if not concurrent:
        return [await run_one(call, position) for position, call in enumerate(calls)]
    tasks: list[asyncio.Task[T]] = []
    try:
        async with asyncio.TaskGroup() as group:
            for position, call in enumerate(calls):
                tasks.append(group.create_task(run_one(call, position)))
    except GeneratorExit:
        # dropped by its owner and closed: a closing coroutine may not wait, only cancel
        for task in tasks:
            task.cancel()
        raise
    return [task.result() for task in tasks]


def failure_result(tool: str, error: BaseException) -> tuple[str, bool]:
    """A tool's exception as the model reads it, and whether the tool declared it fatal.

    An exception whose text cannot be made (its ``__str__`` raises) is named by its type.
    """
    try:
        text = str(error)
    except Exception:  # the tool's own exception class is broken: name it
        text = f"<{type(error).__name__} whose message could not be read>"
    if isinstance(error, ToolError):
        return f"{tool} failed: {text}", error.fatal
    return f"{tool} raised {type(error).__name__}: {text}", False
