"""Benchmark results and their renderings: one JSON object, a markdown report, PNG charts.

Every suite produces a `SuiteResult`: per policy (and per scenario or category) the
number of tasks, premature stops (false positives), unnecessary cycles or loops (false
negatives) and correct stops. `BenchReport` gathers the suites of one ``convergent
bench`` invocation; `BenchReport.to_dict` is the shape ``convergent bench --json``
prints.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "BenchReport",
    "PolicyStats",
    "SuiteResult",
    "render_markdown",
    "write_charts",
    "write_report",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyStats:
    """How one stopping policy did on a set of tasks."""

    tasks: int
    """Tasks (or BFCL turns) judged."""
    false_positives: int
    """Premature stops: the run ended before the work the task needs was done."""
    false_negatives: int
    """Unnecessary cycles: the run went on after the task was done, or hit a limit."""
    correct: int
    """Runs that stopped exactly when the task was done, for the expected reason."""
    extra_cycles: int = 0
    """Model requests made after the task was done, summed over the tasks."""

    @property
    def false_positive_rate(self) -> float:
        """Premature stops per task."""
        return self.false_positives / self.tasks if self.tasks else 0.0

    @property
    def false_negative_rate(self) -> float:
        """Runs with unnecessary cycles (or a hit limit) per task."""
        return self.false_negatives / self.tasks if self.tasks else 0.0

    @property
    def accuracy(self) -> float:
        """Correct stops per task."""
        return self.correct / self.tasks if self.tasks else 0.0

    @property
    def mean_extra_cycles(self) -> float:
        """Average model requests made after the task was done."""
        return self.extra_cycles / self.tasks if self.tasks else 0.0

    def __add__(self, other: PolicyStats) -> PolicyStats:
        return PolicyStats(
            tasks=self.tasks + other.tasks,
            false_positives=self.false_positives + other.false_positives,
            false_negatives=self.false_negatives + other.false_negatives,
            correct=self.correct + other.correct,
            extra_cycles=self.extra_cycles + other.extra_cycles,
        )

    def to_dict(self) -> dict[str, Any]:
        """Rates rounded to four places, plus the raw counts."""
        return {
            "false_positive_rate": round(self.false_positive_rate, 4),
            "false_negative_rate": round(self.false_negative_rate, 4),
            "accuracy": round(self.accuracy, 4),
            "tasks": self.tasks,
            "false_positives": self.false_positives,
            "false_negatives": self.false_negatives,
            "correct": self.correct,
            "mean_extra_cycles": round(self.mean_extra_cycles, 4),
        }


EMPTY_STATS = PolicyStats(tasks=0, false_positives=0, false_negatives=0, correct=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class SuiteResult:
    """The outcome of one suite."""

    suite: str
    """Suite name: ``convergence``, ``bfcl`` or ``live``."""
    policies: dict[str, PolicyStats]
    """Totals per stopping policy."""
    breakdown: dict[str, dict[str, PolicyStats]] = field(default_factory=dict)
    """Per scenario (or category) and policy."""
    breakdown_label: str = "scenario"
    """What the keys of `breakdown` are: ``scenario``, ``category``..."""
    details: dict[str, Any] = field(default_factory=dict)
    """Suite-specific figures (BFCL pass counts, limits used, live model name...)."""
    notes: tuple[str, ...] = ()
    """Method notes printed with the results."""
    skipped: str | None = None
    """Why the suite did not run, when it did not."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of this suite."""
        data: dict[str, Any] = {
            "policies": {name: stats.to_dict() for name, stats in self.policies.items()},
            self.breakdown_label + "s": {
                key: {name: stats.to_dict() for name, stats in per_policy.items()}
                for key, per_policy in self.breakdown.items()
            },
        }
        data.update(self.details)
        if self.notes:
            data["notes"] = list(self.notes)
        if self.skipped is not None:
            data["skipped"] = self.skipped
        return data


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchReport:
    """All suites of one benchmark invocation."""

    seed: int
    """Seed of the scripted suites."""
    suites: dict[str, SuiteResult]
    """Results by suite name, in the order they ran."""
    command: str = ""
    """The command line that reproduces the report."""

    def to_dict(self) -> dict[str, Any]:
        """The one JSON object ``convergent bench --json`` prints."""
        return {
            "seed": self.seed,
            "command": self.command,
            "suites": {name: suite.to_dict() for name, suite in self.suites.items()},
        }


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def _stats_rows(per_policy: Mapping[str, PolicyStats], key: str | None) -> list[str]:
    rows = []
    for policy, stats in per_policy.items():
        prefix = f"| {key} " if key is not None else ""
        rows.append(
            f"{prefix}| {policy} | {stats.tasks} | {_pct(stats.false_positive_rate)} | "
            f"{_pct(stats.false_negative_rate)} | {_pct(stats.accuracy)} | "
            f"{stats.mean_extra_cycles:.2f} |"
        )
    return rows


def render_markdown(report: BenchReport) -> str:
    """A markdown report: one table per suite, its breakdown, details and notes."""
    lines = ["# convergent benchmark", ""]
    if report.command:
        lines += ["Reproduce with:", "", "```", report.command, "```", ""]
    header = "| policy | tasks | false positives | false negatives | accuracy | extra cycles |"
    rule = "| --- | ---: | ---: | ---: | ---: | ---: |"
    for name, suite in report.suites.items():
        lines += [f"## {name}", ""]
        if suite.skipped is not None:
            lines += [f"Skipped: {suite.skipped}", ""]
            continue
        lines += [header, rule, *_stats_rows(suite.policies, None), ""]
        if suite.breakdown:
            label = suite.breakdown_label
            lines += [f"| {label} {header[1:]}", f"| --- {rule[1:]}"]
            for key, per_policy in suite.breakdown.items():
                lines += _stats_rows(per_policy, key)
            lines.append("")
        for key, value in suite.details.items():
            if isinstance(value, Mapping | list):
                lines.append(f"- **{key}**: `{json.dumps(value, sort_keys=True)}`")
            else:
                lines.append(f"- **{key}**: {value}")
        if suite.details:
            lines.append("")
        lines += [f"- {note}" for note in suite.notes]
        if suite.notes:
            lines.append("")
    return "\n".join(lines)


def _bar_chart(
    path: Path,
    title: str,
    groups: Sequence[str],
    per_group: Sequence[Mapping[str, PolicyStats]],
    policies: Sequence[str],
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    metrics = (
        ("false positives", "false_positive_rate"),
        ("false negatives", "false_negative_rate"),
    )
    fig, axes = plt.subplots(
        len(metrics),
        1,
        figsize=(min(14.0, max(7.0, 0.35 * len(groups) * len(policies))), 7.0),
        sharex=True,
    )
    width = 0.8 / max(1, len(policies))
    for ax, (label, attribute) in zip(axes, metrics, strict=True):
        for index, policy in enumerate(policies):
            values = [
                100 * getattr(stats[policy], attribute) if policy in stats else 0.0
                for stats in per_group
            ]
            positions = [g + (index - (len(policies) - 1) / 2) * width for g in range(len(groups))]
            ax.bar(positions, values, width=width, label=policy)
        ax.set_ylabel(f"{label} (%)")
        ax.set_ylim(0, 105)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_title(title)
    axes[0].legend(loc="upper left", fontsize="small")
    axes[-1].set_xticks(range(len(groups)))
    axes[-1].set_xticklabels(groups, rotation=35, ha="right", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)


def write_charts(report: BenchReport, folder: Path) -> list[Path]:
    """PNG charts: per suite, rates per policy and per scenario (or category).

    Returns:
        The files written.
    """
    written: list[Path] = []
    for name, suite in report.suites.items():
        if suite.skipped is not None or not suite.policies:
            continue
        policies = list(suite.policies)
        groups = ["all", *suite.breakdown]
        per_group = [suite.policies, *suite.breakdown.values()]
        path = folder / f"{name}_rates.png"
        title = f"{name}: stopping errors per policy and {suite.breakdown_label}"
        _bar_chart(path, title, groups, per_group, policies)
        written.append(path)
    return written


def write_report(report: BenchReport, folder: Path) -> list[Path]:
    """Write ``bench.json``, ``bench.md`` and the PNG charts into ``folder``.

    Returns:
        The files written.
    """
    folder.mkdir(parents=True, exist_ok=True)
    json_path = folder / "bench.json"
    json_path.write_text(json.dumps(report.to_dict(), indent=2) + "\n", encoding="utf-8")
    md_path = folder / "bench.md"
    md_path.write_text(render_markdown(report) + "\n", encoding="utf-8")
    return [json_path, md_path, *write_charts(report, folder)]
