"""Run the real Claude Code CLI against `FakeAnthropic`, sealed off from everything else.

Each run gets its own ``HOME``, config and temporary folders, a project folder, and an
environment built from nothing: the fake's URL and a dummy key, nonessential traffic
off, and every proxy variable pointing at an `OutboundTrap`, so a request meant for
anywhere but loopback is caught (and fails the run) instead of leaving the machine.
The CLI runs in its own session; whatever it leaves running after it exits (a hook,
a shell, a background agent: any process with the run's marker in its environment or
its working directory in the run's folder) is killed and fails the run too.

The CLI is the one ``.ci/run`` installs (pinned in ``.ci/claude-code/package.json``),
or ``claude`` on ``PATH``. Another driver of the CLI (``claude-agent-sdk``) can reuse
the pieces: start it with `ClaudeCode.environment` (a fresh token each time), then
check the trap's ``attempts`` and call `reap` with the token, as `ClaudeCode.run` does.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from .fake_anthropic import FakeAnthropic, OutboundTrap

__all__ = [
    "PINNED_VERSION",
    "ClaudeCode",
    "LeftoverProcesses",
    "Session",
    "UnexpectedTraffic",
    "cli_version",
    "expected_version",
    "find_claude",
    "reap",
]

ROOT = Path(__file__).resolve().parents[2]
_PIN_DIR = ROOT / ".ci" / "claude-code"
PINNED_VERSION: str = json.loads((_PIN_DIR / "package.json").read_text())["dependencies"][
    "@anthropic-ai/claude-code"
]
"""The Claude Code version ``.ci/run`` installs."""

SAFETY_TIMEOUT = 180.0
"""Seconds a run may take before it is killed: a net against hangs, not a timing test."""

_MARKER = "CONVERGENT_CLAUDE_CODE_RUN"
_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")


class UnexpectedTraffic(AssertionError):
    """The CLI tried to reach something other than the fake Messages API."""


class LeftoverProcesses(AssertionError):
    """Processes the CLI started were still running after it exited (now killed)."""

    def __init__(self, processes: dict[int, str]) -> None:
        super().__init__(f"still running after claude exited: {processes}")
        self.processes = processes
        """Their pids and command lines."""


def find_claude() -> Path | None:
    """The CLI the tests drive: the pinned one from ``.ci/run``'s install, else ``claude``
    on ``PATH``, else the one ``claude-agent-sdk`` ships, else None."""
    pinned = _PIN_DIR / "node_modules" / ".bin" / "claude"
    if pinned.exists():
        return pinned
    found = shutil.which("claude")
    if found:
        return Path(found)
    spec = importlib.util.find_spec("claude_agent_sdk")
    for folder in (spec.submodule_search_locations or ()) if spec is not None else ():
        bundled = Path(folder) / "_bundled" / "claude"
        if bundled.is_file() and os.access(bundled, os.X_OK):
            return bundled
    return None


def cli_version(binary: Path) -> str:
    """The version a Claude Code CLI reports (``2.1.330``)."""
    done = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    return done.stdout.split()[0] if done.stdout.split() else ""


def expected_version(binary: Path) -> str:
    """The version a session of ``binary`` must report: the pinned one for the pinned
    install; for another CLI (on ``PATH``, or the SDK's), the one it says it is."""
    pinned = _PIN_DIR / "node_modules" / ".bin" / "claude"
    return PINNED_VERSION if binary == pinned else cli_version(binary)


@dataclass(frozen=True, slots=True)
class Session:
    """One ``claude -p`` run, read from its ``stream-json`` output."""

    returncode: int
    """The CLI's exit code."""
    events: list[dict[str, Any]]
    """Every JSON line it printed, in order."""
    stderr: str
    """What it wrote on stderr."""

    @property
    def results(self) -> list[dict[str, Any]]:
        """The ``result`` events (one per turn the session ran)."""
        return [event for event in self.events if event.get("type") == "result"]

    @property
    def result(self) -> dict[str, Any]:
        """The last ``result`` event: ``terminal_reason``, the final ``result`` text..."""
        if not self.results:
            raise AssertionError(f"no result event; stderr: {self.stderr[-2000:]}")
        return self.results[-1]

    def hook_answers(self, event: str) -> list[dict[str, Any]]:
        """What the hooks for ``event`` printed, parsed (needs ``--include-hook-events``)."""
        return [
            json.loads(item["stdout"])
            for item in self.events
            if item.get("subtype") == "hook_response"
            and item.get("hook_event") == event
            and item.get("stdout", "").strip()
        ]

    def hook_stderr(self, event: str) -> list[str]:
        """What the hooks for ``event`` wrote on stderr, one entry per call."""
        return [
            str(item.get("stderr", ""))
            for item in self.events
            if item.get("subtype") == "hook_response" and item.get("hook_event") == event
        ]

    def notices(self) -> list[str]:
        """Claude Code's own warnings in the stream (e.g. its stop-hook block cap)."""
        return [
            str(item.get("content"))
            for item in self.events
            if item.get("type") == "system" and item.get("subtype") == "informational"
        ]


@dataclass
class ClaudeCode:
    """A sealed place to run the CLI: ``home``, ``project`` and ``tmp`` under ``root``."""

    binary: Path
    """The ``claude`` executable."""
    root: Path
    """A fresh folder that holds everything the run may write."""
    hook_path: list[str] = field(default_factory=list)
    """Folders put first on the ``PATH`` hooks and tools run with."""

    def __post_init__(self) -> None:
        for folder in (self.home, self.project, self.tmp):
            folder.mkdir(parents=True, exist_ok=True)

    @property
    def home(self) -> Path:
        """The run's ``HOME`` (Claude Code's config and transcripts live here)."""
        return self.root / "home"

    @property
    def project(self) -> Path:
        """The working directory the CLI starts in."""
        return self.root / "project"

    @property
    def tmp(self) -> Path:
        """The run's ``TMPDIR``."""
        return self.root / "tmp"

    def write_settings(self, settings: dict[str, Any]) -> Path:
        """Write the project's ``.claude/settings.json``, as a user would install hooks."""
        path = self.project / ".claude" / "settings.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings, indent=2))
        return path

    def environment(self, fake: FakeAnthropic, trap: OutboundTrap, token: str) -> dict[str, str]:
        """The CLI's whole environment: nothing inherited but ``PYTHONPATH`` and ``PATH``."""
        path = [*self.hook_path, str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin"]
        env = {
            "PATH": os.pathsep.join([*path, "/bin"]),
            "HOME": str(self.home),
            "CLAUDE_CONFIG_DIR": str(self.home / ".claude"),
            "TMPDIR": str(self.tmp),
            "LANG": "C.UTF-8",
            "ANTHROPIC_BASE_URL": fake.url,
            "ANTHROPIC_API_KEY": "sk-ant-fake-key-for-tests",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
            _MARKER: token,
        }
        for name in _PROXY_VARIABLES:
            env[name] = env[name.lower()] = trap.url
        if os.environ.get("PYTHONPATH"):
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        return env

    def run(
        self,
        prompt: str,
        fake: FakeAnthropic,
        trap: OutboundTrap,
        *,
        args: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
    ) -> Session:
        """Run ``claude -p PROMPT`` in ``project`` with hook events in its JSON stream.

        Raises:
            UnexpectedTraffic: The CLI tried to reach anything but the fake.
            LeftoverProcesses: Something it started outlived it.
            AssertionError: It ran past `SAFETY_TIMEOUT`.
        """
        token = uuid.uuid4().hex
        command = [
            str(self.binary),
            "-p",
            prompt,
            "--output-format",
            "stream-json",
            "--verbose",
            "--include-hook-events",
            *args,
        ]
        process = subprocess.Popen(
            command,
            cwd=self.project,
            env={**self.environment(fake, trap, token), **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            stdout, stderr = process.communicate(timeout=SAFETY_TIMEOUT)
        except subprocess.TimeoutExpired:
            _kill_group(process.pid)
            stdout, stderr = process.communicate()
            reap(token, self.root)
            raise AssertionError(
                f"claude ran past {SAFETY_TIMEOUT:g}s; stderr: {stderr[-2000:]}"
            ) from None
        leftovers = reap(token, self.root)
        if trap.attempts:
            raise UnexpectedTraffic(f"claude tried to reach the outside: {trap.attempts}")
        if leftovers:
            raise LeftoverProcesses(leftovers)
        events = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
        return Session(process.returncode, events, stderr)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _ours(process: psutil.Process, token: str, root: Path) -> bool:
    """Whether a process carries the run's marker or works inside the run's folder."""
    if process.environ().get(_MARKER) == token:
        return True
    return Path(process.cwd()).is_relative_to(root)


def _running(token: str, root: Path) -> dict[int, str]:
    """Live processes of one run (marker in the environment, or cwd under ``root``)."""
    found: dict[int, str] = {}
    for process in psutil.process_iter():
        if process.pid == os.getpid():
            continue
        try:
            with process.oneshot():
                if not _ours(process, token, root):
                    continue
                if process.status() == psutil.STATUS_ZOMBIE:  # already dead
                    continue
                found[process.pid] = " ".join(process.cmdline())
        except psutil.Error:  # it ended meanwhile, or is not ours to read
            continue
    return found


def reap(token: str, root: Path) -> dict[int, str]:
    """Kill whatever belongs to the run; return what was still running.

    Processes that are on their way out (a hook the CLI just answered) get a moment to
    finish before they count as left behind.
    """
    deadline = time.monotonic() + 2.0
    running = _running(token, root)
    while running and time.monotonic() < deadline:
        time.sleep(0.1)
        running = _running(token, root)
    for pid in running:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return running
