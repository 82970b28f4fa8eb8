"""The evidence replay script: corpora under sources and policies, over `convergent.replay`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmarks.replay.cli import main, settings_for

FIXTURES = Path(__file__).parents[1] / "replay" / "fixtures"
TAU = FIXTURES / "tau_bench_excerpt.json"
TAU2 = FIXTURES / "tau2_bench_excerpt.json"
SRC = Path(__file__).resolve().parents[2] / "src"


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_report_counts_cuts_faults_and_loops(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(
        capsys,
        f"--corpus=tau-bench:{TAU}",
        f"--corpus=tau2-bench:{TAU2}",
        "--policy=stop at the first error",
        "--json",
    )
    assert code == 0
    report = json.loads(out)
    (tau,) = report["tau_bench_excerpt.json"]
    assert tau["policy"] == "installed: stop at the first error"
    assert tau["runs"] == {"successful": 3, "failed": 1, "unlabelled": 0}
    # #0 fails a payment once (cut by this policy); #3 reads again after each write, which
    # is progress and is never cut
    cut = [run["id"] for run in tau["stopped"] if run["success"]]
    assert cut == ["tau_bench_excerpt.json#0 task 0 trial 0"]
    assert tau["real_loops"]["failed"] == {"stopped": 1, "nudged": 0, "missed": 0}
    (tau2,) = report["tau2_bench_excerpt.json"]
    assert (tau2["runs"]["successful"], tau2["failed_stopped"]) == (2, 0)
    # three different lookups failing in one batch: the recording shows no loop there
    batch = next(run for run in tau2["stopped"] if "sim0001" in run["id"])
    assert batch["verdict"] == "successful, cut: policy's fault"


def test_the_text_report_names_every_stop(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, f"--corpus=tau-bench:{TAU}", "--details")
    assert code == 0
    assert "== tau_bench_excerpt.json: 4 runs (3 successful, 1 failed)" in out
    assert "installed: default" in out and "installed: stop at the first error" in out
    assert "failed, stopped: tau_bench_excerpt.json#1 task 1 trial 0: stalled" in out
    # the third identical read is nudged, the fourth stops the run
    assert "real loop: get_reservation_details x4 unchanged" in out


def test_a_source_tree_is_replayed_in_its_own_process(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = [f"--corpus=tau-bench:{TAU}", f"--corpus=tau2-bench:{TAU2}", "--json"]
    _, here, _ = run_cli(capsys, *argv)
    code, there, _ = run_cli(capsys, *argv, f"--source=tree={SRC}")
    assert code == 0
    replayed = json.loads(there)
    for rows in replayed.values():
        for row in rows:
            row["policy"] = row["policy"].replace("tree: ", "installed: ")
    assert replayed == json.loads(here)


def test_a_policy_uses_the_names_the_replayed_convergent_takes() -> None:
    from convergent.replay._settings import setting_names

    renamed = "notes" if "notes" in setting_names() else "stall_nudges"
    assert settings_for("no nudge") == {renamed: 0}
    assert settings_for("default") == {}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--corpus=tau-bench"], "--corpus 'tau-bench': expected FORMAT:PATH"),
        (["--corpus=tau-bench:/no/such.json"], "/no/such.json: no such file or folder"),
        ([f"--corpus=tau-bench:{TAU}", "--source=x=/no/such"], "expected LABEL=SRC"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run_cli(capsys, *argv)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and message in err


def test_the_patterns_of_a_corpus_are_counted(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, f"--corpus=tau-bench:{TAU}", "--patterns", "--policy=default")
    assert code == 0
    header = out.splitlines().index(next(line for line in out.splitlines() if "parallel" in line))
    successful, failed = out.splitlines()[header + 1 : header + 3]
    # successful: run #0 fails twice in a row; run #3 reads a reservation again after each
    # write, with a new result each time (a repeat with new results and a verify after write)
    assert successful.split()[:5] == ["successful", "(3)", "0", "1", "1"]
    assert successful.split()[-3:] == ["2,", "2", "1"]
    assert failed.split()[-1] == "4"


def test_declared_replays_each_corpus_with_the_file_of_its_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.benchmarks.test_replay_declared import _tau_run

    corpus = tmp_path / "gpt-4o-airline.json"
    corpus.write_text(json.dumps([_tau_run([f"reservation R{n}" for n in range(4)])]))
    for flag, stopped in (("--loop-threshold=3", 0), ("--declared", 1)):
        code, out, _ = run_cli(
            capsys, f"--corpus=tau-bench:{corpus}", "--policy=default", flag, "--json"
        )
        assert code == 0
        (figures,) = json.loads(out)["gpt-4o-airline.json"]
        assert figures["failed_stopped"] == stopped, flag
