"""`WebChannel`: ``ask_user`` answered in the web console (``--ask-via web``).

The channel needs only the run store: it writes the question into the ``questions``
table and polls the row until the console writes an answer. `AskUser` applies the
usual timeout around the wait; when it ends unanswered the row is marked expired and
the run stops ``needs_user``, resumable with the answer (from the console too).
"""

from __future__ import annotations

import asyncio

from convergent.builder import BuildContext, register_ask_channel
from convergent.durability.sqlite import RunStore
from convergent.exceptions import UserError
from convergent.ui.questions import expire_question, post_question, read_answer

__all__ = ["WebChannel", "register"]


class WebChannel:
    """Puts each question into the run database and waits for the console's answer.

    Args:
        store: The run's database (the one the console shows).
        run_id: The run that asks.
        poll_interval: Seconds between looks at the question's row.
    """

    name = "web"

    def __init__(self, store: RunStore, run_id: str, *, poll_interval: float = 0.2) -> None:
        self.store = store
        self.run_id = run_id
        self.poll_interval = poll_interval

    async def ask(self, question: str) -> str:
        """Store the question and return the answer written by the console."""
        question_id = post_question(self.store, self.run_id, question)
        answered = False
        try:
            while True:
                answer = read_answer(self.store, question_id)
                if answer is not None:
                    answered = True
                    return answer
                await asyncio.sleep(self.poll_interval)
        finally:
            if not answered:
                expire_question(self.store, question_id)


def web_channel(context: BuildContext) -> WebChannel:
    """Build the channel for a run (the factory registered as ``web``).

    Raises:
        UserError: If the run is not stored in a run database.
    """
    if not isinstance(context.store, RunStore) or context.run_id is None:
        raise UserError(
            "ask_via web needs a stored run (the console reads the run database); "
            "drop --no-checkpoint"
        )
    return WebChannel(context.store, context.run_id)


def register() -> None:
    """Make ``ask_via="web"`` (and ``convergent run --ask-via web``) use `WebChannel`."""
    register_ask_channel("web", web_channel)
