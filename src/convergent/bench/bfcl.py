"""The ``bfcl`` suite: BFCL multi-turn ground truth replayed through the objective loop.

The Berkeley Function Calling Leaderboard ships its multi-turn sets (``base``,
``miss_func``, ``miss_param``, ``long_context``; 200 entries each) as data plus
executable Python backends inside the ``bfcl-eval`` package (install it with
``pip install --no-deps bfcl-eval``; the backends need only the standard library and
``mpmath``). For every entry and turn a scripted model replays the ground-truth calls,
either one call per response or all of them in one batched response, and then answers
in text. The calls run on fresh backend objects through convergent `Tool` objects built
from BFCL's function docs. Each turn passes when:

- the executed calls equal the ground truth, in order (name and bound arguments);
- their results equal those of a reference execution of the ground truth on a second
  set of fresh backends;
- the loop stopped ``completed`` exactly at the turn's end (``len + 1`` model
  requests one call per response, 2 batched, 1 for a ``[]`` turn), asking the
  scripted model for nothing more;
- the backends' public state equals the reference's (BFCL's own state check).

Probes check the other stop reasons on real backends: a cycle limit below a turn's
length stops ``max_cycles`` with exactly that prefix executed; a call the backend
rejects (BFCL backends return ``{"error": ...}``, mapped here to a tool failure) stops
``tool_error`` under the stop policy and is fed back under the continue policy; a call
to an unknown function is the model's mistake, fed back, and the turn still completes.

Call strings are parsed with `ast` and their arguments read with `ast.literal_eval`;
nothing is evaluated. The backends share state between the calls of one batch, so the
tools are coroutines that never yield: the loop's concurrent batch then runs them
atomically in call order, as BFCL's own executor does.
"""

from __future__ import annotations

import ast
import copy
import functools
import importlib
import inspect
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, create_model
from pydantic.fields import FieldInfo

from convergent._json import UnusableJson, load_json
from convergent.agent import Agent
from convergent.bench.report import PolicyStats, SuiteResult
from convergent.exceptions import ScriptExhaustedError, ToolError, UserError
from convergent.limits import Limits
from convergent.messages import CallOutcome, Message, SystemMessage, UserMessage
from convergent.models.scripted import ScriptedModel
from convergent.policy import StopPolicy
from convergent.result import RunResult
from convergent.state import RunState
from convergent.stop import StopReason
from convergent.tools import Tool

__all__ = [
    "BAD_CALLS",
    "CATEGORIES",
    "MAX_CYCLES_PER_TURN",
    "MODES",
    "BfclEntry",
    "EntryResult",
    "ProbeResult",
    "TurnResult",
    "backend_tool",
    "load_entries",
    "parse_call",
    "probe_entry",
    "replay_entry",
    "run_bfcl_async",
]

CATEGORIES = ("base", "miss_func", "miss_param", "long_context")
"""The four multi-turn categories."""
Mode = Literal["one_per_response", "batched"]
MODES: tuple[Mode, ...] = ("one_per_response", "batched")
"""Replay modes: one ground-truth call per model response, or all in one response."""
MAX_CYCLES_PER_TURN = 50
"""Cycle limit of each turn; the longest turns (34 calls) need 35 one call per response."""
BFCL_STEP_LIMIT = 20
"""BFCL's own harness force-quits a turn once it exceeds this many tool-calling steps."""

BAD_CALLS: dict[str, tuple[tuple[str, dict[str, Any]], ...]] = {
    "GorillaFileSystem": (
        ("cd", {"folder": "__no_such_folder__"}),
        ("cat", {"file_name": "__no_such_file__"}),
    ),
    "MathAPI": (
        ("divide", {"a": 1.0, "b": 0.0}),
        ("square_root", {"number": -1.0, "precision": 2}),
    ),
    "MessageAPI": (
        ("send_message", {"receiver_id": "USR_NOBODY", "message": "hi"}),
        ("get_user_id", {"user": "__nobody__"}),
    ),
    "TwitterAPI": (
        ("comment", {"tweet_id": 987654, "comment_content": "hi"}),
        ("retweet", {"tweet_id": 987654}),
    ),
    "TicketAPI": (("create_ticket", {"title": "probe", "priority": 9}),),
    "TradingBot": (
        ("get_stock_info", {"symbol": "NOSUCH"}),
        ("cancel_order", {"order_id": -1}),
    ),
    "TravelAPI": (
        ("cancel_booking", {"access_token": "invalid-token", "booking_id": "0"}),
        ("retrieve_invoice", {"access_token": "invalid-token"}),
    ),
    "VehicleControlAPI": (
        ("fillFuelTank", {"fuelAmount": -5.0}),
        ("pressBrakePedal", {"pedalPosition": 5.0}),
    ),
}
"""Per backend class, calls its backend rejects with ``{"error": ...}``, in preference order."""

_TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": None}
_UNSET: Any = type("_Unset", (), {"__repr__": lambda self: "<unset>"})()


def _package_root() -> Path:
    try:
        import bfcl_eval
    except ImportError:
        raise UserError(
            "the bfcl suite needs the bfcl-eval package: pip install --no-deps bfcl-eval"
        ) from None
    return Path(bfcl_eval.__file__).parent


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The JSON object on each line of a data file of ``bfcl-eval``.

    Raises:
        UserError: If a line is not JSON (the installed data is damaged).
    """
    lines = path.read_text(encoding="utf-8").splitlines()
    try:
        return [load_json(line) for line in lines if line]
    except UnusableJson as exc:
        raise UserError(f"the BFCL data file {path} is {exc}") from None


@dataclass(frozen=True, slots=True)
class BfclEntry:
    """One multi-turn entry with its ground truth."""

    id: str
    """BFCL id, e.g. ``multi_turn_base_0``."""
    category: str
    """One of `CATEGORIES`."""
    questions: tuple[tuple[dict[str, str], ...], ...]
    """The user messages of each turn (empty for a turn that only adds functions)."""
    ground_truth: tuple[tuple[str, ...], ...]
    """The call strings of each turn; ``()`` where the model must not call anything."""
    initial_config: dict[str, Any]
    """Backend state to load, per class."""
    involved_classes: tuple[str, ...]
    """Backend classes the entry uses."""
    missed_function: dict[int, tuple[str, ...]] = field(default_factory=dict)
    """Functions withheld until the given turn (``miss_func``)."""
    excluded_function: tuple[str, ...] = ()
    """Functions never offered."""

    @property
    def long_context(self) -> bool:
        """Whether backends load BFCL's long-context extension data."""
        return self.category == "long_context"


def load_entries(category: str, limit: int | None = None) -> list[BfclEntry]:
    """Load a category's entries and answers from the installed ``bfcl-eval`` data.

    Raises:
        UserError: If the category is unknown or ``bfcl-eval`` is not installed.
    """
    if category not in CATEGORIES:
        raise UserError(f"unknown BFCL category {category!r}; use {', '.join(CATEGORIES)}")
    data = _package_root() / "data"
    name = f"BFCL_v4_multi_turn_{category}.json"
    answers = {a["id"]: a["ground_truth"] for a in _read_jsonl(data / "possible_answer" / name)}
    entries: list[BfclEntry] = []
    for raw in _read_jsonl(data / name)[:limit]:
        entries.append(
            BfclEntry(
                id=raw["id"],
                category=category,
                questions=tuple(tuple(turn) for turn in raw["question"]),
                ground_truth=tuple(tuple(turn) for turn in answers[raw["id"]]),
                initial_config=raw.get("initial_config", {}),
                involved_classes=tuple(raw["involved_classes"]),
                missed_function={
                    int(turn): tuple(names)
                    for turn, names in raw.get("missed_function", {}).items()
                },
                excluded_function=tuple(raw.get("excluded_function", ())),
            )
        )
    return entries


@functools.cache
def _func_docs(class_name: str) -> tuple[dict[str, Any], ...]:
    from bfcl_eval.constants.executable_backend_config import MULTI_TURN_FUNC_DOC_FILE_MAPPING

    path = _package_root() / "data" / "multi_turn_func_doc"
    return tuple(_read_jsonl(path / MULTI_TURN_FUNC_DOC_FILE_MAPPING[class_name]))


@functools.cache
def _extra_function_prompt() -> str:
    from bfcl_eval.constants.default_prompts import DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC

    return str(DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC)


def make_backends(entry: BfclEntry) -> dict[str, Any]:
    """Fresh backend objects for an entry, loaded with its initial state."""
    from bfcl_eval.constants.executable_backend_config import (
        CLASS_FILE_PATH_MAPPING,
        STATELESS_CLASSES,
    )

    backends: dict[str, Any] = {}
    for class_name in entry.involved_classes:
        module = importlib.import_module(CLASS_FILE_PATH_MAPPING[class_name])
        instance = getattr(module, class_name)()
        if class_name not in STATELESS_CLASSES:
            config = copy.deepcopy(entry.initial_config.get(class_name, {}))
            instance._load_scenario(config, long_context=entry.long_context)
        backends[class_name] = instance
    return backends


def _methods(backends: Mapping[str, Any]) -> dict[str, Callable[..., Any]]:
    methods: dict[str, Callable[..., Any]] = {}
    for instance in backends.values():
        for name, method in inspect.getmembers(instance, predicate=inspect.ismethod):
            if not name.startswith("_"):
                methods[name] = method
    return methods


def parse_call(text: str) -> tuple[str, list[Any], dict[str, Any]]:
    """Split ``name(arg, key=value)`` into its parts without evaluating anything.

    Raises:
        ValueError: If the text is not a single call with literal arguments.
    """
    node = ast.parse(text.strip(), mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a function call: {text!r}")
    args = [ast.literal_eval(arg) for arg in node.args]
    kwargs: dict[str, Any] = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            raise ValueError(f"**kwargs are not supported: {text!r}")
        kwargs[keyword.arg] = ast.literal_eval(keyword.value)
    return node.func.id, args, kwargs


def _bind(methods: Mapping[str, Callable[..., Any]], text: str) -> tuple[str, dict[str, Any]]:
    """A ground-truth call as (name, keyword arguments), positional ones named."""
    name, args, kwargs = parse_call(text)
    if name not in methods:
        raise ValueError(f"no backend method {name!r} for {text!r}")
    bound = inspect.signature(methods[name]).bind(*args, **kwargs)
    return name, dict(bound.arguments)


def _json_schema(schema: Any) -> Any:
    """BFCL's parameter schema as JSON schema (``dict`` means ``object``, ...)."""
    if isinstance(schema, list):
        return [_json_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    converted: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type" and isinstance(value, str):
            mapped = _TYPES.get(value, value)
            if mapped is not None:
                converted[key] = mapped
        elif key == "properties" and isinstance(value, dict):
            converted[key] = {name: _json_schema(prop) for name, prop in value.items()}
        else:
            converted[key] = _json_schema(value)
    return converted


@functools.cache
def _arguments_model(class_name: str, function: str) -> tuple[type[BaseModel], str]:
    doc = next(d for d in _func_docs(class_name) if d["name"] == function)
    parameters = doc["parameters"]
    required = set(parameters.get("required", ()))
    fields: dict[str, Any] = {
        name: (Any, FieldInfo(default=... if name in required else _UNSET))
        for name in parameters.get("properties", {})
    }
    model = create_model(f"{function}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
    schema = _json_schema(parameters)
    schema["type"] = "object"
    return model, json.dumps(schema)


@dataclass(frozen=True, slots=True)
class Executed:
    """One call that reached a backend."""

    name: str
    """Function name."""
    arguments: dict[str, Any]
    """Keyword arguments passed."""
    result: Any
    """What the backend returned (or the exception it raised)."""


def backend_tool(
    class_name: str, function: str, method: Callable[..., Any], log: list[Executed]
) -> Tool:
    """A `Tool` for one backend method, described by BFCL's function doc.

    Arguments are checked only for names (unknown ones and missing required ones are
    the model's mistake); values reach the backend unchanged, as in BFCL. A result
    holding an ``"error"`` key is raised as `ToolError`, i.e. a tool failure.

    Args:
        class_name: Backend class owning the function.
        function: Function (method) name.
        method: The bound backend method to call.
        log: Every call that reaches the backend is appended here.
    """
    arguments_model, schema = _arguments_model(class_name, function)
    doc = next(d for d in _func_docs(class_name) if d["name"] == function)

    async def invoke(**values: Any) -> Any:
        arguments = {key: value for key, value in values.items() if value is not _UNSET}
        try:
            result = method(**arguments)
        except Exception as exc:
            log.append(Executed(function, arguments, exc))
            raise
        log.append(Executed(function, arguments, result))
        if isinstance(result, dict) and "error" in result:
            raise ToolError(str(result["error"]))
        return result

    return Tool(
        name=function,
        description=doc["description"],
        function=invoke,
        arguments_model=arguments_model,
        parameters=json.loads(schema),
        timeout=None,
    )


def _available(entry: BfclEntry, turn: int) -> list[tuple[str, str]]:
    """(class, function) pairs offered at a turn, after withheld functions are added."""
    withheld = {name for at, names in entry.missed_function.items() if at > turn for name in names}
    excluded = set(entry.excluded_function) | withheld
    return [
        (class_name, doc["name"])
        for class_name in entry.involved_classes
        for doc in _func_docs(class_name)
        if doc["name"] not in excluded
    ]


def _turn_messages(entry: BfclEntry, turn: int) -> list[Message]:
    question = entry.questions[turn]
    if not question:
        return [UserMessage(content=_extra_function_prompt())]
    return [
        SystemMessage(content=m["content"])
        if m["role"] == "system"
        else UserMessage(content=m["content"])
        for m in question
    ]


def _script(
    calls: Sequence[tuple[str, dict[str, Any]]], mode: Mode, turn: int
) -> list[dict[str, Any]]:
    def call(index: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"id": f"t{turn}_{index}", "name": name, "arguments": copy.deepcopy(arguments)}

    items: list[dict[str, Any]]
    if mode == "batched" and calls:
        items = [{"tool_calls": [call(i, *c) for i, c in enumerate(calls)]}]
    else:
        items = [{"tool_calls": [call(i, *c)]} for i, c in enumerate(calls)]
    items.append({"content": f"Turn {turn} done."})
    return items


def _differences(actual: Mapping[str, Any], reference: Mapping[str, Any]) -> list[str]:
    """Public attributes whose values differ (BFCL's own state check)."""
    differences: list[str] = []
    for class_name, expected in reference.items():
        for attribute, value in vars(expected).items():
            if attribute.startswith("_"):
                continue
            if getattr(actual[class_name], attribute, _UNSET) != value:
                differences.append(f"{class_name}.{attribute}")
    return differences


def _same_result(a: Any, b: Any) -> bool:
    if isinstance(a, Exception) or isinstance(b, Exception):
        return type(a) is type(b) and str(a) == str(b)
    return bool(a == b)


@dataclass(frozen=True, slots=True)
class TurnResult:
    """The check of one replayed turn."""

    index: int
    """Turn index."""
    calls: int
    """Ground-truth calls in the turn."""
    stop: str
    """Stop reason of the turn's run (``script_exhausted`` if it asked for more)."""
    cycles: int
    """Model requests the turn made."""
    expected_cycles: int
    """Model requests it should make."""
    problems: tuple[str, ...] = ()
    """What did not match; empty when the turn passed."""

    @property
    def passed(self) -> bool:
        """Whether every check held."""
        return not self.problems

    @property
    def premature(self) -> bool:
        """The loop stopped before the ground truth was done."""
        return self.stop != "script_exhausted" and self.cycles < self.expected_cycles

    @property
    def overran(self) -> bool:
        """The loop asked for more after the turn's end, or hit a limit."""
        return self.stop in ("script_exhausted", StopReason.MAX_CYCLES.value) or (
            self.cycles > self.expected_cycles
        )


@dataclass(frozen=True, slots=True)
class EntryResult:
    """One entry replayed in one mode."""

    entry: str
    """Entry id."""
    category: str
    """Its category."""
    mode: str
    """Replay mode."""
    turns: tuple[TurnResult, ...]
    """Per-turn checks."""
    error: str | None = None
    """A failure outside the turn checks (ground truth that cannot be parsed, ...)."""
    dataset_issues: tuple[str, ...] = ()
    """Ground-truth calls to functions the entry does not offer at that turn."""

    @property
    def passed(self) -> bool:
        """Whether every turn passed."""
        return self.error is None and all(turn.passed for turn in self.turns)


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """One probe of one entry."""

    entry: str
    """Entry id."""
    category: str
    """Its category."""
    kind: str
    """``max_cycles``, ``tool_error_stop``, ``tool_error_continue``, ``invalid_call``..."""
    problems: tuple[str, ...] = ()
    """What did not match; empty when the probe passed."""
    detail: str = ""
    """What the probe did."""

    @property
    def passed(self) -> bool:
        """Whether the probe behaved as expected."""
        return not self.problems


@dataclass
class _Session:
    """One entry's live backends, reference backends and conversation."""

    entry: BfclEntry
    backends: dict[str, Any]
    reference: dict[str, Any]
    methods: dict[str, Callable[..., Any]]
    reference_methods: dict[str, Callable[..., Any]]
    messages: list[Message] = field(default_factory=list)

    @classmethod
    def start(cls, entry: BfclEntry) -> _Session:
        backends, reference = make_backends(entry), make_backends(entry)
        return cls(entry, backends, reference, _methods(backends), _methods(reference))

    def calls(self, turn: int) -> list[tuple[str, dict[str, Any]]]:
        return [_bind(self.methods, text) for text in self.entry.ground_truth[turn]]

    def reference_run(self, calls: Sequence[tuple[str, dict[str, Any]]]) -> list[Any]:
        results: list[Any] = []
        for name, arguments in calls:
            try:
                results.append(self.reference_methods[name](**copy.deepcopy(arguments)))
            except Exception as exc:
                results.append(exc)
        return results

    async def run_turn(
        self,
        turn: int,
        script: list[dict[str, Any]],
        *,
        max_cycles: int = MAX_CYCLES_PER_TURN,
        on_tool_error: Literal["stop", "continue"] = "stop",
    ) -> tuple[RunResult | None, list[Executed], ScriptedModel]:
        log: list[Executed] = []
        owners = {name: cls for cls, name in _available(self.entry, turn)}
        tools = [backend_tool(owners[n], n, self.methods[n], log) for n in owners]
        model = ScriptedModel(script, name=f"bfcl:{self.entry.id}:{turn}")
        agent = Agent(
            model,
            tools,
            limits=Limits(max_cycles=max_cycles),
            policy=StopPolicy(on_tool_error=on_tool_error),
            record_events=False,
        )
        new = _turn_messages(self.entry, turn)
        state = RunState(
            run_id=f"{self.entry.id}-{turn}",
            task=new[-1].content,
            model=model.name,
            messages=[*self.messages, *new],
        )
        try:
            result = await agent.run(state=state)
        except ScriptExhaustedError:
            return None, log, model
        self.messages = list(result.messages)
        return result, log, model


def _check(
    session: _Session,
    result: RunResult | None,
    log: Sequence[Executed],
    model: ScriptedModel,
    expected: Sequence[tuple[str, dict[str, Any]]],
    reference_results: Sequence[Any],
    expected_stop: StopReason,
    expected_cycles: int,
) -> tuple[str, int, list[str]]:
    """Compare a run with the expectation; return (stop, cycles, problems)."""
    problems: list[str] = []
    if result is None:
        stop, cycles = "script_exhausted", len(model.requests)
        problems.append("the loop asked for a response after the turn's end")
    else:
        stop, cycles = result.stop_reason.value, result.cycles
        if result.stop_reason is not expected_stop:
            problems.append(f"stopped {stop}, expected {expected_stop.value}")
        if cycles != expected_cycles:
            problems.append(f"{cycles} model requests, expected {expected_cycles}")
        if model.unconsumed:
            problems.append(f"{len(model.unconsumed)} scripted responses never requested")
    executed = [(e.name, e.arguments) for e in log]
    if executed != [(name, arguments) for name, arguments in expected]:
        problems.append(f"executed {executed!r}, expected {list(expected)!r}")
    elif not all(_same_result(e.result, r) for e, r in zip(log, reference_results, strict=True)):
        problems.append("results differ from the reference execution")
    differences = _differences(session.backends, session.reference)
    if differences:
        problems.append("backend state differs from the reference: " + ", ".join(differences))
    return stop, cycles, problems


def dataset_issues(entry: BfclEntry) -> list[str]:
    """Ground-truth calls to functions that are withheld or excluded at their turn.

    A loop that offers BFCL's functions as BFCL does reports such a call as a call to
    an unknown tool, so the turn cannot match its ground truth.
    """
    issues: list[str] = []
    for turn, calls in enumerate(entry.ground_truth):
        offered = {name for _, name in _available(entry, turn)}
        for text in calls:
            name = text.split("(", 1)[0].strip()
            if name not in offered:
                issues.append(f"turn {turn}: {name} is not offered until later or excluded")
    return issues


async def replay_entry(
    entry: BfclEntry, mode: Mode, *, max_cycles: int = MAX_CYCLES_PER_TURN
) -> EntryResult:
    """Replay every turn of an entry in one mode and check each turn."""
    issues = tuple(dataset_issues(entry))
    try:
        session = _Session.start(entry)
        turns: list[TurnResult] = []
        for turn in range(len(entry.ground_truth)):
            calls = session.calls(turn)
            expected_cycles = 1 if not calls else (2 if mode == "batched" else len(calls) + 1)
            result, log, model = await session.run_turn(
                turn, _script(calls, mode, turn), max_cycles=max_cycles
            )
            reference_results = session.reference_run(calls)
            stop, cycles, problems = _check(
                session,
                result,
                log,
                model,
                calls,
                reference_results,
                StopReason.COMPLETED,
                expected_cycles,
            )
            turns.append(
                TurnResult(turn, len(calls), stop, cycles, expected_cycles, tuple(problems))
            )
            if result is None:
                break
    except (ValueError, TypeError, KeyError, SyntaxError) as exc:
        error = f"{type(exc).__name__}: {exc}"
        return EntryResult(entry.id, entry.category, mode, (), error, issues)
    return EntryResult(entry.id, entry.category, mode, tuple(turns), None, issues)


async def _replay_until(session: _Session, stop_turn: int) -> None:
    """Replay turns before ``stop_turn`` (one call per response) to reach its state."""
    for turn in range(stop_turn):
        calls = session.calls(turn)
        await session.run_turn(turn, _script(calls, "one_per_response", turn))
        session.reference_run(calls)


async def _probe_max_cycles(
    entry: BfclEntry, turn: int, limit: int, kind: str = "max_cycles"
) -> ProbeResult:
    session = _Session.start(entry)
    await _replay_until(session, turn)
    calls = session.calls(turn)
    result, log, model = await session.run_turn(
        turn, _script(calls, "one_per_response", turn), max_cycles=limit
    )
    prefix = calls[:limit]
    reference_results = session.reference_run(prefix)
    _, _, problems = _check(
        session, result, log, model, prefix, reference_results, StopReason.MAX_CYCLES, limit
    )
    # The responses past the limit are never requested; that is the point of the probe.
    problems = [p for p in problems if "never requested" not in p]
    detail = f"turn {turn}: {len(calls)} calls, max_cycles={limit}"
    return ProbeResult(entry.id, entry.category, kind, tuple(problems), detail)


async def _probe_bad_call(
    entry: BfclEntry, turn: int, policy: Literal["stop", "continue"]
) -> ProbeResult:
    offered = {name for _, name in _available(entry, turn)}
    choice = next(
        (
            (owner, name, arguments)
            for owner in entry.involved_classes
            for name, arguments in BAD_CALLS[owner]
            if name in offered
        ),
        None,
    )
    kind = f"tool_error_{policy}"
    if choice is None:
        return ProbeResult(entry.id, entry.category, kind, ("no rejecting call is offered",))
    class_name, name, arguments = choice
    session = _Session.start(entry)
    await _replay_until(session, turn)
    calls = session.calls(turn)
    script = _script([(name, arguments), *calls], "one_per_response", turn)
    if policy == "stop":
        script = script[:1]
    result, log, model = await session.run_turn(turn, script, on_tool_error=policy)
    executed = [(name, arguments)] if policy == "stop" else [(name, arguments), *calls]
    reference_results = session.reference_run(executed)
    expected_stop = StopReason.TOOL_ERROR if policy == "stop" else StopReason.COMPLETED
    expected_cycles = 1 if policy == "stop" else len(calls) + 2
    _, _, problems = _check(
        session, result, log, model, executed, reference_results, expected_stop, expected_cycles
    )
    first = reference_results[0]
    if not (isinstance(first, dict) and "error" in first):
        problems.append(f"the probe call {name} did not fail on this backend: {first!r}")
    if result is not None:
        outcomes = [record.outcome for record in result.tool_calls if record.name == name]
        if outcomes[:1] != [CallOutcome.FAILED]:
            problems.append(f"the rejected call was recorded as {outcomes[:1]}, not failed")
    detail = f"turn {turn}: {class_name}.{name} rejected, on_tool_error={policy}"
    return ProbeResult(entry.id, entry.category, kind, tuple(problems), detail)


async def _probe_invalid_call(entry: BfclEntry, turn: int) -> ProbeResult:
    session = _Session.start(entry)
    await _replay_until(session, turn)
    calls = session.calls(turn)
    script = _script([("no_such_function", {}), *calls], "one_per_response", turn)
    result, log, model = await session.run_turn(turn, script)
    reference_results = session.reference_run(calls)
    _, _, problems = _check(
        session,
        result,
        log,
        model,
        calls,
        reference_results,
        StopReason.COMPLETED,
        len(calls) + 2,
    )
    if result is not None and not any(r.outcome == CallOutcome.INVALID for r in result.tool_calls):
        problems.append("the unknown function was not reported as invalid")
    detail = f"turn {turn}: unknown function, fed back; the turn completes"
    return ProbeResult(entry.id, entry.category, "invalid_call", tuple(problems), detail)


async def probe_entry(entry: BfclEntry) -> list[ProbeResult]:
    """Run the entry's probes: cycle limit, rejected call (both policies), invalid call.

    Turns longer than BFCL's own step limit also get a probe at that limit.
    """
    lengths = [len(turn) for turn in entry.ground_truth]
    longest = max(range(len(lengths)), key=lambda t: lengths[t])
    first = next((t for t, n in enumerate(lengths) if n), None)
    probes = [await _probe_max_cycles(entry, longest, max(0, lengths[longest] - 1))]
    for turn, length in enumerate(lengths):
        if length > BFCL_STEP_LIMIT:
            probes.append(await _probe_max_cycles(entry, turn, BFCL_STEP_LIMIT, "bfcl_step_limit"))
    if first is not None:
        probes.append(await _probe_bad_call(entry, first, "stop"))
        probes.append(await _probe_bad_call(entry, first, "continue"))
        probes.append(await _probe_invalid_call(entry, first))
    return probes


def _turn_stats(results: Sequence[EntryResult]) -> PolicyStats:
    turns = [turn for result in results for turn in result.turns]
    errors = sum(1 for result in results if result.error is not None)
    return PolicyStats(
        tasks=len(turns) + errors,
        false_positives=sum(turn.premature for turn in turns),
        false_negatives=sum(turn.overran for turn in turns),
        correct=sum(turn.passed for turn in turns),
        extra_cycles=sum(max(0, turn.cycles - turn.expected_cycles) for turn in turns),
    )


def summarize(
    replays: Sequence[EntryResult], probes: Sequence[ProbeResult], seconds: float
) -> SuiteResult:
    """Pass counts per category and mode, probe counts, and turn-level rates."""
    categories = list(dict.fromkeys(r.category for r in replays))
    policies = {f"objective_{mode}": [r for r in replays if r.mode == mode] for mode in MODES}
    breakdown = {
        category: {
            policy: _turn_stats([r for r in results if r.category == category])
            for policy, results in policies.items()
        }
        for category in categories
    }
    pass_counts: dict[str, Any] = {}
    for category in categories:
        counts: dict[str, Any] = {}
        for mode in MODES:
            results = [r for r in replays if r.category == category and r.mode == mode]
            turns = [t for r in results for t in r.turns]
            counts[mode] = {
                "entries": len(results),
                "entries_passed": sum(r.passed for r in results),
                "entries_failed_with_dataset_issue": sum(
                    not r.passed and bool(r.dataset_issues) for r in results
                ),
                "turns": len(turns),
                "turns_passed": sum(t.passed for t in turns),
            }
        kinds = dict.fromkeys(p.kind for p in probes if p.category == category)
        counts["probes"] = {
            kind: {
                "run": sum(p.kind == kind and p.category == category for p in probes),
                "passed": sum(
                    p.kind == kind and p.category == category and p.passed for p in probes
                ),
            }
            for kind in kinds
        }
        pass_counts[category] = counts
    failures = [
        {
            "entry": r.entry,
            "mode": r.mode,
            "problems": r.error or [f"turn {t.index}: {p}" for t in r.turns for p in t.problems],
        }
        for r in replays
        if not r.passed
    ] + [
        {"entry": p.entry, "probe": p.kind, "problems": list(p.problems)}
        for p in probes
        if not p.passed
    ]
    issues = {r.entry: list(r.dataset_issues) for r in replays if r.dataset_issues}
    long_turns = sorted({(p.entry, p.detail) for p in probes if p.kind == "bfcl_step_limit"})
    return SuiteResult(
        suite="bfcl",
        policies={name: _turn_stats(results) for name, results in policies.items()},
        breakdown=breakdown,
        breakdown_label="category",
        details={
            "pass_counts": pass_counts,
            "max_cycles_per_turn": MAX_CYCLES_PER_TURN,
            "turns_over_bfcl_step_limit": [f"{entry} {detail}" for entry, detail in long_turns],
            "dataset_issues": issues,
            "failures": failures[:50],
            "seconds": round(seconds, 1),
        },
        notes=(
            "a task here is one turn; a false positive stopped before the turn's ground "
            "truth was executed, a false negative asked for more after it or hit the limit",
            f"max_cycles={MAX_CYCLES_PER_TURN} per turn: the two 34-call long-context turns "
            f"need 35 model requests one call per response (2 batched)",
            f"BFCL's own harness force-quits a turn after {BFCL_STEP_LIMIT} + 1 tool-calling "
            f"steps; the bfcl_step_limit probe runs those turns with max_cycles="
            f"{BFCL_STEP_LIMIT} and expects max_cycles with a {BFCL_STEP_LIMIT}-call prefix",
        ),
    )


async def run_bfcl_async(
    categories: Sequence[str] = CATEGORIES,
    *,
    limit: int | None = None,
    probes: bool = True,
    on_entry: Callable[[str], None] | None = None,
) -> tuple[SuiteResult, list[EntryResult], list[ProbeResult]]:
    """Replay (and probe) the entries of the given categories.

    Args:
        categories: Categories to run.
        limit: Only the first ``limit`` entries of each category.
        probes: Also run the probes.
        on_entry: Called with each entry id once it is done.
    """
    started = time.perf_counter()
    replays: list[EntryResult] = []
    probe_results: list[ProbeResult] = []
    for category in categories:
        for entry in load_entries(category, limit):
            for mode in MODES:
                replays.append(await replay_entry(entry, mode))
            if probes:
                probe_results.extend(await probe_entry(entry))
            if on_entry is not None:
                on_entry(entry.id)
    summary = summarize(replays, probe_results, time.perf_counter() - started)
    return summary, replays, probe_results


def entry_count(categories: Sequence[str] = CATEGORIES, limit: int | None = None) -> int:
    """How many entries `run_bfcl_async` will run (for progress bars)."""
    return sum(len(load_entries(category, limit)) for category in categories)
