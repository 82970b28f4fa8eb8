"""Every replayed tool declared as docs/loop.md tells users to, from a file per corpus kind.

The replay's readers declare only the tools each benchmark marks as reads; a user
declares writes too. The files in ``declarations/`` beside this module declare the tools
of each kind of corpus of docs/evidence.md as its user would, with the replay's public
``--declare`` keys (`convergent.replay.load_declarations`): ``tau.yaml`` (τ-bench and
τ²-bench: their domains' READ and WRITE tools), ``bfcl.yaml`` (BFCL's functions by what
they do: reads, idempotent calls, writes), ``swe-agent.yaml`` (SWE-agent's own commands)
and ``mini-swe-agent.yaml`` (a shell declares nothing). `replay_each` replays each
corpus with the file of its kind, and its own labels where given, into one report.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from convergent.replay import (
    Declarations,
    ReplayReport,
    detect_format,
    load_declarations,
    replay,
)

__all__ = [
    "DECLARATIONS",
    "FILES",
    "Labels",
    "add_success_option",
    "corpus_format",
    "declarations_for",
    "labels_by_corpus",
    "replay_each",
]

DECLARATIONS = Path(__file__).with_name("declarations")
"""The folder of declaration files."""
FILES = {
    "tau-bench": "tau.yaml",
    "tau2-bench": "tau.yaml",
    "bfcl": "bfcl.yaml",
    "swe-agent": "swe-agent.yaml",
    "mini-swe-agent": "mini-swe-agent.yaml",
}
"""The declaration file of each format (a format without one declares nothing)."""
_SUFFIXES = (".json", ".jsonl", ".traj")

Labels = tuple[dict[str, bool], dict[str, dict[str, bool]]]
"""Success labels for every corpus, and each corpus's own (by its path as given)."""


def declarations_for(format: str | None) -> Declarations:
    """The tools of a format's corpora, declared as their user would (empty: none)."""
    name = FILES.get(format or "")
    return Declarations() if name is None else load_declarations(DECLARATIONS / name)


def corpus_format(path: Path) -> str | None:
    """The format of a corpus: of the file, or of the first file of the folder in one."""
    if path.is_file():
        return detect_format(path)
    for file in sorted(path.rglob("*")):
        if file.suffix in _SUFFIXES and file.is_file():
            found = detect_format(file)
            if found is not None:
                return found
    return None


def add_success_option(parser: argparse.ArgumentParser) -> None:
    """The ``--success [PATH=]JSON`` option, repeatable, that `labels_by_corpus` reads."""
    parser.add_argument(
        "--success",
        action="append",
        default=[],
        metavar="[PATH=]JSON",
        help="success labels by run id (a `convergent replay --success` file), for every "
        "corpus or for the corpus at PATH (run ids are paths within a corpus: two corpora "
        "may share them); repeatable",
    )


def labels_by_corpus(specs: Sequence[str]) -> Labels:
    """``--success [PATH=]JSON`` values: labels for every corpus, and for the one at PATH.

    Run ids are paths within a corpus, so two corpora may share them: give each its own.
    """
    shared: dict[str, bool] = {}
    own: dict[str, dict[str, bool]] = {}
    for spec in specs:
        path, sep, file = spec.rpartition("=")
        labels = json.loads(Path(file).read_text(encoding="utf-8"))
        if sep:
            own.setdefault(str(Path(path)), {}).update(labels)
        else:
            shared.update(labels)
    return shared, own


def replay_each(
    corpora: Sequence[Path],
    *,
    settings: Mapping[str, Any] | None = None,
    labels: Labels = ({}, {}),
    declared: bool = True,
    workers: int = 1,
    threshold: int = 3,
) -> ReplayReport:
    """Replay each corpus with its own labels, into one report.

    Args:
        corpora: Recording files or folders, one corpus each.
        settings: The policy under test (default: the library's defaults).
        labels: Labels for every corpus, and each corpus's own (`labels_by_corpus`).
        declared: Declare each corpus's tools with the file of its kind (else only as
            its reader knows them).
        workers: Processes that replay.
        threshold: Unchanged repeats of one call that make a real loop.
    """
    shared, own = labels
    joined = ReplayReport(settings=dict(settings or {}), threshold=threshold)
    for corpus in corpora:
        given = {**shared, **own.get(str(Path(corpus)), {})}
        report = replay(
            [corpus],
            settings=settings,
            success=given or None,
            declarations=declarations_for(corpus_format(Path(corpus))) if declared else None,
            threshold=threshold,
            workers=workers,
        )
        joined.corpora.update(report.corpora)
        joined.malformed += report.malformed
        joined.skipped += report.skipped
    return joined
