"""A run's typed output on its page and in its JSON download."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

pytest.importorskip("starlette", reason="the console needs the extra ui")

from starlette.testclient import TestClient  # noqa: E402

from convergent.durability.sqlite import RunStore  # noqa: E402
from convergent.testing import call, step  # noqa: E402
from convergent.ui.timeline import CLIP  # noqa: E402

from .conftest import BASE, SCRIPT_XSS, make_run  # noqa: E402


class City(BaseModel):
    name: str
    population: int


def test_the_run_page_shows_the_typed_output_escaped(store: RunStore, client: TestClient) -> None:
    answer = json.dumps({"name": SCRIPT_XSS, "population": 10_000_000})
    make_run(store, "typed", [step(call("calculator", expression="1+1")), answer],
             output_type=City)  # fmt: skip
    assert store.get_run("typed").output_data == {"name": SCRIPT_XSS, "population": 10_000_000}
    page = client.get(f"{BASE}/runs/typed").text
    assert "<h3>Typed output</h3>" in page
    shown = page[page.index('<pre class="output-data"') :]
    shown = shown[: shown.index("</pre>")]
    assert "&#34;population&#34;: 10000000" in shown
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in shown and SCRIPT_XSS not in page
    download = client.get(f"{BASE}/runs/typed/download").json()
    assert download["run"]["output_data"] == {"name": SCRIPT_XSS, "population": 10_000_000}


def test_a_run_without_an_output_type_shows_no_typed_output(
    store: RunStore, client: TestClient
) -> None:
    make_run(store, "plain", ['{"name": "Lima", "population": 1}'])
    assert "Typed output" not in client.get(f"{BASE}/runs/plain").text
    assert client.get(f"{BASE}/runs/plain/download").json()["run"]["output_data"] is None


def test_a_long_typed_output_is_cut_with_a_link_to_the_whole(
    store: RunStore, client: TestClient
) -> None:
    name = "n" * (CLIP * 2)
    make_run(store, "long", [json.dumps({"name": name, "population": 1})], output_type=City)
    page = client.get(f"{BASE}/runs/long").text
    shown = page[page.index('<pre class="output-data"') :]
    shown = shown[: shown.index("</pre>")]
    assert "n" * (CLIP - 20) in shown and name not in shown
    assert "more characters" in shown and f'href="{BASE}/runs/long/download"' in shown
