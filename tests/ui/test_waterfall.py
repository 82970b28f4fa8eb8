"""The run page's timing waterfall and its token chart for runs without token counts."""

from __future__ import annotations

import pytest

pytest.importorskip("starlette", reason="the console needs the extra ui")

from starlette.testclient import TestClient  # noqa: E402

from convergent import Usage  # noqa: E402
from convergent.durability.sqlite import RunStore  # noqa: E402
from convergent.messages import CallOutcome  # noqa: E402
from convergent.testing import answer, call, step  # noqa: E402
from convergent.ui.timeline import CallView, CycleView  # noqa: E402
from convergent.ui.views import build_chart  # noqa: E402
from convergent.ui.waterfall import LABEL, Bar, build_waterfall  # noqa: E402

from .conftest import BASE, SCRIPT_XSS, echo, make_run  # noqa: E402


def finished(name: str, at: float, took: float) -> CallView:
    return CallView(name, name, "{}", CallOutcome.OK, duration=took, finished_at=at)


def test_the_model_bar_is_the_cycle_less_its_calls_and_calls_side_by_side_overlap() -> None:
    cycles = [
        # 4 s: a runs from t=103 to 105 and b beside it from 104 to 104.5: 2 s for the model
        CycleView(1, calls=[finished("a", 105.0, 2.0), finished("b", 104.5, 0.5)], seconds=4.0),
        CycleView(2, seconds=1.0),  # the answer: the model only
        CycleView(3),  # nothing measured yet: left out
    ]
    waterfall = build_waterfall(cycles, width=LABEL + 400)
    assert waterfall is not None
    assert waterfall.longest == 4.0 and waterfall.height == 4 * 18
    model, a, b, answered = waterfall.bars
    tip = "cycle 1: model and loop 2.000 s"
    assert model == Bar(0, LABEL, 200.0, "cycle 1 model", "model", tip)
    assert (a.x, a.width, a.kind, a.label) == (LABEL + 200.0, 200.0, "tool", "a")
    assert (b.x, b.width) == (LABEL + 300.0, 50.0)
    assert (answered.label, answered.width) == ("cycle 2 model", 100.0)
    assert build_waterfall([CycleView(1)]) is None


def test_a_running_cycle_shows_its_finished_calls_without_a_model_bar() -> None:
    waterfall = build_waterfall([CycleView(1, calls=[finished("slow", 50.0, 3.0)])])
    assert waterfall is not None
    (bar,) = waterfall.bars
    assert (bar.kind, bar.x, bar.label) == ("tool", LABEL, "slow")


def test_the_run_page_draws_a_row_per_model_request_and_tool_call(
    store: RunStore, client: TestClient
) -> None:
    make_run(
        store,
        "timed",
        [step(call("calculator", expression="1+1"), call(SCRIPT_XSS, text="x")), "2"],
    )
    page = client.get(f"{BASE}/runs/timed").text
    assert "Where the time went" in page
    rows = page[page.index('<figure class="waterfall">') :]
    rows = rows[: rows.index("</figure>")]
    assert rows.count('<g class="step model">') == 2 and rows.count('<g class="step tool">') == 2
    assert ">calculator</text>" in rows and "&lt;script&gt;" in rows and SCRIPT_XSS not in rows


def test_a_run_without_token_counts_says_so_instead_of_drawing_zero_bars(
    store: RunStore, client: TestClient
) -> None:
    make_run(store, "untokened", [step(call("calculator", expression="1+1")), "2"])
    page = client.get(f"{BASE}/runs/untokened").text
    assert "reported no token counts" in page and "Duration per cycle" in page
    assert 'class="bar"' not in page and 'class="line"' in page
    assert page.count('<circle class="dot"') == 2  # a dot per cycle: one cycle still shows
    assert "<dt>Tokens</dt><dd>not reported by the model</dd>" in page
    assert "0 tokens" not in page
    tokens = Usage(input_tokens=100, output_tokens=20, requests=1)
    make_run(
        store,
        "tokened",
        [step(call("echo", text="x"), usage=tokens), answer("x", usage=tokens)],
        tools=[echo],
    )
    counted = client.get(f"{BASE}/runs/tokened").text
    assert "reported no token counts" not in counted
    assert counted.count('<rect class="bar"') == 2
    assert "<dt>Tokens</dt><dd>240 (200 in, 40 out)</dd>" in counted
    assert '<span class="meta">120 tokens · ' in counted
    runs = client.get(f"{BASE}/runs").text
    assert '<td class="num" title="not reported by the model">-</td>' in runs
    assert '<td class="num">240</td>' in runs


def test_the_chart_has_no_bars_when_every_cycle_has_zero_tokens() -> None:
    chart = build_chart([CycleView(1, tokens=0, seconds=1.0), CycleView(2, tokens=0, seconds=2.0)])
    assert chart is not None and not chart.tokens_known and chart.bars == []
    assert chart.line == "160.0,62.0 480.0,4.0"
