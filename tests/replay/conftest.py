"""Helpers for the replay tests: the committed fixtures, and runs built in a line."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from convergent.replay import Malformed, RecordedCall, RecordedReply, Trajectory, read_runs

FIXTURES = Path(__file__).parent / "fixtures"
TAU = FIXTURES / "tau_bench_excerpt.json"
TAU_REUSED_IDS = FIXTURES / "tau_bench_reused_ids.json"
TAU2 = FIXTURES / "tau2_bench_excerpt.json"
MINI_SWE = FIXTURES / "mini_swe_agent"
READS = frozenset({"get", "think"})


def runs_of(*paths: Path, format: str | None = None) -> list[Trajectory]:
    """Every run read from ``paths``; a malformed one fails the test."""
    found = list(read_runs(paths, format))
    malformed = [item.describe() for item in found if isinstance(item, Malformed)]
    assert not malformed, malformed
    return [item for item in found if isinstance(item, Trajectory)]


def write_json(path: Path, value: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def write_lines(path: Path, values: Iterable[Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(value) + "\n" for value in values), encoding="utf-8")
    return path


def recorded(
    *replies: tuple[str, str],
    success: bool | None = False,
    failed: Iterable[int] = (),
    answer: bool = True,
) -> Trajectory:
    """One turn of one-call replies ``(name, result)``; ``get`` and ``think`` only read,
    ``send`` hands off; replies whose index is in ``failed`` failed; then an answer."""
    failing = set(failed)
    turn = tuple(
        RecordedReply("", (RecordedCall(name, {"id": 1}, result, index in failing),))
        for index, (name, result) in enumerate(replies)
    )
    return Trajectory(
        id="run",
        name="run",
        source="test",
        model="m",
        success=success,
        turns=(turn + ((RecordedReply("answer"),) if answer else ()),),
        read_only=READS,
        terminal=frozenset({"send"}),
    )


def labelled_run(
    name: str, calls: list[tuple[str, dict[str, Any], str, bool]], success: bool
) -> Any:
    """A labelled run in the OpenAI message form: one call per reply, then an answer."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "do it"}]
    for number, (tool, arguments, result, failed) in enumerate(calls):
        function = {"name": tool, "arguments": json.dumps(arguments)}
        messages.append(
            {"role": "assistant", "tool_calls": [{"id": f"c{number}", "function": function}]}
        )
        messages.append(
            {"role": "tool", "tool_call_id": f"c{number}", "content": result, "is_error": failed}
        )
    messages.append({"role": "assistant", "content": "done"})
    return {"id": name, "messages": messages, "success": success}


def labelled_corpus(path: Path) -> Path:
    same = ("status", {"job": 1}, "pending", False)
    return write_lines(
        path,
        [
            # succeeds after checking the same status three times
            labelled_run("good-polls", [same] * 3, True),
            # recovers from one failed payment
            labelled_run(
                "good-retry",
                [("pay", {"n": 1}, "declined", True), ("pay", {"n": 2}, "ok", False)],
                True,
            ),
            # loops on the same status until the recording ends
            labelled_run("bad-loop", [same] * 8, False),
            # fails thirteen different payments in a row (a search past max_failing_steps)
            labelled_run(
                "bad-failures", [("pay", {"n": n}, "declined", True) for n in range(13)], False
            ),
        ],
    )
