from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from convergent import UserError
from convergent.synthesis import Diagnosis, synthesize_insights, write_state

DISTINCT = [
    ("optimist", "Tourism revenue will climb steadily."),
    ("critic", "Legacy databases break under load."),
    ("analyst", "Quarterly churn figures look unusual."),
    ("innovator", "Blockchain ledgers enable provenance."),
    ("pragmatist", "Hire two contractors immediately."),
]


def _records(confidences: list[int]) -> list[dict[str, Any]]:
    return [
        {"archetype": name, "key_insight": text, "confidence": c, "evidence": [f"{name} point"]}
        for (name, text), c in zip(DISTINCT, confidences, strict=True)
    ]


@pytest.mark.parametrize(
    ("confidences", "diagnosis"),
    [
        ([4, 5, 4, 5, 4], Diagnosis.GENUINELY_COMPLEX),
        ([1, 2, 2, 1, 2], Diagnosis.PROMPT_NEEDS_REFINEMENT),
        ([5, 1, 3, 4, 2], Diagnosis.NORMAL_DIVERGENCE),
        ([4, 4, 4, 4, 3], Diagnosis.NORMAL_DIVERGENCE),
    ],
)
async def test_no_convergence_diagnosis(confidences: list[int], diagnosis: Diagnosis) -> None:
    report = await synthesize_insights(_records(confidences))
    assert report.convergent == ()
    portfolio = report.no_convergence
    assert portfolio is not None and portfolio.diagnosis is diagnosis
    data = report.to_dict()
    assert data["convergent_insights"] == []
    assert len(data["divergent_insights"]) == 5
    assert data["no_convergence"]["diagnosis"] == diagnosis.value
    assert data["no_convergence"]["choices"] == [
        "Proceed with portfolio synthesis",
        "Refine the original prompt for another attempt",
        "Select most relevant perspective for deeper exploration",
    ]


async def test_portfolio_markdown_has_the_seed_framing() -> None:
    report = await synthesize_insights(_records([4, 5, 4, 5, 4]), prompt="What now?")
    text = report.to_markdown()
    assert "## Portfolio of Options\n\nNo strong consensus emerged across perspectives." in text
    assert "- Multiple valid approaches exist\n\nBelow are 5 distinct perspectives, each " in text
    assert "## Convergent insights" not in text
    assert "genuinely complex" in text
    assert "3. Select most relevant perspective for deeper exploration" in text
    # divergent insights are listed best first: confidence 5 ones before 4 ones
    assert text.index("**critic**") < text.index("**optimist**")


async def test_convergent_report_markdown_and_yaml(seed_records: list[dict[str, Any]]) -> None:
    report = await synthesize_insights(seed_records, prompt="Expand into Asia?")
    text = report.to_markdown()
    assert text.startswith("# Synthesis: Expand into Asia?\n\n5 of 5 perspectives · grouping:")
    assert "1. **Shared keywords: asian, company, growth, market, opportunity** (score 7.2" in text
    assert "Portfolio of Options" not in text
    assert yaml.safe_load(report.to_yaml()) == report.to_dict()
    assert list(report.to_dict()) == ["convergent_insights", "divergent_insights"]


async def test_synthesized_insight_leads_with_the_most_confident_member() -> None:
    records = [
        {"archetype": "optimist", "key_insight": "Cloud migration cuts costs", "confidence": 3},
        {
            "archetype": "critic",
            "key_insight": "Cloud migration cuts hosting costs.",
            "confidence": 5,
            "evidence": ["b"],
        },
        {"archetype": "analyst", "key_insight": "Staff morale is dropping.", "confidence": 2},
    ]
    entry = (await synthesize_insights(records)).to_dict()["convergent_insights"][0]
    assert entry["synthesized_insight"] == (
        "Cloud migration cuts hosting costs. Cloud migration cuts costs."
    )
    assert entry["contributing_archetypes"] == ["optimist", "critic"]
    assert entry["score"] == 6.0  # mean 4 x 1.5


async def test_json_dict_records_how_the_report_was_made(
    seed_records: list[dict[str, Any]],
) -> None:
    data = (await synthesize_insights(seed_records)).to_json_dict()
    assert data["grouping"] == {
        "method": "jaccard_fallback",
        "trigger": "no_model",
        "reason": "no_model: no model configured",
        "attempts": 0,
    }
    assert data["partial"] is False and data["no_convergence"] is None
    assert [p["status"] for p in data["perspectives"]] == ["provided"] * 5


async def test_expected_archetypes_make_given_insights_partial(
    seed_records: list[dict[str, Any]],
) -> None:
    names = [r["archetype"] for r in seed_records]
    report = await synthesize_insights(seed_records[:4] + seed_records[4:], archetypes=names)
    assert report.partial is False
    report = await synthesize_insights(
        [r for r in seed_records if r["archetype"] != "critic"], archetypes=names
    )
    assert report.partial is True
    assert report.themes[0].score == pytest.approx(4 * 1.3 * 1.2)
    assert report.perspectives[1].status == "failed"
    with pytest.raises(UserError, match="'critic', which is not among the archetypes"):
        await synthesize_insights(seed_records, archetypes=["optimist", "analyst"])


async def test_state_file_is_replaced_atomically_and_keeps_other_keys(
    seed_records: list[dict[str, Any]], tmp_path: Path
) -> None:
    state = tmp_path / "workflow-state.yaml"
    report = await synthesize_insights(seed_records)
    write_state(state, report)
    data = yaml.safe_load(state.read_text())
    data["stage_4"] = {"summary": "kept"}
    state.write_text(yaml.safe_dump(data))
    before = os.stat(state).st_ino
    write_state(state, report)
    after = yaml.safe_load(state.read_text())
    assert after["stage_4"] == {"summary": "kept"}
    assert after["workflow"] == "synthesis" and after["schema_version"] == 1
    assert after["stage_3"]["grouping_method"] == "jaccard_fallback"
    assert after["stage_3"]["grouping_reason"] == "no_model: no model configured"
    assert os.stat(state).st_ino != before  # a new file renamed over the old one
    assert os.listdir(tmp_path) == ["workflow-state.yaml"]  # no temporary file left


async def test_state_file_of_another_workflow_is_not_overwritten(
    seed_records: list[dict[str, Any]], tmp_path: Path
) -> None:
    state = tmp_path / "workflow-state.yaml"
    original = "schema_version: 1\ngoal: ship it\natoms: []\n"
    state.write_text(original)
    report = await synthesize_insights(seed_records)
    with pytest.raises(UserError, match="is not a synthesis workflow state"):
        write_state(state, report)
    assert state.read_text() == original
