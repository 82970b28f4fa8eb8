"""``run --run-id``, ``runs``, ``resume``, ``rewind`` and ``steer`` through the console
script's entry point in this process (`cli_runner`), and in a subprocess where standard
input itself is under test."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cli_runner import Ran, console_script, invoke
from convergent.durability.sqlite import RunStore
from convergent.testing import call, write_script

RULE = "1-128 letters, digits, '.', '_' or '-', starting with a letter or digit"


def cli(*args: str, cwd: Path, stdin: str | None = None) -> Ran:
    return invoke(*args, cwd=cwd, stdin=stdin)


def test_run_checkpoints_by_default_and_resume_continues(tmp_path: Path) -> None:
    first = write_script(
        tmp_path / "a.json",
        call("calculator", expression="1+1"),
        call("calculator", expression="2+2"),
    )
    proc = cli("run", "add", "--model", first, "--run-id", "r1", "--max-cycles", "2", "--json",
               cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["stop_reason"] == "max_cycles"
    assert (tmp_path / ".convergent" / "runs.db").is_file()
    listed = json.loads(cli("runs", "--json", cwd=tmp_path).stdout)
    assert [(r["run_id"], r["status"], r["cycles"], r["resumable"]) for r in listed] == [
        ("r1", "max_cycles", 2, True)
    ]
    second = write_script(tmp_path / "b.json", "the sums are 2 and 4")
    resumed = cli("resume", "r1", "--model", second, "--json", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    data = json.loads(resumed.stdout)
    assert data["stop_reason"] == "completed" and data["cycles"] == 3
    assert [c["result"] for c in data["tool_calls"]] == ["2", "4"]
    table = cli("runs", cwd=tmp_path).stdout
    assert "r1" in table and "completed" in table
    again = cli("resume", "r1", cwd=tmp_path)
    assert again.returncode == 2
    assert again.stderr.strip() == "error: run 'r1' ended completed; there is nothing to resume"


def test_needs_user_resume_takes_an_answer(tmp_path: Path) -> None:
    ask = call("ask_user", question="Which colour?")
    proc = cli("run", "paint", "--model", write_script(tmp_path / "a.json", ask), "--run-id", "q",
               "--ask-via", "none", "--json", cwd=tmp_path)  # fmt: skip
    assert json.loads(proc.stdout)["stop_reason"] == "needs_user"
    missing = cli("resume", "q", cwd=tmp_path)
    assert missing.returncode == 2
    assert "waits for an answer to: Which colour?" in missing.stderr
    done = write_script(tmp_path / "b.json", "painting it blue")
    resumed = cli("resume", "q", "--answer", "blue", "--model", done, "--json", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["output"] == "painting it blue"


def test_rewind_restores_files_written_by_the_run(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("original")
    responses = [
        call("edit_file", path="notes.txt", old_text="original", new_text="changed"),
        call("write_file", path="new.txt", content="x"),
        "done",
    ]  # fmt: skip
    model = write_script(tmp_path / "s.json", *responses)
    proc = cli("run", "edit", "--model", model, "--run-id", "w",
               "--allow-writes", "--json", cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "notes.txt").read_text() == "changed"
    rewound = cli("rewind", "w", "--to", "0", "--json", cwd=tmp_path)
    assert rewound.returncode == 0, rewound.stderr
    assert json.loads(rewound.stdout) == {
        "run_id": "w",
        "cycle": 0,
        "restored": ["notes.txt"],
        "deleted": ["new.txt"],
        "skipped": [],
    }
    assert (tmp_path / "notes.txt").read_text() == "original"
    assert not (tmp_path / "new.txt").exists()
    assert json.loads(cli("runs", "--json", cwd=tmp_path).stdout)[0]["status"] == "stopped"


def test_skills_option_puts_skills_in_the_prompt(tmp_path: Path) -> None:
    skill = tmp_path / "skills" / "greet"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: greet\ndescription: Say hello.\n---\nWave.\n")
    responses = [call("load_skill", name="greet"), "hi"]
    proc = cli("run", "greet", "--model", write_script(tmp_path / "s.json", *responses), "--skills",
               str(tmp_path / "skills"), "--no-checkpoint", "--json", cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["tool_calls"][0]["result"] == "Wave."
    assert not (tmp_path / ".convergent").exists()


@pytest.mark.slow
def test_terminal_steering_reads_stdin_when_asked(tmp_path: Path) -> None:
    model = write_script(tmp_path / "s.json", "answer")
    proc = console_script("run", "x", "--model", model, "--steer",
               "--json", cwd=tmp_path, stdin="")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["output"] == "answer"


@pytest.fixture(scope="module")
def one_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder whose runs.db holds one completed two-cycle run, r1."""
    folder = tmp_path_factory.mktemp("one_run")
    model = write_script(folder / "s.json", call("calculator", expression="1"), "done")
    made = cli("run", "t", "--model", model, "--run-id", "r1", "--db", "runs.db", "--json",
               cwd=folder)  # fmt: skip
    assert made.returncode == 0, made.stderr
    return folder


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["runs"], "error: no run database at .convergent/runs.db (pass --db PATH)"),
        (["resume", "nope", "--db", "runs.db"], "error: no run 'nope' in runs.db"),
        (["rewind", "r1", "--to", "-1", "--db", "runs.db"], "error: --to must be >= 0, got -1"),
        (["rewind", "r1", "--to", "7", "--db", "runs.db"],
         "error: run 'r1' has no checkpoint for cycle 7; have 0, 1, 2"),
        (["steer", "r1", "--db", "runs.db"],
         "error: give exactly one of MESSAGE, --stop, --pause or --resume"),
        (["steer", "r1", "hi", "--stop", "--db", "runs.db"],
         "error: give exactly one of MESSAGE, --stop, --pause or --resume"),
        (["steer", "r1", "--pause", "--db", "runs.db"],
         "error: run 'r1' is not running (completed)"),
        (["run", "x", "--run-id", "bad id!", "--db", "runs.db"],
         f"error: --run-id must be {RULE}, got 'bad id!'"),
        (["resume", "--db", "runs.db", "--", "-x"], f"error: run id must be {RULE}, got '-x'"),
        (["steer", "a/b", "hi", "--db", "runs.db"], f"error: run id must be {RULE}, got 'a/b'"),
        (["rewind", "x" * 231, "--to", "1", "--db", "runs.db"],
         f"error: run id must be {RULE}, got '{'x' * 40}'… (231 characters)"),
        (["run", "x", "--run-id", "-r", "--db", "runs.db"],
         f"error: --run-id must be {RULE}, got '-r'"),
        (["run", "x", "--run-id", "r1", "--db", "runs.db"],
         "error: run 'r1' already exists; continue it with: resume r1"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(one_run: Path, args: list[str], message: str) -> None:
    proc = cli(*args, cwd=one_run)
    assert proc.returncode == 2
    assert proc.stderr.strip() == message


def test_steer_message_to_a_stopped_run_is_queued_for_resume(tmp_path: Path) -> None:
    model = write_script(tmp_path / "s.json", call("calculator", expression="1"))
    cli("run", "t", "--model", model, "--run-id", "r", "--max-cycles", "1", cwd=tmp_path)
    queued = cli("steer", "r", "count to three", cwd=tmp_path)
    assert queued.returncode == 0
    assert queued.stdout.strip() == (
        "queued for r; it is delivered when the run resumes (convergent resume r)"
    )
    resumed = cli("resume", "r", "--model", write_script(tmp_path / "b.json", "3"), "--json",
                  cwd=tmp_path)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    with RunStore(tmp_path / ".convergent" / "runs.db") as store:
        users = [m.content for m in store.load("r").messages if m.role == "user"]
    # the task, the budget note before the only cycle, then the message on resume
    assert users[0] == "t" and users[1].startswith("Budget note:")
    assert users[2:] == ["count to three"]


def test_steer_and_resume_both_refuse_a_completed_run(tmp_path: Path) -> None:
    model = write_script(tmp_path / "s.json", "done")
    cli("run", "t", "--model", model, "--run-id", "r", cwd=tmp_path)
    steered = cli("steer", "r", "now do more", cwd=tmp_path)
    assert steered.returncode == 2
    assert steered.stderr.strip() == (
        "error: run 'r' ended completed; there is nothing to steer "
        "(convergent resume continues only runs that did not complete)"
    )
    resumed = cli("resume", "r", "--message", "now do more", cwd=tmp_path)
    assert resumed.returncode == 2
    assert resumed.stderr.strip() == "error: run 'r' ended completed; there is nothing to resume"
    with RunStore(tmp_path / ".convergent" / "runs.db") as store:
        assert store.stored_steering("r", 0) == []


def test_runs_lists_any_number_of_runs_a_page_at_a_time(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    with RunStore(db) as store, store.transaction() as conn:
        conn.executemany(
            "INSERT INTO runs (run_id, task, model, status, stop_reason, cycles, usage, elapsed, "
            "started_at, updated_at, epoch, message_count, state_version) "
            "VALUES (?, ?, 'scripted', 'stopped', 'completed', 1, '{}', 0, ?, ?, 1, 0, 2)",
            [(f"r{n:04d}", f"task {n}\x1b[31m", n, n) for n in range(1203)],
        )
    listed = json.loads(
        cli("runs", "--db", str(db), "--limit", "5000", "--json", cwd=tmp_path).stdout
    )
    assert [run["run_id"] for run in listed] == [f"r{n:04d}" for n in reversed(range(1203))]
    some = json.loads(cli("runs", "--db", str(db), "--limit", "501", "--json", cwd=tmp_path).stdout)
    assert len(some) == 501 and some[-1]["run_id"] == "r0702"
    table = cli("runs", "--db", str(db), "--limit", "1000", cwd=tmp_path).stdout.splitlines()
    assert table[0].split() == ["id", "status", "cycles", "cost", "age", "task"]
    assert len(table) == 1001 and table[1].split()[:3] == ["r1202", "completed", "1"]
    assert table[-1].split()[0] == "r0203" and "\x1b" not in "".join(table)
    assert len({line.index("completed") for line in table[1:]}) == 1  # columns line up


def test_a_run_started_with_a_relative_script_and_a_workspace_resumes_from_anywhere(
    tmp_path: Path,
) -> None:
    (tmp_path / "ws").mkdir()
    ask = call("ask_user", question="which?")
    write_script(tmp_path / "s.json", ask, "you chose it")
    first = cli("run", "pick", "--model", "scripted:s.json", "--workspace", "ws", "--ask-via",
                "none", "--run-id", "rel", "--json", cwd=tmp_path)  # fmt: skip
    assert first.returncode == 1 and json.loads(first.stdout)["stop_reason"] == "needs_user"
    db = tmp_path / ".convergent" / "runs.db"
    resumed = cli("resume", "rel", "--answer", "the left one", "--db", str(db), "--json",
                  cwd=tmp_path / "ws")  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["output"] == "you chose it"


def test_runs_shows_child_runs_indented_under_their_parent(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    shutil.copy(Path(__file__).parents[1] / "durability" / "sqlite" / "fixtures" / "runs.v5.db", db)
    with RunStore(db) as store, store.transaction() as conn:
        conn.execute(
            "INSERT INTO runs (run_id, task, model, status, stop_reason, cycles, usage, elapsed, "
            "started_at, updated_at, epoch, message_count, state_version, parent_run_id, "
            "parent_call_id) VALUES ('grandchild', 'deeper', 'scripted', 'stopped', "
            "'completed', 1, '{}', 0, 1, 1, 1, 0, 3, 'fixture-v5.1.ask-1', 'c9')"
        )
    table = cli("runs", "--db", str(db), cwd=tmp_path).stdout.splitlines()
    assert [line.split()[0] for line in table] == [
        "id",
        "fixture-v5",
        "fixture-v5.1.ask-1",
        "grandchild",
    ]
    assert table[2].startswith("  fixture-v5.1.ask-1 ") and table[3].startswith("    grandchild ")
    assert len({line.index("completed") for line in table[1:]}) == 1  # columns line up
    listed = json.loads(cli("runs", "--db", str(db), "--json", cwd=tmp_path).stdout)
    parents = {run["run_id"]: (run["parent_run_id"], run["parent_call_id"]) for run in listed}
    assert parents == {
        "fixture-v5": (None, None),
        "fixture-v5.1.ask-1": ("fixture-v5", "ask-1"),
        "grandchild": ("fixture-v5.1.ask-1", "c9"),
    }


def capped_run(folder: Path) -> None:
    """Run ``r`` stopped ``max_cycles`` after 2 of 2 cycles, with calls left in its script."""
    script = write_script(
        folder / "a.json", *[call("calculator", expression=f"{n}+1") for n in range(8)]
    )
    options = ["--max-cycles", "2", "--max-cost", "5", "--no-final-answer", "--run-id", "r"]
    proc = cli("run", "add", "--model", script, *options, "--json", cwd=folder)
    assert json.loads(proc.stdout)["stop_reason"] == "max_cycles", proc.stderr


@pytest.mark.parametrize(
    ("options", "cycles"),
    [
        (["--max-cycles", "3"], 3),  # counted from the run's start, as for run
        (["--more-cycles", "3"], 5),  # on top of the 2 it used
        ([], 4),  # its own limit of 2, granted once more
    ],
)
def test_resume_budgets_count_from_the_runs_start_and_more_adds(
    tmp_path: Path, options: list[str], cycles: int
) -> None:
    capped_run(tmp_path)
    resumed = cli("resume", "r", *options, "--json", cwd=tmp_path)
    data = json.loads(resumed.stdout)
    assert (data["stop_reason"], data["cycles"]) == ("max_cycles", cycles), resumed.stderr
    with RunStore(tmp_path / ".convergent" / "runs.db") as store:
        limits = store.get_run("r").spec
    assert limits is not None and limits["limits"]["max_cost"] == 5, "the other budgets stay"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--max-cycles", "2"], "error: run 'r' has used 2 of max_cycles=2: budgets count"),
        (["--max-cycles", "5", "--more-cycles", "1"], "error: give --max-cycles or --more-c"),
        (["--more-tokens", "-1"], "error: --more-tokens must be >= 0, got -1"),
    ],
)
def test_resume_budgets_that_leave_no_room_are_one_line_errors(
    tmp_path: Path, options: list[str], message: str
) -> None:
    capped_run(tmp_path)
    resumed = cli("resume", "r", *options, cwd=tmp_path)
    assert resumed.returncode == 2
    assert resumed.stderr.startswith(message) and len(resumed.stderr.splitlines()) == 1


def test_a_paused_run_is_listed_paused_and_its_pause_is_printed(tmp_path: Path) -> None:
    import asyncio
    import threading
    import time

    from convergent import Agent, tool
    from convergent.events import Event, RunPaused, RunUnpaused
    from convergent.testing import scripted

    release = threading.Event()

    @tool
    def wait() -> str:
        """Wait until the test lets the call end."""
        release.wait(30)
        return "done"

    db = tmp_path / ".convergent" / "runs.db"
    db.parent.mkdir()
    seen: list[Event] = []
    with RunStore(db) as store:
        agent = Agent(scripted(call("wait"), "finished"), [wait], store=store)
        run = threading.Thread(
            target=asyncio.run, args=(agent.run("w", run_id="p", on_event=seen.append),)
        )
        run.start()
        while not store.exists("p"):
            time.sleep(0.01)
        assert cli("steer", "p", "--pause", cwd=tmp_path).returncode == 0
        release.set()  # the cycle ends; the pause holds the run before the next one
        while not any(isinstance(event, RunPaused) for event in seen):
            time.sleep(0.01)
        listed = json.loads(cli("runs", "--json", cwd=tmp_path).stdout)
        assert [(r["run_id"], r["status"]) for r in listed] == [("p", "paused")]
        assert cli("runs", cwd=tmp_path).stdout.splitlines()[1].split()[:2] == ["p", "paused"]
        assert cli("steer", "p", "--resume", cwd=tmp_path).returncode == 0
        run.join()
        assert any(isinstance(event, RunUnpaused) for event in seen)
        assert store.get_run("p").status == "completed"
