"""`convergent run` as a user runs it: the console script's entry point, in this process
(`cli_runner`), and in a subprocess where standard input itself is under test."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from cli_runner import EXE, Ran, invoke
from convergent import AgentSpec, Limits
from convergent.durability.sqlite import RunStore
from convergent.messages import ToolCall
from convergent.testing import answer, call, step, write_script


def run_cli(*args: str, cwd: Path | None = None) -> Ran:
    return invoke(*args, cwd=cwd)


def test_json_output_has_the_contract_fields(tmp_path: Path) -> None:
    model = write_script(
        tmp_path / "script.json",
        step(
            call("calculator", expression="17*23"),
            metadata={"confidence": 0.99, "action": "finish"},
        ),
        answer("391", metadata={"confidence": 0.1}),
    )
    proc = run_cli("run", "17*23", "--model", model, "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["stop_reason"] == "completed"
    assert data["output"] == "391"
    assert data["cycles"] == 2
    assert data["tool_calls"] == [  # the call, whole: nothing more, nothing less
        {
            "name": "calculator",
            "arguments": {"expression": "17*23"},
            "ok": True,
            "outcome": "ok",
            "result": "391",
            "cycle": 1,
        }
    ]
    assert {k: data["tool_calls"][0][k] for k in ("name", "arguments", "ok")} == {
        "name": "calculator",
        "arguments": {"expression": "17*23"},
        "ok": True,
    }
    assert set(data["usage"]) >= {"input_tokens", "output_tokens"}


def fails(count: int) -> list[ToolCall]:
    return [call("fail", message=f"boom {n}") for n in range(count)]


def test_tool_error_stop_policy_stops_at_the_first_failure(tmp_path: Path) -> None:
    model = write_script(tmp_path / "script.json", *fails(1))
    proc = run_cli("run", "x", "--model", model, "--json", "--tool-error", "stop", cwd=tmp_path)
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["stop_reason"] == "tool_error"


def test_a_tool_error_goes_back_to_the_model_by_default(tmp_path: Path) -> None:
    model = write_script(tmp_path / "script.json", *fails(2), "handled")
    proc = run_cli("run", "x", "--model", model, "--json", cwd=tmp_path)
    assert proc.returncode == 0
    data = json.loads(proc.stdout)
    assert data["stop_reason"] == "completed"
    assert [call["ok"] for call in data["tool_calls"]] == [False, False]


def test_failing_calls_that_differ_are_the_model_searching(tmp_path: Path) -> None:
    model = write_script(tmp_path / "script.json", *fails(4), "gave up on it")
    proc = run_cli("run", "x", "--model", model, "--json", "--no-checkpoint", cwd=tmp_path)
    assert proc.returncode == 0
    data = json.loads(proc.stdout)
    assert data["stop_reason"] == "completed" and len(data["tool_calls"]) == 4


def test_a_stop_ends_with_the_best_answer_unless_switched_off(tmp_path: Path) -> None:
    calc = call("calculator", expression="2*3")
    model = write_script(tmp_path / "script.json", calc, "6 so far")
    args = ["run", "x", "--model", model, "--json", "--max-cycles", "1", "--no-checkpoint"]
    data = json.loads(run_cli(*args, cwd=tmp_path).stdout)
    assert data["stop_reason"] == "max_cycles"
    assert data["output"] == "6 so far" and data["output_after_stop"] is True
    off = json.loads(run_cli(*args, "--no-final-answer", cwd=tmp_path).stdout)
    assert off["stop_reason"] == "max_cycles"
    assert off["output"] == "" and off["output_after_stop"] is False
    shown = run_cli(*args[:4], "--max-cycles", "1", "--no-checkpoint", cwd=tmp_path)
    assert "best answer after the stop:" in shown.stdout and "6 so far" in shown.stdout


def test_the_live_view_and_the_trace_show_a_nudge(tmp_path: Path) -> None:
    calc = call("calculator", expression="1+1")
    model = write_script(tmp_path / "script.json", calc, calc, calc, "2")
    trace = tmp_path / "trace.jsonl"
    proc = run_cli(
        "run", "x", "--model", model, "--no-checkpoint", "--trace", str(trace), cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert "nudge instead of stalled" in proc.stdout
    kinds = [json.loads(line)["type"] for line in trace.read_text().splitlines()]
    assert kinds.count("nudged") == 1


def test_a_cap_that_continues_refuses_the_call_and_the_run_answers(tmp_path: Path) -> None:
    model = write_script(
        tmp_path / "script.json",
        step(call("calculator", expression="1+1")),
        step(call("calculator", expression="2+2")),
        answer("2 and, not computed, 4"),
    )
    args = ["--max-calls-per-tool", "calculator=1", "--on-max-calls-per-tool", "continue"]
    proc = run_cli("run", "add", "--model", model, *args, "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["stop_reason"] == "completed"
    assert [c["result"] for c in data["tool_calls"]] == ["2"]  # the second did not run


def test_max_cycles_and_trace_file(tmp_path: Path) -> None:
    calls = [call("calculator", expression=f"{i}+1") for i in range(5)]
    trace = tmp_path / "trace.jsonl"
    proc = run_cli(
        "run",
        "x",
        "--model",
        write_script(tmp_path / "script.json", *calls),
        "--max-cycles",
        "2",
        "--json",
        "--trace",
        str(trace),
        cwd=tmp_path,
    )
    assert json.loads(proc.stdout)["stop_reason"] == "max_cycles"
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    assert events[0]["type"] == "run_started"
    assert events[-1]["type"] == "run_stopped" and events[-1]["reason"] == "max_cycles"
    assert sum(e["type"] == "tool_finished" for e in events) == 2


def test_live_view_shows_cycles_and_stop_reason(tmp_path: Path) -> None:
    model = write_script(tmp_path / "script.json", call("calculator", expression="2+2"), "4")
    proc = run_cli("run", "2+2", "--model", model, cwd=tmp_path)
    assert proc.returncode == 0
    assert "cycle 1" in proc.stdout
    assert 'ok calculator(expression="2+2") -> 4' in proc.stdout
    assert "stopped: completed" in proc.stdout


def test_live_view_shows_the_arguments_of_each_call_in_a_batch(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha")
    calls = [
        call("read_file", call_id="c1", path="a.txt"),
        call("calculator", call_id="c2", expression="6*7"),
    ]
    model = write_script(tmp_path / "script.json", calls, "done")
    proc = run_cli("run", "go", "--model", model, "--workspace", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert 'read_file(path="a.txt") -> alpha' in proc.stdout
    assert 'calculator(expression="6*7") -> 42' in proc.stdout


def test_read_file_is_confined_to_the_workspace(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "a.txt").write_text("inside")
    model = write_script(
        tmp_path / "script.json",
        step(
            call("read_file", path="a.txt"),
            call("read_file", path="../script.json"),
        ),
        "ok",
    )
    proc = run_cli(
        "run", "x", "--model", model, "--json", "--workspace", str(tmp_path / "ws"), cwd=tmp_path
    )
    calls = json.loads(proc.stdout)["tool_calls"]
    assert [c["ok"] for c in calls] == [True, False]
    assert "outside the workspace" in calls[1]["result"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "nope:x"], "unknown model"),
        (["--model", "scripted:/does/not/exist.json"], "script file not found"),
        (["--max-cycles", "-3"], "--max-cycles must be >= 0"),
        (["--max-tokens", "-1"], "--max-tokens must be >= 0"),
        (["--tool-error", "ignore"], "--tool-error must be"),
        (["--policy", "on_tool_error=bogus"], "--policy on_tool_error must be 'continue' or"),
        (["--policy", "max_repeated_failures=-3"], "--policy max_repeated_failures must be >= 1"),
        (["--workspace", "/does/not/exist"], "workspace folder not found"),
        (["--workspace", "script.json"], "--workspace must be a folder, not a file"),
        (["--max-seconds", "nan"], "--max-seconds must be a number, got nan"),
        (["--max-cost", "nan"], "--max-cost must be a number, got nan"),
        (["--max-seconds", "inf"], "--max-seconds must be a finite number, got inf"),
        (["--protocol", "xml"], "--protocol must be 'native' or 'structured', got 'xml'"),
        (["--temperature", "-0.5"], "--temperature must be >= 0, got -0.5"),
        (["--max-tool-errors", "-1"], "--max-tool-errors must be >= 0"),
        (["--ask-via", "carrier-pigeon"], "--ask-via must be one of"),
        (["--on-max-tool-calls", "skip"], "--on-max-tool-calls must be"),
    ],
)
def test_bad_input_is_one_line_and_exit_two(tmp_path: Path, args: list[str], message: str) -> None:
    base = ["--model", write_script(tmp_path / "script.json", "hi")]
    proc = run_cli("run", "task", *base, *args, cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"[{", "error: script file"),
        (b'["caf\xe9"]', "is not UTF-8 text"),
        (b"[" * 100_000 + b"]" * 100_000, "is nested too deeply"),
        (b'[{"usage": {"input_tokens": "many"}}]', "usage.input_tokens must be a whole number"),
        (b'[{"usage": {"output_tokens": -3}}]', "usage.output_tokens must be a whole number"),
        (b'[{"usage": {"input_tokens": 1.5}}]', "usage.input_tokens must be a whole number"),
        (b'[{"usage": [1, 2]}]', "'usage' must be an object"),
    ],
)
def test_malformed_script_is_one_line(tmp_path: Path, content: bytes, message: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    proc = run_cli("run", "x", "--model", f"scripted:{bad}", cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr


def test_too_short_script_is_reported(tmp_path: Path) -> None:
    model = write_script(tmp_path / "script.json", call("calculator", expression="1"))
    proc = run_cli("run", "x", "--model", model, cwd=tmp_path)
    assert proc.returncode == 2
    assert "holds only 1 response" in proc.stderr


def run_with_stdin(tmp_path: Path, data: bytes, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [EXE, "run", "-", "--model", write_script(tmp_path / "script.json", "read it"), *args],
        input=data,
        capture_output=True,
        timeout=60,
        cwd=tmp_path,
        check=False,
    )


@pytest.mark.slow
def test_a_task_from_standard_input_may_be_long(tmp_path: Path) -> None:
    task = "summarise this: " + "lorem ipsum " * 20_000
    assert len(task.encode()) > 128 * 1024
    proc = run_with_stdin(tmp_path, task.encode(), "--json", "--run-id", "long")
    assert proc.returncode == 0, proc.stderr
    with RunStore(tmp_path / ".convergent" / "runs.db") as store:
        assert store.get_run("long").task == task


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"   \n\t", "error: the task is empty"),
        (b"caf\xe9 au lait", "error: the task on standard input is not UTF-8 (byte 3)"),
    ],
)
@pytest.mark.slow
def test_a_bad_task_on_standard_input_is_one_line(
    tmp_path: Path, data: bytes, message: str
) -> None:
    proc = run_with_stdin(tmp_path, data)
    assert proc.returncode == 2
    assert proc.stderr.decode().strip() == message


def test_an_empty_task_argument_is_refused(tmp_path: Path) -> None:
    proc = run_cli(
        "run", "  ", "--model", write_script(tmp_path / "script.json", "x"), cwd=tmp_path
    )
    assert proc.returncode == 2 and proc.stderr.strip() == "error: the task is empty"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "x", "--model", "scripted:/does/not/exist.json"], "script file not found"),
        (["run", "--model", "scripted:x.json"], "Missing argument 'task'"),
        (["runs", "--db", "/does/not/exist.db"], "no run database"),
        (["coordinator", "status", "--state", "missing.yaml"], "missing.yaml"),
        (["bench", "nonsense"], "unknown suite 'nonsense'"),
        (["run", "x", "--max-seconds", "nan"], "--max-seconds"),
    ],
)
def test_json_errors_are_exactly_one_object(tmp_path: Path, args: list[str], message: str) -> None:
    proc = run_cli(*args, "--json", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout.count("\n") == 1, proc.stdout
    error = json.loads(proc.stdout)
    assert set(error) == {"error", "exit_code"} and error["exit_code"] == 2
    assert message in error["error"]
    assert "Traceback" not in proc.stderr


def test_a_run_that_never_starts_is_not_announced_as_saved(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    model = write_script(tmp_path / "script.json", "hi")
    proc = run_cli("run", "x", "--model", model, "--mcp", "no-such-server-cmd", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == (
        "error: MCP server 'no-such-server-cmd' failed to start: "
        "cannot run 'no-such-server-cmd': No such file or directory\n"
    )
    assert json.loads(run_cli("runs", "--json", cwd=tmp_path).stdout) == []
    model = write_script(tmp_path / "script.json", "hi")
    started = run_cli("run", "x", "--model", model, "--no-steer", cwd=tmp_path)
    assert started.returncode == 0
    (run,) = json.loads(run_cli("runs", "--json", cwd=tmp_path).stdout)
    assert started.stderr == f"run {run['run_id']} · saved in .convergent/runs.db\n"


def test_a_run_whose_model_fails_to_load_only_says_it_was_not_kept(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model.gguf"
    proc = run_cli("run", "x", "--model", f"local:{missing}", "--no-steer", cwd=tmp_path)
    assert proc.returncode == 2
    notes = proc.stderr.splitlines()
    assert "saved in" not in proc.stderr, proc.stderr
    assert notes[-2:] == [
        notes[-2].split(" never started")[0] + " never started: it was not kept",
        f"error: model file not found: {missing}",
    ]
    assert json.loads(run_cli("runs", "--json", cwd=tmp_path).stdout) == []


@pytest.mark.parametrize("command", [["run"], ["resume"], ["steer"], ["runs"], ["mcp", "tools"]])
def test_help_shows_no_value_type_for_flags(command: list[str]) -> None:
    proc = invoke(*command, "--help", env={"COLUMNS": "160", "NO_COLOR": "1"})
    assert proc.returncode == 0, proc.stderr
    assert "<bool>" not in proc.stdout
    (help_row,) = [line for line in proc.stdout.splitlines() if "--help" in line]
    assert help_row.split() == ["│", "--help", "Show", "this", "message", "and", "exit.", "│"]


def test_a_run_without_a_cycle_limit_gets_the_one_python_gets(tmp_path: Path) -> None:
    model = write_script(tmp_path / "s.json", "hi")
    assert run_cli("run", "x", "--model", model, "--run-id", "d", cwd=tmp_path).returncode == 0
    with RunStore(tmp_path / ".convergent" / "runs.db") as store:
        spec = store.get_run("d").spec
    assert spec is not None
    assert spec["limits"]["max_cycles"] == Limits().max_cycles == AgentSpec().limits.max_cycles


def test_a_run_whose_model_cannot_start_leaves_nothing_behind(tmp_path: Path) -> None:
    proc = run_cli("run", "hi", "--model", f"local:{tmp_path / 'nope.gguf'}", cwd=tmp_path)
    assert proc.returncode == 2
    assert (
        proc.stderr.strip().splitlines()[-1]
        == f"error: model file not found: {tmp_path / 'nope.gguf'}"
    )
    with RunStore(tmp_path / ".convergent" / "runs.db") as store:
        assert store.count_runs() == 0
