"""`CycleDriver`: one run's stop decisions in the loop's order, for any host.

Its home is `convergent.loop.driver`: users import it from here, the
loop's own modules from its home.
"""

from convergent.loop.driver import (
    ANSWER_AFTER_STOP as ANSWER_AFTER_STOP,
)
from convergent.loop.driver import (
    FINAL_ANSWER_PROMPT as FINAL_ANSWER_PROMPT,
)
from convergent.loop.driver import (
    MAX_CALLS_PER_RESPONSE as MAX_CALLS_PER_RESPONSE,
)
from convergent.loop.driver import (
    RUN_ALL as RUN_ALL,
)
from convergent.loop.driver import (
    CycleDriver as CycleDriver,
)
from convergent.loop.driver import (
    FinalRequest as FinalRequest,
)
from convergent.loop.driver import (
    PolicyOptions as PolicyOptions,
)
from convergent.loop.driver import (
    Review as Review,
)
from convergent.loop.driver import (
    RunTally as RunTally,
)
from convergent.loop.driver import (
    StopReport as StopReport,
)
from convergent.loop.driver import (
    Tally as Tally,
)
from convergent.loop.driver import (
    cap_note as cap_note,
)
from convergent.loop.driver import (
    failure_result as failure_result,
)
from convergent.loop.driver import (
    message_chars as message_chars,
)
from convergent.loop.driver import (
    resolved_policy as resolved_policy,
)
from convergent.loop.driver import (
    verdict_feedback as verdict_feedback,
)

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
