from __future__ import annotations

import os
from pathlib import Path

import pytest

from convergent import ToolArgumentsError, ToolError, calculator, fail, file_tools
from convergent.builtin_tools import evaluate_arithmetic


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
    with pytest.raises(ToolError):
        evaluate_arithmetic(expression)


def test_division_by_zero_is_a_tool_error() -> None:
    with pytest.raises(ToolError, match="cannot compute"):
        evaluate_arithmetic("1/0")


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
