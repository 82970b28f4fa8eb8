"""``convergent run --mcp / --mcp-config`` and ``convergent resume`` as a user runs them."""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from mcp_helpers import SERVER, alive, descendants, listed, raw_args

from convergent.testing import call, step, write_script

if importlib.util.find_spec("mcp") is None:  # found, not imported: collecting stays light
    pytest.skip("needs the mcp extra", allow_module_level=True)
pytestmark = pytest.mark.slow  # each test starts convergent and its servers as processes

TIME = f"{shlex.quote(sys.executable)} -m mcp_server_time"
TESTING = f"{shlex.quote(sys.executable)} {shlex.quote(str(SERVER))}"


@pytest.fixture(autouse=True)
def _no_server_outlives_its_test() -> object:
    before = descendants()
    yield None
    assert descendants() - before == set()


def cli(*args: str, cwd: Path) -> subprocess.Popen[str]:
    """Start ``convergent ARGS`` as a terminal starts it: with Ctrl-C (SIGINT) at its
    default, also when the suite runs as a background job, whose shell ignores it."""
    ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    if ignored:  # a child inherits an ignored signal, but not a handler: it gets the default
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "convergent", *args],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    finally:
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "convergent", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_mcp_starts_a_server_from_a_command_line(tmp_path: Path) -> None:
    model = write_script(
        tmp_path / "script.json",
        call("get_current_time", timezone="Europe/Paris"),
        call("echo", text="hello"),
        "done",
    )
    proc = run_cli(
        "run", "x", "--model", model, "--json", "--mcp", TIME, "--mcp", TESTING, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    now, echo = data["tool_calls"]
    assert now["ok"] and json.loads(now["result"])["timezone"] == "Europe/Paris"
    assert echo["ok"] and echo["result"] == "hello"
    with sqlite3.connect(tmp_path / ".convergent" / "runs.db") as conn:
        rows = conn.execute("SELECT source FROM finished_calls ORDER BY cycle").fetchall()
    assert rows == [("mcp:mcp_server_time",), ("mcp:server",)]


def test_mcp_config_reads_an_mcp_servers_file(tmp_path: Path) -> None:
    config = tmp_path / ".mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "testing": {"command": sys.executable, "args": [str(SERVER)], "timeout": 0.5}
                }
            }
        )
    )
    model = write_script(tmp_path / "script.json", call("slow", seconds=30), "gave up")
    proc = run_cli(
        "run", "x", "--model", model, "--json", "--mcp-config", str(config), cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    (slow,) = json.loads(proc.stdout)["tool_calls"]
    assert slow["result"] == "slow timed out after 0.5s"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{oops", "not valid JSON"),
        ('{"mcpServers": {"a": {"command": 3}}}', "mcpServers.a needs a command (a string)"),
    ],
)
def test_a_bad_config_file_is_exit_two_and_one_line(
    tmp_path: Path, content: str, message: str
) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(content)
    proc = run_cli(
        "run",
        "x",
        "--model",
        write_script(tmp_path / "script.json", "x"),
        "--mcp-config",
        str(config),
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and message in proc.stderr


def test_a_server_that_fails_to_start_is_exit_two_naming_it(tmp_path: Path) -> None:
    model = write_script(tmp_path / "script.json", "x")
    proc = run_cli("run", "x", "--model", model, "--mcp", "no-such-mcp-server --flag", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == (
        "error: MCP server 'no-such-mcp-server' failed to start: cannot run "
        "'no-such-mcp-server': No such file or directory"
    )
    assert "Traceback" not in proc.stderr


def _server_pid(cli_pid: int, deadline: float) -> int:
    while time.monotonic() < deadline:
        for pid in descendants(cli_pid):
            try:
                command = psutil.Process(pid).cmdline()
            except psutil.Error:
                continue
            if str(SERVER) in " ".join(command):
                return pid
        time.sleep(0.05)
    raise AssertionError("the MCP server did not start")


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_during_a_call_stops_the_server_too(
    tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "t": {"command": sys.executable, "args": [str(SERVER)], "timeout": None}
                }
            }
        )
    )
    trace = tmp_path / "trace.jsonl"
    model = write_script(tmp_path / "script.json", call("slow", seconds=60), "never")
    proc = cli(
        "run",
        "x",
        "--model",
        model,
        "--json",
        "--mcp-config",
        str(config),
        "--trace",
        str(trace),
        cwd=tmp_path,
    )
    try:
        deadline = time.monotonic() + 30
        server = _server_pid(proc.pid, deadline)
        while "tool_started" not in (trace.read_text() if trace.exists() else ""):
            assert time.monotonic() < deadline, "the call did not start"
            time.sleep(0.05)
        os.kill(proc.pid, sig)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == code, stderr
    if sig == signal.SIGTERM:
        assert stderr.splitlines()[-1] == "error: terminated"
    assert "Traceback" not in stderr
    assert not alive(server)


def test_resume_restarts_the_servers(tmp_path: Path) -> None:
    model = write_script(
        tmp_path / "script.json",
        call("pid"),
        "a process id, so far",  # the answer after the max_cycles stop
        call("pid"),
        "done",
    )
    first = run_cli(
        "run",
        "x",
        "--model",
        model,
        "--json",
        "--mcp",
        TESTING,
        "--max-cycles",
        "1",
        "--run-id",
        "r1",
        cwd=tmp_path,
    )
    assert first.returncode == 1 and json.loads(first.stdout)["stop_reason"] == "max_cycles"
    second = run_cli("resume", "r1", "--more-cycles", "5", "--json", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    data = json.loads(second.stdout)
    assert data["stop_reason"] == "completed"
    before, after = (c["result"] for c in data["tool_calls"])
    assert before != after and int(after) > 0


def test_a_schema_that_would_backtrack_for_ever_is_checked_at_once(tmp_path: Path) -> None:
    fanned: dict[str, Any] = {"$defs": {"d30": {"type": "string"}}}
    for level in range(30):  # each level tries the next one twice: 2**30 paths
        step = {"$ref": f"#/$defs/d{level + 1}"}
        fanned["$defs"][f"d{level}"] = {"anyOf": [step, {"allOf": [step, {"minLength": 9}]}]}
    plan = {
        "tools": [
            listed("nested", {"word": {"type": "string", "pattern": "^(a+)+$"}}),
            listed("named", {}, patternProperties={"^(x+x+)+y$": {"type": "integer"}}),
            listed("fanned", {"word": {"$ref": "#/$defs/d0"}}, **fanned),
        ]
    }
    config = tmp_path / "mcp.json"
    server = {"command": sys.executable, "args": raw_args(tmp_path, plan)}
    config.write_text(json.dumps({"mcpServers": {"raw": server}}))
    calls = [
        call("nested", word="a" * 5000 + "!"),
        call("nested", word="aaaa"),
        call("named", **{"x" * 5000 + "!": 1, "x" * 5000 + "y": "not a number"}),
        call("fanned", word=7),
    ]
    model = write_script(tmp_path / "script.json", calls, "done")
    proc = run_cli(
        "run", "x", "--model", model, "--json", "--mcp-config", str(config), cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    nested, good, named, fanned_call = json.loads(proc.stdout)["tool_calls"]
    assert not nested["ok"] and nested["result"].startswith(
        "invalid arguments for nested: word: 'aaaaaaaa"
    )
    assert nested["result"].endswith("... does not match '^(a+)+$'")
    assert good["ok"] and json.loads(good["result"]) == {"word": "aaaa"}
    assert not named["ok"] and "is not of type 'integer'" in named["result"]
    # past the time budget the arguments are left to the server, which answers
    assert fanned_call["ok"] and json.loads(fanned_call["result"]) == {"word": 7}


def test_a_disabled_server_is_not_started(tmp_path: Path) -> None:
    config = tmp_path / "claude_desktop_config.json"
    servers = {
        "ghost": {"command": "/no/such/server", "disabled": True},
        "testing": {"command": sys.executable, "args": [str(SERVER)]},
    }
    config.write_text(json.dumps({"mcpServers": servers}))
    model = write_script(tmp_path / "script.json", call("echo", text="on"), "done")
    proc = run_cli(
        "run", "x", "--model", model, "--json", "--mcp-config", str(config), cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    (echo,) = json.loads(proc.stdout)["tool_calls"]
    assert echo["result"] == "on"


def test_literal_env_values_are_not_stored_and_resume_reads_them_again(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    entry = {"command": sys.executable, "args": [str(SERVER)], "env": {"API_TOKEN": "s3cr3t"}}
    config.write_text(json.dumps({"mcpServers": {"testing": entry}}))
    model = write_script(
        tmp_path / "script.json",
        call("env", name="API_TOKEN"),
        call("env", name="API_TOKEN"),
        "done",
    )
    options = ["--mcp-config", str(config), "--max-cycles", "1", "--run-id", "r1"]
    options.append("--no-final-answer")  # the script's second call is for the resumed run
    first = run_cli("run", "x", "--model", model, "--json", *options, cwd=tmp_path)
    assert first.returncode == 1, first.stderr
    assert json.loads(first.stdout)["tool_calls"][0]["result"] == "s3cr3t"
    with sqlite3.connect(tmp_path / ".convergent" / "runs.db") as db:
        (stored,) = db.execute("SELECT recipe FROM runs WHERE run_id = 'r1'").fetchone()
    assert "s3cr3t" not in stored
    assert json.loads(stored)["mcp_servers"]["testing"]["env"] == {"API_TOKEN": "${API_TOKEN}"}
    without = run_cli("resume", "r1", "--more-cycles", "5", "--json", cwd=tmp_path)
    assert without.returncode == 2
    assert without.stderr.strip().splitlines()[-1] == (
        "error: MCP server 'testing' failed to start: environment variable API_TOKEN is not "
        "set (used as ${API_TOKEN})"
    )
    resumed = subprocess.run(
        [sys.executable, "-m", "convergent", "resume", "r1", "--more-cycles", "5", "--json"],
        cwd=tmp_path,
        env={**os.environ, "API_TOKEN": "given-again"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["tool_calls"][-1]["result"] == "given-again"


def test_noise_on_a_servers_stdout_prints_nothing_under_json(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    plan = {"tools": [listed("echo", {})], "noise": "Starting server... {not json"}
    server = {"command": sys.executable, "args": raw_args(tmp_path, plan)}
    config.write_text(json.dumps({"mcpServers": {"raw": server}}))
    model = write_script(tmp_path / "script.json", call("echo", said="hi"), "done")
    proc = run_cli(
        "run", "x", "--model", model, "--json", "--mcp-config", str(config), cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    (echo,) = json.loads(proc.stdout)["tool_calls"]
    assert json.loads(echo["result"]) == {"said": "hi"}
    assert proc.stderr == ""


def test_a_server_that_never_initializes_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    server = {
        "command": sys.executable,
        "args": raw_args(tmp_path, {"initialize": "never"}),
        "startup_timeout": 0.5,
    }
    config.write_text(json.dumps({"mcpServers": {"mute": server}}))
    model = write_script(tmp_path / "script.json", "unused")
    proc = run_cli("run", "x", "--model", model, "--mcp-config", str(config), cwd=tmp_path)
    assert proc.returncode == 2
    # the run never started: nothing says it was saved
    assert proc.stderr == (
        "error: MCP server 'mute' failed to start: no answer within 0.5s; likely cause: it is "
        "still starting (uvx and pipx install it on first use: give it a longer "
        "startup_timeout), or it does not speak MCP on its standard output\n"
    )


CLASH = f"{shlex.quote(sys.executable)} {shlex.quote(str(SERVER.with_name('clash_server.py')))}"


def test_a_server_tool_named_like_a_builtin_is_prefixed_with_the_server(tmp_path: Path) -> None:
    model = write_script(
        tmp_path / "script.json",
        call("calculator", expression="2+2"),
        call("clash_server_calculator", expression="2+2"),
        "done",
    )
    proc = run_cli("run", "x", "--model", model, "--json", "--mcp", CLASH, "--builtin-tools",
                   cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    calls = json.loads(proc.stdout)["tool_calls"]
    assert [(c["name"], c["result"]) for c in calls] == [
        ("calculator", "4"),
        ("clash_server_calculator", "server saw 2+2"),
    ]


def test_no_builtin_tools_leaves_the_server_its_own_names(tmp_path: Path) -> None:
    model = write_script(
        tmp_path / "script.json",
        step(call("calculator", expression="2+2"), call("read_file", path="x")),
        "done",
    )
    proc = run_cli("run", "x", "--model", model, "--json", "--mcp", CLASH, "--no-builtin-tools",
                   cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    calls = json.loads(proc.stdout)["tool_calls"]
    assert [(c["name"], c["outcome"]) for c in calls] == [
        ("calculator", "ok"),
        ("read_file", "invalid"),
    ]
    assert calls[0]["result"] == "server saw 2+2"


@pytest.mark.parametrize(("declared", "ran"), [((), 3), (("--mcp-effect", "calculator=write"), 2)])
def test_mcp_effect_declares_what_a_servers_tool_does(
    tmp_path: Path, declared: tuple[str, ...], ran: int
) -> None:
    """The clash server's calculator declares nothing: the third identical call runs
    (a note follows it). Declared a write on the command line, it does not run, and a
    resume keeps the declaration (it is stored with the run's servers)."""
    same = call("calculator", expression="2+2")
    model = write_script(tmp_path / "script.json", same, same, same, "done")
    proc = run_cli("run", "x", "--model", model, "--json", "--mcp", CLASH, *declared,
                   "--run-id", "r1", cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    outcomes = [c["outcome"] for c in json.loads(proc.stdout)["tool_calls"]]
    assert outcomes.count("ok") == ran
    stored = sqlite3.connect(tmp_path / ".convergent" / "runs.db").execute(
        "SELECT recipe FROM runs WHERE run_id = 'r1'"
    )
    (servers,) = [json.loads(recipe)["mcp_servers"] for (recipe,) in stored]
    assert [entry.get("effects") for entry in servers.values()] == (
        [{"calculator": "write"}] if declared else [None]
    )


def test_mcp_effect_for_a_tool_the_server_lacks_stops_the_run(tmp_path: Path) -> None:
    model = write_script(tmp_path / "script.json", "done")
    proc = run_cli("run", "x", "--model", model, "--mcp", CLASH, "--mcp-effect",
                   "calculater=write", cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "effects name tools it does not offer: calculater" in proc.stderr
    assert "Traceback" not in proc.stderr
    alone = run_cli("run", "x", "--model", model, "--mcp-effect", "pay=write", cwd=tmp_path)
    assert (alone.returncode, alone.stderr) == (
        2,
        "error: --mcp-effect needs an MCP server (--mcp or --mcp-config)\n",
    )


def test_mcp_tools_lists_what_servers_offer(tmp_path: Path) -> None:
    proc = run_cli("mcp", "tools", TIME, "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [
        {"name": "get_current_time", "server": "mcp_server_time", "effect": "read",
         "read_only": True, "description": "Get current time in a specific timezone"},
        {"name": "convert_time", "server": "mcp_server_time", "effect": "read",
         "read_only": True, "description": "Convert time between timezones"},
    ]  # fmt: skip
    config = tmp_path / "servers.json"
    clash = {"command": sys.executable, "args": [str(SERVER.with_name("clash_server.py"))]}
    config.write_text(json.dumps({"mcpServers": {"c": clash}}))
    table = run_cli("mcp", "tools", "--mcp-config", str(config), cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    assert table.stdout.split("\n")[0].split() == ["name", "server", "effect", "description"]
    assert table.stdout.split("\n")[1].split() == [
        "calculator", "c", "undeclared", "Answer", "as", "the", "server,", "never", "computing",
        "anything.",
    ]  # fmt: skip
    config.write_text(
        json.dumps({"mcpServers": {"c": {**clash, "effects": {"calculator": "write"}}}})
    )
    declared = run_cli("mcp", "tools", "--mcp-config", str(config), cwd=tmp_path)
    assert declared.returncode == 0, declared.stderr
    assert declared.stdout.split("\n")[1].split()[:3] == ["calculator", "c", "write"]
    note = "declare what such a tool does with --mcp-effect TOOL=EFFECT or in its server's"
    assert note in " ".join(table.stdout.split()) and note not in " ".join(declared.stdout.split())
    inline = run_cli("mcp", "tools", CLASH, "--mcp-effect", "calculator=idempotent", "--json",
                     cwd=tmp_path)  # fmt: skip
    assert inline.returncode == 0, inline.stderr
    assert [(row["name"], row["effect"]) for row in json.loads(inline.stdout)] == [
        ("calculator", "idempotent")
    ]
    none = run_cli("mcp", "tools", cwd=tmp_path)
    assert none.returncode == 2
    assert (
        none.stderr == 'error: give a server: convergent mcp tools "COMMAND" or --mcp-config FILE\n'
    )
