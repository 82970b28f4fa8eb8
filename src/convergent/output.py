"""Typed output: a run is ``completed`` only when its final answer validates.

An agent declares the shape of its answer with ``output_type`` (any type pydantic's
``TypeAdapter`` accepts: a model, a dataclass, ``list[int]``...) or ``output_schema``
(a JSON Schema). The answer, the model's reply without tool calls, must be JSON of
that shape; while it is not, the validation errors go back to the model and the run
goes on, like a verifier's feedback. The check is objective: the same text always
gets the same verdict, in any process.

Example:
    >>> class Answer(BaseModel):
    ...     city: str
    ...     population: int
    >>> agent = Agent(model, output_type=Answer)
    >>> result = await agent.run("Largest city of Peru?")
    >>> result.output_data  # Answer(city='Lima', population=...) once completed
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import PydanticSchemaGenerationError, TypeAdapter, ValidationError

from convergent._json import UnusableJson, load_json
from convergent.exceptions import UserError

__all__ = [
    "OUTPUT_SECONDS",
    "OUTPUT_STEPS",
    "OUTPUT_STEPS_PER_ITEM",
    "OutputCheck",
    "OutputSpec",
    "load_output_schema",
]

_MAX_ERRORS = 8
"""Validation errors shown to the model; the rest are counted."""

OUTPUT_STEPS = 100_000
"""Steps (keyword evaluations and the errors they make) one check of an answer against
an output schema may take, and `OUTPUT_STEPS_PER_ITEM` more per array or object in the
answer: enough for answers of any size the model writes; a schema whose alternatives
multiply runs out of them in about a second."""

OUTPUT_STEPS_PER_ITEM = 20
"""More steps for each array or object the answer holds."""

OUTPUT_SECONDS = 1.0
"""Seconds one check of an answer against an output schema may take, besides its steps:
the check runs on the event loop, and a step can take 40 µs on a busy machine (a check
that used its 100,000 steps took 3.5 to 4.9 s)."""

_FENCED = re.compile(r"\A```[A-Za-z0-9_-]*\s*\n(.*?)\n?```\Z", re.DOTALL)


@dataclass(frozen=True, slots=True)
class OutputCheck:
    """The verdict on one answer: its value when it validates, else what is wrong."""

    errors: str | None
    """What does not validate, in words, for the model; None: the answer is valid."""
    value: Any = None
    """The validated value (an instance of the output type), when valid."""
    data: Any = None
    """The value as plain JSON data (what a store keeps), when valid."""


class OutputSpec:
    """The declared shape of a run's final answer, and the check of an answer against it.

    Build one with `of_type` or `of_schema`; `convergent.Agent` does it for its
    ``output_type`` / ``output_schema`` arguments.
    """

    __slots__ = ("_check", "_value", "schema")

    def __init__(
        self,
        schema: dict[str, Any],
        check: Callable[[str], OutputCheck],
        value: Callable[[Any], Any] | None = None,
    ) -> None:
        self.schema = schema
        """The answer's JSON Schema: given to providers with structured output, and
        stored with durable runs so that a resumed run checks the same shape."""
        self._check = check
        self._value = value

    @classmethod
    def of_type(cls, output_type: Any) -> OutputSpec:
        """The shape of ``output_type``, checked by pydantic.

        Raises:
            UserError: If pydantic cannot validate or describe the type.
        """
        try:
            adapter: TypeAdapter[Any] = TypeAdapter(output_type)
            schema = adapter.json_schema()
        except (PydanticSchemaGenerationError, TypeError) as exc:
            raise UserError(f"output_type {output_type!r} cannot be validated: {exc}") from None

        def check(text: str) -> OutputCheck:
            try:
                value = adapter.validate_json(_unfenced(text))
            except ValidationError as exc:
                return OutputCheck(_pydantic_errors(exc))
            return OutputCheck(None, value, adapter.dump_python(value, mode="json"))

        def value(data: Any) -> Any:
            # as JSON text, validated as the answer was: strict types read their JSON forms
            return adapter.validate_json(json.dumps(data))

        return cls(schema, check, value)

    @classmethod
    def of_schema(
        cls,
        schema: Mapping[str, Any],
        *,
        seconds: float | None = OUTPUT_SECONDS,
        checked: Mapping[str, str | None] | None = None,
    ) -> OutputSpec:
        """The shape a JSON Schema describes, checked within bounds.

        The check is `convergent._bounded_schema.BoundedValidator`'s, as for an MCP
        tool's arguments: patterns on RE2, references only within the schema, at most
        `OUTPUT_STEPS` steps (more for a big answer), 100 levels of nesting and
        ``seconds``. An answer that cannot be checked within them is not accepted.

        Args:
            schema: The JSON Schema.
            seconds: Time one check may take; None: steps only, which gives the same
                verdict on every machine and every replay.
            checked: Verdicts already given on some answers (text -> errors; None:
                valid), taken as they are. A Temporal workflow takes its workers' so:
                the history records them, where a check bounded in seconds would not
                replay to the same verdict, and one in steps only can take seconds.

        Raises:
            UserError: If ``schema`` is not a valid JSON Schema, refers outside itself,
                or has a pattern RE2 cannot run.
        """
        # imported here: most runs declare no schema, and the import takes a while
        from jsonschema.exceptions import SchemaError

        from convergent._bounded_schema import (
            BoundedValidator,
            Budget,
            Unchecked,
            foreign_references,
            shown_error,
            unsupported_patterns,
        )

        if not isinstance(schema, Mapping):
            raise UserError("an output schema must be a JSON object")
        schema = dict(schema)
        try:
            validator = BoundedValidator(
                schema, Budget(OUTPUT_STEPS, OUTPUT_STEPS_PER_ITEM, seconds=seconds)
            )
        except SchemaError as exc:
            raise UserError(f"invalid output schema: {exc.message}") from None
        for reference in foreign_references(schema):
            raise UserError(
                f"the output schema refers to {reference!r}, which is not within it "
                "(references to other files or addresses are not followed)"
            )
        for pattern in unsupported_patterns(schema):
            raise UserError(
                f"the output schema's pattern {pattern!r} cannot be checked: patterns run "
                "on RE2, which has no backreferences or lookaround"
            )

        given = checked if checked is not None else {}

        def check(text: str) -> OutputCheck:
            try:
                data = load_json(_unfenced(text))
            except UnusableJson as exc:
                return OutputCheck(f"the answer is {exc}")
            if text in given:
                errors = given[text]
                return OutputCheck(errors) if errors is not None else OutputCheck(None, data, data)
            try:
                found = validator.errors(data)
            except Unchecked as exc:
                return OutputCheck(f"the answer cannot be checked against the schema: {exc}")
            if found:
                return OutputCheck(_joined([shown_error(error, "(answer)") for error in found]))
            return OutputCheck(None, data, data)

        return cls(schema, check)

    def check(self, answer: str) -> OutputCheck:
        """Validate an answer (JSON text, optionally in one Markdown code fence)."""
        return self._check(answer)

    def value_of(self, data: Any) -> Any:
        """The value that a valid answer's JSON data (`OutputCheck.data`) stands for.

        For a schema the data is the value; for a type, the data validated again, as a
        run's stored answer becomes its result's ``output_data``.
        """
        return data if self._value is None or data is None else self._value(data)


def load_output_schema(path: str | Path) -> dict[str, Any]:
    """Read a JSON Schema file for ``--output-schema``.

    Raises:
        UserError: If the file cannot be read, is not JSON, or is not a valid schema.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read output schema {path}: {exc.strerror or exc}") from None
    try:
        schema = load_json(text)
    except UnusableJson as exc:
        raise UserError(f"output schema {path} is {exc}") from None
    if not isinstance(schema, dict):
        raise UserError(f"output schema {path} must be a JSON object")
    OutputSpec.of_schema(schema)
    return schema


def _unfenced(text: str) -> str:
    """The answer without the Markdown code fence a model may put around its JSON."""
    stripped = text.strip()
    match = _FENCED.match(stripped)
    return match.group(1) if match else stripped


def _pydantic_errors(exc: ValidationError) -> str:
    lines = []
    for error in exc.errors(include_url=False, include_input=False):
        lines.append(f"{_where(error['loc'])}: {error['msg']}")
    return _joined(lines)


def _where(path: Any) -> str:
    parts = [str(part) for part in path]
    return ".".join(parts) if parts else "(answer)"


def _joined(lines: list[str]) -> str:
    shown = "; ".join(lines[:_MAX_ERRORS])
    if len(lines) > _MAX_ERRORS:
        shown += f"; and {len(lines) - _MAX_ERRORS} more"
    return shown
