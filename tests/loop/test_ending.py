"""What counts as an answer after a stop: the checks of `convergent.loop.ending`."""

from __future__ import annotations

import pytest

from convergent import Agent, Limits, StopReason, calculator
from convergent.loop.ending import (
    FINAL_ANSWER_PROMPT,
    HEAD_CHARS,
    answer_problem,
    detail_with_note,
    settle_output,
)
from convergent.testing import call, scripted

NOT_USED = "the answer asked for after the stop was not used"
PROMPT = FINAL_ANSWER_PROMPT.format(detail="reached max_cycles=1")


@pytest.mark.parametrize(
    "answer",
    [
        "17 * 23 = 391",
        "The population of Paris is 2.1 million; the lookup gave no date for it.",
        "Yes.",
        # says one thing twice, briefly: still an answer
        "It is 391. It is 391.",
        # quotes part of the request, and answers
        "The run has stopped before the check, but 17 * 23 = 391 according to the calculator.",
    ],
)
def test_an_answer_is_an_answer(answer: str) -> None:
    assert answer_problem(answer, (PROMPT,)) is None


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ("", "it was empty"),
        ("  \n ", "it was empty"),
        ("}{}{", "it had no words"),
        (PROMPT, "it repeated the request"),
        ('"' + PROMPT.upper() + '"', "it repeated the request"),
        (
            '{"thought": "You have requested lookup(city=\\"Paris\\") 3 times", "tool_calls": []}',
            "it was the tool-call protocol's JSON",
        ),
        ('Sure: {"thought": "The ru', "it was the tool-call protocol's JSON"),
        ('{"answer": "}32200000000000000000', "it was the tool-call protocol's JSON"),
        ("The city is not in the list. " * 35, "it repeated itself"),
        ("You cannot call tools again. " * 35, "it repeated the request"),
        ("17 * 23 = 431.17, 23! = 81, " + "23! = 19, " * 12, "it repeated itself"),
    ],
)
def test_what_is_not_an_answer_and_why(answer: str, problem: str) -> None:
    assert answer_problem(answer, (PROMPT,)) == problem


def test_only_the_head_of_a_huge_answer_is_read() -> None:
    prose = " ".join(f"finding {n} holds for case {n * 7}." for n in range(HEAD_CHARS))
    assert len(prose) > 2 * HEAD_CHARS
    loop = "and then the tool said the same again " * (HEAD_CHARS // 10)
    # a reply that loops only past its head is judged by its head: an answer
    assert answer_problem(prose[:HEAD_CHARS] + loop, (PROMPT,)) is None
    # one that loops from its start is caught, whatever its size
    assert answer_problem(loop + prose, (PROMPT,)) == "it repeated itself"


def test_a_usable_answer_is_the_output_made_after_the_stop() -> None:
    assert settle_output("I need 17 * 23", "17 * 23 = 391", (PROMPT,)) == (
        "17 * 23 = 391",
        True,
        "",
    )


def test_an_unusable_answer_leaves_the_last_useful_text_and_says_why() -> None:
    settled = settle_output("I need to compute 17 * 23.", PROMPT, (PROMPT,))
    assert settled.output == "I need to compute 17 * 23."
    assert not settled.after_stop
    assert settled.note == f"{NOT_USED}: it repeated the request"
    # the last text is no better: nothing is the output
    assert settle_output("go on. " * 20, "", (PROMPT,)).output == ""


def test_the_note_follows_the_detail() -> None:
    assert detail_with_note("reached max_cycles=1", "") == "reached max_cycles=1"
    assert detail_with_note("reached max_cycles=1", "x") == "reached max_cycles=1; x"
    assert detail_with_note("", "x") == "x"


async def test_an_echoed_request_after_a_stop_is_not_the_runs_answer() -> None:
    model = scripted(call("calculator", expression="17 * 23"), PROMPT)
    result = await Agent(model, [calculator], limits=Limits(max_cycles=1)).run("17 * 23?")
    assert result.stop_reason is StopReason.MAX_CYCLES
    assert result.output == "" and not result.output_after_stop
    assert result.stop_detail == (
        "reached max_cycles=1; the answer asked for after the stop was not used: "
        "it repeated the request"
    )
    assert result.events[-1].detail == result.stop_detail  # type: ignore[attr-defined]


async def test_an_empty_answer_after_a_stop_is_mentioned() -> None:
    model = scripted(call("calculator", expression="1 + 1"), "")
    result = await Agent(model, [calculator], limits=Limits(max_cycles=1)).run("1 + 1?")
    assert result.output == "" and not result.output_after_stop
    assert result.stop_detail.endswith(f"{NOT_USED}: it was empty")
