"""Externally verifiable completion checks: the coordinator's base case.

A base case is a list of checks; it is satisfied when there is at least one check and
every check passes. Four kinds exist, matching how completion can be observed:

- ``command``: a command exits with the expected code (run without a shell unless asked).
- ``artifact``: a path or glob matches at least ``min_matches`` files or directories.
- ``http``: a URL answers with the expected status code (and optionally contains a text).
- ``judgment``: a statement only a person can vouch for; it passes only once a human
  confirmation is recorded, never by machine evaluation.

Every check returns a `CheckResult` carrying its evidence (exit code, output tail, HTTP
status, matched paths or the confirmation), so a decision can always be explained.
"""

from __future__ import annotations

import glob
import shlex
import threading
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, ClassVar, Literal, assert_never

from msgspec import Meta

from convergent.coordinator._record import Record

__all__ = [
    "ArtifactCheck",
    "Check",
    "CheckKind",
    "CheckResult",
    "CommandCheck",
    "Confirmation",
    "HttpCheck",
    "JudgmentCheck",
    "base_case_satisfied",
    "run_check",
    "run_checks",
]

_TAIL_CHARS = 2000


_Name = Annotated[str, Meta(min_length=1)]


class CheckKind(StrEnum):
    """The ways completion can be observed."""

    COMMAND = "command"
    ARTIFACT = "artifact"
    HTTP = "http"
    JUDGMENT = "judgment"


class CommandCheck(Record, tag=CheckKind.COMMAND.value, tag_field="kind", kw_only=True):
    """A command whose exit code decides the check, e.g. ``pytest -q`` exiting 0."""

    kind: ClassVar[Literal[CheckKind.COMMAND]] = CheckKind.COMMAND
    name: _Name
    """Unique name of the check inside the base case."""
    command: str | list[str]
    """The command: an argument list, or a string split with `shlex` unless ``shell``."""
    shell: bool = False
    """Run the string through the system shell; off by default so nothing is interpreted."""
    expect_exit: int = 0
    """The exit code that means "done"."""
    timeout: Annotated[float, Meta(gt=0)] = 600.0
    """Seconds before the command (and its process group) is killed and the check fails."""
    cwd: str | None = None
    """Working directory, relative to the state file's directory; that directory if unset."""

    def _check(self) -> None:
        if (isinstance(self.command, str) and not self.command.strip()) or not self.command:
            raise ValueError("command must not be empty")


class ArtifactCheck(Record, tag=CheckKind.ARTIFACT.value, tag_field="kind", kw_only=True):
    """A file or directory that must exist, given as a path or a glob pattern."""

    kind: ClassVar[Literal[CheckKind.ARTIFACT]] = CheckKind.ARTIFACT
    name: _Name
    """Unique name of the check inside the base case."""
    path: Annotated[str, Meta(min_length=1)]
    """Path or glob (``*``, ``?``, ``[...]``, ``**``), relative to the state file's directory."""
    min_matches: Annotated[int, Meta(ge=1)] = 1
    """How many existing paths the pattern must match."""


class HttpCheck(Record, tag=CheckKind.HTTP.value, tag_field="kind", kw_only=True):
    """An HTTP endpoint that must answer with the expected status, e.g. a health route."""

    kind: ClassVar[Literal[CheckKind.HTTP]] = CheckKind.HTTP
    name: _Name
    """Unique name of the check inside the base case."""
    url: Annotated[str, Meta(pattern=r"^https?://")]
    """The URL to request; loopback or any host the user configured."""
    method: Literal["GET", "HEAD", "POST"] = "GET"
    """HTTP method."""
    expect_status: Annotated[int, Meta(ge=100, le=599)] = 200
    """The status code that means "done"."""
    contains: str | None = None
    """Text the response body must contain, if set."""
    timeout: Annotated[float, Meta(gt=0)] = 10.0
    """Seconds for connecting and reading before the check fails."""


class Confirmation(Record, kw_only=True):
    """A person's recorded confirmation that a judgment statement holds."""

    by: _Name
    """Who confirmed it."""
    at: datetime
    """When it was confirmed (UTC)."""
    note: str | None = None
    """What the person looked at, if they said."""


class JudgmentCheck(Record, tag=CheckKind.JUDGMENT.value, tag_field="kind", kw_only=True):
    """A statement that needs human judgment; passes only with a recorded confirmation."""

    kind: ClassVar[Literal[CheckKind.JUDGMENT]] = CheckKind.JUDGMENT
    name: _Name
    """Unique name of the check inside the base case."""
    statement: Annotated[str, Meta(min_length=1)]
    """What must be true, in words, e.g. "the auth API operates normally"."""
    confirmation: Confirmation | None = None
    """The human confirmation; set with ``convergent coordinator record confirm``."""


Check = CommandCheck | ArtifactCheck | HttpCheck | JudgmentCheck
"""One completion check; the ``kind`` field selects the type."""


class CheckResult(Record, kw_only=True):
    """The outcome of one check together with the evidence it was decided on."""

    name: str
    """Name of the check."""
    kind: CheckKind
    """Kind of the check."""
    passed: bool
    """Whether the check holds."""
    summary: str
    """One line saying why it passed or failed."""
    checked_at: datetime
    """When the check ran (UTC)."""
    seconds: float = 0.0
    """How long the check took."""
    exit_code: int | None = None
    """Command checks: the exit code (None when killed on timeout or not started)."""
    output_tail: str | None = None
    """Command checks: the last characters of combined stdout and stderr."""
    status_code: int | None = None
    """HTTP checks: the response status."""
    matches: list[str] | None = None
    """Artifact checks: the paths that matched (at most 20)."""
    confirmed_by: str | None = None
    """Judgment checks: who confirmed the statement."""


def _now() -> datetime:
    return datetime.now(UTC)


def _tail(text: str) -> str:
    return text if len(text) <= _TAIL_CHARS else text[-_TAIL_CHARS:]


def _run_command(check: CommandCheck, base_dir: Path) -> CheckResult:
    started = time.monotonic()
    cwd = base_dir / check.cwd if check.cwd else base_dir
    args: str | list[str]
    if check.shell:
        args = check.command if isinstance(check.command, str) else shlex.join(check.command)
    else:
        args = shlex.split(check.command) if isinstance(check.command, str) else check.command

    def result(passed: bool, summary: str, code: int | None, out: str | None) -> CheckResult:
        return CheckResult(
            name=check.name,
            kind=check.kind,
            passed=passed,
            summary=summary,
            checked_at=_now(),
            seconds=round(time.monotonic() - started, 3),
            exit_code=code,
            output_tail=out,
        )

    # subprocess machinery is loaded only when a command runs (the hook answers without)
    from convergent.coordinator._process import run_bounded

    try:
        finished = run_bounded(
            args, shell=check.shell, cwd=cwd, timeout=check.timeout, keep=_TAIL_CHARS * 4
        )
    except OSError as exc:
        return result(False, f"could not start command: {exc.strerror or exc}", None, None)
    out = _tail(finished.output.decode(errors="replace"))
    if finished.timed_out:
        return result(False, f"timed out after {check.timeout:g}s", None, out)
    code = finished.exit_code
    if code == check.expect_exit:
        return result(True, f"exit code {code}", code, out)
    return result(False, f"exit code {code}, expected {check.expect_exit}", code, out)


def _has_magic(pattern: str) -> bool:
    return any(char in pattern for char in "*?[")


def _run_artifact(check: ArtifactCheck, base_dir: Path) -> CheckResult:
    started = time.monotonic()
    target = Path(check.path).expanduser()
    full = target if target.is_absolute() else base_dir / target
    if _has_magic(check.path):
        found = sorted(glob.glob(str(full), recursive=True))
    else:
        found = [str(full)] if full.exists() else []
    passed = len(found) >= check.min_matches
    if passed:
        summary = f"{len(found)} path(s) match {check.path}"
    else:
        summary = f"{len(found)} path(s) match {check.path}, need {check.min_matches}"
    return CheckResult(
        name=check.name,
        kind=check.kind,
        passed=passed,
        summary=summary,
        checked_at=_now(),
        seconds=round(time.monotonic() - started, 3),
        matches=found[:20],
    )


_MAX_BODY = 1_000_000


def _fetch(check: HttpCheck, deadline: float, box: dict[str, object]) -> None:
    """The request, in a thread; it gives up reading past ``deadline``."""
    import httpx  # deferred: the hook command should not pay for it when no HTTP check runs

    from convergent._tls import shared_tls

    try:
        with (
            httpx.Client(
                timeout=check.timeout, follow_redirects=False, verify=shared_tls()
            ) as client,
            client.stream(check.method, check.url) as response,
        ):
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > _MAX_BODY or time.monotonic() > deadline:
                    break
            box["status"] = response.status_code
            box["text"] = body.decode(errors="replace")
    except httpx.HTTPError as exc:
        box["error"] = f"{type(exc).__name__}: {exc}"


def _run_http(check: HttpCheck) -> CheckResult:
    started = time.monotonic()

    def result(passed: bool, summary: str, status: int | None) -> CheckResult:
        return CheckResult(
            name=check.name,
            kind=check.kind,
            passed=passed,
            summary=summary,
            checked_at=_now(),
            seconds=round(time.monotonic() - started, 3),
            status_code=status,
        )

    # httpx's timeouts count per read; a server that drips a byte at a time never
    # trips them, so the whole exchange runs in a thread with a total deadline
    box: dict[str, object] = {}
    deadline = started + check.timeout
    worker = threading.Thread(target=_fetch, args=(check, deadline, box), daemon=True)
    worker.start()
    worker.join(check.timeout)
    if worker.is_alive() or ("status" not in box and "error" not in box):
        return result(False, f"timed out after {check.timeout:g}s", None)
    if "error" in box:
        return result(False, f"request failed: {box['error']}", None)
    status = int(str(box["status"]))
    text = str(box.get("text", ""))
    if time.monotonic() > deadline:
        return result(False, f"timed out after {check.timeout:g}s", status)
    if status != check.expect_status:
        return result(False, f"HTTP {status}, expected {check.expect_status}", status)
    if check.contains is not None and check.contains not in text:
        return result(False, f"HTTP {status} but body lacks {check.contains!r}", status)
    return result(True, f"HTTP {status}", status)


def _run_judgment(check: JudgmentCheck) -> CheckResult:
    confirmation = check.confirmation
    if confirmation is None:
        summary = "needs a human confirmation (convergent coordinator record confirm)"
        return CheckResult(
            name=check.name, kind=check.kind, passed=False, summary=summary, checked_at=_now()
        )
    return CheckResult(
        name=check.name,
        kind=check.kind,
        passed=True,
        summary=f"confirmed by {confirmation.by} at {confirmation.at.isoformat()}",
        checked_at=_now(),
        confirmed_by=confirmation.by,
    )


def run_check(check: Check, base_dir: Path) -> CheckResult:
    """Run one check and return its result with evidence; never raises for a failing check.

    Args:
        check: The check to run.
        base_dir: Directory that relative paths and the default working directory refer
            to (the state file's directory).
    """
    match check:
        case CommandCheck():
            return _run_command(check, base_dir)
        case ArtifactCheck():
            return _run_artifact(check, base_dir)
        case HttpCheck():
            return _run_http(check)
        case JudgmentCheck():
            return _run_judgment(check)
        case _:
            assert_never(check)


def run_checks(checks: Iterable[Check], base_dir: Path) -> list[CheckResult]:
    """Run checks in order (sequentially, so commands never compete for the machine)."""
    return [run_check(check, base_dir) for check in checks]


def base_case_satisfied(results: list[CheckResult]) -> bool:
    """Whether the base case holds: at least one check ran and every check passed.

    An empty base case is never satisfied, so a workflow cannot complete by declaring
    nothing to verify.
    """
    return bool(results) and all(result.passed for result in results)
