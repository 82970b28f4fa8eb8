"""MCP servers as tool sources of a run: real servers, driven by ScriptedModel."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from mcp_helpers import alive, descendants, http_server, raw_server, stdio_testing, time_server

from convergent import (
    Agent,
    ModelResponse,
    ScriptedModel,
    StopPolicy,
    StopReason,
    ToolCall,
    ToolStarted,
    UserError,
    calculator,
)
from convergent.mcp import MCPServer
from convergent.mcp.toolset import MCPToolset
from convergent.testing import call, scripted, step

if importlib.util.find_spec("mcp") is None:  # found, not imported: collecting stays light
    pytest.skip("needs the mcp extra", allow_module_level=True)

REFUSED = "Error executing tool refuse: refused"


@pytest.fixture(autouse=True)
def _no_server_outlives_its_test() -> object:
    before = descendants()
    yield None
    assert descendants() - before == set()


@pytest.mark.slow
async def test_the_time_server_answers_through_the_loop() -> None:
    model = scripted(
        step(
            call("get_current_time", timezone="Asia/Tokyo"),
            call("convert_time", source_timezone="UTC", time="12:00", target_timezone="UTC"),
            call("calculator", expression="2+2"),
        ),
        "it is late in Tokyo",
    )
    agent = Agent(model, [calculator], mcp_servers=[time_server()])
    assert agent.tool_names == ("calculator",)
    result = await agent.run("What time is it in Tokyo?")
    assert result.stop_reason is StopReason.COMPLETED
    now, converted, four = result.tool_calls
    assert now.ok and json.loads(now.result)["timezone"] == "Asia/Tokyo"
    assert converted.ok and "12:00" in converted.result
    assert four.result == "4"
    assert agent.tool_names == ("calculator",)  # the servers' tools leave with them


@pytest.mark.slow
async def test_the_listed_schema_and_description_reach_the_model() -> None:
    seen: list[tuple[str, ...]] = []

    def respond(messages: object, tools: tuple[object, ...]) -> ModelResponse:
        seen.append(tuple(getattr(spec, "name", "") for spec in tools))
        return ModelResponse(content="ok")

    agent = Agent(ScriptedModel(respond), mcp_servers=[time_server()])
    async with agent:
        spec = agent.tools["get_current_time"].spec
        assert spec.description == "Get current time in a specific timezone"
        assert spec.parameters["required"] == ["timezone"]
        assert agent.tools["get_current_time"].source == "mcp:time"
        assert agent.tools["get_current_time"].idempotent  # read-only by its annotations
        await agent.run("x")
    assert seen == [("get_current_time", "convert_time")]


@pytest.mark.slow
async def test_an_is_error_result_is_a_tool_error_under_the_policy() -> None:
    refuse = call("refuse", reason="no")
    agent = Agent(scripted(refuse, "recovered"), mcp_servers=[stdio_testing()])
    result = await agent.run("x")
    assert result.stop_reason is StopReason.COMPLETED
    (failed,) = result.tool_calls
    assert (failed.outcome, failed.result) == (
        "failed",
        f"refuse failed: {REFUSED}: no",
    )
    strict = Agent(
        scripted(refuse), mcp_servers=[stdio_testing()], policy=StopPolicy(on_tool_error="stop")
    )
    stopped = await strict.run("x")
    assert stopped.stop_reason is StopReason.TOOL_ERROR
    assert stopped.stop_detail == f"refuse failed: {REFUSED}: no"


@pytest.mark.slow
async def test_arguments_that_break_the_schema_are_the_models_mistake() -> None:
    model = scripted(step(call("echo", text=5), call("echo")), "done")
    result = await Agent(model, mcp_servers=[stdio_testing()]).run("x")
    wrong, missing = result.tool_calls
    assert wrong.outcome == "invalid" and "text: 5 is not of type 'string'" in wrong.result
    assert missing.outcome == "invalid" and "'text' is a required property" in missing.result


@pytest.mark.slow
async def test_a_slow_tool_times_out_and_the_server_goes_on() -> None:
    model = scripted(
        call("slow", seconds=30),
        call("echo", text="hi"),
        "ok",
    )
    agent = Agent(model, mcp_servers=[stdio_testing(timeout=0.5)])
    result = await agent.run("x")
    slow, echo = result.tool_calls
    assert (slow.outcome, slow.result) == ("failed", "slow timed out after 0.5s")
    assert (echo.outcome, echo.result) == ("ok", "hi")
    assert result.stop_reason is StopReason.COMPLETED


@pytest.mark.slow
async def test_a_server_crashing_mid_call_is_a_tool_failure_naming_it() -> None:
    model = scripted(
        call("pid"),
        step(call("crash"), call("get_current_time", timezone="UTC")),
        call("echo", text="again"),
        "the testing server is gone",
    )
    agent = Agent(model, mcp_servers=[stdio_testing(), time_server()])
    result = await agent.run("x")
    assert result.stop_reason is StopReason.COMPLETED
    pid, crash, now, again = result.tool_calls
    assert crash.outcome == "failed"
    assert crash.result == (
        "crash failed: MCP server 'testing' closed the connection during the call "
        "(its last output: about to crash)"
    )
    assert now.ok  # the other server is unaffected
    assert again.result == (
        "echo failed: MCP server 'testing' is not running "
        "(it closed the connection during an earlier call)"
    )
    assert not alive(int(pid.result))


@pytest.mark.slow
async def test_a_server_that_cannot_start_is_one_line_naming_it() -> None:
    missing = MCPServer.stdio("ghost", "/no/such/command")
    with pytest.raises(UserError) as caught:
        await Agent(scripted("unused"), mcp_servers=[time_server(), missing]).run("x")
    assert str(caught.value) == (
        "MCP server 'ghost' failed to start: cannot run '/no/such/command': "
        "No such file or directory"
    )
    exits = MCPServer.stdio("broken", sys.executable, ["-c", "import sys; sys.exit('bad config')"])
    with pytest.raises(UserError) as caught:
        await Agent(scripted("unused"), mcp_servers=[exits]).run("x")
    assert str(caught.value) == (
        "MCP server 'broken' failed to start: it exited or closed the connection before "
        "answering (its last output: bad config)"
    )


async def test_a_server_that_never_answers_fails_its_startup_timeout() -> None:
    mute = MCPServer(
        name="mute",
        command=sys.executable,
        args=("-c", "import sys; sys.stdin.read()"),
        startup_timeout=0.5,
    )
    with pytest.raises(
        UserError,
        match=r"^MCP server 'mute' failed to start: no answer within 0.5s; likely cause: it is "
        r"still starting \(uvx and pipx install it on first use: give it a longer "
        r"startup_timeout\), or it does not speak MCP on its standard output$",
    ):
        await Agent(scripted("unused"), mcp_servers=[mute]).run("x")


@pytest.mark.slow
async def test_tools_with_one_name_on_two_servers_need_a_prefix() -> None:
    clash = [stdio_testing("one"), stdio_testing("two")]
    with pytest.raises(UserError, match="mcp:one and mcp:two both offer a tool named 'echo'; give"):
        await Agent(scripted("unused"), mcp_servers=clash).run("x")
    model = scripted(step(call("echo", text="1"), call("b_echo", text="2")), "ok")
    agent = Agent(model, mcp_servers=[stdio_testing("one"), stdio_testing("two", prefix="b")])
    result = await agent.run("x")
    assert [c.result for c in result.tool_calls] == ["1", "2"]


@pytest.mark.slow
async def test_a_server_tool_named_like_a_local_tool_takes_the_server_name() -> None:
    from convergent import tool

    @tool
    def echo(text: str) -> str:
        """Local echo."""
        return f"local {text}"

    model = scripted(step(call("echo", text="a"), call("testing_echo", text="b")), "done")
    result = await Agent(model, [echo], mcp_servers=[stdio_testing()]).run("x")
    assert [(c.name, c.result) for c in result.tool_calls] == [
        ("echo", "local a"),
        ("testing_echo", "b"),
    ]


@pytest.mark.slow
async def test_tools_that_change_between_list_calls_are_listed_at_each_run() -> None:
    model = scripted(
        call("grow", name="sprout"),
        call("sprout"),
        "first run done",
        call("sprout"),
        "second run done",
    )
    agent = Agent(model, mcp_servers=[stdio_testing()])
    async with agent:
        first = await agent.run("grow")
        assert "sprout" not in agent.tool_names
        second = await agent.run("use it")
    grow, unlisted = first.tool_calls
    assert grow.result == "added sprout"
    assert unlisted.outcome == "invalid" and "unknown tool 'sprout'" in unlisted.result
    (listed,) = second.tool_calls
    assert (listed.outcome, listed.result) == ("ok", "I am sprout")


@pytest.mark.slow
async def test_a_cancelled_run_stops_its_servers() -> None:
    model = scripted(call("slow", seconds=60))
    agent = Agent(model, mcp_servers=[stdio_testing(timeout=None)])
    started = asyncio.Event()
    run = asyncio.ensure_future(
        agent.run("x", on_event=lambda e: started.set() if isinstance(e, ToolStarted) else None)
    )
    await asyncio.wait_for(started.wait(), 20)
    assert descendants()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    # the autouse fixture checks that no server process is left


@pytest.mark.slow
async def test_a_run_cancelled_while_its_servers_start_leaves_none() -> None:
    mute = MCPServer(
        name="mute", command=sys.executable, args=("-c", "import time; time.sleep(60)")
    )
    run = asyncio.ensure_future(Agent(scripted("x"), mcp_servers=[time_server(), mute]).run("x"))
    deadline = asyncio.get_running_loop().time() + 20
    while len(descendants()) < 2:
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.05)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(run, 20)


@pytest.mark.slow
async def test_overlapping_runs_share_one_set_of_servers() -> None:
    def answer(messages: list[object], tools: object) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(tool_calls=(ToolCall(id=f"c{id(messages)}", name="pid"),))
        return ModelResponse(content="ok")

    agent = Agent(ScriptedModel(answer), mcp_servers=[stdio_testing()])
    one, two = await asyncio.gather(agent.run("a"), agent.run("b"))
    assert one.tool_calls[0].result == two.tool_calls[0].result


@pytest.mark.slow
async def test_the_git_server_on_a_temporary_repository(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    for args in (
        ["init", "-q", "-b", "main"],
        ["config", "user.email", "t@example.com"],
        ["config", "user.name", "T"],
    ):
        subprocess.run(["git", *args], cwd=repo, check=True)  # noqa: ASYNC221
    (repo / "notes.txt").write_text("hello\n")
    git = MCPServer.stdio(
        "git", sys.executable, ["-m", "mcp_server_git", "--repository", str(repo)]
    )
    model = scripted(
        call("git_add", repo_path=str(repo), files=["notes.txt"]),
        call("git_commit", repo_path=str(repo), message="Add notes"),
        call("git_log", repo_path=str(repo), max_count=1),
        "committed",
    )
    result = await Agent(model, mcp_servers=[git]).run("commit the notes")
    assert result.stop_reason is StopReason.COMPLETED
    assert all(c.ok for c in result.tool_calls), result.tool_calls
    assert "Add notes" in result.tool_calls[2].result
    log = subprocess.run(  # noqa: ASYNC221
        ["git", "log", "--oneline"], cwd=repo, capture_output=True, text=True
    )
    assert "Add notes" in log.stdout


@pytest.mark.slow
async def test_a_streamable_http_server() -> None:
    with http_server() as url:
        server = MCPServer.http("remote", url, headers={"X-Test": "1"})
        model = scripted(
            step(call("echo", text="over http"), call("refuse", reason="r")),
            call("crash"),
            call("echo", text="again"),
            "ok",
        )
        agent = Agent(model, mcp_servers=[server])
        result = await agent.run("x")
    echo, refuse, crash, again = result.tool_calls
    assert (echo.outcome, echo.result) == ("ok", "over http")
    assert (refuse.outcome, refuse.result) == ("failed", f"refuse failed: {REFUSED}: r")
    assert crash.result == "crash failed: MCP server 'remote' closed the connection during the call"
    assert again.result.startswith("echo failed: MCP server 'remote' is not running")


async def test_an_unreachable_http_server_cannot_start() -> None:
    from mcp_helpers import free_port

    url = f"http://127.0.0.1:{free_port()}/mcp"
    with pytest.raises(
        UserError, match=rf"^MCP server 'remote' failed to start: cannot connect to {url}"
    ):
        await Agent(scripted("x"), mcp_servers=[MCPServer.http("remote", url)]).run("x")


@pytest.mark.slow
async def test_a_server_sees_only_a_minimal_environment_and_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-parent-secret")
    model = scripted(
        step(call("env", name="OPENAI_API_KEY"), call("env", name="MODE")),
        call("env", name="PATH"),
        "done",
    )
    server = stdio_testing(env={"MODE": "configured"})
    result = await Agent(model, mcp_servers=[server]).run("look")
    secret, mode, path = result.tool_calls
    assert secret.result == "unset"
    assert mode.result == "configured"
    assert path.result != "unset"


@pytest.mark.parametrize(
    ("last_words", "cause"),
    [
        (
            "AttributeError: 'Server' object has no attribute 'list_resources'",
            "likely cause: it was written for another version of the MCP SDK than the one it "
            "runs with: run it from an environment of its own",
        ),
        (
            "ModuleNotFoundError: No module named 'sqlite_vec'",
            "likely cause: a package it needs (sqlite_vec) is missing where it runs",
        ),
    ],
)
async def test_a_server_that_dies_at_start_up_says_its_likely_cause(
    last_words: str, cause: str
) -> None:
    dies = f"import sys; print({last_words!r}, file=sys.stderr); sys.exit(1)"
    toolset = MCPToolset([MCPServer.stdio("dying", sys.executable, ["-c", dies])])
    with pytest.raises(UserError) as failed:
        await toolset.acquire()
    await toolset.release()
    message = str(failed.value)
    assert message.startswith("MCP server 'dying' failed to start: ") and "\n" not in message
    assert f"(its last output: {last_words}); {cause}" in message


async def test_a_server_that_cannot_list_its_tools_says_so(tmp_path: Path) -> None:
    server = raw_server(tmp_path, {"list_error": "tools are switched off"})
    toolset = MCPToolset([server])
    with pytest.raises(UserError) as failed:
        await toolset.acquire()
    await toolset.release()
    assert str(failed.value) == (
        "MCP server 'raw' failed to start: it answered, but listing its tools failed: "
        "tools are switched off"
    )


@pytest.mark.slow
@pytest.mark.parametrize(("effects", "ran"), [({}, 3), ({"calculator": "write"}, 2)])
async def test_a_servers_effects_declare_what_its_tools_annotations_do_not(
    effects: dict[str, str], ran: int
) -> None:
    """The clash server's calculator declares nothing: three identical calls with one
    result run, the third gets the note after it. Declared a write in the server's
    ``effects``, the third does not run."""
    server = MCPServer.stdio(
        "clash", sys.executable, [str(Path(__file__).with_name("clash_server.py"))],
        effects=effects,
    )  # fmt: skip
    same = call("calculator", expression="2+2")
    agent = Agent(scripted(same, same, same, "done"), mcp_servers=[server])
    result = await agent.run("x")
    assert [record.outcome for record in result.tool_calls].count("ok") == ran


@pytest.mark.slow
async def test_effects_that_name_a_tool_the_server_lacks_are_refused() -> None:
    server = MCPServer.stdio(
        "clash", sys.executable, [str(Path(__file__).with_name("clash_server.py"))],
        effects={"calculater": "read"},
    )  # fmt: skip
    with pytest.raises(UserError) as caught:
        await Agent(scripted("done"), mcp_servers=[server]).run("x")
    assert str(caught.value) == (
        "MCP server 'clash': effects name tools it does not offer: calculater "
        "(it offers calculator)"
    )
