"""The web ask channel: a run asks through the questions table and waits for the console."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from convergent import Agent, ModelResponse, ScriptedModel, StopReason, ToolCall
from convergent.builder import ASK_CHANNELS, BuildContext
from convergent.durability.sqlite import RunStore
from convergent.gate import AskUser
from convergent.spec import AgentSpec
from convergent.testing import call, write_script
from convergent.ui import WebChannel
from convergent.ui.questions import answer_question, open_questions


def asking_model() -> ScriptedModel:
    ask = ToolCall(id="ask-1", name="ask_user", arguments={"question": "which file?"})
    return ScriptedModel([ModelResponse(tool_calls=(ask,)), "done"])


async def test_a_run_waits_for_the_answer_written_by_the_console(store: RunStore) -> None:
    channel = WebChannel(store, "web-1", poll_interval=0.01)
    asker = AskUser(channel, timeout=30)
    agent = Agent(asking_model(), [asker.tool], store=store)
    running = asyncio.create_task(agent.run("ask me", run_id="web-1"))
    while not open_questions(store, "web-1"):
        assert not running.done()
        await asyncio.sleep(0.01)
    (question,) = open_questions(store, "web-1")
    assert question.question == "which file?" and question.call_id == "ask-1"
    assert answer_question(store, question.id, "the second one")
    result = await asyncio.wait_for(running, 30)
    assert result.stop_reason is StopReason.COMPLETED
    assert result.tool_calls[0].result == "the second one"
    assert asker.exchanges[0].channel == "web" and asker.exchanges[0].status == "answered"


async def test_an_unanswered_question_expires_and_the_run_needs_the_user(store: RunStore) -> None:
    asker = AskUser(WebChannel(store, "web-2", poll_interval=0.01), timeout=0.2)
    result = await Agent(asking_model(), [asker.tool], store=store).run("ask", run_id="web-2")
    assert result.stop_reason is StopReason.NEEDS_USER
    assert store.query("SELECT status FROM questions WHERE run_id = 'web-2'") == [("expired",)]
    assert not answer_question(store, 1, "too late")
    assert [q.question for q in store.pending_questions("web-2")] == ["which file?"]


def test_web_is_a_registered_ask_channel_that_needs_a_store(tmp_path: Path) -> None:
    assert "web" in ASK_CHANNELS
    with RunStore(tmp_path / "runs.db") as store:
        built = ASK_CHANNELS["web"](BuildContext(run_id="r", store=store))
        assert isinstance(built, WebChannel)
    from convergent.exceptions import UserError

    with pytest.raises(UserError, match="ask_via web needs a stored run"):
        ASK_CHANNELS["web"](BuildContext())
    spec = AgentSpec(model="scripted:x.json", ask_via="web")
    assert spec.ask_via == "web"


def test_registering_the_channel_does_not_import_the_server() -> None:
    code = (
        "import sys, convergent.ui, convergent.cli; "
        "from convergent.builder import ASK_CHANNELS; assert 'web' in ASK_CHANNELS; "
        "print(sorted(m for m in ('starlette', 'uvicorn', 'jinja2') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.slow
def test_convergent_run_ask_via_web_expires_into_needs_user(tmp_path: Path) -> None:
    script = write_script(tmp_path / "script.json", call("ask_user", question="name?"))
    db = tmp_path / "runs.db"
    command = [sys.executable, "-m", "convergent", "run", "ask", "--model", script]
    command += ["--db", str(db), "--run-id", "cli-web", "--ask-via", "web", "--ask-timeout", "0.3"]
    done = subprocess.run([*command, "--json"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["stop_reason"] == "needs_user"
    with RunStore(db) as store:
        rows = store.query("SELECT question, status FROM questions WHERE run_id = 'cli-web'")
    assert rows == [("name?", "expired")]
    refused = subprocess.run(
        [*command[:-2], "--no-checkpoint"], capture_output=True, text=True, timeout=60
    )
    assert refused.returncode == 2
    assert refused.stderr.strip().startswith("error: ask_via web needs a stored run")
    assert len(refused.stderr.strip().splitlines()) == 1
