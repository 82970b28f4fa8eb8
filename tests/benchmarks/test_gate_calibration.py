from __future__ import annotations

import pytest
from benchmarks.gate_calibration import (
    SCENARIOS,
    brier_score,
    expected_calibration_error,
    precision_recall,
    run_calibration,
    scripted_scorer,
)


def test_precision_and_recall_of_asking() -> None:
    asked = [True, True, False, False, True]
    wrong = [True, False, True, False, True]
    assert precision_recall(asked, wrong) == pytest.approx((2 / 3, 2 / 3))
    assert precision_recall([False], [False]) == (0.0, 0.0)


def test_expected_calibration_error() -> None:
    assert expected_calibration_error([1.0, 1.0, 0.0, 0.0], [True, True, False, False]) == 0.0
    # One bin at 0.9 where half are right: gap 0.4.
    assert expected_calibration_error([0.9, 0.9], [True, False]) == pytest.approx(0.4)
    # Two bins of two: |0.8 - 1.0| and |0.3 - 0.5|, equally weighted.
    assert expected_calibration_error(
        [0.8, 0.8, 0.3, 0.3], [True, True, True, False]
    ) == pytest.approx(0.2)
    assert expected_calibration_error([], []) == 0.0


def test_brier_score() -> None:
    assert brier_score([1.0, 0.0], [True, False]) == 0.0
    assert brier_score([0.5, 0.5], [True, False]) == pytest.approx(0.25)


def test_the_scenarios_are_balanced_and_runnable() -> None:
    assert sum(s.right for s in SCENARIOS) == sum(not s.right for s in SCENARIOS) == 12
    assert len({s.name for s in SCENARIOS}) == len(SCENARIOS)
    assert all(s.corrected for s in SCENARIOS if not s.right)


async def test_calibration_with_the_scripted_scorer() -> None:
    report = await run_calibration(scripted_scorer(), threshold=0.85)

    assert len(report.results) == 24 and report.unusable_scores == 0
    # Scripted scores: two wrong proposals score >= 0.85 (missed), two right ones < 0.85.
    assert (report.precision, report.recall) == pytest.approx((10 / 12, 10 / 12))
    assert (report.wrong_executed_baseline, report.wrong_executed, report.right_asked) == (12, 2, 2)
    missed = {r.name for r in report.results if r.wrong_executed}
    assert missed == {"mercury-level", "mute-notifications"}
    # Every run scores its proposal; each asked run adds a question, a new proposal and its score.
    assert report.scorer_requests == 24 + 12
    assert report.extra_requests_per_run == pytest.approx((12 * 1 + 12 * 3) / 24)
    point = {p.threshold: p for p in report.sweep}
    assert point[0.85].precision == pytest.approx(report.precision)
    assert (point[0.95].recall, point[0.5].precision) == (1.0, 1.0)
    assert 0.0 < report.ece < 0.5
    assert report.to_dict()["results"][0]["name"] == "multiply"
