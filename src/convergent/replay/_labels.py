"""Success labels given by the user: a map of runs, or a rule on the final answer.

A label given this way takes precedence over the recording's own (a benchmark's
reward): the map first (a JSON object from a run's id or name to ``true``/``false``,
or to a reward, 1 meaning success), then the rule (a regular expression searched in
the run's final answer, the text of its last reply when that reply has no tool calls).
A run that ends without a final answer (on tool calls, or with its text not recorded)
cannot be judged by the rule: it keeps the recording's own label, or none, and says why.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convergent.exceptions import UserError
from convergent.replay._readers._common import FormatMismatch, load_json, reward_label
from convergent.replay._recording import Trajectory

__all__ = ["Labels", "load_labels"]


@dataclass(frozen=True, slots=True)
class Labels:
    """Labels to put on runs before they are judged."""

    given: Mapping[str, bool] = dataclasses.field(default_factory=dict)
    """Success by run id or name."""
    rule: re.Pattern[str] | None = None
    """Success when this matches the run's final answer."""

    def apply(self, trajectory: Trajectory) -> Trajectory:
        """The run with the label these give it (unchanged when they give none)."""
        label = self.given.get(trajectory.id, self.given.get(trajectory.name))
        if label is None and self.rule is not None:
            answer = trajectory.final_answer
            if answer is None and trajectory.success is not None:
                return trajectory  # the recording's own label stays
            if answer is None:
                why = (
                    "no final answer: the recording ends on tool calls"
                    if trajectory.turns and trajectory.turns[-1][-1].calls
                    else "no final answer: its text is not in the recording"
                )
                return dataclasses.replace(trajectory, unlabelled_why=why)
            label = self.rule.search(answer) is not None
        if label is None or label == trajectory.success:
            return trajectory
        return dataclasses.replace(trajectory, success=label)


def load_labels(map_file: Path | None = None, rule: str | None = None) -> Labels:
    """Labels from a JSON map file and a rule.

    Raises:
        UserError: If the file is not a JSON object of labels, or the rule not a regex.
    """
    given: dict[str, bool] = {}
    if map_file is not None:
        try:
            data: Any = load_json(map_file)
        except FormatMismatch as exc:
            raise UserError(f"--success {map_file}: {exc}") from None
        if not isinstance(data, dict):
            raise UserError(f"--success {map_file}: expected a JSON object from run to label")
        for key, value in data.items():
            try:
                given[str(key)] = value if isinstance(value, bool) else reward_label(value)
            except FormatMismatch:
                raise UserError(
                    f"--success {map_file}: the label of {key!r} is {value!r}, "
                    "expected true, false or a reward"
                ) from None
    pattern = None
    if rule is not None:
        try:
            pattern = re.compile(rule)
        except re.error as exc:
            raise UserError(f"--success-if {rule!r}: not a regular expression ({exc})") from None
    return Labels(given, pattern)
