"""The report page in a real browser: Playwright driving Debian's chromium, offline.

The page is written by ``convergent replay --calibrate --html`` and opened from the
file; every request but that file is refused and recorded, so a page that needs the
network fails. A screenshot goes to test-artifacts/.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli_runner import invoke

from .conftest import labelled_corpus

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).parents[2] / "test-artifacts"

sync_api = pytest.importorskip("playwright.sync_api", reason="needs playwright (the dev extra)")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="/usr/bin/chromium is missing (apt-get install chromium)"
    ),
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


def test_the_page_shows_the_summary_the_curve_and_the_stops_offline(
    browser: Any, tmp_path: Path
) -> None:
    page_file = tmp_path / "replay.html"
    done = invoke(
        "replay",
        str(labelled_corpus(tmp_path / "runs.jsonl")),
        "--calibrate",
        "--html",
        str(page_file),
    )
    assert done.returncode == 0, done.stderr
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    requested: list[str] = []

    def route(request_route: Any) -> None:
        requested.append(request_route.request.url)
        if request_route.request.url == page_file.as_uri():
            request_route.continue_()
        else:
            request_route.abort()

    page.route("**/*", route)
    page.goto(page_file.as_uri())
    assert requested == [page_file.as_uri()]  # nothing else: it works offline
    assert page.title() == "convergent replay"
    headline = page.locator("#headline").inner_text()
    assert headline.startswith("None of your 2 successful runs would be cut;")
    summary = page.locator("#summary tr")
    assert summary.count() == 2  # the header and the one corpus
    assert "runs.jsonl" in summary.nth(1).inner_text()
    points = page.locator("#points tr").count() - 1
    assert points > 5 and page.locator("#curve circle").count() == points
    labels = page.locator("#curve text.point").all_text_contents()
    assert any(label.startswith("chosen; ") for label in labels)
    assert any("library defaults" in label for label in labels)
    assert any("max_repeated_calls=" in label for label in labels)  # each point named
    runs = page.locator("details.run")
    assert runs.count() >= 1
    first = runs.first
    assert not first.locator("table.calls").is_visible()
    first.locator("summary").click()
    assert first.locator("table.calls").is_visible()
    assert first.locator("tr.notrun, tr.noted").count() >= 1  # the calls where the loop acted
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "replay-report.png"), full_page=True)
    page.close()


def test_the_page_of_every_export_names_runs_rules_and_what_was_guessed(
    browser: Any, tmp_path: Path
) -> None:
    exports = Path(__file__).parent / "fixtures" / "exports"
    folders = ["openai-agents", "messages", "otlp", "tau-bench", "tau2-bench", "bfcl"]
    page_file = tmp_path / "exports.html"
    done = invoke(
        "replay",
        *[str(exports / folder) for folder in folders],
        "--success-if",
        "done|Paris|shipped|Refunded",
        "--html",
        str(page_file),
    )
    assert done.returncode == 0, done.stderr
    for width, name in ((1280, "replay-exports.png"), (760, "replay-exports-narrow.png")):
        page = browser.new_page(viewport={"width": width, "height": 900})
        page.goto(page_file.as_uri())
        assert page.locator("#headline").inner_text().endswith(".)")  # what was guessed, too
        reading = page.locator("#reading").inner_text()
        assert "calls without a recorded result" in reading  # the BFCL excerpt's calls
        summaries = page.locator("details.run summary").all_inner_texts()
        assert any(text.startswith("Builder") for text in summaries)  # runs by their name
        assert not any("trace_" in text.split()[0] for text in summaries)
        page.locator("details.run summary").first.click()
        assert "by max_" in page.locator("details.run").first.inner_text()  # the rule
        # nothing wider than the window but the tables of calls, which scroll
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, overflow
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / name), full_page=True)
        page.close()
