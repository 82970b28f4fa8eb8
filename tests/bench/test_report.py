"""Report rendering: JSON shape, markdown tables and PNG charts."""

from __future__ import annotations

from pathlib import Path

import pytest

from convergent.bench.report import (
    BenchReport,
    PolicyStats,
    SuiteResult,
    render_markdown,
    write_report,
)


def _report() -> BenchReport:
    good = PolicyStats(tasks=10, false_positives=0, false_negatives=0, correct=10)
    bad = PolicyStats(tasks=10, false_positives=3, false_negatives=2, correct=5, extra_cycles=9)
    suite = SuiteResult(
        suite="convergence",
        policies={"objective": good, "subjective": bad},
        breakdown={"sequential": {"objective": good, "subjective": bad}},
        details={"seed": 0},
        notes=("a note",),
    )
    skipped = SuiteResult(suite="live", policies={}, skipped="model 'local' is not available")
    return BenchReport(
        seed=0, suites={"convergence": suite, "live": skipped}, command="convergent bench"
    )


def test_rates_and_json_shape() -> None:
    data = _report().to_dict()
    subjective = data["suites"]["convergence"]["policies"]["subjective"]
    assert subjective["false_positive_rate"] == 0.3
    assert subjective["false_negative_rate"] == 0.2
    assert subjective["accuracy"] == 0.5
    assert subjective["mean_extra_cycles"] == 0.9
    assert data["suites"]["convergence"]["scenarios"]["sequential"]["objective"]["tasks"] == 10
    assert data["suites"]["live"]["skipped"] == "model 'local' is not available"
    empty = PolicyStats(tasks=0, false_positives=0, false_negatives=0, correct=0)
    assert empty.accuracy == 0.0 and (empty + empty).tasks == 0


def test_markdown_has_tables_and_skips() -> None:
    text = render_markdown(_report())
    assert "| subjective | 10 | 30.0% | 20.0% | 50.0% | 0.90 |" in text
    assert "| sequential | objective | 10 | 0.0% | 0.0% | 100.0% | 0.00 |" in text
    assert "Skipped: model 'local' is not available" in text
    assert "- a note" in text


def test_write_report_writes_every_file(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    written = write_report(_report(), tmp_path)
    names = sorted(path.name for path in written)
    assert names == ["bench.json", "bench.md", "convergence_rates.png"]
    assert (tmp_path / "convergence_rates.png").stat().st_size > 5000
