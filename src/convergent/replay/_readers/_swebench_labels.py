"""SWE-bench evaluation results beside a folder of runs: which instances were resolved.

Looked for in the runs' folder and up to three folders above it, nearest first:
``results_summary.json`` (``instances[].resolved``), ``results.json`` (``resolved``: a
list of instance ids, as SWE-agent's evaluation writes it), or the SWE-bench harness's
report (any ``*.json`` with ``resolved_ids``; instances it lists as unresolved or in
error are failures, others unknown).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from convergent.replay._readers._common import FormatMismatch, load_json

__all__ = ["swebench_label"]

_LEVELS = 4


def swebench_label(run_file: Path, instance: str) -> bool | None:
    """Whether the evaluation beside ``run_file`` resolved ``instance`` (None: unknown)."""
    folder = run_file.resolve().parent
    for _ in range(_LEVELS):
        labels = _labels_in(folder)
        if labels is not None:
            return labels.get(instance)
        if folder.parent == folder:
            break
        folder = folder.parent
    return None


@functools.lru_cache(maxsize=256)
def _labels_in(folder: Path) -> Mapping[str, bool] | None:
    summary = _load(folder / "results_summary.json")
    if isinstance(summary, dict) and isinstance(summary.get("instances"), list):
        return {
            str(item["instance_id"]): bool(item.get("resolved"))
            for item in summary["instances"]
            if isinstance(item, dict) and "instance_id" in item
        }
    results = _load(folder / "results.json")
    if isinstance(results, dict) and isinstance(results.get("resolved"), list):
        return dict.fromkeys(map(str, results["resolved"]), True)
    for candidate in sorted(folder.glob("*.json")):
        if candidate.name.endswith(".traj.json") or not _mentions(candidate, b"resolved_ids"):
            continue
        report = _load(candidate)
        if isinstance(report, dict) and isinstance(report.get("resolved_ids"), list):
            labels: dict[str, bool] = {}
            for key in ("unresolved_ids", "error_ids"):
                labels.update(dict.fromkeys(map(str, report.get(key) or []), False))
            labels.update(dict.fromkeys(map(str, report["resolved_ids"]), True))
            return labels
    return None


def _load(path: Path) -> Any:
    if not path.is_file():
        return None
    try:
        return load_json(path)
    except FormatMismatch:
        return None


def _mentions(path: Path, word: bytes) -> bool:
    try:
        with path.open("rb") as file:
            return word in file.read(4096)
    except OSError:
        return False
