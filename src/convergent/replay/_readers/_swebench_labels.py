"""SWE-bench evaluation results beside a folder of runs: which instances were resolved.

Looked for in the run file's folder and up to three folders above it, nearest first,
along the path as given (through links) and then along the file's real location, and in
each such folder's ``results/`` child (the SWE-bench experiments layout keeps
``<run>/trajs/`` beside ``<run>/results/``). The first folder holding one of these
evaluations gives the labels:

- ``results_summary.json`` (mini-swe-agent): ``instances[].resolved`` for each instance;
- ``final_report.json`` (SWE-agent's evaluation): ``resolved`` instance ids; it covers
  the runs of its folder, so every other run there failed (no patch, or not resolved);
- ``results.json``: the SWE-bench harness's report under that name (as below, its
  resolved ids in ``resolved``), or SWE-agent's evaluation: ``resolved`` ids, and the
  instances it evaluated in its other lists (``generated``, ``applied``,
  ``no_generation``...), the unresolved among them failed; with ``resolved`` alone, it
  covers its folder as above;
- a SWE-bench harness or ``sb-cli`` report (``report.json`` or any ``*.json`` with
  ``resolved_ids``): ``resolved_ids`` succeeded; ``unresolved_ids``, ``empty_patch_ids``
  and ``error_ids`` failed (a report without those lists: its ``submitted_ids`` and
  ``completed_ids`` not resolved failed); ``incomplete_ids`` were not evaluated;
- the harness's per-instance reports (``{instance: {"resolved": bool}}`` in
  ``<id>/report.json``), found under ``eval_results/*/`` or ``logs/run_evaluation/*/*/``
  of one of those folders.

An instance an evaluation does not cover has no label.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convergent.replay._readers._common import FormatMismatch, load_json

__all__ = ["swebench_label"]

_LEVELS = 4
_MAX_REPORT_BYTES = 64 * 1024**2
_NOT_RESOLVED = ("unresolved_ids", "empty_patch_ids", "error_ids")
_SUBMITTED = ("submitted_ids", "completed_ids")
_PER_INSTANCE = ("eval_results/*/*/report.json", "logs/run_evaluation/*/*/*/report.json")
_MAX_PER_INSTANCE = 100_000


@dataclass(frozen=True, slots=True)
class _Evaluation:
    """What one evaluation file says."""

    resolved: frozenset[str]
    """Instances resolved."""
    failed: frozenset[str] = frozenset()
    """Instances evaluated and not resolved."""
    whole_folder: bool = False
    """Whether every run under the evaluation's folder was evaluated."""

    def label(self, instance: str) -> bool | None:
        if instance in self.resolved:
            return True
        if instance in self.failed or self.whole_folder:
            return False
        return None


def swebench_label(run_file: Path, instance: str) -> bool | None:
    """Whether the evaluation beside ``run_file`` resolved ``instance`` (None: unknown)."""
    for folder in _folders(run_file):
        for place in (folder, folder / "results"):
            evaluation = _evaluation_in(place)
            if evaluation is not None:
                return evaluation.label(instance)
        per_instance = _per_instance_in(folder)
        if instance in per_instance:
            return per_instance[instance]
    return None


def _folders(run_file: Path) -> Iterator[Path]:
    """The run's folder and those above it: along the path given, then the real one."""
    seen: set[Path] = set()
    for start in (Path(os.path.abspath(run_file)).parent, run_file.resolve().parent):
        folder = start
        for _ in range(_LEVELS):
            if folder not in seen:
                seen.add(folder)
                yield folder
            if folder.parent == folder:
                break
            folder = folder.parent


def _ids(value: Any) -> frozenset[str]:
    return frozenset(map(str, value)) if isinstance(value, list) else frozenset()


@functools.lru_cache(maxsize=256)
def _evaluation_in(folder: Path) -> _Evaluation | None:
    summary = _load(folder / "results_summary.json")
    if isinstance(summary, dict) and isinstance(summary.get("instances"), list):
        items = [item for item in summary["instances"] if isinstance(item, dict)]
        return _Evaluation(
            resolved=frozenset(str(i["instance_id"]) for i in items if i.get("resolved") is True),
            failed=frozenset(
                str(i["instance_id"]) for i in items if "instance_id" in i and not i.get("resolved")
            ),
        )
    final = _load(folder / "final_report.json")
    if isinstance(final, dict) and isinstance(final.get("resolved"), list):
        return _Evaluation(resolved=_ids(final["resolved"]), whole_folder=True)
    results = _load(folder / "results.json")
    if isinstance(results, dict) and isinstance(results.get("resolved"), list):
        if any(key.endswith("_ids") for key in results):  # the harness's report
            return _harness(results, _ids(results["resolved"]))
        resolved = _ids(results["resolved"])
        evaluated = frozenset().union(
            *(_ids(value) for key, value in results.items() if key != "resolved")
        )
        return _Evaluation(resolved, evaluated - resolved, whole_folder=not evaluated)
    for candidate in sorted(folder.glob("*.json")):
        if candidate.name.endswith(".traj.json"):
            continue
        found = _harness_report(candidate)
        if found is not None:
            return found
    return None


def _harness_report(path: Path) -> _Evaluation | None:
    """A SWE-bench harness (or sb-cli) report, or a per-instance ``report.json``."""
    if path.name != "report.json" and not _mentions(path, b"resolved_ids"):
        return None
    report = _load(path)
    if not isinstance(report, dict):
        return None
    if isinstance(report.get("resolved_ids"), list):
        return _harness(report, _ids(report["resolved_ids"]))
    per_instance = _instance_labels(report)
    if not per_instance:
        return None
    return _Evaluation(
        resolved=frozenset(key for key, value in per_instance.items() if value),
        failed=frozenset(key for key, value in per_instance.items() if not value),
    )


def _harness(report: Mapping[str, Any], resolved: frozenset[str]) -> _Evaluation:
    """The harness's report: its lists of unresolved ids failed; incomplete ones unknown."""
    listed = [key for key in _NOT_RESOLVED if key in report]
    failed = frozenset().union(*(_ids(report.get(key)) for key in listed or _SUBMITTED))
    return _Evaluation(resolved, failed - resolved - _ids(report.get("incomplete_ids")))


def _instance_labels(report: Mapping[str, Any]) -> dict[str, bool]:
    return {
        str(key): value["resolved"]
        for key, value in report.items()
        if isinstance(value, Mapping) and isinstance(value.get("resolved"), bool)
    }


@functools.lru_cache(maxsize=256)
def _per_instance_in(folder: Path) -> Mapping[str, bool]:
    """The labels of the harness's per-instance reports under ``folder``."""
    labels: dict[str, bool] = {}
    for pattern in _PER_INSTANCE:
        for count, path in enumerate(sorted(folder.glob(pattern))):
            if count >= _MAX_PER_INSTANCE:
                break
            report = _load(path)
            if isinstance(report, dict):
                labels.update(_instance_labels(report))
    return labels


def _load(path: Path) -> Any:
    try:
        if not path.is_file() or path.stat().st_size > _MAX_REPORT_BYTES:
            return None
        return load_json(path)
    except (FormatMismatch, OSError):
        return None


def _mentions(path: Path, word: bytes) -> bool:
    try:
        with path.open("rb") as file:
            return word in file.read(4096)
    except OSError:
        return False
