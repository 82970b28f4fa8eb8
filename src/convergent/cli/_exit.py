"""How the command line ends its process.

Some native libraries keep threads that can abort the interpreter while it shuts down;
the Temporal client is one (temporalio/sdk-python#300). A command that used such a
library marks it, and the process then flushes its output and exits at once.
"""

from __future__ import annotations

import os
import sys

__all__ = ["leave", "leave_now", "mark_native_threads"]

_native_threads = False


def mark_native_threads() -> None:
    """Note that this process started a library whose threads outlive its event loop."""
    global _native_threads
    _native_threads = True


def leave(code: int) -> None:
    """End the process with ``code``, skipping interpreter teardown when it is unsafe."""
    if _native_threads:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    raise SystemExit(code)


def leave_now(code: int) -> None:
    """End the process with ``code`` at once, once its output is flushed.

    For the hook commands: Claude Code waits for the hook's process to end, the hook
    leaves nothing to clean up, and the interpreter's teardown (freeing every module it
    loaded) would add about a tenth of the hook's time to every call.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
