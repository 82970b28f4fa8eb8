from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from convergent import ModelError, ScriptedModel, ToolError, UserError, tool
from convergent.exceptions import ScriptExhaustedError
from convergent.synthesis import Archetype, parse_archetypes, synthesize

from .conftest import SEED_RECORDS, SEED_THEMES, SynthesisScript, extraction, themes_json

EXTRACTIONS = {r["archetype"]: extraction(r) for r in SEED_RECORDS}


@tool
def web_search(query: str) -> list[str]:
    """Search the web.

    Args:
        query: What to look for.
    """
    if query == "down":
        raise ToolError("search service unavailable (HTTP 503)")
    if query == "nothing":
        return []
    return [f"result for {query}"]


async def test_seed_example_through_perspectives_with_research(tmp_path: Any) -> None:
    # research as in the seed's table: everyone but the innovator finds something
    script = SynthesisScript(
        insights={**EXTRACTIONS, "critic": {**EXTRACTIONS["critic"], "research_backed": False}},
        grouping=[themes_json(SEED_THEMES)],
        searches={
            "optimist": ["asia growth"],
            "critic": ["privacy law", "down"],
            "analyst": ["market survey"],
            "innovator": ["nothing", "nothing"],
            "pragmatist": ["distributors"],
        },
    )
    # the innovator found nothing: its confidence drops from 4 to the seed's 3
    script.insights["innovator"] = {**EXTRACTIONS["innovator"], "confidence": 4}
    state = tmp_path / "workflow-state.yaml"
    report = await synthesize(
        "Should we expand into Asia?",
        script.model(),
        research=web_search,
        retry_delay=0,
        state_path=state,
    )
    assert report.grouping.method == "llm"
    assert [t.score for t in report.themes] == [7.2, 5.5, 4.4, 3.0]
    backed = {i.archetype: i.research_backed for i in report.insights}
    assert backed == {
        "optimist": True,
        "critic": True,
        "analyst": True,
        "innovator": False,
        "pragmatist": True,
    }
    innovator = report.perspectives[3]
    assert innovator.raw_confidence == 4 and innovator.insight is not None
    assert innovator.insight.confidence == 3
    assert innovator.notes == ("0 successful searches: confidence 4 -> 3",)
    data = yaml.safe_load(state.read_text())
    assert data["agents"]["critic"]["searches"] == {
        "successful": 1,
        "failed": 1,
        "empty": 0,
        "invalid": 0,
    }
    assert data["stage_3"]["grouping_method"] == "llm"
    assert data["stage_2"]["partial"] is False


async def test_model_claims_do_not_make_research_backed() -> None:
    claims = {name: {**e, "research_backed": True} for name, e in EXTRACTIONS.items()}
    script = SynthesisScript(
        insights=claims,
        grouping=[themes_json(SEED_THEMES)],
        searches={"critic": ["down", "down"]},
    )
    report = await synthesize("q", script.model(), research=web_search, retry_delay=0)
    critic = report.perspectives[1]
    assert critic.insight is not None
    assert critic.insight.research_backed is False
    assert critic.insight.confidence == 4  # 5, minus one: service unavailable
    assert "limited research" in critic.notes
    assert all(not i.research_backed for i in report.insights)
    assert "- critic: limited research" in report.to_markdown()


async def test_without_a_research_tool_nothing_is_adjusted() -> None:
    script = SynthesisScript(insights=EXTRACTIONS, grouping=[themes_json(SEED_THEMES)])
    report = await synthesize("q", script.model(), retry_delay=0)
    assert [i.confidence for i in report.insights] == [4, 5, 4, 3, 4]
    assert all(p.research is None and p.notes == () for p in report.perspectives)
    # research_backed is False for all, so no bonus: 4 x 1.5 = 6.0
    assert report.themes[0].score == 6.0


async def test_perspectives_run_concurrently() -> None:
    script = SynthesisScript(
        insights=EXTRACTIONS,
        grouping=[themes_json(SEED_THEMES)],
        delays={name: 0.3 for name in EXTRACTIONS},
    )
    report = await synthesize("q", script.model(), retry_delay=0)
    # every perspective's delayed request was in flight at the same moment
    assert script.max_in_flight == 5
    assert len(report.insights) == 5


async def test_timed_out_perspective_makes_a_partial_run(tmp_path: Any) -> None:
    script = SynthesisScript(
        insights=EXTRACTIONS,
        grouping=[themes_json([t for t in SEED_THEMES if t[0] != "Platform approach"])],
        delays={"innovator": 10},
    )
    state = tmp_path / "workflow-state.yaml"
    report = await synthesize(
        "q", script.model(), perspective_timeout=0.2, retry_delay=0, state_path=state
    )
    innovator = report.perspectives[3]
    assert innovator.status == "timed_out" and innovator.insight is None
    assert report.partial is True
    # Step 4: a pair scores 1.3 instead of 1.5 (research_backed is False without a tool)
    assert [t.score for t in report.themes] == [5.2, 5.0, 4.0]
    assert report.themes[0].multiplier == pytest.approx(1.3)
    data = yaml.safe_load(state.read_text())
    assert data["stage_2"]["missing"] == ["innovator"]
    assert data["agents"]["innovator"]["status"] == "timed_out"
    assert "Partial run: missing innovator (timed_out)" in report.to_markdown()


async def test_failing_perspectives_are_partial_and_grouping_ids_follow() -> None:
    script = SynthesisScript(
        insights=EXTRACTIONS,
        grouping=[
            themes_json(
                [
                    ("Growth", ["optimist_insight", "pragmatist_insight", "analyst_insight"]),
                    ("Platform", ["innovator_insight"]),
                ]
            )
        ],
        failures={"critic": ModelError("HTTP 500: boom")},
    )
    report = await synthesize("q", script.model(), retry_delay=0)
    assert report.perspectives[1].status == "failed"
    assert report.perspectives[1].error == "agent run ended model_error: HTTP 500: boom"
    assert "critic_insight" not in script.grouping_prompts[0]
    assert "Analyze these 4 insights" in script.grouping_prompts[0]
    # 3 agreeing under the partial table: 2.0 (4+4+4)/3 = 4 -> 8.0
    assert report.themes[0].score == 8.0 and report.partial


async def test_all_perspectives_failing_raises() -> None:
    script = SynthesisScript(
        insights=EXTRACTIONS,
        failures={name: ModelError("down") for name in EXTRACTIONS},
    )
    with pytest.raises(ModelError, match="all 5 perspectives failed; optimist: "):
        await synthesize("q", script.model(), retry_delay=0)


async def test_extraction_is_retried_once_then_the_perspective_fails() -> None:
    script = SynthesisScript(
        insights={
            **EXTRACTIONS,
            "optimist": ["I think growth.", json.dumps(EXTRACTIONS["optimist"])],
            "critic": ["nope", '{"key_insight": "x"}'],
        },
        grouping=[themes_json([t for t in SEED_THEMES if t[0] != "Regulatory risk"])],
    )
    report = await synthesize("q", script.model(), retry_delay=0)
    assert script.extraction_counts["optimist"] == 2
    assert report.perspectives[0].status == "completed"
    critic = report.perspectives[1]
    assert critic.status == "failed"
    assert critic.error is not None and "confidence: Field required" in critic.error


async def test_out_of_range_model_confidence_is_clamped() -> None:
    script = SynthesisScript(
        insights={**EXTRACTIONS, "critic": {**EXTRACTIONS["critic"], "confidence": 7}},
        grouping=[themes_json(SEED_THEMES)],
    )
    report = await synthesize("q", script.model(), retry_delay=0)
    assert report.validation_warnings == ("critic: Confidence above maximum, set to 5",)
    assert report.perspectives[1].raw_confidence == 7


async def test_custom_archetypes() -> None:
    archetypes: list[str | Archetype] = [
        Archetype("optimist", "You are the Optimist. Be hopeful."),
        "critic",
    ]
    model = SynthesisScript(insights=EXTRACTIONS).model()
    report = await synthesize("q", model, archetypes=archetypes, grouping_model=None)
    assert report.requested == ("optimist", "critic")
    systems = {request.messages[0].content for request in model.requests}
    assert "You are the Optimist. Be hopeful." in systems
    assert len(model.requests) == 4  # two perspectives x (answer + extraction), no grouping
    assert report.grouping.reason == "no_model: no model configured"


@pytest.mark.parametrize(
    ("archetypes", "message"),
    [
        (["optimist", "wizard"], "unknown archetype 'wizard'"),
        (["critic", "critic"], "archetype 'critic' is listed twice"),
        (["critic"], "at least two archetypes"),
    ],
)
async def test_bad_archetypes_are_user_errors(archetypes: list[str], message: str) -> None:
    with pytest.raises(UserError, match=message):
        await synthesize("q", SynthesisScript(insights={}).model(), archetypes=archetypes)


async def test_an_exhausted_script_surfaces_as_the_user_error_itself() -> None:
    with pytest.raises(ScriptExhaustedError):
        await synthesize("q", ScriptedModel(["only one reply"]), retry_delay=0)


def test_parse_archetypes_mixes_defaults_and_custom() -> None:
    chosen = parse_archetypes("Optimist, security=You are the Security reviewer.")
    assert [a.name for a in chosen] == ["optimist", "security"]
    assert chosen[1].stance == "You are the Security reviewer."
    assert chosen[0].insight_id == "optimist_insight"
    with pytest.raises(UserError, match="empty entry"):
        parse_archetypes("optimist,,critic")
    with pytest.raises(UserError, match="lowercase identifier"):
        parse_archetypes("optimist,bad name=x")


async def test_untyped_research_function_is_a_user_error() -> None:
    def search(query):  # type: ignore[no-untyped-def]
        return []

    with pytest.raises(UserError, match="needs a type hint"):
        await synthesize("q", SynthesisScript(insights={}).model(), research=search)
