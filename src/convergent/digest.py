"""Stable digests of texts and of tool calls: the numbers a run's counters keep.

A digest is the same in every process (no hash seed), so that counters written by one
process and read by another (a checkpoint, a resumed run) agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from zlib import crc32

from convergent.stop import canonical_call_key

__all__ = ["call_digest", "text_digest"]


def text_digest(text: str) -> int:
    """A stable digest of a text: its CRC-32 and its length."""
    return crc32(text.encode("utf-8", "surrogatepass")) | len(text) << 32


def call_digest(name: str, arguments: Mapping[str, Any]) -> int:
    """The number a run's counters know a call by: the digest of its canonical key.

    Identical calls (same name, same arguments: `convergent.stop.canonical_call_key`)
    have the same digest; the counters keep the digest, not the key, so that what they
    hold (and what a checkpoint writes) does not grow with the size of the arguments.
    """
    return text_digest(canonical_call_key(name, arguments))
