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

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import PydanticSchemaGenerationError, TypeAdapter, ValidationError

from convergent._json import UnusableJson, load_json
from convergent.exceptions import UserError

__all__ = ["OutputCheck", "OutputSpec", "load_output_schema"]

_MAX_ERRORS = 8
"""Validation errors shown to the model; the rest are counted."""

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

    __slots__ = ("_check", "schema")

    def __init__(
        self,
        schema: dict[str, Any],
        check: Callable[[str], OutputCheck],
    ) -> None:
        self.schema = schema
        """The answer's JSON Schema: given to providers with structured output, and
        stored with durable runs so that a resumed run checks the same shape."""
        self._check = check

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

        return cls(schema, check)

    @classmethod
    def of_schema(cls, schema: Mapping[str, Any]) -> OutputSpec:
        """The shape a JSON Schema describes, checked by ``jsonschema``.

        Raises:
            UserError: If ``schema`` is not a valid JSON Schema.
        """
        # imported here: most runs declare no schema, and the import takes a while
        from jsonschema import validators
        from jsonschema.exceptions import SchemaError

        if not isinstance(schema, Mapping):
            raise UserError("an output schema must be a JSON object")
        schema = dict(schema)
        validator_class = validators.validator_for(schema)
        try:
            validator_class.check_schema(schema)
        except SchemaError as exc:
            raise UserError(f"invalid output schema: {exc.message}") from None
        validator = validator_class(schema)

        def check(text: str) -> OutputCheck:
            try:
                data = load_json(_unfenced(text))
            except UnusableJson as exc:
                return OutputCheck(f"the answer is {exc}")
            found = sorted(validator.iter_errors(data), key=lambda error: list(error.path))
            if found:
                lines = [f"{_where(error.path)}: {error.message}" for error in found]
                return OutputCheck(_joined(lines))
            return OutputCheck(None, data, data)

        return cls(schema, check)

    def check(self, answer: str) -> OutputCheck:
        """Validate an answer (JSON text, optionally in one Markdown code fence)."""
        return self._check(answer)


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
