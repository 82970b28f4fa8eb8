from __future__ import annotations

import gc
import os
import socket
from pathlib import Path

import psutil
import pytest


def test_non_loopback_connections_are_refused() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        with pytest.raises(ConnectionRefusedError, match="only loopback"):
            sock.connect(("192.0.2.1", 443))


class _Item:
    """The part of a collected test the marking hook reads and writes."""

    def __init__(self, *markers: str) -> None:
        self.markers = set(markers)

    def get_closest_marker(self, name: str) -> str | None:
        return name if name in self.markers else None

    def add_marker(self, marker: pytest.MarkDecorator) -> None:
        self.markers.add(marker.name)


def test_tests_of_heavy_components_are_slow() -> None:
    from conftest import pytest_collection_modifyitems

    items = [_Item("temporal"), _Item("local_model"), _Item("browser"), _Item("asyncio"), _Item()]
    pytest_collection_modifyitems(items)  # type: ignore[arg-type]
    assert ["slow" in item.markers for item in items] == [True, True, True, False, False]


def test_what_a_test_leaves_in_the_checkout_is_found_and_removed(tmp_path: Path) -> None:
    from conftest import CheckoutGuard

    (tmp_path / "src" / "pkg").mkdir(parents=True)
    kept = tmp_path / "src" / "pkg" / "module.py"
    kept.write_text("")
    guard = CheckoutGuard(tmp_path)
    (tmp_path / ".convergent").mkdir()
    (tmp_path / ".convergent" / "runs.db").write_bytes(b"")
    (tmp_path / "src" / "pkg" / "stray.json").write_text("{}")
    (tmp_path / "src" / "pkg" / "__pycache__").mkdir()
    assert guard.sweep() == [tmp_path / ".convergent", tmp_path / "src" / "pkg" / "stray.json"]
    assert not (tmp_path / ".convergent").exists()
    assert kept.exists() and (tmp_path / "src" / "pkg" / "__pycache__").exists()
    assert guard.sweep() == []


def test_a_check_while_nothing_changed_lists_no_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from conftest import CHECKOUT, CheckoutGuard

    guard = CheckoutGuard(CHECKOUT)
    assert len(guard.folders) > 10, "the whole checkout is watched"
    listed: list[object] = []
    monkeypatch.setattr(os, "scandir", lambda path: listed.append(path))
    assert guard.sweep() == [] and listed == []


class _Report:
    def __init__(self, nodeid: str, reason: str) -> None:
        self.nodeid = nodeid
        self.longrepr = (nodeid.split("::")[0], 1, f"Skipped: {reason}")


class _Terminal:
    def __init__(self, skipped: list[_Report]) -> None:
        self.stats = {"skipped": skipped}
        self.lines: list[str] = []

    def section(self, title: str) -> None:
        self.lines.append(f"== {title} ==")

    def write_line(self, line: str) -> None:
        self.lines.append(line)


def test_the_summary_says_which_groups_were_skipped_and_why() -> None:
    from conftest import pytest_terminal_summary

    terminal = _Terminal(
        [
            _Report("tests/claude_code/test_hook.py::a", "the Claude Code CLI is not installed"),
            _Report("tests/claude_code/test_sdk.py::b", "the Claude Code CLI is not installed"),
            _Report("tests/ui/test_browser.py::c", "/usr/bin/chromium is missing"),
        ]
    )
    pytest_terminal_summary(terminal)
    assert terminal.lines == [
        "== skipped, by reason ==",
        "2 skipped: the Claude Code CLI is not installed -- in tests/claude_code (2)",
        "1 skipped: /usr/bin/chromium is missing -- in tests/ui (1)",
    ]
    quiet = _Terminal([])
    pytest_terminal_summary(quiet)
    assert quiet.lines == []


def test_the_collector_runs_during_tests_with_what_collection_loaded_frozen() -> None:
    from conftest import _YOUNG_COLLECTION_EVERY

    assert gc.isenabled()  # collection turned it off; the tests need it back on
    assert gc.get_freeze_count() > 0
    assert gc.get_threshold()[0] == _YOUNG_COLLECTION_EVERY


def test_collecting_loads_no_host_sdk() -> None:
    from conftest import LOADED_WHILE_COLLECTING

    heavy = {"agents", "anthropic", "claude_agent_sdk", "langchain", "langgraph", "mcp"}
    heavy |= {"openai", "pydantic_ai", "temporalio"}
    assert LOADED_WHILE_COLLECTING  # the collection hook ran in this process
    assert not heavy & LOADED_WHILE_COLLECTING


def test_the_files_that_import_sdks_make_one_unit_of_work_the_others_one_each() -> None:
    from conftest import work_unit

    shared = work_unit("tests/adapters/test_langchain.py::test_x[a::b]")
    assert work_unit("tests/models/test_openai.py::test_y") == shared
    assert work_unit("tests/mcp/test_mcp_tools.py::test_v") == shared
    assert shared.startswith("tests/adapters/")
    assert work_unit("tests/test_meaning.py::test_z") == "tests/test_meaning.py"
    assert work_unit("tests/cli/test_run.py::T::test_w") == "tests/cli/test_run.py"


def _children() -> set[int]:
    """The processes whose parent is this one, zombies included."""
    return {child.pid for child in psutil.Process().children()}


def test_the_servers_a_process_pool_started_are_stopped_after_the_test() -> None:
    import concurrent.futures
    import multiprocessing

    from conftest import stop_process_servers

    before = _children()
    context = multiprocessing.get_context("forkserver")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
        assert pool.submit(abs, -2).result() == 2
    assert _children() - before  # the fork server and the resource tracker
    stop_process_servers()
    assert _children() == before
