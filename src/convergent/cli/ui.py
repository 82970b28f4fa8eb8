"""``convergent ui``: the web console over the run database (the optional extra ``ui``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

import convergent.ui  # noqa: F401  (registers the ``web`` ask channel; no server imports)
from convergent.cli._app import app
from convergent.cli._session import open_reader
from convergent.durability.sqlite import DEFAULT_DB_PATH, RunStore
from convergent.exceptions import UserError

__all__ = ["ui_command"]


@app.command("ui")
def ui_command(
    db: Annotated[Path, typer.Option(help="Run database.")] = DEFAULT_DB_PATH,
    host: Annotated[
        str, typer.Option(help="Address to listen on (only this machine by default).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0: any free port).")] = 8765,
    allow_remote: Annotated[
        bool,
        typer.Option(
            "--allow-remote",
            help="Allow a --host that other machines can reach (plain HTTP: at your own risk).",
        ),
    ] = False,
    state: Annotated[
        Path | None, typer.Option(help="A coordinator workflow-state.yaml to show.")
    ] = None,
    open_browser: Annotated[
        bool, typer.Option("--open/--no-open", help="Open the console in a browser.")
    ] = True,
) -> None:
    """Serve a local web console: every run, live runs, questions, steering and rewind."""
    from convergent.ui.server import check_extra, reachable, serve

    check_extra()
    if not 0 <= port <= 65535:
        raise UserError(f"--port must be between 0 and 65535, got {port}")
    if db != DEFAULT_DB_PATH and not db.is_file():
        raise UserError(f"no run database at {db} (start a run with --db {db} first)")
    if state is not None and not state.is_file():
        raise UserError(f"no state file at {state}")
    where = reachable(host, port, allow_remote=allow_remote)
    # a database this user may not change is shown read-only, as `convergent runs` reads it
    with open_reader(db) if db.is_file() else RunStore(db) as store:
        try:
            serve(store, where, port=port, state_file=state, open_browser=open_browser)
        except KeyboardInterrupt:
            return
