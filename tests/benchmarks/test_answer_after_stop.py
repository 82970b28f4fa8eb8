"""The answer-after-stop benchmark sorts outputs by its own rules."""

from __future__ import annotations

import pytest
from benchmarks.bench_answer_after_stop import judge, lookup

FACT = r"2[.,]1 ?million"


@pytest.mark.parametrize(
    ("output", "verdict"),
    [
        ("The population of Paris is 2.1 million.", "states the result"),
        ("Paris is a big city!", "other text"),
        ("", "empty"),
        ('{"thought": "x", "tool_calls": []}', "protocol JSON"),
        ("The run has stopped, and you cannot call tools any more.", "prompt echoed"),
        ("It is big. It is big. It is big. It is big.", "repetition"),
    ],
)
def test_outputs_are_sorted(output: str, verdict: str) -> None:
    assert judge(output, FACT) == verdict


def test_the_users_tool_knows_paris_only() -> None:
    assert lookup("Paris") == "2.1 million" and lookup("Atlantis") == "unknown city: Atlantis"
