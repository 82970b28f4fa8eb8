from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import pytest

from convergent import ModelError, ModelResponse, ScriptedModel
from convergent.messages import Message, ToolSpec
from convergent.synthesis import (
    GROUPING_SCHEMA,
    FallbackTrigger,
    GroupingResult,
    Insight,
    extract_keywords,
    group_insights,
    jaccard_groups,
    keyword_overlap_jaccard,
)

from .conftest import SEED_RECORDS, SEED_THEMES, themes_json

SEED = [Insight.model_validate(r) for r in SEED_RECORDS]
ALL_IDS = [i.insight_id for i in SEED]
SEED_JACCARD = (("optimist", "pragmatist"), ("critic",), ("analyst",), ("innovator",))


def _archetypes(result: GroupingResult) -> list[tuple[str, ...]]:
    return [t.archetypes for t in result.themes]


async def _group(replies: list[str | BaseException]) -> tuple[GroupingResult, list[str]]:
    prompts: list[str] = []
    script = list(replies)

    def respond(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        prompts.append(messages[0].content)
        step = script.pop(0)
        if isinstance(step, BaseException):
            raise step
        return ModelResponse(content=step)

    result = await group_insights(SEED, ScriptedModel(respond), retry_delay=0)
    assert not script, "every scripted grouping reply should have been requested"
    return result, prompts


async def test_prompt_is_the_refined_template_with_schema_and_ids() -> None:
    result, prompts = await _group([themes_json(SEED_THEMES)])
    assert result.method == "llm" and result.trigger is None and result.reason is None
    prompt = prompts[0]
    assert prompt.startswith(
        "Analyze these 5 insights and group them by thematic similarity.\n"
        "Return ONLY valid JSON matching the schema below. No preamble or explanation.\n\n"
        f"Schema: {json.dumps(GROUPING_SCHEMA)}\n\n"
        "Rules:\n- Each insight must appear in exactly one theme\n"
    )
    for record in SEED_RECORDS:
        assert f"- {record['archetype']}_insight: {record['key_insight']}" in prompt
    assert _archetypes(result) == list(SEED_JACCARD)


async def test_schema_is_the_seeds() -> None:
    item = GROUPING_SCHEMA["properties"]["themes"]["items"]
    assert GROUPING_SCHEMA["required"] == ["themes"]
    assert item["required"] == ["theme_id", "theme_description", "insight_ids"]
    assert item["properties"]["insight_ids"] == {"type": "array", "items": {"type": "string"}}


async def test_code_fenced_reply_is_accepted() -> None:
    result, _ = await _group(["```json\n" + themes_json(SEED_THEMES) + "\n```"])
    assert result.method == "llm"


async def test_invalid_json_twice_falls_back() -> None:
    result, prompts = await _group(["Here are the themes: growth", '{"themes": "nope"}'])
    assert result.method == "jaccard_fallback"
    assert result.trigger is FallbackTrigger.INVALID_JSON
    assert [a.outcome for a in result.attempts] == ["invalid_json", "invalid_json"]
    assert "not valid JSON matching the schema" in prompts[1]
    assert _archetypes(result) == list(SEED_JACCARD)


async def test_invalid_json_then_valid_reply_uses_the_llm() -> None:
    result, _ = await _group(["not json", themes_json(SEED_THEMES)])
    assert result.method == "llm"
    assert [a.outcome for a in result.attempts] == ["invalid_json", "ok"]


async def test_a_too_deeply_nested_reply_is_invalid_json_then_retried() -> None:
    result, prompts = await _group(["[" * 100_000 + "]" * 100_000, themes_json(SEED_THEMES)])
    assert result.method == "llm"
    assert [a.outcome for a in result.attempts] == ["invalid_json", "ok"]
    assert "nested too deeply" in prompts[1]


async def test_one_theme_is_collapsed_without_retry() -> None:
    result, prompts = await _group([themes_json([("Everything", ALL_IDS)])])
    assert (result.method, result.trigger) == ("jaccard_fallback", FallbackTrigger.COLLAPSED)
    assert result.reason == "collapsed: all 5 insights in a single theme"
    assert len(prompts) == 1


async def test_zero_themes_is_collapsed() -> None:
    result, _ = await _group(['{"themes": []}'])
    assert result.trigger is FallbackTrigger.COLLAPSED
    assert result.reason == "collapsed: 0 themes returned"


async def test_all_singletons_is_fragmented() -> None:
    result, prompts = await _group([themes_json([(i, [i]) for i in ALL_IDS])])
    assert (result.method, result.trigger) == ("jaccard_fallback", FallbackTrigger.FRAGMENTED)
    assert len(prompts) == 1
    assert _archetypes(result) == list(SEED_JACCARD)


WRONG_IDS = [
    ("Growth", ["Optimist", "pragmatist_insight"]),
    ("Risk", ["critic_insight", "critic_insight"]),
    ("Other", ["innovator_insight"]),
]


async def test_wrong_ids_retry_with_explicit_instruction_then_succeed() -> None:
    result, prompts = await _group([themes_json(WRONG_IDS), themes_json(SEED_THEMES)])
    assert result.method == "llm"
    assert [a.outcome for a in result.attempts] == ["invalid_ids", "ok"]
    assert result.attempts[0].detail == (
        "unknown: Optimist; repeated: critic_insight; missing: optimist_insight, analyst_insight"
    )
    retry = prompts[1]
    assert "form {archetype}_insight" in retry
    assert "each exactly once across all themes: " + ", ".join(ALL_IDS) in retry


async def test_wrong_ids_twice_falls_back() -> None:
    result, prompts = await _group([themes_json(WRONG_IDS), themes_json(WRONG_IDS)])
    assert (result.method, result.trigger) == ("jaccard_fallback", FallbackTrigger.INVALID_IDS)
    assert len(prompts) == 2


async def test_model_raising_twice_falls_back() -> None:
    result, prompts = await _group([ModelError("HTTP 503"), ModelError("HTTP 503")])
    assert (result.method, result.trigger) == (
        "jaccard_fallback",
        FallbackTrigger.MODEL_UNAVAILABLE,
    )
    assert result.reason == "model_unavailable: HTTP 503"
    assert len(prompts) == 2


async def test_model_raising_once_then_answering_uses_the_llm() -> None:
    result, _ = await _group([ModelError("timeout"), themes_json(SEED_THEMES)])
    assert result.method == "llm"


async def test_slow_model_exceeds_latency_and_is_not_retried() -> None:
    calls = 0

    async def slow(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        nonlocal calls
        calls += 1
        await asyncio.sleep(5)
        return ModelResponse(content=themes_json(SEED_THEMES))

    result = await group_insights(SEED, ScriptedModel(slow), latency_limit=0.05, retry_delay=0)
    assert (result.method, result.trigger) == (
        "jaccard_fallback",
        FallbackTrigger.LATENCY_EXCEEDED,
    )
    assert calls == 1
    assert result.attempts[0].latency < 1


async def test_retry_waits_the_retry_delay() -> None:
    model = ScriptedModel(["not json", themes_json(SEED_THEMES)])
    loop = asyncio.get_running_loop()
    started = loop.time()
    result = await group_insights(SEED, model, retry_delay=0.2)
    assert result.method == "llm"
    assert loop.time() - started >= 0.2


async def test_fewer_than_two_insights_need_no_model() -> None:
    model = ScriptedModel([])
    result = await group_insights(SEED[:1], model)
    assert result.trigger is FallbackTrigger.TOO_FEW_INSIGHTS
    assert _archetypes(result) == [("optimist",)]
    assert model.requests == []


def test_keywords_fold_case_plurals_and_stop_words() -> None:
    assert extract_keywords("The Risks of new Opportunities, and a risk") == {
        "risk",
        "new",
        "opportunity",
    }


def test_jaccard_threshold_is_strict() -> None:
    # {alpha, beta, gamma} vs {gamma, delta, omega}: 1/5 = 0.2; vs {alpha, beta, delta}: 2/4
    assert keyword_overlap_jaccard("alpha beta gamma", "gamma delta omega") == pytest.approx(0.2)
    assert keyword_overlap_jaccard("alpha beta gamma", "alpha beta delta") == 0.5
    # 3 shared of 10 in the union: exactly 0.3 does not link
    a = "one1 two2 thr3 fou4 fiv5 six6 sev7"
    b = "one1 two2 thr3 eig8 nin9 ten0"
    assert keyword_overlap_jaccard(a, b) == pytest.approx(0.3)
    pair = [
        Insight(archetype="a", key_insight=a, confidence=3),
        Insight(archetype="b", key_insight=b, confidence=3),
    ]
    assert [t.archetypes for t in jaccard_groups(pair)] == [("a",), ("b",)]


def test_jaccard_groups_are_connected_components_in_input_order() -> None:
    texts = {
        "x": "solar panels roof",
        "a": "cheap solar energy storage",
        "y": "unrelated legal contract",
        "b": "energy storage batteries grid",
        "c": "batteries grid upgrade",
    }
    insights = [Insight(archetype=k, key_insight=v, confidence=3) for k, v in texts.items()]
    # a~b (2/6 > 0.3), b~c (2/5), a and c share nothing: single linkage joins all three
    assert keyword_overlap_jaccard(insights[1], insights[4]) == 0
    themes = jaccard_groups(insights)
    assert [t.archetypes for t in themes] == [("x",), ("a", "b", "c"), ("y",)]
    assert [t.theme_id for t in themes] == ["theme_1", "theme_2", "theme_3"]
    assert themes[1].description == "Shared keywords: battery, energy, grid, storage"
    assert themes[0].description == "solar panels roof"
    assert jaccard_groups(list(reversed(insights)))[0].archetypes == ("c", "b", "a")
