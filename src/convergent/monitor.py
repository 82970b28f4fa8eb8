"""`RunMonitor`: the counters behind a run's progress facts.

Its home is `convergent.loop.monitor`, and that of the counters it keeps
(`MonitorState`) `convergent.state`: users import them from here, the loop's own
modules from their homes.
"""

from convergent.loop.monitor import RunMonitor, describe_call
from convergent.state import MonitorState

__all__ = ["MonitorState", "RunMonitor", "describe_call"]
