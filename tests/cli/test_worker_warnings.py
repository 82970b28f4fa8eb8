"""A worker prints the SDK's warnings as readable lines, and none that says nothing is wrong."""

from __future__ import annotations

import logging

import pytest

from convergent.cli._temporal import SDK_LOGGER, WorkerWarnings


def record(message: str) -> logging.LogRecord:
    return logging.LogRecord(SDK_LOGGER, logging.WARNING, "(sdk-core)", 0, message, (), None)


def test_a_query_the_client_gave_up_on_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    WorkerWarnings().emit(record("Query not found when attempting to respond to it"))
    assert capsys.readouterr().err == ""


def test_other_warnings_are_one_line_each(capsys: pytest.CaptureFixture[str]) -> None:
    WorkerWarnings().emit(record("Error while polling\nstatus: Unavailable\x1b]0;x\x07"))
    assert capsys.readouterr().err == "worker: warning: Error while polling\n"


def test_the_worker_runtime_forwards_core_warnings_to_that_handler() -> None:
    pytest.importorskip("temporalio", reason="needs the temporal extra")
    from convergent.cli._temporal import _worker_runtime

    assert _worker_runtime() is _worker_runtime()
    handlers = logging.getLogger(SDK_LOGGER).handlers
    assert [type(handler) for handler in handlers] == [WorkerWarnings]
