"""`RunMonitor`: the counters behind a run's progress facts.

Its home is `convergent.loop.monitor`: users import it from here, the
loop's own modules from its home.
"""

from convergent.loop.monitor import (
    MonitorState as MonitorState,
)
from convergent.loop.monitor import (
    RunMonitor as RunMonitor,
)
from convergent.loop.monitor import (
    describe_call as describe_call,
)

__all__ = [
    "MonitorState",
    "RunMonitor",
    "describe_call",
]
