"""The adapters' benchmark still runs every host its three ways."""

from __future__ import annotations

import asyncio
import os

import pytest

from benchmarks import bench_adapters

# as the benchmark and tests/adapters run the Agents SDK; set in the environment rather
# than through the SDK's API, so that collecting this file does not load the SDK
os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"


@pytest.fixture
def two_repeats(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_adapters, "REPEATS", 2)


@pytest.mark.slow
@pytest.mark.usefixtures("two_repeats")
@pytest.mark.parametrize("host", sorted(bench_adapters.HOSTS))
def test_every_host_runs_alone_with_a_no_op_and_with_the_adapter(host: str) -> None:
    figures = asyncio.run(bench_adapters.measure(bench_adapters.HOSTS[host]))
    for clock in ("wall", "cpu"):
        assert figures[clock]["host_ms_per_cycle"] > 0
        assert len(figures[clock]["adapter_share"]) == 3  # median and quartiles
