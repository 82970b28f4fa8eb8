"""The run page's timeline of the whole run, and its chart for runs without token counts."""

from __future__ import annotations

import pytest

pytest.importorskip("starlette", reason="the console needs the extra ui")

from starlette.testclient import TestClient  # noqa: E402

from convergent import Agent, Usage  # noqa: E402
from convergent.durability.sqlite import RunStore  # noqa: E402
from convergent.testing import answer, call, scripted, step  # noqa: E402
from convergent.ui.timeline import CycleView  # noqa: E402
from convergent.ui.trace import LABEL, MIN_WIDTH, ROW, Span, Trace, draw, load_trace  # noqa: E402
from convergent.ui.views import build_chart  # noqa: E402

from .conftest import BASE, SCRIPT_XSS, echo, make_run  # noqa: E402


def test_spans_are_laid_out_on_one_axis_and_a_tiny_call_is_still_drawn() -> None:
    trace = Trace(
        spans=[
            Span("model", "cycle 1 model", 0.0, 4.0),
            Span("tool", "quick", 4.0, 4.001),
            Span("model", "cycle 2 model", 6.0, 8.0),
        ],
        resumes=[(6.0, 1)],
    )
    drawing = draw(trace, width=LABEL + 8 + 400)
    model, quick, second = drawing.bars
    assert (model.x, model.width) == (LABEL, 200.0)
    assert quick.x == LABEL + 200.0 and quick.width == MIN_WIDTH  # 0.05 units: drawn wider
    assert quick.took == "1 ms" and "quick: 1 ms" in quick.tip
    assert (second.x, second.y) == (LABEL + 300.0, drawing.top + 2 * ROW)
    assert drawing.marks == [(LABEL + 300.0, "resumed at cycle 1")]
    assert [text for _, text in drawing.ticks] == ["0 ms", "2.00 s", "4.00 s", "6.00 s", "8.00 s"]


def test_the_trace_of_a_stored_run_follows_its_cycles_and_calls(store: RunStore) -> None:
    make_run(
        store,
        "timed",
        [step(call("calculator", expression="1+1"), call("echo", text="x")), "2"],
    )
    trace = load_trace(store, "timed", 1, 2)
    assert trace is not None and trace.resumes == []
    kinds = [(span.kind, span.label) for span in trace.spans]
    assert kinds == [
        ("model", "cycle 1 model"),
        ("tool", "calculator"),
        ("tool", "echo"),
        ("model", "cycle 2 model"),
    ]
    first, calc, echoed, second = trace.spans
    assert 0.0 <= first.start <= first.end <= calc.start + 1e-6
    assert calc.end <= second.start + 1e-6 and echoed.end <= second.start + 1e-6


def test_a_child_run_is_nested_inside_the_call_that_started_it(store: RunStore) -> None:
    helper = Agent(scripted(call("echo", text="inner"), "child done"), [echo]).as_tool(
        "helper", "Helps."
    )
    make_run(store, "parent", [call("helper", task="go"), "done"], tools=[helper])
    trace = load_trace(store, "parent", 1, 2)
    assert trace is not None
    rows = [(span.depth, span.kind, span.label) for span in trace.spans]
    assert rows == [
        (0, "model", "cycle 1 model"),
        (0, "tool", "helper"),
        (1, "model", "cycle 1 model"),
        (1, "tool", "echo"),
        (1, "model", "cycle 2 model"),
        (0, "model", "cycle 2 model"),
    ]
    call_span = trace.spans[1]
    for span in trace.spans[2:5]:
        assert call_span.start - 1e-3 <= span.start and span.end <= call_span.end + 1e-3
        assert span.run_id == store.children("parent")[0].run_id


def test_a_resumed_run_has_a_mark_where_its_new_process_went_on(store: RunStore) -> None:
    import asyncio

    from convergent import Limits, resume

    make_run(store, "twice", [call("echo", text="a")], limits=Limits(max_cycles=1))
    agent = Agent(scripted(call("echo", text="b"), "done"), [echo], store=store)
    asyncio.run(resume("twice", store=store, agent=agent))
    trace = load_trace(store, "twice", 1, 3)
    assert trace is not None
    ((at, cycle),) = trace.resumes
    assert cycle == 1
    labels = [span.label for span in trace.spans]
    assert labels == ["cycle 1 model", "echo", "cycle 2 model", "echo", "cycle 3 model"]
    # the time between the two processes takes no room: the second goes on from the first
    assert trace.spans[1].end <= at + 1e-3 <= trace.spans[2].start + 1e-3


def test_the_run_page_draws_the_whole_run_and_escapes_names(
    store: RunStore, client: TestClient
) -> None:
    make_run(
        store,
        "timed",
        [step(call("calculator", expression="1+1"), call(SCRIPT_XSS, text="x")), "2"],
    )
    page = client.get(f"{BASE}/runs/timed").text
    assert "Timeline of the run" in page
    rows = page[page.index('<figure class="trace">') :]
    rows = rows[: rows.index("</figure>")]
    assert rows.count('<g class="step model') == 2 and rows.count('<g class="step tool') == 2
    assert "calculator · " in rows and "&lt;script&gt;" in rows and SCRIPT_XSS not in rows


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
