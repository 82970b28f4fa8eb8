"""``convergent ui`` on the command line: start, the token, and one-line errors."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import pytest

from convergent.durability.sqlite import RunStore
from convergent.testing import call, step

from .conftest import make_run, needs_extra

COMMAND = [sys.executable, "-m", "convergent", "ui", "--no-open"]


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


def start(*args: str, prefix: Sequence[str] = ()) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*prefix, *COMMAND, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def stop(server: subprocess.Popen[str]) -> tuple[str, str]:
    server.terminate()
    out, err = server.communicate(timeout=30)
    return out, err


@pytest.mark.slow
def test_listening_beyond_loopback_needs_allow_remote(tmp_path: Path) -> None:
    needs_extra()
    db = tmp_path / "runs.db"
    RunStore(db).close()
    done = subprocess.run(
        [*COMMAND, "--db", str(db), "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == (
        "error: --host 0.0.0.0 can be reached from other machines, over plain HTTP; "
        "pass --allow-remote to listen there anyway"
    )


@pytest.mark.slow
def test_allow_remote_keeps_the_token_off_the_screen_and_out_of_addresses(tmp_path: Path) -> None:
    needs_extra()
    db = tmp_path / "runs.db"
    RunStore(db).close()
    server = start("--db", str(db), "--host", "0.0.0.0", "--allow-remote", "--port", "0")
    try:
        assert server.stdout is not None and server.stderr is not None
        address = server.stdout.readline()
        found = re.fullmatch(r"convergent console on http://0\.0\.0\.0:(\d+)/\n", address)
        assert found, address
        login = server.stdout.readline()
        kept = re.fullmatch(r"log in with the token in (\S+) \(readable only by you; .*\)\n", login)
        assert kept, login
        warning = server.stderr.readline()
        assert warning.startswith("warning: listening on 0.0.0.0: other machines can reach")
        token_file = Path(kept.group(1))
        token = token_file.read_text().strip()
        assert len(token) >= 32 and token_file.stat().st_mode & 0o777 == 0o600
        port = found.group(1)
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/runs", headers={"Authorization": f"Bearer {token}"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200
    finally:
        out, err = stop(server)
    assert token not in address + login + warning + out + err
    assert not token_file.exists()


@pytest.mark.parametrize("host", ["127.1", "LOCALHOST", "localhost", "127.0.0.2", "::1"])
@pytest.mark.slow
def test_every_spelling_of_loopback_is_loopback(tmp_path: Path, host: str) -> None:
    needs_extra()
    db = tmp_path / "runs.db"
    RunStore(db).close()
    server = start("--db", str(db), "--host", host, "--port", "0")
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert "/?token=" in line, line
    finally:
        _, err = stop(server)
    assert "warning" not in err


def read_only(folder: Path) -> list[str]:
    """A command prefix under which ``folder`` cannot be written (also by root)."""
    if os.geteuid() != 0:
        for path in folder.iterdir():
            path.chmod(0o444)
        folder.chmod(0o555)
        return []
    unshare = shutil.which("unshare")
    probe = [unshare or "unshare", "-m", "--propagation", "private", "true"]
    if unshare is None or subprocess.run(probe, capture_output=True, check=False).returncode:
        pytest.skip("needs unshare to mount a folder read-only for root")
    remount = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'
    return [unshare, "-m", "--propagation", "private", "sh", "-c", remount, str(folder)]


@pytest.mark.slow
def test_a_database_that_cannot_be_written_is_shown_read_only(tmp_path: Path) -> None:
    needs_extra()
    folder = tmp_path / "ro"
    folder.mkdir()
    db = folder / "runs.db"
    with RunStore(db) as store:
        make_run(store, "r1", [step(call("calculator", expression="1+1")), "2"])
    prefix = read_only(folder)
    try:
        listed = subprocess.run(
            [*prefix, sys.executable, "-m", "convergent", "runs", "--db", str(db)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert listed.returncode == 0 and "r1" in listed.stdout, listed.stderr
        server = start("--db", str(db), "--port", "0", prefix=prefix)
        try:
            assert server.stdout is not None
            found = re.search(
                r"(http://127\.0\.0\.1:\d+)/\?token=([\w-]+)", server.stdout.readline()
            )
            assert found
            assert server.stdout.readline().startswith("(anyone with this address")
            assert (
                server.stdout.readline().strip() == f"{db} is open read-only: actions are disabled"
            )
            base, token = found.group(1), found.group(2)
            bearer = {"Authorization": f"Bearer {token}"}
            with urllib.request.urlopen(
                urllib.request.Request(f"{base}/runs/r1", headers=bearer), timeout=10
            ) as response:
                page = response.read().decode()
            assert "open read-only" in page and "Why it stopped: completed" in page
            steer = urllib.request.Request(
                f"{base}/runs/r1/steer",
                data=b"message=hi",
                headers={**bearer, "Origin": base},
                method="POST",
            )
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(steer, timeout=10)
            assert refused.value.code == 400
            assert "is open read-only" in refused.value.read().decode()
            refused.value.close()
        finally:
            stop(server)
    finally:
        folder.chmod(0o755)
