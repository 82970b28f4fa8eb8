"""Run recipes: rebuild the same agent in any process, resume across Python and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import convergent
from cli_runner import Ran, invoke
from convergent import (
    Agent,
    ExecutiveGate,
    GateRecipe,
    Limits,
    LimitsRecipe,
    RunRecipe,
    StopReason,
    UserError,
)
from convergent.recipe import RECIPE_VERSION, resolve_tools
from convergent.store import RunStore


def cli(*args: str, cwd: Path) -> Ran:
    return invoke(*args, cwd=cwd)


def script_file(folder: Path, responses: list[object], name: str = "script.json") -> str:
    path = folder / name
    path.write_text(json.dumps(responses))
    return f"scripted:{path}"


def calc(expression: str) -> dict[str, object]:
    return {"tool_calls": [{"name": "calculator", "arguments": {"expression": expression}}]}


def test_a_recipe_round_trips_through_json() -> None:
    recipe = RunRecipe(
        model="scripted:x.json",
        tools=("calculator", "write_file"),
        gate=GateRecipe(threshold=0.7),
        limits=LimitsRecipe(max_cycles=7, max_cost=1.5),
        on_tool_error="stop",
    )
    assert RunRecipe.from_json(recipe.model_dump_json()) == recipe
    assert RunRecipe.from_json(recipe.model_dump(mode="json")) == recipe


def test_a_recipe_from_a_newer_version_is_refused() -> None:
    data = RunRecipe().model_dump(mode="json") | {"version": RECIPE_VERSION + 1, "new": 1}
    newer = rf"version {RECIPE_VERSION + 1}; this convergent reads up to {RECIPE_VERSION} \(upgrade"
    with pytest.raises(UserError, match=newer):
        RunRecipe.from_json(data)


def test_a_version_1_recipe_still_loads_with_the_new_fields_at_their_defaults() -> None:
    data = RunRecipe().model_dump(mode="json")
    data["version"] = 1
    del data["final_answer"], data["limits"]["stall_nudges"]
    recipe = RunRecipe.from_json(data)
    assert recipe.final_answer is True and recipe.limits.stall_nudges == 1
    assert RunRecipe(final_answer=False, limits=LimitsRecipe(stall_nudges=0)).limits.build() == (
        Limits(stall_nudges=0)
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"limits": {"max_cycles": -1}}, "invalid recipe: limits.max_cycles"),
        ({"on_tool_error": "ignore"}, "invalid recipe: on_tool_error"),
        ({"surprise": True}, "invalid recipe: surprise"),
        ("{not json", "invalid recipe: not JSON"),
    ],
)
def test_a_malformed_recipe_is_one_user_error(data: object, message: str) -> None:
    with pytest.raises(UserError, match=message):
        RunRecipe.from_json(data)


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


def test_from_recipe_builds_every_part(tmp_path: Path) -> None:
    model = script_file(tmp_path, ["done"])
    recipe = RunRecipe(
        model=model,
        workspace=str(tmp_path),
        gate=GateRecipe(threshold=0.6),
        limits=LimitsRecipe(max_cycles=4),
        on_tool_error="stop",
        max_consecutive_tool_errors=5,
    )
    agent = Agent.from_recipe(recipe)
    assert isinstance(agent.gate, ExecutiveGate) and agent.gate.threshold == 0.6
    assert set(agent.tools) == {"calculator", "read_file", "list_dir", "ask_user"}
    assert agent.limits.max_cycles == 4 and agent.on_tool_error == "stop"
    assert agent.recipe is not None and agent.recipe.workspace == str(tmp_path)
    with pytest.raises(UserError, match="workspace folder not found"):
        Agent.from_recipe(recipe.model_copy(update={"workspace": str(tmp_path / "gone")}))


async def test_a_run_started_in_python_resumes_from_the_cli(tmp_path: Path) -> None:
    model = script_file(tmp_path, [calc("2*3"), "6, so far", calc("4*5"), "6 and 20"])
    recipe = RunRecipe(model=model, workspace=str(tmp_path), limits=LimitsRecipe(max_cycles=1))
    store = RunStore(tmp_path / ".convergent" / "runs.db")
    first = await Agent.from_recipe(recipe).run("calc", run_id="py1", store=store)
    assert first.stop_reason is StopReason.MAX_CYCLES
    store.close()
    proc = cli("resume", "py1", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    # the script continues where the first run stopped: no reply is played twice
    assert data["output"] == "6 and 20"
    assert [c["arguments"]["expression"] for c in data["tool_calls"]] == ["2*3", "4*5"]


async def test_a_run_started_on_the_cli_resumes_from_python(tmp_path: Path) -> None:
    model = script_file(tmp_path, [calc("7*6"), "42, unchecked", "42"])
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
    def score(value: float) -> dict[str, object]:
        return {"content": json.dumps({"clarity": value, "certainty": value, "reason": "-"})}

    model = script_file(tmp_path, [calc("1+1"), "2 so far", calc("2+2"), "2 and 4"])
    scorer = script_file(tmp_path, [score(0.9), score(0.1)], name="scorer.json")
    args = ["--model", model, "--gate", "0.5", "--gate-model", scorer, "--json"]
    first = cli("run", "t", *args, "--max-cycles", "1", "--run-id", "g", cwd=tmp_path)
    assert json.loads(first.stdout)["stop_reason"] == "max_cycles", first.stderr
    resumed = cli("resume", "g", "--json", cwd=tmp_path)
    # the second step gets the scorer's second (low) score, so the gate asks the user
    assert json.loads(resumed.stdout)["stop_reason"] == "needs_user", resumed.stderr
