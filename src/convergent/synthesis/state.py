"""The synthesis entry of ``workflow-state.yaml``: per-agent records and ``stage_3``.

``stage_3.grouping_method`` says whether the themes came from the LLM or from the
Jaccard fallback, and why, so that grouping reliability can be analysed afterwards.
Each agent's entry carries its validation warnings. The file is replaced atomically
(temporary file, then rename); keys this module does not own are preserved.
"""

from __future__ import annotations

import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from convergent.exceptions import UserError
from convergent.synthesis.perspectives import PerspectiveResult
from convergent.synthesis.report import SynthesisReport

__all__ = ["STATE_FILE_NAME", "STATE_SCHEMA_VERSION", "state_dict", "write_state"]

STATE_FILE_NAME = "workflow-state.yaml"
"""Default file name of the workflow state."""
STATE_SCHEMA_VERSION = 1
"""Version of the layout written here."""
WORKFLOW = "synthesis"
"""Value of the top-level ``workflow`` key that marks a file as ours."""


def _agent_entry(result: PerspectiveResult) -> dict[str, Any]:
    insight = result.insight
    entry: dict[str, Any] = {
        "status": result.status,
        "raw_confidence": result.raw_confidence,
        "confidence": insight.confidence if insight else None,
        "research_backed": insight.research_backed if insight else None,
        "validation_warnings": list(result.validation_warnings),
        "notes": list(result.notes),
        "error": result.error,
        "stop_reason": result.stop_reason.value if result.stop_reason else None,
        "duration_seconds": round(result.duration, 3),
    }
    if result.research is not None:
        entry["searches"] = {
            "successful": result.research.successful,
            "failed": result.research.failed,
            "empty": result.research.empty,
            "invalid": result.research.invalid,
        }
    return entry


def state_dict(report: SynthesisReport) -> dict[str, Any]:
    """The keys this module writes into the workflow state."""
    grouping = report.grouping
    portfolio = report.no_convergence
    completed = [p.archetype for p in report.perspectives if p.insight is not None]
    return {
        "schema_version": STATE_SCHEMA_VERSION,
        "workflow": WORKFLOW,
        "updated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "prompt": report.prompt,
        "agents": {p.archetype: _agent_entry(p) for p in report.perspectives},
        "stage_2": {
            "requested": list(report.requested),
            "completed": completed,
            "missing": [a for a in report.requested if a not in completed],
            "partial": report.partial,
        },
        "stage_3": {
            "grouping_method": grouping.method,
            "fallback_trigger": grouping.trigger.value if grouping.trigger else None,
            "grouping_reason": grouping.reason,
            "llm_attempts": [
                {
                    "attempt": a.number,
                    "outcome": a.outcome,
                    "detail": a.detail,
                    "latency_seconds": round(a.latency, 3),
                }
                for a in grouping.attempts
            ],
            "themes": len(report.themes),
            "convergent": len(report.convergent),
            "divergent": len(report.divergent),
            "no_convergence": portfolio.diagnosis.value if portfolio else None,
            "validation_warnings": list(report.validation_warnings),
        },
    }


def _existing(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read state file {path}: {exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        data = None
    if data is None and not text.strip():
        return {}
    if not isinstance(data, dict) or data.get("workflow") != WORKFLOW:
        raise UserError(f"{path} exists and is not a synthesis workflow state; choose another path")
    return data


def write_state(path: str | Path, report: SynthesisReport) -> Path:
    """Write (or update) the workflow state for ``report`` atomically.

    Raises:
        UserError: If the file belongs to another workflow (for example the
            coordinator's) or cannot be written.
    """
    target = Path(path)
    data = _existing(target)
    data.update(state_dict(report))
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp_name, target)
        except BaseException:
            Path(tmp_name).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise UserError(f"cannot write state file {target}: {exc.strerror or exc}") from None
    return target
