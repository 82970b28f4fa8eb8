"""Stop reasons and statuses in plain words, for the console's pages."""

from __future__ import annotations

from convergent.durability.sqlite import RunSummary

__all__ = ["STATUSES", "explain_stop"]

STATUSES = (
    "running",
    "interrupted",
    "completed",
    "stopped",
    "needs_user",
    "handed_off",
    "tool_error",
    "stalled",
    "max_cycles",
    "budget_exhausted",
    "model_error",
)
"""The statuses the runs page filters by."""

_WHY = {
    "completed": "The model answered without calling a tool (and any verifier passed): the "
    "work is done.",
    "stopped": "A stop was requested from outside (the console, convergent steer --stop, "
    "the API or a signal), or the run was rewound. It can be resumed.",
    "needs_user": "The run asked a question nobody could answer in time. Answer it here to "
    "resume the run with your answer.",
    "handed_off": "A terminal tool (a hand-off) ran: the work passed to someone else.",
    "tool_error": "Tool failures persisted (too many in a row, a fatal failure, or any failure "
    "under the policy stop).",
    "stalled": "No progress: the model requested the same call with the same arguments too "
    "often, so the run stopped instead of looping.",
    "max_cycles": "The cycle limit was reached before the model finished. Resume it to give "
    "it more cycles.",
    "budget_exhausted": "A token, wall-time or cost budget was used up.",
    "model_error": "The model backend failed after its retries.",
    "running": "A live process is running it now.",
    "interrupted": "Its process ended without recording a stop (killed or crashed). It can be "
    "resumed from its last checkpoint.",
}


def explain_stop(run: RunSummary) -> str:
    """Why the run is where it is, in a sentence or two (plus the stored detail)."""
    why = _WHY.get(run.status, "")
    if run.stop_detail and not run.running:
        why = f"{why} Detail: {run.stop_detail}".strip()
    return why
