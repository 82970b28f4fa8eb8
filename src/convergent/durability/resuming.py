"""Deprecated: `resume` and its helpers moved to `convergent.resuming`.

They rebuild agents from their specs, so they sit above the loop, beside the builder;
this module keeps old imports working, with a `DeprecationWarning`.
"""

from __future__ import annotations

import warnings

from convergent.resuming import (
    Continuation,
    answers_for,
    pending_answers,
    prepare_resume,
    resumable_run,
    resume,
    spec_of,
    steerable_run,
)

__all__ = [
    "Continuation",
    "answers_for",
    "pending_answers",
    "prepare_resume",
    "resumable_run",
    "resume",
    "spec_of",
    "steerable_run",
]

warnings.warn(
    "convergent.durability.resuming moved: import from convergent.resuming",
    DeprecationWarning,
    stacklevel=2,
)
