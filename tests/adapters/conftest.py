"""Adapter tests run every host offline: the Agents SDK exports no traces.

The SDK's own switch is set in the environment rather than through its API, so that a
test process that runs no adapter test does not load the SDK.
"""

from __future__ import annotations

import os

os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"
