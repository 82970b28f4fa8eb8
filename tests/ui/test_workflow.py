"""The coordinator page: a workflow-state.yaml as a graph, checks, counters and decision."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the console needs the extra ui")

from starlette.testclient import TestClient  # noqa: E402

from convergent.durability.sqlite import RunStore
from convergent.ui.app import create_app

from .conftest import BASE, ORIGIN, SCRIPT_XSS, TOKEN

FIXTURE = Path(__file__).parents[1] / "coordinator" / "fixtures" / "workflow-state.v1.yaml"


def open_client(store: RunStore, state: Path | None) -> TestClient:
    app = create_app(store, token=TOKEN, state_file=state, base=BASE)
    client = TestClient(app, base_url=ORIGIN)
    client.headers["authorization"] = f"Bearer {TOKEN}"
    return client


def test_the_state_file_is_shown_as_a_graph_with_checks_and_decision(
    store: RunStore, tmp_path: Path
) -> None:
    state = tmp_path / "workflow-state.yaml"
    shutil.copy(FIXTURE, state)
    with open_client(store, state) as client:
        page = client.get("/coordinator").text
    assert f'href="{BASE}/coordinator"' in page
    assert "ship the auth API" in page
    for atom in ("schema", "endpoints", "tokens-jwt", "tokens-opaque", "docs"):
        assert f">{atom}<" in page
    assert page.count('<line class="edge"') == 2
    assert '<g class="node resolved">' in page and '<g class="node failed ready">' in page
    assert "continue (3 unresolved)" in page and "1 of 3" in page and "(last: stall)" in page
    assert "exit code 1, expected 0" in page and "1 failed, 41 passed" in page
    assert page.count("not run") == 4
    assert "ImportError: no module named jose" in page


def test_a_broken_or_hostile_state_file_is_shown_safely(store: RunStore, tmp_path: Path) -> None:
    state = tmp_path / "workflow-state.yaml"
    state.write_text(f"goal: '{SCRIPT_XSS}'\natoms: [{{id: a, depends_on: [b]}}]\n")
    with open_client(store, state) as client:
        page = client.get("/coordinator").text
        assert "depends on unknown atom" in page
        state.write_text(f"goal: '{SCRIPT_XSS}'\natoms: [{{id: a, note: '{SCRIPT_XSS}'}}]\n")
        page = client.get("/coordinator").text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
        assert "<script>alert" not in page
    with open_client(store, None) as client:
        assert "convergent ui --state" in client.get("/coordinator").text
        assert client.get("/coordinator/stream").status_code == 404


@pytest.mark.slow  # starts the console as a process
def test_a_deeply_nested_or_long_chained_state_file_does_not_take_the_console_down(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    RunStore(db).close()
    state = tmp_path / "workflow-state.yaml"
    state.write_text("goal: " + "[" * 40_000 + "]" * 40_000 + "\n")
    server = subprocess.Popen(
        [sys.executable, "-m", "convergent", "ui", "--no-open", "--port", "0"]
        + ["--db", str(db), "--state", str(state)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        found = re.search(r"(http://127\.0\.0\.1:\d+)/\?token=([\w-]+)", line)
        assert found, line
        request = urllib.request.Request(
            f"{found.group(1)}/coordinator", headers={"Authorization": f"Bearer {found.group(2)}"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            assert "nested too deeply (over 100 levels at line 1)" in response.read().decode()
        # each atom waits on the next one: laid out without recursing along the chain
        chain = "".join(f"  - {{id: a{n}, depends_on: [a{n + 1}]}}\n" for n in range(2999))
        state.write_text(f"atoms:\n{chain}  - {{id: a2999}}\n")
        with urllib.request.urlopen(request, timeout=30) as response:
            page = response.read().decode()
        assert ">a0<" in page and ">a2999<" in page and "continue (3000 unresolved)" in page
        assert server.poll() is None
    finally:
        server.terminate()
        server.communicate(timeout=30)
