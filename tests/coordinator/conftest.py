from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from convergent.coordinator import (
    Atom,
    AtomStatus,
    BaseCase,
    Check,
    Control,
    StateStore,
    WorkflowState,
)


def make_state(
    pending: int = 0,
    resolved: int = 0,
    *,
    checks: list[Check] | None = None,
    **control: object,
) -> WorkflowState:
    """A state with `pending` unresolved and `resolved` resolved independent atoms."""
    atoms = [Atom(id=f"p{i}", title=f"pending {i}") for i in range(pending)]
    atoms += [Atom(id=f"r{i}", status=AtomStatus.RESOLVED) for i in range(resolved)]
    return WorkflowState(
        goal="test goal",
        atoms=atoms,
        base_case=BaseCase(checks=checks or []),
        control=Control(**control),
    )


@pytest.fixture
def state_path(tmp_path: Path) -> Path:
    return tmp_path / "workflow-state.yaml"


@pytest.fixture
def store(state_path: Path) -> StateStore:
    return StateStore(state_path)


@pytest.fixture(scope="session")
def convergent_exe() -> str:
    exe = Path(sys.executable).with_name("convergent")
    if not exe.exists():
        pytest.fail(f"console script not installed at {exe}: pip install --no-deps -e .")
    return str(exe)


class _Handler(BaseHTTPRequestHandler):
    routes = {"/health": (200, b"status: ok"), "/down": (503, b"maintenance")}

    def do_GET(self) -> None:
        status, body = self.routes.get(self.path, (404, b"not found"))
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def http_base() -> Iterator[str]:
    """A real HTTP server on 127.0.0.1 (random port) serving /health (200) and /down (503)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
