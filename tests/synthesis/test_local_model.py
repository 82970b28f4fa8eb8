"""The whole pipeline on the embedded model: a valid report, whichever grouping path.

Three archetypes (not five) keep the run to well under a minute on one CPU thread;
the embedded 135M model is far too small for good insights, so only structure is
checked.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from convergent.models.registry import model_from_string
from convergent.synthesis import synthesize

pytest.importorskip("xllamacpp")
pytestmark = pytest.mark.local_model


async def test_synthesis_on_the_embedded_model(tmp_path: Path) -> None:
    state = tmp_path / "workflow-state.yaml"
    async with model_from_string("local") as model:
        report = await synthesize(
            "Should a small bakery open a second shop?",
            model,
            archetypes=["optimist", "critic", "pragmatist"],
            retry_delay=0,
            state_path=state,
        )
    assert report.insights, "at least one perspective must produce an insight"
    grouped = sorted(a for t in report.themes for a in t.theme.archetypes)
    assert grouped == sorted(i.archetype for i in report.insights)
    assert all(1 <= i.confidence <= 5 for i in report.insights)
    scores = [t.exact_score for t in report.themes]
    assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)
    data = yaml.safe_load(report.to_yaml())
    assert len(data["convergent_insights"]) + len(data["divergent_insights"]) == len(report.themes)
    stage_3 = yaml.safe_load(state.read_text())["stage_3"]
    assert stage_3["grouping_method"] == report.grouping.method
    if report.grouping.method == "llm":
        assert stage_3["fallback_trigger"] is None
    else:
        assert stage_3["fallback_trigger"] is not None and stage_3["grouping_reason"]
