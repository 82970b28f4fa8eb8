from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convergent import (
    Agent,
    StopPolicy,
    StopReason,
    ToolArgumentsError,
    ToolError,
    calculator,
    file_tools,
)
from convergent.builtin_tools import MAX_BITS, evaluate_arithmetic, fail
from convergent.testing import call, scripted


@pytest.mark.parametrize(
    ("expression", "expected"),
    [("(17 * 23) + 4", 395), ("2 ** 10", 1024), ("7 / 2", 3.5), ("-3 + +1", -2), ("sqrt(16)", 4)],
)
def test_calculator_arithmetic(expression: str, expected: float) -> None:
    assert evaluate_arithmetic(expression) == expected


@pytest.mark.parametrize(
    "expression",
    ["__import__('os').system('true')", "open('x')", "a + 1", "2 ** 100000", "[1, 2]", "True + 1"],
)
def test_calculator_refuses_anything_but_arithmetic(expression: str) -> None:
    with pytest.raises(ToolArgumentsError):
        evaluate_arithmetic(expression)


def test_division_by_zero_is_the_models_mistake() -> None:
    with pytest.raises(ToolArgumentsError, match="cannot compute"):
        evaluate_arithmetic("1/0")


BOMBS = [
    "(10**10000)**10000",
    "9**9**9",
    "10**10**10",
    "(10**3000)*(10**3000)*(10**3000)*(10**3000)*(10**3000)",
    "(2**5000)**3",
    "2**14001",
    "(-7)**100000",
    "round(1, -10**9)",
    "max(10**4000, 2)**2",
]


def test_no_expression_can_hang_the_process() -> None:
    """Each bomb is refused at once; a subprocess with a deadline keeps a regression
    from hanging the suite (big-integer work cannot be interrupted)."""
    program = (
        "import json, sys\n"
        "from convergent.builtin_tools import MAX_BITS, evaluate_arithmetic\n"
        "from convergent.exceptions import ToolArgumentsError\n"
        "refused = []\n"
        "for expression in json.loads(sys.argv[1]):\n"
        "    try:\n"
        "        evaluate_arithmetic(expression)\n"
        "    except ToolArgumentsError as exc:\n"
        "        refused.append(str(exc))\n"
        "print(json.dumps(refused))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", program, json.dumps(BOMBS)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    refused = json.loads(proc.stdout)
    assert len(refused) == len(BOMBS), refused
    assert all("bits" in text or "round()" in text for text in refused), refused


@settings(max_examples=200, deadline=None)
@given(base=st.integers(-(10**30), 10**30), exponent=st.integers(-50, 3000))
def test_a_power_is_computed_exactly_or_refused_by_its_size(base: int, exponent: int) -> None:
    expression = f"({base})**({exponent})"
    too_big = exponent > 0 and abs(base) > 1 and abs(base).bit_length() * exponent > MAX_BITS
    if too_big:
        with pytest.raises(ToolArgumentsError, match="bits"):
            evaluate_arithmetic(expression)
        return
    try:
        expected = base**exponent
    except ZeroDivisionError:
        with pytest.raises(ToolArgumentsError, match="cannot compute"):
            evaluate_arithmetic(expression)
        return
    value = evaluate_arithmetic(expression)
    if isinstance(expected, float):
        assert value == pytest.approx(expected) or (math.isinf(expected))
    else:
        assert value == expected


async def test_a_bad_expression_goes_back_to_the_model_and_the_run_goes_on() -> None:
    model = scripted(
        call("calculator", expression="17 x 23"),
        call("calculator", expression="17 * 23"),
        "391",
    )
    result = await Agent(model, [calculator], policy=StopPolicy(on_tool_error="stop")).run("17*23?")
    assert result.stop_reason is StopReason.COMPLETED
    assert [r.outcome for r in result.tool_calls] == ["invalid", "ok"]


async def test_calculator_tool_and_fail_tool() -> None:
    assert await calculator.call({"expression": "6*7"}) == "42"
    with pytest.raises(ToolError, match="boom"):
        await fail.call({"message": "boom"})


async def test_file_tools_are_confined_to_the_workspace(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello", encoding="utf-8")
    (tmp_path / "sub").mkdir()
    outside = tmp_path.parent / f"{tmp_path.name}-outside.txt"
    outside.write_text("secret", encoding="utf-8")
    os.symlink(outside, tmp_path / "link.txt")
    read_file, list_dir = file_tools(tmp_path)

    assert await read_file.call({"path": "notes.txt"}) == "hello"
    assert (await list_dir.call({})).splitlines() == ["link.txt", "notes.txt", "sub/"]
    for path in ("../" + outside.name, str(outside), "link.txt"):
        with pytest.raises(ToolArgumentsError, match="outside the workspace"):
            await read_file.call({"path": path})
    with pytest.raises(ToolArgumentsError, match="no such file"):
        await read_file.call({"path": "missing.txt"})


async def test_read_file_truncates_large_files(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("x" * 50, encoding="utf-8")
    read_file, _ = file_tools(tmp_path, max_bytes=10)
    assert await read_file.call({"path": "big.txt"}) == "x" * 10 + "\n[... truncated]"
