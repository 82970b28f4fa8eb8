"""The Step 1 insight record, its confidence validation, and research adjustments.

Every perspective yields one record: ``archetype``, ``key_insight``, ``confidence``
(an integer from 1 to 5), ``evidence`` and ``research_backed``. A confidence outside
1..5 is clamped with the seed's warning. When a research tool was available, what the
tool actually returned (never what the model claims) decides ``research_backed`` and
whether the confidence drops by one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from convergent._json import UnusableJson, load_json
from convergent.exceptions import UserError
from convergent.messages import CallOutcome
from convergent.state import ToolCallRecord
from convergent.synthesis.archetypes import validate_archetype_name

__all__ = [
    "CONFIDENCE_MAX",
    "CONFIDENCE_MIN",
    "Insight",
    "InsightRecord",
    "ResearchTally",
    "ValidatedInsight",
    "adjust_for_research",
    "load_insights",
    "parse_insight_records",
    "records_from",
    "validate_confidence",
    "validate_insight",
]

CONFIDENCE_MIN = 1
"""Lowest valid confidence."""
CONFIDENCE_MAX = 5
"""Highest valid confidence."""

LIMITED_RESEARCH_NOTE = "limited research"
"""The note attached when the research service was unavailable."""

_EMPTY_RESULTS = frozenset({"", "[]", "{}", "null", "none", '""'})


def _integer(value: Any) -> Any:
    """Accept ints and integral floats; reject booleans and strings, which JSON keeps apart."""
    if isinstance(value, bool) or isinstance(value, str):
        raise ValueError("confidence must be an integer")
    return value


class Insight(BaseModel):
    """One perspective's validated insight (confidence already within 1..5)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    archetype: str
    """Which perspective produced it."""
    key_insight: str
    """The insight itself, one or two sentences."""
    confidence: int = Field(ge=CONFIDENCE_MIN, le=CONFIDENCE_MAX)
    """Self-reported confidence after clamping and research adjustment; ranks, never decides."""
    evidence: tuple[str, ...] = ()
    """Supporting points."""
    research_backed: bool = False
    """Whether at least one research call returned results for this perspective."""

    @property
    def insight_id(self) -> str:
        """The id used by theme grouping: ``{archetype}_insight``."""
        return f"{self.archetype}_insight"


class InsightRecord(BaseModel):
    """A Step 1 record as given (``--insights`` file, or a model's extraction): unclamped."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    archetype: str
    """Perspective name; normalised to lower case."""
    key_insight: str = Field(min_length=1)
    """The insight text."""
    confidence: int
    """Raw confidence; values outside 1..5 are clamped by `validate_insight`."""
    evidence: list[str] = Field(default_factory=list)
    """Supporting points."""
    research_backed: bool = Field(default=False, strict=True)
    """Whether the insight was backed by a successful search."""

    @field_validator("archetype")
    @classmethod
    def _archetype(cls, value: str) -> str:
        try:
            return validate_archetype_name(value)
        except UserError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("confidence", mode="before")
    @classmethod
    def _confidence(cls, value: Any) -> Any:
        return _integer(value)


def validate_confidence(raw_confidence: int, archetype: str) -> tuple[int, list[str]]:
    """Clamp a confidence to 1..5, with the seed's warning when it had to change.

    Returns:
        The confidence to use and the validation warnings (empty when in range).
    """
    validation_warnings: list[str] = []
    if raw_confidence < CONFIDENCE_MIN:
        confidence = CONFIDENCE_MIN
        validation_warnings.append(f"{archetype}: Confidence below minimum, set to 1")
    elif raw_confidence > CONFIDENCE_MAX:
        confidence = CONFIDENCE_MAX
        validation_warnings.append(f"{archetype}: Confidence above maximum, set to 5")
    else:
        confidence = raw_confidence
    return confidence, validation_warnings


@dataclass(frozen=True, slots=True, kw_only=True)
class ValidatedInsight:
    """An `Insight` together with what validation changed."""

    insight: Insight
    """The record with a valid confidence."""
    raw_confidence: int
    """The confidence as given, before clamping."""
    warnings: tuple[str, ...]
    """The clamping warnings, if any."""


def validate_insight(record: InsightRecord) -> ValidatedInsight:
    """Clamp the record's confidence and build the validated `Insight`."""
    confidence, warnings = validate_confidence(record.confidence, record.archetype)
    insight = Insight(
        archetype=record.archetype,
        key_insight=record.key_insight,
        confidence=confidence,
        evidence=tuple(e.strip() for e in record.evidence if e.strip()),
        research_backed=record.research_backed,
    )
    return ValidatedInsight(
        insight=insight, raw_confidence=record.confidence, warnings=tuple(warnings)
    )


@dataclass(frozen=True, slots=True)
class ResearchTally:
    """What a perspective's research tool actually returned, counted from the run's records.

    A call is *successful* when the tool returned a non-empty result, *failed* when the
    tool raised or timed out (the service was unavailable), and *invalid* when the model
    sent arguments the tool rejected. A tool signals "no results" by returning an empty
    value (``""``, ``[]``, ``None``); that counts as neither success nor failure.
    """

    successful: int = 0
    """Calls that returned results."""
    failed: int = 0
    """Calls where the tool raised or timed out."""
    empty: int = 0
    """Calls that ran but found nothing."""
    invalid: int = 0
    """Calls rejected for bad arguments (the model's mistake)."""

    @classmethod
    def from_tool_calls(cls, records: Iterable[ToolCallRecord], tool_name: str) -> ResearchTally:
        """Count the research calls among a run's executed tool calls."""
        successful = failed = empty = invalid = 0
        for record in records:
            if record.name != tool_name:
                continue
            if record.outcome == CallOutcome.FAILED:
                failed += 1
            elif record.outcome != CallOutcome.OK:
                invalid += 1
            elif record.result.strip().lower() in _EMPTY_RESULTS:
                empty += 1
            else:
                successful += 1
        return cls(successful=successful, failed=failed, empty=empty, invalid=invalid)

    @property
    def backed(self) -> bool:
        """At least one search returned results."""
        return self.successful > 0

    @property
    def service_unavailable(self) -> bool:
        """No search succeeded and at least one failed because the tool errored."""
        return self.successful == 0 and self.failed > 0


def adjust_for_research(confidence: int, tally: ResearchTally) -> tuple[int, list[str]]:
    """Apply the seed's "Research Backing Impact" table to a valid confidence.

    One or more successful searches: no change. Zero: -1 (floor 1). Service unavailable:
    -1 (floor 1) and the note ``limited research``.

    Returns:
        The adjusted confidence and the notes to attach to the perspective.
    """
    if tally.backed:
        return confidence, []
    adjusted = max(CONFIDENCE_MIN, confidence - 1)
    if tally.service_unavailable:
        return adjusted, [
            LIMITED_RESEARCH_NOTE,
            f"research service unavailable ({tally.failed} failed call(s)): "
            f"confidence {confidence} -> {adjusted}",
        ]
    return adjusted, [f"0 successful searches: confidence {confidence} -> {adjusted}"]


def _describe_error(exc: ValidationError) -> str:
    err = exc.errors(include_url=False)[0]
    where = ".".join(str(part) for part in err["loc"]) or "record"
    message = str(err["msg"]).removeprefix("Value error, ")
    return f"{where}: {message}"


def parse_insight_records(data: Any, *, source: str = "insights") -> list[InsightRecord]:
    """Validate a JSON list of Step 1 records; reject duplicates.

    Raises:
        UserError: With one line naming the record and field that is wrong.
    """
    if not isinstance(data, list):
        raise UserError(f"{source} must be a JSON list of insight records")
    if not data:
        raise UserError(f"{source} holds no insight records")
    records: list[InsightRecord] = []
    seen: set[str] = set()
    for index, item in enumerate(data):
        if not isinstance(item, Mapping):
            raise UserError(f"{source}: record {index} must be an object")
        try:
            record = InsightRecord.model_validate(item)
        except ValidationError as exc:
            raise UserError(f"{source}: record {index}: {_describe_error(exc)}") from None
        if record.archetype in seen:
            raise UserError(f"{source}: archetype {record.archetype!r} appears twice")
        seen.add(record.archetype)
        records.append(record)
    return records


def load_insights(path: str | Path) -> list[InsightRecord]:
    """Read and validate an ``--insights`` file.

    Raises:
        UserError: If the file is missing, unreadable, not JSON, or has a bad record.
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"insights file not found: {file}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read insights file {file}: {exc}") from None
    try:
        data = load_json(text)
    except UnusableJson as exc:
        raise UserError(f"insights file {file} is {exc}") from None
    return parse_insight_records(data, source=f"insights file {file}")


def records_from(
    items: Sequence[InsightRecord | Insight | Mapping[str, Any]],
) -> list[InsightRecord]:
    """Coerce the public API's accepted input forms to records.

    Raises:
        UserError: If a record has the wrong shape or an archetype repeats.
    """
    raw: list[Any] = []
    for item in items:
        if isinstance(item, InsightRecord):
            raw.append(item.model_dump())
        elif isinstance(item, Insight):
            raw.append(item.model_dump(mode="json"))
        else:
            raw.append(item)
    return parse_insight_records(raw)
