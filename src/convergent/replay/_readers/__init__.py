"""Readers of recorded runs, one per format, and the detection that picks one per file.

Each file is decoded once: a JSON file as a whole, a JSON Lines file line by line (its
first line decides the format). A folder is searched for ``.json``, ``.jsonl`` and
``.traj`` files; those in no known format (evaluation reports, score files) are passed
over. Runs are yielded one at a time, so a long input is never held whole: only the
file being read is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from pathlib import Path

import msgspec

from convergent.exceptions import UserError
from convergent.replay._readers._common import FormatMismatch, load_json
from convergent.replay._readers._format import Format, Sample
from convergent.replay._readers.bfcl import BFCL
from convergent.replay._readers.claude_code import CLAUDE_CODE
from convergent.replay._readers.messages import MESSAGES
from convergent.replay._readers.openai_agents import OPENAI_AGENTS
from convergent.replay._readers.otlp import OTLP
from convergent.replay._readers.swe import MINI_SWE_AGENT, SWE_AGENT
from convergent.replay._readers.tau import TAU2_BENCH, TAU_BENCH
from convergent.replay._recording import Malformed, Trajectory

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
_decoder = msgspec.json.Decoder()


def _sample(path: Path) -> Sample:
    if path.suffix != ".jsonl":
        try:
            return Sample(load_json(path), lines=False)
        except FormatMismatch:
            pass  # perhaps JSON Lines under another name: tried below
    try:
        with path.open("rb") as lines:
            for line in lines:
                if line.strip():
                    return Sample(_decoder.decode(line), lines=True)
    except OSError as exc:
        raise FormatMismatch(f"cannot be read ({exc.strerror})") from None
    except msgspec.DecodeError:
        raise FormatMismatch("neither JSON nor JSON Lines") from None
    raise FormatMismatch("empty")


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
    return next((found for found in FORMATS.values() if found.claims(path, sample)), None)


def _expected() -> str:
    return ", ".join(FORMATS)


def read_runs(
    paths: Iterable[str | Path], format: str | None = None
) -> Iterator[Trajectory | Malformed]:
    """Every recorded run in ``paths`` (files or folders), read or reported as malformed.

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
            found = False
            for file in sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in _SUFFIXES):
                runs = _read_file(file, format)
                if runs is not None:
                    found = True
                    yield from _named_within(runs, file, file.relative_to(path))
            if not found:
                wanted = format or f"one of: {_expected()}"
                raise UserError(f"{path}: no recorded runs found (expected {wanted})")
        elif path.is_file():
            runs = _read_file(path, format)
            if runs is None:
                expected = (
                    f"a {format} file: {FORMATS[format].expects}"
                    if format
                    else f"one of: {_expected()} (or force one with --format)"
                )
                raise UserError(f"{path}: not a recording in a known format; expected {expected}")
            yield from runs
        else:
            raise UserError(f"{path}: no such file or folder")


def _named_within(
    runs: Iterator[Trajectory | Malformed], file: Path, relative: Path
) -> Iterator[Trajectory | Malformed]:
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


def _read_file(path: Path, format: str | None) -> Iterator[Trajectory | Malformed] | None:
    """The runs of a file in ``format`` (or its own), or None if it is not in it."""
    try:
        sample = _sample(path)
    except FormatMismatch:
        return None
    reader = FORMATS[format] if format is not None else _claimant(path, sample)
    if reader is None or not reader.claims(path, sample):
        return None
    return reader.read(path, sample)
