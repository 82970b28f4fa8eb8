"""LangChain tools loaded from a real MCP server with ``langchain-mcp-adapters``: the
effects their annotations declare reach convergent's stop rules.

``langchain-mcp-adapters`` needs the MCP SDK 1.x, and the ``mcp`` extra installs 2.x, so
the run happens in an environment of its own (`kept_env.kept_environment`), with
LangChain at the versions of the ``langchain`` extra and convergent from this checkout.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from kept_env import kept_environment

pytestmark = pytest.mark.slow  # builds (once) an environment, then starts a server

ROOT = Path(__file__).resolve().parents[2]
INSTALLS = [
    ["--no-deps", "-r", str(ROOT / "requirements-runtime.lock")],
    ["langchain==1.4.7", "langchain-core==1.7.2", "langgraph==1.2.22",
     "langchain-mcp-adapters==0.3.2", "mcp==1.30.0"],
]  # fmt: skip
"""The runtime's locked packages, then LangChain as the extra pins it, and the adapters."""


def test_a_servers_annotations_reach_the_stop_rules_through_langchain_mcp_adapters() -> None:
    """The server marks ``pay`` a write: of three identical payments the third does not
    run (its result is the note), and ``balance`` is a read."""
    python = kept_environment("langchain-mcp-adapters", INSTALLS) / "bin" / "python"
    driver = Path(__file__).with_name("langchain_mcp_driver.py")
    done = subprocess.run(
        [str(python), str(driver), "run"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["effects"] == {"pay": "write", "balance": "read"}
    assert report["results"][:2] == ["paid 5", "paid 5"]
    assert report["results"][2].startswith("Not run: you have requested pay(amount=5) 3 times")
    assert report["reason"] == "completed"
