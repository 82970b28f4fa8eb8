from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from convergent import UserError
from convergent.state import ToolCallRecord
from convergent.synthesis import (
    InsightRecord,
    ResearchTally,
    load_insights,
    synthesize_insights,
    validate_confidence,
)
from convergent.synthesis.insights import adjust_for_research, parse_insight_records


@pytest.mark.parametrize(
    ("raw", "expected", "warnings"),
    [
        (0, 1, ["critic: Confidence below minimum, set to 1"]),
        (-3, 1, ["critic: Confidence below minimum, set to 1"]),
        (1, 1, []),
        (5, 5, []),
        (6, 5, ["critic: Confidence above maximum, set to 5"]),
        (99, 5, ["critic: Confidence above maximum, set to 5"]),
    ],
)
def test_validate_confidence_clamps_with_the_seed_warnings(
    raw: int, expected: int, warnings: list[str]
) -> None:
    assert validate_confidence(raw, "critic") == (expected, warnings)


async def test_clamping_warnings_reach_report_and_state(
    seed_records: list[dict[str, Any]], tmp_path: Path
) -> None:
    seed_records[1]["confidence"] = 9
    seed_records[3]["confidence"] = 0
    state = tmp_path / "workflow-state.yaml"
    report = await synthesize_insights(seed_records, state_path=state)
    expected = [
        "critic: Confidence above maximum, set to 5",
        "innovator: Confidence below minimum, set to 1",
    ]
    assert report.to_dict()["validation_warnings"] == expected
    assert "## Validation warnings" in report.to_markdown()
    data = yaml.safe_load(state.read_text())
    assert data["agents"]["critic"]["validation_warnings"] == expected[:1]
    assert data["agents"]["critic"]["raw_confidence"] == 9
    assert data["agents"]["critic"]["confidence"] == 5
    assert data["agents"]["innovator"]["validation_warnings"] == expected[1:]
    assert data["agents"]["optimist"]["validation_warnings"] == []
    assert data["stage_3"]["validation_warnings"] == expected
    # clamped values are what gets scored: critic 5 x 1.1, innovator 1 x 1.0
    scores = {t.theme.archetypes: t.score for t in report.themes}
    assert scores[("critic",)] == 5.5 and scores[("innovator",)] == 1.0


def _record(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"archetype": "critic", "key_insight": "Risky.", "confidence": 3}
    return {**base, **changes}


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (_record(confidence=True), "record 0: confidence: Value error, confidence must be"),
        (_record(confidence="4"), "record 0: confidence:"),
        (_record(confidence=3.5), "record 0: confidence:"),
        (_record(confidance=3), "record 0: confidance: Extra inputs are not permitted"),
        (_record(key_insight="  "), "record 0: key_insight:"),
        (_record(archetype="Critic Two"), "record 0: archetype:"),
        (_record(research_backed="yes"), "record 0: research_backed:"),
        ({"archetype": "critic", "confidence": 3}, "record 0: key_insight: Field required"),
    ],
)
def test_bad_records_are_rejected_with_one_line(record: dict[str, Any], message: str) -> None:
    with pytest.raises(UserError) as info:
        parse_insight_records([record])
    assert message.replace("Value error, ", "") in str(info.value)
    assert "\n" not in str(info.value)


def test_records_normalise_and_default() -> None:
    [record] = parse_insight_records([_record(archetype=" Critic ", confidence=4.0)])
    assert record == InsightRecord(archetype="critic", key_insight="Risky.", confidence=4)
    assert record.evidence == [] and record.research_backed is False


def test_duplicate_archetypes_and_bad_containers_are_rejected() -> None:
    with pytest.raises(UserError, match="archetype 'critic' appears twice"):
        parse_insight_records([_record(), _record()])
    with pytest.raises(UserError, match="must be a JSON list"):
        parse_insight_records({"archetype": "critic"})
    with pytest.raises(UserError, match="holds no insight records"):
        parse_insight_records([])
    with pytest.raises(UserError, match="record 1 must be an object"):
        parse_insight_records([_record(), "critic"])


def test_load_insights_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="insights file not found"):
        load_insights(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("[{", encoding="utf-8")
    with pytest.raises(UserError, match="is not valid JSON"):
        load_insights(bad)
    bad.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    with pytest.raises(UserError, match="is nested too deeply"):
        load_insights(bad)
    good = tmp_path / "good.json"
    good.write_text(json.dumps([_record()]), encoding="utf-8")
    assert load_insights(good)[0].archetype == "critic"


def _call(outcome: str, result: str, name: str = "web_search") -> ToolCallRecord:
    return ToolCallRecord(
        cycle=1,
        id="c",
        name=name,
        arguments={},
        ok=outcome == "ok",
        outcome=outcome,
        result=result,
        duration=0.0,
    )


def test_research_tally_counts_what_the_tool_returned() -> None:
    records = [
        _call("ok", '["a result"]'),
        _call("ok", "[]"),
        _call("ok", "  "),
        _call("failed", "web_search failed: 503"),
        _call("invalid", "invalid arguments"),
        _call("ok", "other tool output", name="calculator"),
    ]
    tally = ResearchTally.from_tool_calls(records, "web_search")
    assert tally == ResearchTally(successful=1, failed=1, empty=2, invalid=1)
    assert tally.backed and not tally.service_unavailable


@pytest.mark.parametrize(
    ("tally", "confidence", "expected", "limited"),
    [
        (ResearchTally(successful=2), 4, 4, False),
        (ResearchTally(successful=1, failed=1), 4, 4, False),
        (ResearchTally(empty=2), 4, 3, False),
        (ResearchTally(), 1, 1, False),
        (ResearchTally(failed=2), 4, 3, True),
        (ResearchTally(failed=1, empty=1), 1, 1, True),
    ],
)
def test_research_adjustment_table(
    tally: ResearchTally, confidence: int, expected: int, limited: bool
) -> None:
    adjusted, notes = adjust_for_research(confidence, tally)
    assert adjusted == expected
    assert ("limited research" in notes) is limited
    assert bool(notes) is (not tally.backed)
