from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from convergent import ScriptedModel
from convergent.synthesis import (
    Insight,
    Theme,
    convergence_multiplier,
    score_themes,
    synthesize_insights,
)
from convergent.synthesis.scoring import research_bonus

from .conftest import SEED_THEMES, themes_json


@pytest.mark.parametrize(
    ("count", "full", "partial"),
    [(1, "1.0", "1.0"), (2, "1.5", "1.3"), (3, "2.0", "2.0"), (4, "2.5", "2.0"), (5, "2.5", "2.0")],
)
def test_multiplier_tables_match_steps_3_and_4(count: int, full: str, partial: str) -> None:
    assert convergence_multiplier(count) == Fraction(full)
    assert convergence_multiplier(count, partial=True) == Fraction(partial)


def test_research_bonus_adds_a_tenth_per_backed_member() -> None:
    members = [
        Insight(archetype=name, key_insight="x", confidence=3, research_backed=backed)
        for name, backed in (("a", True), ("b", True), ("c", False))
    ]
    assert research_bonus(members) == Fraction("1.2")
    assert research_bonus(members[2:]) == 1


def _assert_seed_report(report: Any) -> None:
    data = report.to_dict()
    assert [c["score"] for c in data["convergent_insights"]] == [7.2]
    growth = data["convergent_insights"][0]
    assert growth["convergence_count"] == 2
    assert growth["contributing_archetypes"] == ["optimist", "pragmatist"]
    assert growth["evidence"] == [
        "Regional demand doubled since 2020",
        "Existing distributor contacts in the region",
    ]
    divergent = data["divergent_insights"]
    assert [(d["archetype"], d["confidence"]) for d in divergent] == [
        ("critic", 5),
        ("analyst", 4),
        ("innovator", 3),
    ]
    assert all(
        d["note"] == "This perspective was not echoed by other archetypes" for d in divergent
    )
    assert [t.score for t in report.themes] == [7.2, 5.5, 4.4, 3.0]
    assert [t.theme.archetypes for t in report.themes] == [
        ("optimist", "pragmatist"),
        ("critic",),
        ("analyst",),
        ("innovator",),
    ]
    assert "no_convergence" not in data and "validation_warnings" not in data
    assert report.partial is False


async def test_seed_example_with_llm_grouping(seed_records: list[dict[str, Any]]) -> None:
    model = ScriptedModel([themes_json(SEED_THEMES)])
    report = await synthesize_insights(seed_records, model, retry_delay=0)
    model.assert_consumed()
    assert report.grouping.method == "llm"
    _assert_seed_report(report)
    assert [t.theme.description for t in report.themes] == [d for d, _ in SEED_THEMES]
    # the factors the seed lists for each group
    factors = [(t.avg_confidence, t.multiplier, t.research_bonus) for t in report.themes]
    assert factors == [
        (Fraction(4), Fraction("1.5"), Fraction("1.2")),
        (Fraction(5), Fraction(1), Fraction("1.1")),
        (Fraction(4), Fraction(1), Fraction("1.1")),
        (Fraction(3), Fraction(1), Fraction(1)),
    ]


async def test_seed_example_offline_with_jaccard(seed_records: list[dict[str, Any]]) -> None:
    report = await synthesize_insights(seed_records)
    assert report.grouping.method == "jaccard_fallback"
    assert report.grouping.reason == "no_model: no model configured"
    _assert_seed_report(report)


def test_partial_completion_uses_the_reduced_table() -> None:
    insights = {
        name: Insight(archetype=name, key_insight=name, confidence=4, research_backed=False)
        for name in ("a", "b", "c", "d")
    }
    themes = [Theme("t1", "three", ("a", "b", "c")), Theme("t2", "one", ("d",))]
    full = score_themes(themes, insights)
    partial = score_themes(themes, insights, partial=True)
    assert [t.score for t in full] == [8.0, 4.0]
    assert [t.score for t in partial] == [8.0, 4.0]
    pair = [Theme("t1", "two", ("a", "b")), Theme("t2", "c", ("c",)), Theme("t3", "d", ("d",))]
    assert score_themes(pair, insights)[0].score == 6.0
    assert score_themes(pair, insights, partial=True)[0].score == 5.2
    four = [Theme("t1", "all", ("a", "b", "c", "d"))]
    assert score_themes(four, insights)[0].score == 10.0
    assert score_themes(four, insights, partial=True)[0].score == 8.0


def test_ties_rank_by_count_then_confidence_then_input_order() -> None:
    insights = {
        "a": Insight(archetype="a", key_insight="a", confidence=3),
        "b": Insight(archetype="b", key_insight="b", confidence=3),
        "c": Insight(archetype="c", key_insight="c", confidence=2),
        "d": Insight(archetype="d", key_insight="d", confidence=4),
    }
    # c+d: mean 3 x 1.5 = 4.5; b alone: 3; a alone: 3 -> a before b by input order
    themes = [Theme("1", "b", ("b",)), Theme("2", "a", ("a",)), Theme("3", "cd", ("c", "d"))]
    ranked = score_themes(themes, insights)
    assert [t.theme.archetypes for t in ranked] == [("c", "d"), ("a",), ("b",)]
