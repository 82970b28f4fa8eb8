"""The state file's lock: exclusive between processes, reentrant in one, never through a link."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from convergent.coordinator._lock import StateLock

HOLD = """
import sys, time
from convergent.coordinator._lock import StateLock
with StateLock(sys.argv[1], timeout=5):
    print("held", flush=True)
    sys.stdin.read()
"""


def test_another_process_holding_it_makes_a_taker_wait_then_give_up(tmp_path: Path) -> None:
    path = str(tmp_path / "state.yaml.lock")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, path],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(TimeoutError), StateLock(path, timeout=0.2):
            pass
    finally:
        holder.communicate("")
    with StateLock(path, timeout=0.2):  # free once the holder is gone
        pass


def test_it_is_reentrant_within_a_thread(tmp_path: Path) -> None:
    lock = StateLock(str(tmp_path / "state.yaml.lock"), timeout=0.2)
    with lock, lock:
        pass
    with StateLock(str(tmp_path / "state.yaml.lock"), timeout=0.2):
        pass  # released after the outer exit


def test_a_link_in_place_of_the_lock_file_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    link = tmp_path / "state.yaml.lock"
    link.symlink_to(target)
    with pytest.raises(OSError), StateLock(str(link), timeout=0.2):
        pass
    assert not target.exists()
