"""A command loads only the command-line module that defines it; help loads them all."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

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


def test_the_command_line_is_built_once_until_a_module_adds_commands(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import typer
    import typer.main

    from cli_runner import invoke
    from convergent.cli import _app

    built: list[object] = []
    real = typer.main.get_group

    def counted(instance: typer.Typer) -> object:
        built.append(instance)
        return real(instance)

    monkeypatch.setattr(typer.main, "get_group", counted)
    monkeypatch.setattr(_app, "_built", {})
    for _ in range(2):
        assert invoke("runs", "--help", cwd=tmp_path).returncode == 0
    assert len(built) == 1
    first = _app.command_for("runs")

    def added() -> None:
        """A command a module adds after the first build."""

    extra = typer.models.CommandInfo(name="added-later", callback=added)
    monkeypatch.setattr(_app.app, "registered_commands", [*_app.app.registered_commands, extra])
    assert "added-later" in invoke("--help", cwd=tmp_path).stdout
    assert len(built) == 2 and _app.command_for() is not first
