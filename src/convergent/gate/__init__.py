"""The executive function (seed 003): ask the user before acting on an uncertain step.

`ExecutiveGate` scores each proposed step with a second, focused model request and,
below its threshold, discards the step and asks the user through the ``ask_user`` tool
built by `AskUser`. Objective triggers (a declared ambiguity, arguments rejected twice)
ask without a score. The score decides whether to ask before acting, never whether a
run is finished.
"""

from convergent.gate.ask import (
    ASK_USER,
    AskChannel,
    AskTimedOut,
    AskUser,
    CallbackChannel,
    DialogChannel,
    Exchange,
    LineSource,
    NonInteractiveChannel,
    PendingQuestion,
    QueueChannel,
    StdinChannel,
    TerminalChannel,
    ask_user_tool,
)
from convergent.gate.events import AskStatus, GateDecided, GateTrigger, UserAnswered
from convergent.gate.executive import (
    DEFAULT_THRESHOLD,
    SCORE_SCHEMA,
    AmbiguityDetector,
    ExecutiveGate,
    Score,
    ambiguous,
    declared_ambiguity,
    parse_score,
    question_from_thought,
    scoring_messages,
)

__all__ = [
    "ASK_USER",
    "AmbiguityDetector",
    "AskChannel",
    "AskStatus",
    "AskTimedOut",
    "AskUser",
    "CallbackChannel",
    "DEFAULT_THRESHOLD",
    "DialogChannel",
    "Exchange",
    "ExecutiveGate",
    "GateDecided",
    "GateTrigger",
    "LineSource",
    "NonInteractiveChannel",
    "PendingQuestion",
    "QueueChannel",
    "SCORE_SCHEMA",
    "Score",
    "StdinChannel",
    "TerminalChannel",
    "UserAnswered",
    "ambiguous",
    "ask_user_tool",
    "declared_ambiguity",
    "parse_score",
    "question_from_thought",
    "scoring_messages",
]
