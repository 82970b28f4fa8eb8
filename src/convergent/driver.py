"""`CycleDriver`: one run's stop decisions in the loop's order, for any host.

Its home is `convergent.loop.driver`; what it takes and gives lives beside it in the
loop's package (`convergent.loop.ending`: the answer after a stop; the executor: a
tool's failure as the model reads it). Users import all of it from here, the loop's own
modules from the homes.
"""

from convergent.extensions import verdict_feedback
from convergent.loop.budget import RunTally, Tally, message_chars
from convergent.loop.driver import (
    MAX_CALLS_PER_RESPONSE,
    RUN_ALL,
    CycleDriver,
    PolicyOptions,
    Review,
    cap_note,
)
from convergent.loop.ending import ANSWER_AFTER_STOP, FINAL_ANSWER_PROMPT, FinalRequest, StopReport
from convergent.loop.executor import failure_result
from convergent.policy import resolved_policy

__all__ = [
    "ANSWER_AFTER_STOP",
    "FINAL_ANSWER_PROMPT",
    "MAX_CALLS_PER_RESPONSE",
    "RUN_ALL",
    "CycleDriver",
    "FinalRequest",
    "PolicyOptions",
    "Review",
    "RunTally",
    "StopReport",
    "Tally",
    "cap_note",
    "failure_result",
    "message_chars",
    "resolved_policy",
    "verdict_feedback",
]
