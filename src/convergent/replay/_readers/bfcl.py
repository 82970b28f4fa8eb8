"""BFCL multi-turn result logs (Berkeley Function Calling Leaderboard, ``bfcl generate``).

A result file (``result/<model>/.../BFCL_v*_multi_turn_*_result.json``) is JSON Lines,
one entry per line: ``{"id", "result", "inference_log", ...}``. The inference log holds
each turn (``begin_of_turn_query``, ``step_0``, ``step_1``...) with the model's calls
(``{name: arguments}``, or text decoded in the handler's log) and every call's
execution result (``tool`` messages, in call order); an entry without it has only the
calls, and no results. A result that is an error (text starting ``Error``, or an object
with ``error``) is a failure. Labels come from the matching score file
(``score/<model>/.../*_score.json``): it lists the entries that failed; the others
passed. Without a score file there is no label.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from convergent.replay._readers._common import (
    READ_ERRORS,
    FormatMismatch,
    TurnBuilder,
    as_arguments,
    as_text,
    jsonl_objects,
)
from convergent.replay._readers._format import Format, Sample
from convergent.replay._recording import Malformed, Trajectory
from convergent.replay._tool_kinds import BFCL_READ_ONLY

__all__ = ["BFCL"]


def _claims(path: Path, sample: Sample) -> bool:
    value = sample.value
    return (
        isinstance(value, dict) and "result" in value and "multi_turn" in str(value.get("id", ""))
    )


def _read(path: Path, sample: Sample) -> Iterator[Trajectory | Malformed]:
    failed = _failed_entries(path)
    model = path.parent.parent.name if path.parent.name == "multi_turn" else path.parent.name
    for number, entry in _entries(path, sample):
        where = f"{path}:{number}"
        if isinstance(entry, FormatMismatch):
            yield Malformed(where, str(entry))
            continue
        try:
            entry_id = str(entry["id"])
            log = entry.get("inference_log")
            builder = TurnBuilder()
            if log:
                _logged_turns(builder, log)
            else:
                _result_turns(builder, entry["result"])
            turns = builder.turns()
            yield Trajectory(
                id=f"{path.name}:{entry_id}",
                name=entry_id,
                source=str(path),
                model=model,
                success=None if failed is None else entry_id not in failed,
                turns=turns,
                read_only=BFCL_READ_ONLY,
                gaps=dict(builder.gaps),
            )
        except READ_ERRORS as exc:
            yield Malformed(where, f"not a BFCL multi-turn entry ({type(exc).__name__}: {exc})")


def _entries(path: Path, sample: Sample) -> Iterator[tuple[int, Any]]:
    if sample.lines:
        yield from jsonl_objects(path)
    else:
        yield 1, sample.value


def _failed(text: str) -> bool:
    if text.startswith("Error"):
        return True
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return isinstance(value, dict) and "error" in value


def _calls(step: Sequence[Mapping[str, Any]]) -> list[tuple[None, str, Mapping[str, Any]]]:
    for message in step:
        if message.get("role") != "assistant":
            continue
        content = message.get("content")
        if isinstance(content, list):
            return [
                (None, str(name), as_arguments(arguments))
                for call in content
                if isinstance(call, dict)
                for name, arguments in call.items()
            ]
    for message in step:  # text replies: the calls the handler decoded from the text
        decoded = message.get("model_response_decoded")
        if message.get("role") == "handler_log" and isinstance(decoded, list):
            return [(None, str(call).split("(", 1)[0], {"call": str(call)}) for call in decoded]
    return []


def _logged_turns(builder: TurnBuilder, log: Sequence[Any]) -> None:
    for turn in log:
        if not isinstance(turn, dict):
            continue  # the environment's state between turns
        builder.user()
        steps = sorted(
            (int(key.removeprefix("step_")), value)
            for key, value in turn.items()
            if key.startswith("step_")
        )
        for _, step in steps:
            text = next(
                (
                    as_text(m.get("content"))
                    for m in step
                    if m.get("role") == "assistant" and isinstance(m.get("content"), str)
                ),
                "",
            )
            builder.assistant(text, _calls(step))
            for message in step:
                if message.get("role") == "tool":
                    result = as_text(message.get("content"))
                    builder.result_of_last_call(result, _failed(result))


def _result_turns(builder: TurnBuilder, result: Sequence[Any]) -> None:
    for turn in result:
        builder.user()
        for step in turn:
            calls = [
                (None, str(name), as_arguments(arguments))
                for call in step
                if isinstance(call, dict)
                for name, arguments in call.items()
            ]
            builder.assistant("", calls)


def _score_file(path: Path) -> Path | None:
    parts = list(path.resolve().parts)
    if "result" not in parts:
        return None
    index = len(parts) - 1 - parts[::-1].index("result")
    parts[index] = "score"
    name = path.name.replace("_result.json", "_score.json")
    if "_result_" in name:  # older names: <model>_result_<category>.json(l)
        name = name.replace("_result_", "_score_")
    return Path(*parts[:-1], name)


@functools.lru_cache(maxsize=64)
def _failed_in(score: Path) -> frozenset[str] | None:
    if not score.is_file():
        return None
    failed: set[str] = set()
    for _, line in jsonl_objects(score):
        if isinstance(line, dict) and line.get("valid") is False and "id" in line:
            failed.add(str(line["id"]))
    return frozenset(failed)


def _failed_entries(path: Path) -> frozenset[str] | None:
    score = _score_file(path)
    return None if score is None else _failed_in(score)


BFCL = Format(
    name="bfcl",
    expects="a BFCL multi-turn result file (JSON Lines of entries with 'id' and 'result')",
    claims=_claims,
    read=_read,
)
