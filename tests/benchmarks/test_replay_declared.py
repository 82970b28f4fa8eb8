"""Replays with every tool declared as a user declares them, writes included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmarks.replay.declared import (
    DECLARATIONS,
    FILES,
    corpus_format,
    declarations_for,
    labels_by_corpus,
    replay_each,
)
from benchmarks.replay_declared import main

from convergent.effects import Effect
from convergent.replay import load_declarations

FIXTURES = Path(__file__).resolve().parents[1] / "replay" / "fixtures"


def test_every_file_loads_as_convergent_replay_declare_reads_it() -> None:
    assert sorted(path.name for path in DECLARATIONS.glob("*.yaml")) == sorted(set(FILES.values()))
    for path in DECLARATIONS.glob("*.yaml"):
        load_declarations(path)  # one effect per tool, or it raises


@pytest.mark.parametrize(
    ("format", "name", "expected"),
    [
        ("tau-bench", "get_user_details", Effect.READ),
        ("tau2-bench", "book_reservation", Effect.WRITE),
        ("tau2-bench", "check_network_status", Effect.READ),  # τ²-bench marks it READ
        ("tau2-bench", "toggle_airplane_mode", Effect.WRITE),
        ("bfcl", "ls", Effect.READ),
        ("bfcl", "get_stock_info", Effect.READ),
        ("bfcl", "setHeadlights", Effect.IDEMPOTENT),
        ("bfcl", "post_tweet", Effect.WRITE),
        ("bfcl", "cd", Effect.WRITE),  # relative: cd .. twice goes up twice
        ("bfcl", "get_zipcode_based", None),  # a garbled name is no BFCL function
        ("swe-agent", "edit", Effect.WRITE),
        ("swe-agent", "open", Effect.READ),
        ("swe-agent", "cd", None),  # a shell command declares nothing
        ("mini-swe-agent", "bash", None),
        ("messages", "anything", None),  # no file for the format: nothing declared
    ],
)
def test_each_tool_is_declared_by_what_it_does(
    format: str, name: str, expected: Effect | None
) -> None:
    assert declarations_for(format).effect(name) is expected


def test_a_corpus_s_kind_and_its_own_labels(tmp_path: Path) -> None:
    assert corpus_format(FIXTURES / "tau_bench_excerpt.json") == "tau-bench"
    assert corpus_format(FIXTURES / "exports" / "bfcl") == "bfcl"
    assert corpus_format(tmp_path) is None
    shared = tmp_path / "shared.json"
    shared.write_text('{"a": true}')
    own = tmp_path / "own.json"
    own.write_text('{"a": false}')
    assert labels_by_corpus([str(shared), f"{tmp_path / 'x'}={own}"]) == (
        {"a": True},
        {str(tmp_path / "x"): {"a": False}},
    )


def _tau_run(results: list[str]) -> dict[str, object]:
    """A τ-bench run that books the same flight again and again, then answers."""
    messages: list[dict[str, object]] = [{"role": "user", "content": "book it"}]
    for n, result in enumerate(results):
        call = {
            "id": f"c{n}",
            "type": "function",
            "function": {"name": "book_reservation", "arguments": '{"flight": "HAT001"}'},
        }
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {
                "role": "tool",
                "tool_call_id": f"c{n}",
                "name": "book_reservation",
                "content": result,
            },
        ]
    messages.append({"role": "assistant", "content": "Booked."})
    return {"task_id": 1, "reward": 0.0, "traj": messages}


def test_a_write_repeated_with_new_results_is_stopped_only_when_declared(tmp_path: Path) -> None:
    # each booking returns a new reservation id: new results, the same booking again
    corpus = tmp_path / "gpt-4o-airline.json"
    corpus.write_text(json.dumps([_tau_run([f"reservation R{n}" for n in range(4)])]))
    assert corpus_format(corpus) == "tau-bench"
    plain = replay_each([corpus], declared=False).total
    assert (plain.runs["failed"], plain.failed_stopped) == (1, 0)
    declared = replay_each([corpus]).total
    (stopped,) = declared.stopped
    stop = stopped.stop
    assert stop is not None and (stop.rule, stop.played) == ("max_repeated_calls", 4)


def test_a_corpus_replays_with_its_tools_declared(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main([str(FIXTURES / "tau_bench_excerpt.json"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["total"]["runs"]["successful"] + report["total"]["runs"]["failed"] > 0
    assert main([str(FIXTURES / "tau_bench_excerpt.json")]) == 0
    table = capsys.readouterr().out
    assert table.splitlines()[0].startswith("| corpus |") and "| all |" in table
