"""``convergent ui`` on the command line: start, the token, and one-line errors."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from convergent.store import RunStore

from .conftest import needs_extra

COMMAND = [sys.executable, "-m", "convergent", "ui", "--no-open"]


def test_the_console_starts_prints_its_token_and_refuses_requests_without_it(
    tmp_path: Path,
) -> None:
    needs_extra()
    db = tmp_path / "runs.db"
    RunStore(db).close()
    server = subprocess.Popen(
        [*COMMAND, "--db", str(db), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        found = re.search(r"(http://127\.0\.0\.1:(\d+))/\?token=([\w-]+)", line)
        assert found, line
        base, token = found.group(1), found.group(3)
        try:
            urllib.request.urlopen(f"{base}/runs", timeout=10)
            raise AssertionError("a request without the token was served")
        except urllib.error.HTTPError as exc:
            assert exc.code == 401
            exc.close()
        request = urllib.request.Request(
            f"{base}/runs", headers={"Authorization": f"Bearer {token}"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200
            assert "0 runs" in response.read().decode()
    finally:
        server.terminate()
        server.communicate(timeout=30)


def test_a_taken_port_is_a_one_line_error(tmp_path: Path) -> None:
    needs_extra()
    db = tmp_path / "runs.db"
    RunStore(db).close()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = subprocess.run(
            [*COMMAND, "--db", str(db), "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"error: port {port} on 127.0.0.1 is taken; pass --port N, or --port 0 for a free one"
    )


def test_a_missing_extra_or_database_is_a_one_line_error(tmp_path: Path) -> None:
    hide = (
        "import sys; sys.modules['starlette'] = None; "
        "from convergent.cli import main; main(['ui', '--no-open', '--port', '0'])"
    )
    done = subprocess.run([sys.executable, "-c", hide], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: the console needs starlette: "
        "pip install 'starlette>=1.10.0,<2' 'uvicorn>=0.54.0,<1' 'Jinja2>=3.1.6,<4'"
    )
    missing = subprocess.run(
        [*COMMAND, "--db", str(tmp_path / "nope.db")], capture_output=True, text=True, timeout=60
    )
    assert missing.returncode == 2 and "no run database at" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1
