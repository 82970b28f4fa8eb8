"""Real inference on the embedded model: structure, not wisdom.

One llama.cpp server runs for the whole session (1 thread, temperature 0, small
``max_tokens``); every test's `LocalModel` with the default configuration joins it.
Tests that need their own server use a different configuration, so that closing them
really stops a server.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from convergent import (
    Agent,
    Limits,
    ModelResponded,
    ModelSettings,
    RunResult,
    StopPolicy,
    StopReason,
    Tool,
    calculator,
    file_tools,
)
from convergent.messages import UserMessage
from convergent.models import _llama_server
from convergent.models.local import LocalModel

pytest.importorskip("xllamacpp")
pytestmark = pytest.mark.local_model

MAX_TOKENS = 96


@pytest.fixture(scope="session")
def shared_server() -> Iterator[_llama_server.LlamaServer]:
    """Hold the default configuration's server open for the whole session."""
    server = _llama_server.acquire(LocalModel()._config())
    yield server
    _llama_server.release(server)
    assert not server.running


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "notes.txt").write_text("The launch code is 4721.\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "answer.txt").write_text("42\n")
    return tmp_path


def port_open(url: str) -> bool:
    host, port = url.removeprefix("http://").split(":")
    with socket.socket() as probe:
        probe.settimeout(1.0)
        return probe.connect_ex((host, int(port))) == 0


def assert_well_formed(result: RunResult, tools: Sequence[Tool], max_cycles: int) -> None:
    """Every call the model made names an available tool with arguments fit to run."""
    assert isinstance(result.stop_reason, StopReason)
    assert 1 <= result.cycles <= max_cycles
    by_name = {t.name: t for t in tools}
    responses = [e for e in result.events if isinstance(e, ModelResponded)]
    assert len(responses) == result.cycles
    for response in responses:
        for call in response.tool_calls:
            assert call.name in by_name
            if call.parse_error is not None:
                assert response.finish_reason == "length"
                continue
            required = set(by_name[call.name].spec.parameters.get("required", ()))
            assert required <= set(call.arguments)
            assert all(isinstance(v, str) for v in call.arguments.values())
    if result.stop_reason is StopReason.COMPLETED:
        assert not responses[-1].tool_calls


@pytest.mark.parametrize(
    "task",
    [
        "What is 17 * 23?",
        "Read the file notes.txt and tell me the launch code.",
        "Which files are in the folder data?",
    ],
)
async def test_run_ends_with_a_typed_stop_reason_and_well_formed_calls(
    shared_server: _llama_server.LlamaServer, workspace: Path, task: str
) -> None:
    tools = [calculator, *file_tools(workspace)]
    async with LocalModel(max_tokens=MAX_TOKENS) as model:
        assert model.base_url == shared_server.address
        assert model.active_protocol == "structured"
        agent = Agent(
            model, tools, limits=Limits(max_cycles=4), policy=StopPolicy(on_tool_error="continue")
        )
        result = await agent.run(task)
    assert_well_formed(result, tools, max_cycles=4)
    assert result.usage.output_tokens > 0
    assert shared_server.running


async def test_request_without_tools_is_a_plain_answer(
    shared_server: _llama_server.LlamaServer,
) -> None:
    async with LocalModel(max_tokens=32) as model:
        reply = await model.request([UserMessage(content="Say hello.")], [])
    assert reply.tool_calls == ()
    assert reply.content.strip()
    assert reply.finish_reason == "stop"
    assert reply.model_name == "local"
    assert reply.usage.input_tokens > 0 and reply.usage.output_tokens > 0


async def test_reply_cut_off_by_max_tokens_goes_back_to_the_model(
    shared_server: _llama_server.LlamaServer,
) -> None:
    tools = [calculator]
    async with LocalModel() as model:
        agent = Agent(
            model,
            tools,
            limits=Limits(max_cycles=3),
            settings=ModelSettings(max_tokens=4),
        )
        result = await agent.run("What is 2 + 2?")
    assert result.stop_reason in (StopReason.STALLED, StopReason.MAX_CYCLES)
    assert result.tool_calls
    assert all(r.outcome == "invalid" and "cut off" in r.result for r in result.tool_calls)


async def test_models_with_one_configuration_share_one_server(
    shared_server: _llama_server.LlamaServer,
) -> None:
    first, second = LocalModel(), LocalModel()
    await first.start()
    await second.start()
    assert first.base_url == second.base_url == shared_server.address
    await first.aclose()
    reply = await second.request([UserMessage(content="Hi")], [], ModelSettings(max_tokens=8))
    assert reply.usage.output_tokens > 0
    await second.aclose()
    assert shared_server.running


async def test_server_is_gone_after_the_run(workspace: Path) -> None:
    tools = [calculator, *file_tools(workspace)]
    async with LocalModel(context_size=1024, max_tokens=MAX_TOKENS) as model:
        url = model.base_url
        assert url is not None and url.startswith("http://127.0.0.1:")
        assert port_open(url)
        result = await Agent(model, tools, limits=Limits(max_cycles=2)).run("What is 3 * 4?")
    assert_well_formed(result, tools, max_cycles=2)
    assert model.base_url is None
    assert not port_open(url)
    assert all(s.config.context_size != 1024 for s in _llama_server.running_servers())


async def test_native_protocol_uses_the_shipped_template(workspace: Path) -> None:
    tools = [calculator, *file_tools(workspace)]
    async with LocalModel(protocol="native", max_tokens=48) as model:
        assert model.active_protocol == "native"
        result = await Agent(model, tools, limits=Limits(max_cycles=2)).run("What is 3 * 4?")
        url = model.base_url
    assert_well_formed(result, tools, max_cycles=2)
    assert url is not None and not port_open(url)


def test_a_process_that_never_closes_its_model_leaves_no_server(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import asyncio
        from convergent.models.local import LocalModel

        async def main():
            model = LocalModel(context_size=512)
            await model.start()
            print(model.base_url, flush=True)

        asyncio.run(main())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    url = done.stdout.strip()
    assert url.startswith("http://127.0.0.1:")
    assert not port_open(url)
