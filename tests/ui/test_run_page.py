"""The run page as a trace view: message boxes where they apply, cards, requests, clocks."""

from __future__ import annotations

import json
import re

import pytest

pytest.importorskip("starlette", reason="the console needs the extra ui")

from starlette.testclient import TestClient  # noqa: E402

from convergent import Limits  # noqa: E402
from convergent.durability.sqlite import RunStore  # noqa: E402
from convergent.testing import call, step  # noqa: E402
from convergent.ui.cards import describe_event  # noqa: E402

from .conftest import BASE, SCRIPT_XSS, make_run  # noqa: E402
from .test_app import mark_running  # noqa: E402


def forms(page: str) -> list[str]:
    """The actions of the page's POST forms, and its message boxes' names."""
    actions = re.findall(r'<form method="post" action="[^"]*/(\w+)"', page)
    boxes = re.findall(r'<textarea id="([\w-]+)"', page)
    return actions + boxes


def test_a_completed_run_offers_no_message_box(store: RunStore, client: TestClient) -> None:
    make_run(store, "done", ["finished"])
    page = client.get(f"{BASE}/runs/done").text
    assert forms(page) == []
    assert "Send message" not in page and "takes no more messages" in page


def test_a_resumable_run_has_one_message_box_the_resume(
    store: RunStore, client: TestClient
) -> None:
    make_run(store, "cut", [call("calculator", expression="1+1")], limits=Limits(max_cycles=1))
    page = client.get(f"{BASE}/runs/cut").text
    assert forms(page) == ["resume", "resume-message"]


def test_a_running_run_has_its_controls_and_one_message_box(
    store: RunStore, client: TestClient
) -> None:
    make_run(store, "live", [call("calculator", expression="1+1"), "2"])
    mark_running(store, "live")
    page = client.get(f"{BASE}/runs/live").text
    assert forms(page) == ["control", "steer", "message"]


def test_a_note_to_the_model_is_a_card_in_words_not_json(
    store: RunStore, client: TestClient
) -> None:
    same = step(call("calculator", expression="1+1"))
    make_run(store, "stuck", [same, same, same, same, "2"])
    page = client.get(f"{BASE}/runs/stuck").text
    assert "note instead of stopping stalled" in page
    assert "the model was told: Note: you have requested calculator" in page
    assert "{&#34;about&#34;" not in page and '{"about"' not in page


@pytest.mark.parametrize(
    ("event", "title", "detail"),
    [
        ({"type": "run_paused", "cycle": 2}, "paused",
         "a pause held the run before its next cycle"),
        ({"type": "run_started", "cycle": 3, "resumed": True, "tools": ["a", "b"]}, "resumed",
         "a new process went on from cycle 3 (tools: a, b)"),
        ({"type": "custom_thing", "cycle": 1, "level": 3, "why": "because"}, "custom thing",
         "level: 3; why: because"),
    ],
)  # fmt: skip
def test_every_event_reads_as_words(event: dict[str, object], title: str, detail: str) -> None:
    card = describe_event(event)
    assert (card.title, card.detail) == (title, detail)


def test_each_cycle_links_to_what_its_model_request_was_sent(
    store: RunStore, client: TestClient
) -> None:
    make_run(
        store,
        "asked",
        [step(call("echo", text=SCRIPT_XSS)), "done"],
        task="say it",
        system_prompt="Be brief.",
    )
    page = client.get(f"{BASE}/runs/asked").text
    assert f'href="{BASE}/runs/asked/cycles/2/request"' in page
    second = client.get(f"{BASE}/runs/asked/cycles/2/request").text
    roles = re.findall(r'<div class="message (\w+)', second)
    assert roles == ["system", "user", "assistant", "tool"]
    assert "Be brief." in second and "say it" in second
    assert "&lt;script&gt;" in second and SCRIPT_XSS not in second
    # the tools as the model saw them: name, description, arguments schema
    assert '<span class="tool">echo</span> Return the text unchanged.' in second
    schema = re.search(r'aria-label="arguments schema of echo">([^<]*)</pre>', second)
    assert schema is not None and json.loads(schema.group(1).replace("&#34;", '"'))["required"] == [
        "text"
    ]
    first = client.get(f"{BASE}/runs/asked/cycles/1/request").text
    assert re.findall(r'<div class="message (\w+)', first) == ["system", "user"]
    assert client.get(f"{BASE}/runs/asked/cycles/9/request").status_code == 404


def test_a_running_run_counts_its_time_and_says_the_model_is_working(
    store: RunStore, client: TestClient
) -> None:
    make_run(store, "live", [step(call("calculator", expression="1+1")), "2"])
    mark_running(store, "live")
    page = client.get(f"{BASE}/runs/live").text
    assert re.search(r'<dt>Time</dt><dd><span data-tick="[\d.]+">\d+ s</span> so far', page)
    assert re.search(r'model working… <span data-tick="[\d.]+">\d+ s</span>', page)
    assert 'id="cycle-3"' in page  # the request in progress is the next cycle's
    done = client.get(f"{BASE}/runs/live")
    assert done.status_code == 200


def test_a_free_model_costs_zero_dollars(store: RunStore, client: TestClient) -> None:
    make_run(store, "free", ["2"])
    with store.transaction() as conn:
        conn.execute(
            "UPDATE runs SET recipe = ? WHERE run_id = 'free'", [json.dumps({"model": "local"})]
        )
    assert "<dt>Cost</dt><dd>$0</dd>" in client.get(f"{BASE}/runs/free").text
    row = client.get(f"{BASE}/runs").text
    assert '<td class="num">$0</td>' in row


def test_the_answer_after_a_stop_is_marked_as_such(store: RunStore, client: TestClient) -> None:
    make_run(
        store,
        "cut",
        [call("calculator", expression="1+1"), "probably 2"],
        limits=Limits(max_cycles=1),
    )
    page = client.get(f"{BASE}/runs/cut").text
    assert "<h3>Best answer after the stop" in page and "badge after-stop" in page
    assert "not a completed answer" in page and "probably 2" in page
    make_run(store, "done", ["2"])
    assert "<h3>Output</h3>" in client.get(f"{BASE}/runs/done").text
