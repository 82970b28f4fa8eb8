"""The evidence replay: the library's own corpora under several sources and policies.

`convergent.replay` reads, replays and judges recorded runs; this package adds what the
evidence page needs on top: several trees of convergent's sources compared in one
command (each replayed in its own process), named policy variants, and the call
patterns each corpus holds (`benchmarks.replay.patterns`).
"""

from pathlib import Path

import convergent

_OWN = str(Path(__file__).resolve().parents[2] / "src" / "convergent")
if _OWN not in list(convergent.__path__):
    # a tree of convergent's sources older than `convergent.replay` (``--source``) gets
    # it from this checkout: only the loop under test comes from that tree
    convergent.__path__.append(_OWN)
