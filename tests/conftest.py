"""Shared fixtures: no test may reach a real model provider; heavy tests are slow.

Provider keys are removed from the environment and sockets may only connect to the
loopback interface, so a test that would reach a hosted model fails instead of spending
money or depending on the network (local stub servers and the embedded model still work).

A test writes only under its temporary folders: one that leaves a new file or folder in
the checkout fails, and what it left is removed. The check compares each folder's
modification time with the one seen before the test (a few dozen ``stat`` calls), and
lists only a folder that changed.

A test that needs the Temporal dev server, the embedded model, a browser, Xvfb or
Claude Code is also marked ``slow``, so ``pytest -m "not slow"`` leaves them out.

Every pytest-xdist worker collects every test file, though it runs only some of them: a
test file imports a host framework's SDK (and the convergent modules that load one)
inside its tests and fixtures, never at its top, so that only the worker running it
pays for the import. The files that import them run on one worker (`SHARED_IMPORTS`), so
that each SDK is loaded once per session rather than once per worker.
"""

from __future__ import annotations

import gc
import ipaddress
import os
import shutil
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_HEAVY_MARKERS = ("temporal", "local_model", "browser", "xvfb", "claude_code")
_PROVIDER_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")
_real_connect = socket.socket.connect


def _loopback_only(self: socket.socket, address: Any) -> None:
    if self.family in (socket.AF_INET, socket.AF_INET6):
        host = address[0]
        try:
            allowed = ipaddress.ip_address(host).is_loopback
        except ValueError:
            allowed = host == "localhost"
        if not allowed:
            raise ConnectionRefusedError(f"tests may not connect to {host}: only loopback")
    _real_connect(self, address)


SHARED_IMPORTS = ("tests/adapters/", "tests/claude_code/", "tests/mcp/", "tests/models/")
"""Folders whose test files import the host frameworks' and providers' SDKs: with
``--dist=loadfile`` they make together one unit of work, run by one worker."""
LOADED_WHILE_COLLECTING: set[str] = set()
"""The modules loaded once this process had collected the tests."""
_YOUNG_COLLECTION_EVERY = 10_000
"""New objects between two young collections once tests run (see `pytest_collection`)."""

CHECKOUT = Path(__file__).resolve().parents[1]
"""The folder the tests may read but not write."""
NOT_WATCHED = frozenset(
    {
        ".git",
        "__pycache__",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
        ".hypothesis",
        ".venv",
        "node_modules",
        "test-artifacts",
    }
)
"""Names the checkout guard ignores: the test tools' caches (Hypothesis keeps the examples
that failed in ``.hypothesis``, to try them first next time), and where screenshots of
failures go."""


class CheckoutGuard:
    """Notices what appears in a folder tree, and removes it.

    Each watched folder's modification time is kept with the names in it; a check
    lists again only the folders whose time changed, so it costs one ``stat`` per
    folder while nothing changes.

    Args:
        root: The tree (the checkout).
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.folders: dict[Path, tuple[int, frozenset[str]]] = {}
        self._list(root)

    def _list(self, top: Path) -> None:
        pending = [top]
        while pending:
            folder = pending.pop()
            with os.scandir(folder) as entries:
                kept = [e for e in entries if e.name not in NOT_WATCHED]
            self.folders[folder] = (folder.stat().st_mtime_ns, frozenset(e.name for e in kept))
            pending.extend(Path(e.path) for e in kept if e.is_dir(follow_symlinks=False))

    def sweep(self) -> list[Path]:
        """Remove what appeared since the last check; the paths removed."""
        found: list[Path] = []
        changed = False
        for folder, (mtime, names) in self.folders.items():
            try:
                if folder.stat().st_mtime_ns == mtime:
                    continue
                changed = True
                with os.scandir(folder) as entries:
                    now = {e.name for e in entries if e.name not in NOT_WATCHED}
            except FileNotFoundError:
                continue
            found.extend(folder / name for name in sorted(now - names))
        for path in found:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        if changed:
            self.folders.clear()
            self._list(self.root)
        return found


@pytest.fixture(scope="session")
def _checkout() -> CheckoutGuard:
    return CheckoutGuard(CHECKOUT)


@pytest.fixture(autouse=True)
def _checkout_untouched(_checkout: CheckoutGuard) -> Iterator[None]:
    """Fail a test that leaves something in the checkout, or the working folder changed.

    Autouse fixtures are set up in the order of their names: this one comes first, so it
    checks after the others (and the ``monkeypatch`` they use) have undone their changes.
    """
    folder = os.getcwd()
    yield
    left = _checkout.sweep()
    if left:
        shown = ", ".join(str(path.relative_to(CHECKOUT)) for path in left)
        pytest.fail(f"the test wrote into the checkout (removed now): {shown}; use tmp_path")
    if os.getcwd() != folder:
        os.chdir(folder)
        pytest.fail(
            "the test changed the working folder and left it changed; use monkeypatch.chdir"
        )


def stop_process_servers() -> None:
    """Stop the fork server and resource tracker a process pool started, and reap them.

    ``multiprocessing`` keeps both for the life of the process that started them; in a
    test worker they would outlive the test, and the worker, as orphaned processes.
    """
    forkserver = sys.modules.get("multiprocessing.forkserver")
    if forkserver is not None and forkserver._forkserver._forkserver_pid is not None:
        forkserver._forkserver._stop()
    tracker = sys.modules.get("multiprocessing.resource_tracker")
    if tracker is not None and tracker._resource_tracker._pid is not None:
        tracker._resource_tracker._stop()


@pytest.fixture(autouse=True)
def _no_process_servers_left() -> Iterator[None]:
    yield
    stop_process_servers()


@pytest.fixture(autouse=True)
def _no_real_model_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(socket.socket, "connect", _loopback_only)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that needs a heavy component ``slow`` (before ``-m`` selects)."""
    for item in items:
        if any(item.get_closest_marker(name) for name in _HEAVY_MARKERS):
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session) -> Iterator[object]:
    """Collect with the garbage collector off, then leave what collection loaded out of
    its passes, and let it run less often.

    What collection loads (modules, test functions, host frameworks) lives as long as the
    session: collecting it again and again while it loads, then walking it at every full
    pass, took several seconds of each worker's CPU. Tests make many short-lived
    objects, so a young collection every 10,000 new objects (Python's default: 700)
    keeps the collector's work small without holding much memory.
    """
    gc.disable()
    try:
        return (yield)
    finally:
        LOADED_WHILE_COLLECTING.update(sys.modules)
        gc.freeze()
        gc.set_threshold(_YOUNG_COLLECTION_EVERY, *gc.get_threshold()[1:])
        gc.enable()


def work_unit(nodeid: str) -> str:
    """The unit of work a test belongs to: its file, or the one unit of `SHARED_IMPORTS`."""
    path = nodeid.split("::", 1)[0]
    return " ".join(SHARED_IMPORTS) if path.startswith(SHARED_IMPORTS) else path


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With ``--dist=loadfile``, schedule by `work_unit` instead of by file."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SharedImportsScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return SharedImportsScheduling(config, log)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Say which groups of tests were skipped and why, one line per reason."""
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped:
        return
    groups: dict[str, dict[str, int]] = {}
    for report in skipped:
        longrepr = getattr(report, "longrepr", None)
        reason = str(longrepr[2]) if isinstance(longrepr, tuple) else str(longrepr)
        reason = reason.removeprefix("Skipped: ")
        parts = report.nodeid.split("::")[0].split("/")
        group = "/".join(parts[:2]) if len(parts) > 2 else parts[0]
        per = groups.setdefault(reason, {})
        per[group] = per.get(group, 0) + 1
    terminalreporter.section("skipped, by reason")
    for reason, per in sorted(groups.items(), key=lambda item: -sum(item[1].values())):
        where = ", ".join(f"{group} ({count})" for group, count in sorted(per.items()))
        terminalreporter.write_line(f"{sum(per.values())} skipped: {reason} -- in {where}")
