"""The run page's Resume button: every resumable run has one, a completed run none."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the console needs the extra ui")

from starlette.testclient import TestClient  # noqa: E402

from convergent import Limits, StopReason  # noqa: E402
from convergent.durability.sqlite import RunStore  # noqa: E402
from convergent.gate import AskUser, QueueChannel  # noqa: E402
from convergent.testing import call, step, write_script  # noqa: E402
from convergent.ui.app import console_of  # noqa: E402

from .conftest import BASE, make_run, post  # noqa: E402

RESUME_FORM = 'action="/c-test/runs/{}/resume"'


def test_each_resumable_run_has_a_resume_form_and_a_completed_run_none(
    store: RunStore, client: TestClient
) -> None:
    for run_id in ("cut", "capped"):
        make_run(store, run_id, [step(call("calculator", expression="1+1"))] * 2,
                 limits=Limits(max_cycles=1))  # fmt: skip
    make_run(store, "done", [step(call("calculator", expression="1+1")), "2"])
    make_run(
        store,
        "asks",
        [step(call("ask_user", question="which?"))],
        tools=[AskUser(QueueChannel(answers=[]), timeout=0.01).tool],
    )
    with store.transaction() as conn:  # a run whose process died: interrupted
        conn.execute("UPDATE runs SET status = 'running', stop_reason = NULL, pid = -1 "
                     "WHERE run_id = 'cut'")  # fmt: skip
    assert store.get_run("cut").status == "interrupted"
    assert store.get_run("capped").status == "max_cycles"
    for run_id in ("cut", "capped"):
        page = client.get(f"{BASE}/runs/{run_id}").text
        assert RESUME_FORM.format(run_id) in page, run_id
        assert 'name="message"' in page and "Resume the run" in page
    done = client.get(f"{BASE}/runs/done").text
    assert RESUME_FORM.format("done") not in done and "it cannot be resumed" in done
    # a run waiting for an answer resumes through its answer form, not an empty resume
    asks = client.get(f"{BASE}/runs/asks").text
    assert store.get_run("asks").stop_reason is StopReason.NEEDS_USER
    assert RESUME_FORM.format("asks") not in asks and "Answer and resume" in asks


def test_resume_refuses_a_completed_run_and_one_waiting_for_an_answer(
    store: RunStore, client: TestClient
) -> None:
    make_run(store, "done", [step(call("calculator", expression="1+1")), "2"])
    make_run(
        store,
        "asks",
        [step(call("ask_user", question="which?"))],
        tools=[AskUser(QueueChannel(answers=[]), timeout=0.01).tool],
    )
    completed = post(client, f"{BASE}/runs/done/resume", message="go on")
    assert completed.status_code == 400 and "nothing to resume" in completed.text
    waiting = post(client, f"{BASE}/runs/asks/resume", message="")
    assert waiting.status_code == 400 and "answer its question to resume it" in waiting.text
    assert client.get(f"{BASE}/runs/done/resume").status_code == 405
    make_run(store, "capped", [step(call("calculator", expression="1+1"))] * 2,
             limits=Limits(max_cycles=1))  # fmt: skip
    for headers in ({}, {"origin": "http://evil.example"}):
        forged = client.post(f"{BASE}/runs/capped/resume", data={"message": "x"}, headers=headers)
        assert forged.status_code == 403
    assert console_of(client.app).launcher.children == []  # type: ignore[arg-type]
    assert store.stored_steering("done", 0) == []


def test_a_message_too_long_for_a_command_line_is_refused_in_one_line(
    store: RunStore, client: TestClient
) -> None:
    make_run(store, "capped", [step(call("calculator", expression="1+1"))] * 2,
             limits=Limits(max_cycles=1))  # fmt: skip
    refused = post(client, f"{BASE}/runs/capped/resume", message="x" * 120_000)
    assert refused.status_code == 400
    assert "the message is too long (120,000 bytes; at most 100,000)" in refused.text
    assert console_of(client.app).launcher.children == []  # type: ignore[arg-type]
    assert store.get_run("capped").status == "max_cycles"


def stopped_cli_run(store: RunStore, folder: Path, run_id: str) -> None:
    """A run started by ``convergent run`` with a script file, stopped at max_cycles=1."""
    script = folder / "s.json"
    first = call("calculator", expression="6*7")
    # the second reply is the answer asked for after the stop (a request with no tools)
    write_script(script, first, "no answer yet", "it is 42")
    started = subprocess.run(
        [sys.executable, "-m", "convergent", "run", "multiply", "--model", f"scripted:{script}",
         "--max-cycles", "1", "--run-id", run_id, "--db", str(store.path), "--json"],
        cwd=folder, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert started.returncode == 1 and '"max_cycles"' in started.stdout, started.stderr


@pytest.mark.slow
def test_the_resume_button_continues_a_stopped_run_with_the_message(
    store: RunStore, client: TestClient, tmp_path: Path
) -> None:
    stopped_cli_run(store, tmp_path, "capped")
    response = post(client, f"{BASE}/runs/capped/resume", message="give the product")
    assert response.status_code == 303
    notice = client.get(response.headers["location"]).text
    assert "with your message" in notice and "did not start" not in notice
    launcher = console_of(client.app).launcher  # type: ignore[arg-type]
    assert launcher.children[0].wait(timeout=60) == 0
    run = store.get_run("capped")
    assert run.stop_reason is StopReason.COMPLETED and run.output == "it is 42"
    delivered = [data for _, data in store.events("capped") if data["type"] == "redirected"]
    assert [data["message"] for data in delivered] == ["give the product"]
    page = client.get(f"{BASE}/runs/capped").text
    assert RESUME_FORM.format("capped") not in page


@pytest.mark.slow
def test_the_resume_button_without_a_message_sends_none(
    store: RunStore, client: TestClient, tmp_path: Path
) -> None:
    stopped_cli_run(store, tmp_path, "plain")
    response = post(client, f"{BASE}/runs/plain/resume", message="  ")
    assert response.status_code == 303
    launcher = console_of(client.app).launcher  # type: ignore[arg-type]
    assert launcher.children[0].wait(timeout=60) == 0
    assert store.get_run("plain").stop_reason is StopReason.COMPLETED
    assert not [data for _, data in store.events("plain") if data["type"] == "redirected"]
    assert store.stored_steering("plain", 0) == []
