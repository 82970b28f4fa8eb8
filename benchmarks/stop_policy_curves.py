"""The stop policy's trade-off on recorded runs: one curve per threshold, the others at default.

For each threshold of `convergent.StopPolicy` (the repeat limit, the note, the failure,
mistake and rejected-answer streaks), every candidate value is replayed over the
recorded runs given, with every other setting at the library's default, and the replay
reports what that value does: successful runs cut short (and how many of those the
recording does not justify as a real loop, the policy's fault), failed runs stopped, the
recorded replies of failed runs a stop left unplayed, and the real loops of failed runs
stopped, nudged or missed. The points go to a JSON file, a markdown table and a chart of
successful runs cut against failed-run replies saved.

Run from the repository root (the corpora are not part of the repository; see
docs/evidence.md):
    python benchmarks/stop_policy_curves.py CORPUS... --out /tmp/curves [--workers 2] \
        [--success LABELS.json ...] [--knob NAME ...] [--declared]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.replay.declared import (  # noqa: E402
    add_success_option,
    labels_by_corpus,
    replay_each,
)
from convergent import StopPolicy  # noqa: E402
from convergent.replay import Point  # noqa: E402

CURVES: dict[str, tuple[Any, ...]] = {
    "max_repeated_calls": (2, 3, 4, 5),
    "max_cycle_length": (1, 2, 3, 4, 5, 6),
    "notes": (0, 1, 2),
    "max_repeated_failures": (2, 3, 4, 5, None),
    "max_failing_steps": (6, 7, 8, 10, 11, 12, 14, None),
    "max_repeated_mistakes": (2, 3, 4, 5, None),
    "max_mistakes": (3, 4, 6, 8, 11, 12, 14, None),
    "max_rejected_answers": (1, 2, 3, 5, None),
}
"""Each threshold and the values tried (None: the rule off)."""


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpora", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--knob", action="append", default=[], choices=sorted(CURVES))
    parser.add_argument(
        "--declared",
        action="store_true",
        help="declare every tool as docs/loop.md tells users to, writes included: each "
        "corpus with the declaration file of its kind (benchmarks/replay/declarations/)",
    )
    add_success_option(parser)
    return parser.parse_args(argv)


def _table(points: Sequence[Point]) -> str:
    defaults = StopPolicy()
    lines = [
        "| threshold | value | successful cut (policy's fault) | failed stopped "
        "| failed-run replies saved | real loops of failed runs: stopped, nudged, missed "
        "| notes |",
        "| --- | --- | ---: | ---: | ---: | --- | ---: |",
    ]
    for point in points:
        default = getattr(defaults, point.knob) == point.value
        value = f"**{point.value}** (default)" if default else str(point.value)
        loops = ", ".join(str(count) for count in point.loops)
        lines.append(
            f"| `{point.knob}` | {value} | {point.successful_cut} ({point.policy_faults}) "
            f"| {point.failed_stopped} | {point.replies_saved} | {loops} | {point.notes} |"
        )
    return "\n".join(lines) + "\n"


def _chart(points: Sequence[Point], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    knobs = list(dict.fromkeys(point.knob for point in points))
    columns = min(len(knobs), 4)
    rows = -(-len(knobs) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.6 * rows), squeeze=False)
    defaults = StopPolicy()
    for index, knob in enumerate(knobs):
        axis = axes[index // columns][index % columns]
        mine = [point for point in points if point.knob == knob]
        saved = [point.replies_saved for point in mine]
        axis.plot(saved, [p.policy_faults for p in mine], "o-", label="cut, policy's fault")
        axis.plot(saved, [p.successful_cut for p in mine], "s--", label="cut, all")
        for point in mine:
            bold = getattr(defaults, knob) == point.value
            axis.annotate(
                str(point.value),
                (point.replies_saved, point.successful_cut),
                textcoords="offset points",
                xytext=(4, 4),
                fontweight="bold" if bold else "normal",
                fontsize=8,
            )
        axis.set_title(knob, fontsize=10)
        axis.set_xlabel("failed-run replies saved")
        axis.set_ylabel("successful runs cut")
        axis.grid(alpha=0.3)
    for index in range(len(knobs), rows * columns):
        axes[index // columns][index % columns].axis("off")
    axes[0][0].legend(fontsize=8)
    figure.suptitle("Each threshold against its neighbours (the default in bold)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main(argv: Sequence[str] | None = None) -> None:
    arguments = _arguments(argv)
    arguments.out.mkdir(parents=True, exist_ok=True)
    knobs = arguments.knob or list(CURVES)
    labels = labels_by_corpus(arguments.success)
    points: list[Point] = []
    started = time.perf_counter()
    for knob in knobs:
        for value in CURVES[knob]:
            settings = {knob: value}
            report = replay_each(
                arguments.corpora,
                settings=settings,
                labels=labels,
                declared=arguments.declared,
                workers=arguments.workers,
            )
            point = Point.of(knob, value, settings, report)
            points.append(point)
            print(
                f"{knob}={value}: cut {point.successful_cut} ({point.policy_faults}), "
                f"failed stopped {point.failed_stopped}, saved {point.replies_saved}, "
                f"loops {point.loops}, notes {point.notes}",
                flush=True,
            )
    seconds = time.perf_counter() - started
    data = {"seconds": round(seconds, 1), "points": [point.to_dict() for point in points]}
    (arguments.out / "curves.json").write_text(json.dumps(data, indent=1) + "\n")
    (arguments.out / "curves.md").write_text(_table(points))
    _chart(points, arguments.out / "stop_policy_curves.png")
    print(f"{len(points)} replays in {seconds:.0f} s; wrote {arguments.out}")


if __name__ == "__main__":
    main()
