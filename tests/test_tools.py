from __future__ import annotations

import asyncio
import gc
import json
import threading
import weakref
from typing import Literal

import pytest

from convergent import Tool, ToolArgumentsError, tool
from convergent.exceptions import ToolDefinitionError


def test_schema_comes_from_signature_and_docstring() -> None:
    @tool
    def search(query: str, limit: int = 5, mode: Literal["fast", "deep"] = "fast") -> list[str]:
        """Search the index.

        Longer explanation that is part of the description.

        Args:
            query: Words to look for.
            limit: Maximum hits,
                counted after de-duplication.
            mode: Search depth.

        Returns:
            Matching titles.
        """
        return [query] * limit

    assert isinstance(search, Tool)
    assert search.name == "search"
    assert search.description.startswith("Search the index.")
    assert "Returns" not in search.description
    props = search.parameters["properties"]
    assert search.parameters["required"] == ["query"]
    assert props["query"] == {"type": "string", "description": "Words to look for."}
    assert props["limit"]["default"] == 5
    assert props["limit"]["description"] == "Maximum hits, counted after de-duplication."
    assert props["mode"]["enum"] == ["fast", "deep"]
    assert search.parameters["additionalProperties"] is False


def test_args_with_types_give_their_descriptions() -> None:
    @tool
    def move(x: int, y: int = 0) -> str:
        """Move the cursor.

        Args:
            x (int): Columns to the right.
            y (int, optional): Rows down.
        """
        return f"{x},{y}"

    props = move.parameters["properties"]
    assert (props["x"]["description"], props["y"]["description"]) == (
        "Columns to the right.",
        "Rows down.",
    )


def test_multi_line_descriptions_become_one_line() -> None:
    @tool
    def fetch(url: str) -> str:
        """Fetch a page
        over HTTP.

        Follows redirects,
        at most five.

        Args:
            url: The address,
                with its scheme
                (``https://``).
        """
        return url

    assert fetch.description == "Fetch a page over HTTP. Follows redirects, at most five."
    assert fetch.parameters["properties"]["url"]["description"] == (
        "The address, with its scheme (``https://``)."
    )


def test_a_docstring_without_args_gives_only_the_description() -> None:
    @tool
    def ping(host: str) -> str:
        """Check that a host answers."""
        return host

    assert ping.description == "Check that a host answers."
    assert ping.parameters["properties"]["host"] == {"type": "string"}


def test_returns_and_raises_are_not_part_of_the_description() -> None:
    @tool
    def divide(a: float, b: float) -> float:
        """Divide a by b.

        Args:
            a: The dividend.
            b: The divisor.

        Returns:
            The quotient.

        Raises:
            ZeroDivisionError: If b is zero.
        """
        return a / b

    assert divide.description == "Divide a by b."
    props = divide.parameters["properties"]
    assert (props["a"]["description"], props["b"]["description"]) == (
        "The dividend.",
        "The divisor.",
    )


def test_options_and_names() -> None:
    @tool(name="lookup", timeout=2.5, idempotent=True, description="Find a thing.")
    def find(key: str) -> str:
        return key

    assert (find.name, find.timeout, find.idempotent, find.description) == (
        "lookup",
        2.5,
        True,
        "Find a thing.",
    )


def test_untyped_parameter_is_a_definition_error() -> None:
    def untyped(x):  # type: ignore[no-untyped-def]
        return x

    with pytest.raises(ToolDefinitionError, match="needs a type hint"):
        tool(untyped)


def test_validation_coerces_and_rejects() -> None:
    @tool
    def repeat(text: str, times: int) -> str:
        """Repeat text.

        Args:
            text: Text.
            times: Count.
        """
        return text * times

    assert repeat.validate({"text": "a", "times": "3"}) == {"text": "a", "times": 3}
    with pytest.raises(ToolArgumentsError, match="times"):
        repeat.validate({"text": "a", "times": "many"})
    with pytest.raises(ToolArgumentsError, match="Extra inputs"):
        repeat.validate({"text": "a", "times": 1, "other": 2})


async def test_sync_tools_run_off_the_event_loop_thread() -> None:
    loop_thread = threading.get_ident()

    @tool
    def where() -> int:
        """Report the running thread."""
        return threading.get_ident()

    assert int(await where.call({})) != loop_thread


async def test_async_tools_run_natively_and_results_become_text() -> None:
    @tool
    async def data() -> dict[str, int]:
        """Return structured data."""
        await asyncio.sleep(0)
        return {"a": 1}

    assert data.is_async
    assert await data.call({}) == '{"a": 1}'


def test_read_only_is_declared_or_unknown() -> None:
    from convergent import calculator, file_tools
    from convergent.edit_tools import edit_tools

    @tool(read_only=True)
    def status(job: str) -> str:
        """Report a job's status.

        Args:
            job: The job.
        """
        return "running"

    @tool
    def poke() -> str:
        """Poke something."""
        return "poked"

    assert status.read_only is True and poke.read_only is None
    assert calculator.read_only is True
    assert [t.read_only for t in file_tools(".")] == [True, True]
    assert [t.read_only for t in edit_tools(".")] == [False, False]
    with pytest.raises(ToolDefinitionError, match="read_only and modify files"):
        tool(read_only=True, modifies_files=True)(poke.function)


def _lookup() -> Tool:
    """A tool built from a fresh closure, as a program that builds its tools per request."""

    async def lookup(city: str, days: int = 1) -> str:
        """Look a city up.

        Args:
            city: The city.
        """
        return f"{city} {days}"

    return tool(lookup)


def test_tools_built_again_from_one_definition_share_a_model_but_not_a_schema() -> None:
    first, second = _lookup(), _lookup()
    assert first.arguments_model is second.arguments_model
    assert first.parameters == second.parameters
    first.parameters["properties"]["city"]["description"] = "changed"
    assert second.parameters["properties"]["city"]["description"] == "The city."
    assert _lookup().parameters["properties"]["city"]["description"] == "The city."


def test_a_signature_that_differs_in_name_default_or_description_gets_its_own_schema() -> None:
    def whole(x: float = 0) -> str:
        """Print x.

        Args:
            x: A number.
        """
        return str(x)

    def fraction(x: float = 0.0) -> str:
        """Print x.

        Args:
            x: A number.
        """
        return str(x)

    def described(x: float = 0) -> str:
        """Print x.

        Args:
            x: Another number.
        """
        return str(x)

    built = [tool(name="f")(f) for f in (whole, fraction, described)] + [tool(name="g")(whole)]
    assert len({id(t.arguments_model) for t in built}) == 4
    assert [json.dumps(t.parameters["properties"]["x"]) for t in built[:3]] == [
        '{"default": 0, "description": "A number.", "type": "number"}',
        '{"default": 0.0, "description": "A number.", "type": "number"}',
        '{"default": 0, "description": "Another number.", "type": "number"}',
    ]


_UNHASHABLE_DEFAULT = [1, 2]


def test_a_tool_whose_default_cannot_be_hashed_gets_a_model_of_its_own() -> None:
    def total(values: list[int] = _UNHASHABLE_DEFAULT) -> str:
        return str(sum(values))

    first, second = tool(total), tool(total)
    assert first.arguments_model is not second.arguments_model
    assert first.parameters["properties"]["values"]["default"] == [1, 2]
    assert first.validate({}) == {"values": [1, 2]}
    # nothing keeps such a model once its tool is gone
    model = weakref.ref(second.arguments_model)
    del second
    gc.collect()
    assert model() is None
