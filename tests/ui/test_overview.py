"""Across runs: the overview's figures and filters, and two runs compared."""

from __future__ import annotations

import json
import time

import pytest

pytest.importorskip("starlette", reason="the console needs the extra ui")

from starlette.testclient import TestClient  # noqa: E402

from convergent import Agent, Limits, ModelSettings, Usage  # noqa: E402
from convergent.durability.sqlite import RunStore  # noqa: E402
from convergent.testing import answer, call, scripted, step  # noqa: E402
from convergent.ui.compare import compare_runs  # noqa: E402
from convergent.ui.overview import OverviewQuery, load_overview  # noqa: E402

from .conftest import BASE, SCRIPT_XSS, echo, make_run  # noqa: E402

USAGE = Usage(input_tokens=1_000, output_tokens=100, requests=1)


def varied(store: RunStore) -> None:
    """A completed run, a stalled one (after a note), one at its cycle limit, a child."""
    make_run(
        store,
        "ok",
        [step(call("calculator", expression="6*7"), usage=USAGE), answer("42", usage=USAGE)],
        price=(1.0, 10.0),
    )
    same = step(call("echo", text="again"), usage=USAGE)
    make_run(store, "loop", [same] * 4 + [answer("gave up", usage=USAGE)], price=(1.0, 10.0))
    make_run(
        store,
        "capped",
        [step(call("calculator", expression=f"{n}+1")) for n in range(3)] + ["partial"],
        limits=Limits(max_cycles=2),
        task=SCRIPT_XSS,
    )
    helper = Agent(scripted(call("echo", text="in"), "child done"), [echo]).as_tool("h", "Helps.")
    make_run(store, "parent", [call("h", task="go"), "done"], tools=[helper])


def test_the_overview_counts_reasons_models_tools_and_notes(store: RunStore) -> None:
    varied(store)
    seen = load_overview(store, OverviewQuery(since="all"))
    assert seen.total.runs == 4  # the child run counts in its parent
    assert dict(seen.total.reasons) == {"completed": 2, "stalled": 1, "max_cycles": 1}
    assert [name for name, *_ in seen.reasons][0] == "completed"
    # two priced runs: 2 x (1,000 in at $1/M + 100 out at $10/M) each of their requests
    assert seen.total.cost == pytest.approx(2 * 0.002 + 5 * 0.002, rel=1e-6)
    tools = {row.name: row for row in seen.tools}
    assert tools["echo"].refused >= 1 and tools["echo"].stalled_runs == 1
    assert tools["calculator"].runs == 2 and "h" in tools
    (note,) = [row for row in seen.notes if row.about == "stalled"]
    assert (note.runs, note.completed) == (1, 0)
    everything = load_overview(store, OverviewQuery(since="all", scope="all"))
    assert everything.total.runs == 5 and everything.total.cost == pytest.approx(
        seen.total.cost
    )  # each run with its own spend: nothing counted twice
    assert {row.name for row in everything.tools} >= {"echo", "calculator", "h"}


def test_the_overview_filters_by_reason_model_tool_and_time(store: RunStore) -> None:
    varied(store)
    assert load_overview(store, OverviewQuery(since="all", reason="stalled")).total.runs == 1
    assert load_overview(store, OverviewQuery(since="all", tool="calculator")).total.runs == 2
    assert load_overview(store, OverviewQuery(since="all", model="nope")).total.runs == 0
    with store.transaction() as conn:  # one run started long ago
        conn.execute("UPDATE runs SET started_at = ? WHERE run_id = 'ok'", [time.time() - 9e6])
    assert load_overview(store, OverviewQuery(since="7d")).total.runs == 3
    assert load_overview(store, OverviewQuery(since="all")).period == "week"  # 104 days


def test_stops_that_left_cycles_unspent_are_counted_from_the_stored_limits(
    store: RunStore,
) -> None:
    same = step(call("echo", text="again"), usage=USAGE)
    make_run(store, "loop", [same] * 4 + ["gave up"], price=(1.0, 10.0))
    spec = {"model": "scripted", "limits": {"max_cycles": 50}}
    with store.transaction() as conn:  # as `convergent run` stores its spec
        conn.execute("UPDATE runs SET recipe = ? WHERE run_id = 'loop'", [json.dumps(spec)])
    seen = load_overview(store, OverviewQuery(since="all"))
    (run,) = store.list_runs()
    assert (seen.early_runs, seen.early_known) == (1, 1)
    assert seen.left_cycles == 50 - run.cycles
    assert seen.left_cost == pytest.approx((50 - run.cycles) * run.usage.cost / run.cycles)


def test_the_overview_page_draws_and_links_its_filters(store: RunStore, client: TestClient) -> None:
    varied(store)
    page = client.get(f"{BASE}/overview?since=all")
    assert page.status_code == 200
    text = page.text
    assert "4 runs of all time" in text
    assert 'class="r-completed"' in text and "Runs and cost per" in text
    assert f'href="{BASE}/overview?since=all&amp;reason=stalled&amp;scope=top"' in text
    assert ">echo</a>" in text and "Notes instead of a stop" in text
    filtered = client.get(f"{BASE}/overview?since=all&reason=stalled&tool=echo&model=x&scope=z")
    assert "0 runs" in filtered.text and "No runs here" in filtered.text
    bad = client.get(f"{BASE}/overview?since=forever&reason=<b>")  # falls back, never a 500
    assert bad.status_code == 200 and "of the last 30 days" in bad.text


def test_two_runs_compared_diverge_where_their_steps_first_differ(store: RunStore) -> None:
    common = [step(call("calculator", expression="1+1")), step(call("echo", text="x"))]
    make_run(
        store,
        "a",
        [*common, step(call("calculator", expression="2+2")), "4"],
        settings=ModelSettings(temperature=0.0),
        system_prompt="Be brief.",
    )
    make_run(
        store,
        "b",
        [*common, step(call("echo", text="y")), step(call("echo", text="z")), "done"],
        settings=ModelSettings(temperature=0.9),
        system_prompt="Be brief.",
    )
    compared = compare_runs(store, "a", "b")
    assert compared.diverged == 3
    assert [row.same for row in compared.rows] == [True, True, False, False, False]
    assert compared.rows[-1].left is None  # a made 4 cycles, b 5
    differing = {s.name: (s.left, s.right) for s in compared.differing}
    assert differing == {"request.temperature": ("0.0", "0.9")}
    assert "system_prompt" in {s.name for s in compared.settings if s.same}
    assert compared.measure == "seconds"  # no cost, no tokens: the time it took
    assert compared.lines[0].points and compared.lines[1].points


def test_the_comparison_page(store: RunStore, client: TestClient) -> None:
    make_run(store, "a", [step(call("calculator", expression="1+1")), "2"], task=SCRIPT_XSS)
    make_run(store, "b", [step(call("calculator", expression="1+1")), "2"])
    page = client.get(f"{BASE}/compare?run=a&run=b")  # the runs page's two ticked boxes
    assert page.status_code == 200
    assert "They made the same 2 steps" in page.text
    assert SCRIPT_XSS not in page.text and "&lt;script&gt;" in page.text
    assert client.get(f"{BASE}/compare?a=a&b=nope").status_code == 404
    assert "no run &#39;nope&#39;" in client.get(f"{BASE}/compare?a=a&b=nope").text
    chooser = client.get(f"{BASE}/compare?a=a").text  # from a run page: choose the other
    assert 'value="a"' in chooser and '<option value="b">' in chooser
    runs = client.get(f"{BASE}/runs").text
    assert 'form="compare-form" name="run" value="a"' in runs
