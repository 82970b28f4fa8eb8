"""Safe built-in tools, so that a scripted or real run can do something useful.

File tools are confined to a workspace folder: a path that resolves outside it
(through ``..`` or a symlink) is rejected with an error result, never followed.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from pathlib import Path
from typing import Any

from convergent.exceptions import ToolError
from convergent.tools import Tool, ToolArgumentsError, tool

__all__ = [
    "MAX_BITS",
    "calculator",
    "default_tools",
    "evaluate_arithmetic",
    "fail",
    "file_tools",
    "resolve_in_workspace",
]

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt,
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "log": math.log,
    "exp": math.exp,
}
_CONSTANTS = {"pi": math.pi, "e": math.e}
_MAX_LENGTH = 500
MAX_BITS = 14_000
"""Largest integer (in bits, about 4,200 digits) a calculation may produce at any step.

Big-integer arithmetic holds the interpreter lock, so nothing (a timeout, Ctrl-C) can
stop a huge power once it started: sizes are estimated from the operands before each
step, and a step whose result would be larger is refused instead of computed.
"""
_MAX_ROUND_DIGITS = 1_000


def _bits(value: Any) -> int:
    return abs(value).bit_length() if isinstance(value, int) else 0


def _check_size(op: ast.operator, left: Any, right: Any) -> None:
    """Refuse a step whose integer result would exceed `MAX_BITS`, before computing it."""
    if not (isinstance(left, int) and isinstance(right, int)):
        return  # floats overflow to an error at once; they never grow without bound
    if isinstance(op, ast.Pow):
        if right > 0 and abs(left) > 1 and _bits(left) * right > MAX_BITS:
            raise ToolArgumentsError(
                f"the result of {left if _bits(left) < 64 else 'a large number'} ** {right} "
                f"would have more than {MAX_BITS} bits; refusing to compute it"
            )
    elif isinstance(op, ast.Mult) and _bits(left) + _bits(right) > MAX_BITS:
        raise ToolArgumentsError(f"a product would have more than {MAX_BITS} bits")


def _call(name: str, arguments: list[Any]) -> Any:
    if name == "round" and len(arguments) == 2:
        digits = arguments[1]
        if not isinstance(digits, int) or abs(digits) > _MAX_ROUND_DIGITS:
            raise ToolArgumentsError(
                f"round() takes a whole number of digits between -{_MAX_ROUND_DIGITS} and "
                f"{_MAX_ROUND_DIGITS}"
            )
    return _FUNCTIONS[name](*arguments)


def _walk(node: ast.AST) -> Any:
    if isinstance(node, ast.Expression):
        return _walk(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _walk(node.left), _walk(node.right)
        _check_size(node.op, left, right)
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_walk(node.operand))
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and not node.keywords
    ):
        return _call(node.func.id, [_walk(arg) for arg in node.args])
    raise ToolArgumentsError(f"unsupported syntax in expression: {type(node).__name__}")


def evaluate_arithmetic(expression: str) -> int | float:
    """Evaluate an arithmetic expression by walking its syntax tree (never ``eval``).

    Every step is bounded (see `MAX_BITS`), so any expression finishes at once or is
    refused. An expression that is not plain arithmetic, cannot be computed or is too
    large is the caller's mistake, not a failure of the tool.

    Raises:
        ToolArgumentsError: If the expression is not plain arithmetic, cannot be
            computed, or its result (or a step of it) would be too large.
    """
    if len(expression) > _MAX_LENGTH:
        raise ToolArgumentsError(f"expression longer than {_MAX_LENGTH} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        raise ToolArgumentsError(f"not an arithmetic expression: {expression!r}") from None
    try:
        value = _walk(tree)
    except ToolArgumentsError:
        raise
    except (ArithmeticError, ValueError, TypeError, RecursionError) as exc:
        raise ToolArgumentsError(f"cannot compute {expression!r}: {exc}") from None
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value  # type: ignore[no-any-return]


@tool(idempotent=True, timeout=5.0, read_only=True)
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression such as ``(17 * 23) + 4`` or ``sqrt(2) ** 2``.

    Args:
        expression: Numbers with + - * / // % ** and parentheses; sqrt, abs, round, min,
            max, log, exp; constants pi and e.
    """
    return str(evaluate_arithmetic(expression))


@tool(idempotent=True, timeout=5.0, read_only=True)
def fail(message: str) -> str:
    """Always fail with the given message (shows how a tool failure stops a run).

    Args:
        message: The error text to raise.
    """
    raise ToolError(message)


def resolve_in_workspace(root: Path, path: str) -> Path:
    """Resolve ``path`` against ``root`` and refuse anything that lands outside it.

    Raises:
        ToolArgumentsError: If the resolved path (following symlinks) is outside the
            workspace; a bad path is the caller's mistake, reported back to the model.
    """
    base = root.resolve()
    candidate = Path(path)
    target = (candidate if candidate.is_absolute() else base / candidate).resolve()
    if target != base and base not in target.parents:
        raise ToolArgumentsError(f"{path!r} is outside the workspace {base}")
    return target


def file_tools(workspace: str | Path = ".", *, max_bytes: int = 100_000) -> list[Tool]:
    """Build ``read_file`` and ``list_dir`` confined to ``workspace``."""
    root = Path(workspace)

    @tool(idempotent=True, timeout=10.0, read_only=True)
    def read_file(path: str) -> str:
        """Read a UTF-8 text file inside the workspace.

        Args:
            path: File path relative to the workspace.
        """
        target = resolve_in_workspace(root, path)
        if not target.is_file():
            raise ToolArgumentsError(f"no such file: {path}")
        data = target.read_bytes()[: max_bytes + 1]
        text = data[:max_bytes].decode("utf-8", errors="replace")
        return text + ("\n[... truncated]" if len(data) > max_bytes else "")

    @tool(idempotent=True, timeout=10.0, read_only=True)
    def list_dir(path: str = ".") -> str:
        """List the entries of a folder inside the workspace (folders end with /).

        Args:
            path: Folder path relative to the workspace.
        """
        target = resolve_in_workspace(root, path)
        if not target.is_dir():
            raise ToolArgumentsError(f"no such folder: {path}")
        entries = sorted(entry.name + ("/" if entry.is_dir() else "") for entry in target.iterdir())
        return "\n".join(entries) if entries else "(empty)"

    return [read_file, list_dir]


def default_tools(workspace: str | Path = ".", *, include_fail: bool = True) -> list[Tool]:
    """The built-in tool set of ``convergent run``: calculator, file tools and ``fail``."""
    return [calculator, *file_tools(workspace), *([fail] if include_fail else [])]
