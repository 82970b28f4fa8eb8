"""``convergent run --gate --ask-via``: the console script's entry point in this process,
and in a subprocess where it reads a real standard input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_runner import Ran, console_script, invoke
from convergent.cli._gate import expand_gate_flag
from convergent.messages import ModelResponse
from convergent.testing import answer, call, step, write_script


def run_cli(
    folder: Path, *args: str, stdin: str = "", env: dict[str, str | None] | None = None
) -> Ran:
    """``convergent ARGS`` run in ``folder``, where its run database goes."""
    return invoke(*args, cwd=folder, stdin=stdin, env=env)


def calc(expression: str, thought: str) -> ModelResponse:
    return step(call("calculator", expression=expression), content=thought)


def verdict(score: float, question: str = "") -> ModelResponse:
    reply = {"clarity": 1.0, "certainty": score, "question": question, "reason": "test"}
    return answer(json.dumps(reply))


@pytest.mark.slow
def test_gate_asks_over_stdin_and_the_answer_steers_the_run(tmp_path: Path) -> None:
    model = write_script(
        tmp_path / "model.json",
        calc("2+2", "The user said 'the numbers'; I guess 2 and 2."),
        calc("17*23", "As told."),
        "391",
    )
    scorer = write_script(
        tmp_path / "scorer.json", verdict(0.3, "Which numbers should I multiply?"), verdict(0.95)
    )
    proc = console_script(
        "run",
        "multiply the numbers",
        "--model",
        model,
        "--gate",
        "--ask-via",
        "stdin",
        "--gate-model",
        scorer,
        "--json",
        stdin="17 and 23\n",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["stop_reason"] == "completed" and data["output"] == "391"
    calls = [(c["name"], c["arguments"], c["result"]) for c in data["tool_calls"]]
    assert calls == [
        ("ask_user", {"question": "Which numbers should I multiply?"}, "17 and 23"),
        ("calculator", {"expression": "17*23"}, "391"),
    ]
    assert "question: Which numbers should I multiply?" in proc.stderr


def test_live_view_shows_gate_decisions(tmp_path: Path) -> None:
    model = write_script(tmp_path / "model.json", calc("1+1", "sure"), "2")
    scorer = write_script(tmp_path / "scorer.json", verdict(0.9))
    proc = run_cli(
        tmp_path, "run", "1+1", "--model", model, "--gate-model", scorer, "--gate", "0.8"
    )
    assert proc.returncode == 0, proc.stderr
    assert "gate score 0.90 >= 0.80: executing" in proc.stdout


def test_without_a_user_the_run_stops_needs_user(tmp_path: Path) -> None:
    model = write_script(tmp_path / "model.json", call("ask_user", question="Which file?"))
    proc = run_cli(
        tmp_path, "run", "read the file", "--model", model, "--json"
    )  # stdin is not a TTY
    assert proc.returncode == 1
    data = json.loads(proc.stdout)
    assert (data["stop_reason"], data["stop_detail"]) == ("needs_user", "Which file?")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gate", "1.5"], "error: --gate expects a threshold between 0 and 1, got 1.5"),
        (
            ["--ask-via", "pigeon"],
            "error: --ask-via must be one of terminal, dialog, stdin, web, none",
        ),
        (["--ask-timeout", "0"], "error: --ask-timeout must be > 0 seconds, got 0"),
        (["--gate-model", "scripted:x.json"], "error: --gate-model needs --gate"),
    ],
)
def test_bad_gate_options_are_one_line_errors(
    tmp_path: Path, args: list[str], message: str
) -> None:
    model = write_script(tmp_path / "model.json", "hi")
    proc = run_cli(tmp_path, "run", "task", "--model", model, *args)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]
    assert proc.stderr.startswith(message)


def test_dialog_without_a_display_is_refused_up_front(tmp_path: Path) -> None:
    env: dict[str, str | None] = {"DISPLAY": None, "WAYLAND_DISPLAY": None}
    model = write_script(tmp_path / "model.json", "hi")
    proc = run_cli(tmp_path, "run", "task", "--model", model, "--ask-via", "dialog", env=env)
    assert proc.returncode == 2
    assert (
        proc.stderr.strip()
        == "error: ask_via dialog is not possible here: no display: DISPLAY is not set"
    )


@pytest.mark.parametrize(
    ("args", "expanded"),
    [
        (["run", "t", "--gate"], ["run", "t", "--gate", "0.85"]),
        (["run", "--gate", "t"], ["run", "--gate", "0.85", "t"]),
        (["run", "t", "--gate", "--json"], ["run", "t", "--gate", "0.85", "--json"]),
        (["run", "t", "--gate", "0.5"], ["run", "t", "--gate", "0.5"]),
        (["run", "--", "--gate"], ["run", "--", "--gate"]),
    ],
)
def test_a_bare_gate_flag_gets_the_default_threshold(args: list[str], expanded: list[str]) -> None:
    assert expand_gate_flag(args) == expanded
