"""Readers of recorded runs, one per format, and the detection that picks one per file.

Each file is decoded once: a JSON file as a whole, a JSON Lines file line by line (its
first lines decide the format). A folder is searched, through its links, for ``.json``,
``.jsonl`` and ``.traj`` files; those in no known format (evaluation reports, score
files) are passed over. Runs are yielded one at a time, so a long input is never held
whole: only the file being read is.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from convergent.exceptions import UserError
from convergent.replay._readers._common import (
    READ_ERRORS,
    FormatMismatch,
    first_lines,
    load_json,
)
from convergent.replay._readers._format import Format, Sample
from convergent.replay._readers.bfcl import BFCL
from convergent.replay._readers.claude_code import CLAUDE_CODE
from convergent.replay._readers.messages import MESSAGES
from convergent.replay._readers.openai_agents import OPENAI_AGENTS
from convergent.replay._readers.otlp import OTLP
from convergent.replay._readers.swe import MINI_SWE_AGENT, SWE_AGENT
from convergent.replay._readers.tau import TAU2_BENCH, TAU_BENCH
from convergent.replay._recording import Malformed, Skipped, Trajectory

__all__ = ["FORMATS", "detect_format", "read_runs"]

FORMATS: dict[str, Format] = {
    found.name: found
    for found in (
        CLAUDE_CODE,
        OTLP,
        OPENAI_AGENTS,
        TAU_BENCH,
        TAU2_BENCH,
        MINI_SWE_AGENT,
        SWE_AGENT,
        BFCL,
        MESSAGES,
    )
}
"""Every format by its ``--format`` name, in the order detection tries them (the plain
message list, which claims the most, last)."""

_SUFFIXES = (".json", ".jsonl", ".traj")
_HEAD = 5
"""Lines of a JSON Lines file read to tell its format (a header may come first)."""


def _sample(path: Path) -> Sample:
    if path.suffix != ".jsonl":
        try:
            return Sample(load_json(path), lines=False)
        except FormatMismatch:
            pass  # perhaps JSON Lines under another name: tried below
    head = first_lines(path, _HEAD)
    return Sample(head[0], lines=True, head=tuple(head))


def _files(folder: Path) -> list[Path]:
    """The recording files under ``folder``, through links, each folder visited once."""
    found: list[Path] = []
    seen: set[tuple[int, int]] = set()
    for root, folders, files in os.walk(folder, followlinks=True):
        try:
            status = os.stat(root)
        except OSError:
            folders[:] = []
            continue
        if (status.st_dev, status.st_ino) in seen:  # a link back up: once is enough
            folders[:] = []
            continue
        seen.add((status.st_dev, status.st_ino))
        folders.sort()
        for name in files:
            path = Path(root, name)
            if path.suffix in _SUFFIXES and path.is_file():
                found.append(path)
    return sorted(found)


def detect_format(path: str | Path) -> str | None:
    """The name of the format of a recording file, or None if it is in none known."""
    file = Path(path)
    try:
        sample = _sample(file)
    except FormatMismatch:
        return None
    found = _claimant(file, sample)
    return None if found is None else found.name


def _claimant(path: Path, sample: Sample) -> Format | None:
    return next((found for found in FORMATS.values() if _claims(found, path, sample)), None)


def _claims(found: Format, path: Path, sample: Sample) -> bool:
    """Whether ``found`` takes the file (a value of an unexpected shape: it does not)."""
    try:
        return found.claims(path, sample)
    except READ_ERRORS:
        return False


def _guarded(
    runs: Iterator[Trajectory | Malformed | Skipped], path: Path
) -> Iterator[Trajectory | Malformed | Skipped]:
    """A file's runs; what its reader did not expect costs the rest of the file, reported."""
    try:
        yield from runs
    except READ_ERRORS as exc:
        yield Malformed(str(path), f"unreadable from here on ({type(exc).__name__}: {exc})")


def _expected() -> str:
    return ", ".join(FORMATS)


def read_runs(
    paths: Iterable[str | Path], format: str | None = None
) -> Iterator[Trajectory | Malformed | Skipped]:
    """Every recorded run in ``paths`` (files or folders), read or reported as malformed.

    Lines that hold no run (a header, metadata) come as `Skipped`.

    Args:
        paths: Recording files, or folders searched for them.
        format: A format name from `FORMATS` to read every file as (default: detected
            per file).

    Raises:
        UserError: If the format is unknown, a path is missing, a file given by name is
            in no known format (or not in ``format``), or a folder holds no recordings.
    """
    if format is not None and format not in FORMATS:
        raise UserError(f"unknown format {format!r}; expected one of: {_expected()}")
    for path in map(Path, paths):
        if path.is_dir():
            yield from _read_folder(path, format)
        elif path.is_file():
            runs = _read_file(path, format)
            if isinstance(runs, str):
                expected = (
                    f"a {format} file: {FORMATS[format].expects}"
                    if format
                    else f"one of: {_expected()} (or force one with --format)"
                )
                raise UserError(f"{path}: {runs}; expected {expected}")
            yield from runs
        else:
            raise UserError(f"{path}: no such file or folder")


def _read_folder(folder: Path, format: str | None) -> Iterator[Trajectory | Malformed | Skipped]:
    """The runs of every recording file under ``folder``; the other files are reported."""
    found = False
    passed_over: list[Skipped] = []
    for file in _files(folder):
        runs = _read_file(file, format)
        if isinstance(runs, str):
            passed_over.append(Skipped(str(file), runs))
            continue
        found = True
        yield from _named_within(runs, file, file.relative_to(folder))
    if not found:
        wanted = format or f"one of: {_expected()}"
        raise UserError(f"{folder}: no recorded runs found (expected {wanted})")
    yield from passed_over


def _named_within(
    runs: Iterator[Trajectory | Malformed | Skipped], file: Path, relative: Path
) -> Iterator[Trajectory | Malformed | Skipped]:
    """Runs named by their file get its path within the folder instead.

    Runs of equally named files in different sub-folders so keep distinct ids.
    """
    if relative == Path(file.name):
        yield from runs
        return
    for run in runs:
        if isinstance(run, Trajectory) and run.id.startswith(file.name):
            run = dataclasses.replace(run, id=str(relative) + run.id[len(file.name) :])
        yield run


def _read_file(path: Path, format: str | None) -> Iterator[Trajectory | Malformed | Skipped] | str:
    """The runs of a file in ``format`` (or its own), or why it is not read."""
    try:
        sample = _sample(path)
    except FormatMismatch as exc:
        return str(exc)
    reader = FORMATS[format] if format is not None else _claimant(path, sample)
    if reader is None or not _claims(reader, path, sample):
        return "not a recording in a known format" if format is None else f"not a {format} file"
    return _guarded(reader.read(path, sample), path)
