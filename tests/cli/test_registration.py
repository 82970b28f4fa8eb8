"""A command loads only the command-line module that defines it; help loads them all."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from convergent.cli._app import COMMAND_MODULES, register

from ._probe import probe


def _module_of(callback: object) -> str:
    return str(getattr(callback, "__module__", "")).removeprefix("convergent.cli.")


def test_the_table_names_every_command_with_the_module_that_defines_it() -> None:
    app = register()
    found = {command.name: _module_of(command.callback) for command in app.registered_commands}
    for group in app.registered_groups:
        first = group.typer_instance.registered_commands[0]
        found[group.name] = _module_of(first.callback)
    assert found == COMMAND_MODULES


def test_a_coordinator_command_loads_neither_the_agent_nor_the_other_commands(
    tmp_path: Path,
) -> None:
    assert probe(tmp_path, "coordinator", "init", "--check-command", "true").code == 0
    done = probe(tmp_path, "coordinator", "record", "add", "docs")
    assert done.code == 0
    assert "convergent.cli.coordinator" in done.loaded
    assert not {"convergent.agent", "convergent.cli.run", "convergent.gate"} & done.loaded


def test_help_lists_every_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "convergent", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0
    assert all(name in done.stdout for name in COMMAND_MODULES)


def test_usage_lines_name_arguments_in_capitals(tmp_path: Path) -> None:
    from cli_runner import invoke

    usage = {
        command: next(line for line in invoke(command, "--help", cwd=tmp_path).stdout.splitlines()
                      if "Usage:" in line)
        for command in ("run", "steer")
    }  # fmt: skip
    assert usage["run"].split()[-2:] == ["[OPTIONS]", "TASK"]
    assert usage["steer"].split()[-3:] == ["[OPTIONS]", "RUN_ID", "[MESSAGE]"]
