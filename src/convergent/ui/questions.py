"""The ``questions`` table: questions a running run puts to the web console, and answers.

A run whose ``ask_user`` goes through the web channel inserts an ``open`` row and polls
it; the console shows open rows of live runs and writes the answer into the row
(``answered``). A question nobody answered in time is marked ``expired`` by the run,
which then stops ``needs_user`` as with any other channel. Every change is one short
transaction, so the run and the console never hold the database for long.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from convergent.clock import now
from convergent.durability.sqlite import RunStore

__all__ = [
    "OpenQuestion",
    "answer_question",
    "expire_question",
    "open_questions",
    "post_question",
    "read_answer",
]


@dataclass(frozen=True, slots=True)
class OpenQuestion:
    """A question that waits in the table for the console's answer."""

    id: int
    """Row id (what the answer form sends back)."""
    run_id: str
    """The run that asked."""
    call_id: str
    """The ``ask_user`` call the question belongs to (empty if it could not be told)."""
    question: str
    """What the run asks."""
    asked_at: float
    """Unix time it was asked."""


def post_question(store: RunStore, run_id: str, question: str) -> int:
    """Insert an open question for ``run_id`` and return its row id."""
    call_id = _asking_call(store, run_id, question)
    with store.transaction("store a question") as conn:
        cursor = conn.execute(
            "INSERT INTO questions (run_id, call_id, question, asked_at, status) "
            "VALUES (?, ?, ?, ?, 'open')",
            (run_id, call_id, question, now()),
        )
        row_id = cursor.lastrowid
    assert row_id is not None
    return row_id


def _asking_call(store: RunStore, run_id: str, question: str) -> str:
    """Id of the pending call of the run's latest request that asks ``question``.

    The loop stores a response's calls before any of them runs, so the call that is
    asking now is in the latest assistant message of the current conversation.
    """
    rows = store.query(
        "SELECT m.data FROM messages m JOIN runs r ON r.run_id = m.run_id AND m.epoch = r.epoch "
        "WHERE m.run_id = ? ORDER BY m.seq DESC LIMIT 64",
        [run_id],
    )
    taken = {
        cid for (cid,) in store.query("SELECT call_id FROM questions WHERE run_id = ?", [run_id])
    }
    for (data,) in rows:
        message: dict[str, Any] = json.loads(data)
        calls = message.get("tool_calls") or []
        if message.get("role") != "assistant" or not calls:
            continue
        for call in calls:
            asked = (call.get("arguments") or {}).get("question")
            if isinstance(asked, str) and asked.strip() == question and call["id"] not in taken:
                return str(call["id"])
        break
    return ""


def read_answer(store: RunStore, question_id: int) -> str | None:
    """The answer written for a question, or None while it is open."""
    rows = store.query("SELECT status, answer FROM questions WHERE id = ?", [question_id])
    if rows and rows[0][0] == "answered":
        return str(rows[0][1] or "")
    return None


def expire_question(store: RunStore, question_id: int) -> None:
    """Mark a question nobody answered (the wait ended) so the console stops offering it."""
    with store.transaction("close a question") as conn:
        conn.execute(
            "UPDATE questions SET status = 'expired' WHERE id = ? AND status = 'open'",
            (question_id,),
        )


def answer_question(store: RunStore, question_id: int, answer: str) -> bool:
    """Write the answer; False when the question is no longer open (it expired)."""
    with store.transaction("store an answer") as conn:
        cursor = conn.execute(
            "UPDATE questions SET status = 'answered', answer = ?, answered_at = ? "
            "WHERE id = ? AND status = 'open'",
            (answer, now(), question_id),
        )
        return cursor.rowcount == 1


def open_questions(store: RunStore, run_id: str) -> list[OpenQuestion]:
    """The questions of a run that wait for an answer, oldest first."""
    rows = store.query(
        "SELECT id, run_id, call_id, question, asked_at FROM questions "
        "WHERE status = 'open' AND run_id = ? ORDER BY id",
        [run_id],
    )
    return [OpenQuestion(*row) for row in rows]
