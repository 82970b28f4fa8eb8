from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from convergent import Agent, calculator, tool
from convergent.durability.sqlite import RunStore
from convergent.testing import scripted
from convergent.tools import Tool

TOKEN = "test-token-123"
ORIGIN = "http://127.0.0.1:8765"
BASE = "/c-test"
"""The path the test console's pages live under (random in a real console)."""
SCRIPT_XSS = "<script>alert(1)</script>"
IMG_XSS = '"><img src=x onerror=alert(1)>'


@tool
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


def make_run(
    store: RunStore,
    run_id: str,
    script: Sequence[Any],
    tools: Sequence[Tool] = (calculator, echo),
    task: str = "a task",
    price: tuple[float, float] | None = None,
    **agent: Any,
) -> None:
    model = scripted(*script, price=price)
    run = Agent(model, list(tools), store=store, **agent).run(task, run_id=run_id)
    # in a thread of its own: the browser tests' Playwright owns this thread's event loop
    worker = threading.Thread(target=asyncio.run, args=(run,))
    worker.start()
    worker.join()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RunStore]:
    with RunStore(tmp_path / "runs.db") as opened:
        yield opened


@pytest.fixture
def client(store: RunStore) -> Iterator[Any]:
    needs_extra()
    from starlette.testclient import TestClient

    from convergent.ui.app import create_app

    app = create_app(store, token=TOKEN, base=BASE)
    with TestClient(app, base_url=ORIGIN) as test_client:
        test_client.cookies.clear()
        assert test_client.get(f"/runs?token={TOKEN}").status_code == 200
        yield test_client


def needs_extra() -> None:
    """Skip unless the console's extra (Starlette, uvicorn, Jinja2) is installed."""
    for module in ("starlette", "uvicorn", "jinja2"):
        pytest.importorskip(module, reason="the console needs the extra ui")


def post(client: Any, url: str, **data: str) -> Any:
    return client.post(url, data=data, headers={"origin": ORIGIN}, follow_redirects=False)
