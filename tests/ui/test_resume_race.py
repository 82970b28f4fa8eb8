"""Ten "Answer and resume" posts at once to a real console: one resumes, nine are refused.

The console claims the run before it starts ``convergent resume``, which takes the
claim over; a post that comes while either holds it is refused with ``run ID is running
(pid N)`` and starts nothing.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from convergent import UserError
from convergent.durability.sqlite import RunStore
from convergent.ui import actions
from resume_race import (
    WAIT,
    assert_resumed_once,
    environment,
    executions,
    process_gone,
    stopped_run,
    wait_for,
)

from .conftest import needs_extra

POSTS = 10


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def _post(url: str, token: str, origin: str, answer: str) -> tuple[int, str]:
    request = urllib.request.Request(
        url,
        data=urllib.parse.urlencode({"answer": answer}).encode(),
        headers={"Authorization": f"Bearer {token}", "Origin": origin},
    )
    try:
        with urllib.request.build_opener(_NoRedirect).open(request, timeout=WAIT) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, html.unescape(exc.read().decode())


def _post_together(url: str, token: str, origin: str) -> list[tuple[int, str]]:
    """Post ``answer {i}`` from `POSTS` threads at the same moment."""
    outcomes: list[tuple[int, str]] = [(0, "")] * POSTS
    start = threading.Barrier(POSTS)

    def post(index: int) -> None:
        start.wait()
        outcomes[index] = _post(url, token, origin, f"answer {index}")

    threads = [threading.Thread(target=post, args=(index,)) for index in range(POSTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


@pytest.mark.slow
def test_one_of_many_answers_posted_at_once_resumes_the_run(tmp_path: Path) -> None:
    needs_extra()
    db = tmp_path / "runs.db"
    run_id = stopped_run(db, tmp_path, "needs_user")
    server = subprocess.Popen(
        [sys.executable, "-m", "convergent", "ui", "--no-open", "--db", str(db), "--port", "0"],
        env=environment(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        found = re.search(r"(http://127\.0\.0\.1:\d+)/\?token=([\w-]+)", server.stdout.readline())
        assert found
        origin, token = found.groups()
        try:
            outcomes = _post_together(f"{origin}/runs/{run_id}/answer", token, origin)
        finally:
            (tmp_path / "release").touch()
        with RunStore(db) as store:
            wait_for(lambda: store.get_run(run_id).status == "completed", "the resumed run")
            ((resumer,),) = store.query("SELECT pid FROM runs WHERE run_id = ?", [run_id])
        wait_for(lambda: process_gone(resumer), "the resume process to end")
    finally:
        server.terminate()
        server.communicate(timeout=WAIT)
    resumed = [index for index, (status, _) in enumerate(outcomes) if status == 303]
    assert len(resumed) == 1, outcomes
    refusals = [text for status, text in outcomes if status != 303]
    assert len(refusals) == POSTS - 1
    for text in refusals:
        holder = re.search(rf"run {run_id!r} is running \(pid (\d+)\)", text)
        assert holder is not None, text
        # the console holds the claim until the process it started takes it over
        assert int(holder.group(1)) in (server.pid, resumer)
    assert executions(tmp_path) == [f"{resumer} resumed"]
    assert_resumed_once(db, run_id, f"answer {resumed[0]}", POSTS)


@pytest.mark.slow
def test_the_console_holds_the_claim_until_its_process_takes_it_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "runs.db"
    run_id = stopped_run(db, tmp_path, "needs_user")
    # a resume process that never takes the claim over: it waits, then fails
    fails = tmp_path / "fails.sh"
    fails.write_text(f"#!/bin/sh\nwhile [ ! -e {tmp_path}/fail ]; do sleep 0.02; done\nexit 1\n")
    fails.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(fails))
    launcher = actions.Launcher(db)
    with RunStore(db) as store:
        try:
            notice = actions.answer(store, launcher, run_id, "answer 0", None)
            assert notice.startswith("resuming the run with your answer")
            with pytest.raises(UserError) as refused:
                actions.answer(store, launcher, run_id, "answer 1", None)
            assert str(refused.value) == f"run {run_id!r} is running (pid {os.getpid()})"
        finally:
            (tmp_path / "fail").touch()
            codes = [child.wait(timeout=WAIT) for child in launcher.children]
        assert codes == [1]
        wait_for(lambda: not store.get_run(run_id).running, "the console to give the run back")
        assert store.get_run(run_id).status == "needs_user"
        assert [q.question for q in store.pending_questions(run_id)] == ["which one?"]
