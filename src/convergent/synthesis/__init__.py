"""Multi-perspective convergence synthesis (seed 004).

Several archetype perspectives answer one question; their insights are grouped by
theme (LLM with a JSON schema, Jaccard keyword overlap as the fallback) and ranked by
``mean confidence x convergence multiplier x research bonus``. Confidence ranks
insights here; it never decides when anything stops.
"""

from convergent.synthesis.archetypes import (
    DEFAULT_ARCHETYPES,
    Archetype,
    parse_archetypes,
    resolve_archetypes,
)
from convergent.synthesis.grouping import (
    GROUPING_PROMPT,
    GROUPING_SCHEMA,
    JACCARD_THRESHOLD,
    FallbackTrigger,
    GroupingResult,
    Theme,
    extract_keywords,
    group_insights,
    jaccard_groups,
    keyword_overlap_jaccard,
)
from convergent.synthesis.insights import (
    Insight,
    InsightRecord,
    ResearchTally,
    load_insights,
    validate_confidence,
)
from convergent.synthesis.perspectives import PerspectiveResult, run_perspectives
from convergent.synthesis.pipeline import synthesize, synthesize_insights
from convergent.synthesis.report import Diagnosis, NoConvergence, SynthesisReport
from convergent.synthesis.scoring import ScoredTheme, convergence_multiplier, score_themes
from convergent.synthesis.state import write_state

__all__ = [
    "DEFAULT_ARCHETYPES",
    "GROUPING_PROMPT",
    "GROUPING_SCHEMA",
    "JACCARD_THRESHOLD",
    "Archetype",
    "Diagnosis",
    "FallbackTrigger",
    "GroupingResult",
    "Insight",
    "InsightRecord",
    "NoConvergence",
    "PerspectiveResult",
    "ResearchTally",
    "ScoredTheme",
    "SynthesisReport",
    "Theme",
    "convergence_multiplier",
    "extract_keywords",
    "group_insights",
    "jaccard_groups",
    "keyword_overlap_jaccard",
    "load_insights",
    "parse_archetypes",
    "resolve_archetypes",
    "run_perspectives",
    "score_themes",
    "synthesize",
    "synthesize_insights",
    "validate_confidence",
    "write_state",
]
