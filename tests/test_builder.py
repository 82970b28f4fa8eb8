"""The builder: the same agent from a spec in any process; resume across Python and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import convergent
from cli_runner import Ran, invoke
from convergent import (
    Agent,
    AgentSpec,
    Limits,
    StopPolicy,
    StopReason,
    Usage,
    UserError,
    build_agent,
)
from convergent.builder import BuildContext, ModelRole, Toolbox, resolve_tools
from convergent.durability.sqlite import RunStore
from convergent.gate import ExecutiveGate, QueueChannel
from convergent.models import Model, TokenPrice
from convergent.spec import AgentToolSpec, GateSpec
from convergent.testing import answer, call, step, write_script


def cli(*args: str, cwd: Path) -> Ran:
    return invoke(*args, cwd=cwd)


def test_tools_by_name_and_by_import_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "shop_tools.py").write_text(
        "def price(item: str) -> str:\n"
        '    """Price of an item.\n\n    Args:\n        item: The item.\n    """\n'
        "    return '3 EUR'\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    names = [
        "calculator",
        "read_file",
        "edit_file",
        "shop_tools:price",
        "convergent.builtin_tools:calculator",
    ]
    with pytest.raises(UserError, match="two tools are named 'calculator'"):
        Agent(convergent.ScriptedModel(["x"]), resolve_tools(names, tmp_path))
    tools = resolve_tools(names[:-1], tmp_path)
    assert [t.name for t in tools] == ["calculator", "read_file", "edit_file", "price"]
    with pytest.raises(UserError, match="unknown tool 'rm_rf'"):
        resolve_tools(["rm_rf"], tmp_path)
    with pytest.raises(UserError, match="cannot import tool 'nowhere:thing'"):
        resolve_tools(["nowhere:thing"], tmp_path)


def test_build_agent_builds_every_part(tmp_path: Path) -> None:
    model = write_script(tmp_path / "script.json", "done")
    spec = AgentSpec(
        model=model,
        workspace=str(tmp_path),
        gate=GateSpec(threshold=0.6),
        limits=Limits(max_cycles=4),
        policy=StopPolicy(on_tool_error="stop", max_repeated_failures=5),
    )
    agent = build_agent(spec)
    assert isinstance(agent.gate, ExecutiveGate) and agent.gate.threshold == 0.6
    assert set(agent.tools) == {"calculator", "read_file", "list_dir", "ask_user"}
    assert agent.limits.max_cycles == 4 and agent.policy.on_tool_error == "stop"
    assert agent.spec is not None and agent.spec["workspace"] == str(tmp_path)
    with pytest.raises(UserError, match="workspace folder not found"):
        build_agent(spec.model_copy(update={"workspace": str(tmp_path / "gone")}))


def test_a_spec_with_a_cost_limit_and_a_model_without_a_price_is_refused_when_built(
    tmp_path: Path,
) -> None:
    # on a server of one's own, a model has no price in the table
    own = {"model": "openai:my-own-model", "base_url": "http://127.0.0.1:9/v1"}
    spec = AgentSpec(**own, workspace=str(tmp_path), limits=Limits(max_cost=0.5))
    with pytest.raises(UserError, match=r"^max_cost needs a price for openai:my-own-model"):
        build_agent(spec)
    assert build_agent(spec.model_copy(update={"limits": Limits()})).model.price is None
    priced = build_agent(spec.model_copy(update={"price": (1.0, 4.0)}))
    assert priced.model.price == TokenPrice(1.0, 4.0)
    assert priced.spec is not None and priced.spec["price"] == [1.0, 4.0]
    # a gate's own model needs a price too
    gated = spec.model_copy(
        update={"price": (1.0, 4.0), "gate": GateSpec(model="openai:my-scorer")}
    )
    with pytest.raises(UserError, match=r"^max_cost needs a price for openai:my-scorer"):
        build_agent(gated)


async def test_a_resume_keeps_the_runs_price_unless_given_another_or_another_model(
    tmp_path: Path,
) -> None:
    used = Usage(input_tokens=1000, output_tokens=100)
    steps = [step(call("calculator", expression=f"{n}+1"), usage=used) for n in range(4)]
    model = write_script(tmp_path / "script.json", *steps, answer("done", usage=used))
    other = write_script(tmp_path / "other.json", answer("done", usage=used))
    spec = AgentSpec(
        model=model,
        workspace=str(tmp_path),
        price=(1.0, 4.0),
        policy=StopPolicy(final_answer=False),
    )
    db = tmp_path / "runs.db"
    more = Limits(max_cycles=1)
    with RunStore(db) as store:
        for run_id in ("kept", "changed", "switched"):
            # each run stops after one request; each script starts afresh
            first = await build_agent(spec, limits=more).run("count", run_id=run_id, store=store)
            assert first.usage.cost == pytest.approx(1400 / 1e6)
    # a request of 1,000 input and 100 output tokens: $0.0014 at $1/$4, $0.0028 at $2/$8
    kept = await convergent.resume("kept", store=db, limits=Limits(max_cycles=2))
    assert kept.usage.cost == pytest.approx(2 * 1400 / 1e6)
    changed = await convergent.resume(
        "changed", store=db, limits=Limits(max_cycles=2), price=(2.0, 8.0)
    )
    assert changed.usage.cost == pytest.approx((1400 + 2800) / 1e6)
    # the stored price was the stored model's: another model has its own (a script's: free)
    switched = await convergent.resume("switched", store=db, model=other)
    assert switched.output == "done" and switched.usage.cost == pytest.approx(1400 / 1e6)


async def test_a_run_started_in_python_resumes_from_the_cli(tmp_path: Path) -> None:
    model = write_script(
        tmp_path / "script.json",
        call("calculator", expression="2*3"),
        "6, so far",
        call("calculator", expression="4*5"),
        "6 and 20",
    )
    spec = AgentSpec(model=model, workspace=str(tmp_path), limits=Limits(max_cycles=1))
    store = RunStore(tmp_path / ".convergent" / "runs.db")
    first = await build_agent(spec).run("calc", run_id="py1", store=store)
    assert first.stop_reason is StopReason.MAX_CYCLES
    store.close()
    proc = cli("resume", "py1", "--more-cycles", "5", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    # the script continues where the first run stopped: no reply is played twice
    assert data["output"] == "6 and 20"
    assert [c["arguments"]["expression"] for c in data["tool_calls"]] == ["2*3", "4*5"]


async def test_a_run_started_on_the_cli_resumes_from_python(tmp_path: Path) -> None:
    model = write_script(
        tmp_path / "script.json", call("calculator", expression="7*6"), "42, unchecked", "42"
    )
    proc = cli(
        "run",
        "what is 7*6",
        "--model",
        model,
        "--max-cycles",
        "1",
        "--run-id",
        "c1",
        "--json",
        cwd=tmp_path,
    )
    assert json.loads(proc.stdout)["stop_reason"] == "max_cycles"
    result = await convergent.resume(
        "c1",
        store=tmp_path / ".convergent" / "runs.db",
        limits=convergent.Limits(max_cycles=5),
    )
    assert result.stop_reason is StopReason.COMPLETED and result.output == "42"
    with pytest.raises(UserError, match="ended completed; there is nothing to resume"):
        await convergent.resume("c1", store=tmp_path / ".convergent" / "runs.db")


def test_a_gate_scorer_script_continues_where_it_stopped(tmp_path: Path) -> None:
    def score(value: float) -> str:
        return json.dumps({"clarity": value, "certainty": value, "reason": "-"})

    model = write_script(
        tmp_path / "script.json",
        call("calculator", expression="1+1"),
        "2 so far",
        call("calculator", expression="2+2"),
        "2 and 4",
    )
    scorer = write_script(tmp_path / "scorer.json", score(0.9), score(0.1))
    args = ["--model", model, "--gate", "0.5", "--gate-model", scorer, "--json"]
    first = cli("run", "t", *args, "--max-cycles", "1", "--run-id", "g", cwd=tmp_path)
    assert json.loads(first.stdout)["stop_reason"] == "max_cycles", first.stderr
    resumed = cli("resume", "g", "--more-cycles", "5", "--json", cwd=tmp_path)
    # the second step gets the scorer's second (low) score, so the gate asks the user
    assert json.loads(resumed.stdout)["stop_reason"] == "needs_user", resumed.stderr


def test_factories_replace_where_models_and_tools_come_from() -> None:
    roles: list[str] = []

    def models(role: ModelRole) -> Model:
        roles.append(role)
        return convergent.ScriptedModel([f"{role} reply"])

    @convergent.tool
    def remote(text: str) -> str:
        """Run on another machine.

        Args:
            text: Anything.
        """
        return text

    channel = QueueChannel()
    spec = AgentSpec(
        model="openai:never-built",
        tools=("calculator", "ask_user"),
        workspace="/nowhere/at/all",
        gate=GateSpec(threshold=0.4),
        limits=Limits(max_cycles=9),
    )
    agent = build_agent(
        spec,
        context=BuildContext(ask_channel=channel),
        model_factory=models,
        tool_factory=lambda given: Toolbox(tools=[remote], system_prompt=f"{len(given.tools)}"),
        record_events=False,
    )
    assert roles == ["model", "scorer"]
    assert list(agent.tools) == ["remote", "ask_user"]
    assert agent.system_prompt == "2" and agent.workspace is None
    assert isinstance(agent.gate, ExecutiveGate) and agent.gate.scorer is agent.models["scorer"]
    assert agent.gate.asker.channel is channel and agent.gate.threshold == 0.4
    assert agent.limits == Limits(max_cycles=9) and agent.record_events is False


IMPORTED_WITH_THE_LOOP = """
import sys
import convergent.agent
above = ("convergent.spec", "convergent.builder")
print(sorted(name for name in above if name in sys.modules))
"""


def test_the_loop_imports_neither_the_spec_nor_the_builder() -> None:
    done = subprocess.run(
        [sys.executable, "-c", IMPORTED_WITH_THE_LOOP],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert not hasattr(Agent, "from_recipe")


async def test_a_spec_builds_its_agents_as_tools_and_a_stored_run_stores_the_child(
    tmp_path: Path,
) -> None:
    helper = AgentToolSpec(
        name="helper",
        description="Does arithmetic.",
        agent=AgentSpec(
            model=write_script(tmp_path / "child.json", call("calculator", expression="6*7"), "42")
        ),
    )
    ask = call("helper", call_id="c1", task="6*7?")
    spec = AgentSpec(
        model=write_script(tmp_path / "script.json", ask, "it is 42"),
        workspace=str(tmp_path),
        tools=("calculator",),
        agents=(helper,),
    )
    agent = build_agent(spec)
    assert agent.tools["helper"].parameters["required"] == ["task"]
    store = RunStore(tmp_path / "runs.db")
    result = await agent.run("delegate", run_id="p", store=store)
    assert result.output == "it is 42"
    assert result.tool_calls[0].result == "42"
    (child,) = store.children("p")
    assert (child.run_id, child.parent_call_id) == ("p.1.c1", "c1")
    # a child that names no workspace works in its caller's
    assert child.spec is not None and child.spec["workspace"] == str(tmp_path)
