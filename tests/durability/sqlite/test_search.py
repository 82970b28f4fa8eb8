"""Searching stored runs by the text of their task and output."""

from __future__ import annotations

from convergent import Agent, Limits, calculator
from convergent.durability.sqlite import RunStore
from convergent.testing import call, scripted


def run(store: RunStore, run_id: str, task: str, output: str) -> None:
    Agent(scripted(output), [calculator], store=store).run_sync(task, run_id=run_id)


def test_search_matches_task_or_output_ignoring_case_and_counts_alike(store: RunStore) -> None:
    run(store, "a", "Find the Capital of Peru", "Lima")
    run(store, "b", "name a city", "The capital is LIMA")
    run(store, "c", "add 50% to 10", "15")
    run(store, "d", "add 50 to 10", "60")
    assert [r.run_id for r in store.list_runs(search="capital")] == ["b", "a"]
    assert [r.run_id for r in store.list_runs(search="lima")] == ["b", "a"]
    assert store.count_runs(search="lima") == 2
    # % and _ are text, not wildcards
    assert [r.run_id for r in store.list_runs(search="50%")] == ["c"]
    assert store.list_runs(search="a_d") == []
    assert store.count_runs(search="nowhere") == 0
    assert store.count_runs(search="") == store.count_runs() == 4


def test_search_combines_with_the_status_filter_and_pages(store: RunStore) -> None:
    run(store, "done", "count sheep", "3 sheep")
    Agent(scripted(*[call("calculator", expression="1+1")] * 2), [calculator], store=store,
        limits=Limits(max_cycles=1)).run_sync("count sheep again", run_id="capped")  # fmt: skip
    assert [r.run_id for r in store.list_runs(status="max_cycles", search="sheep")] == ["capped"]
    assert store.count_runs("completed", search="SHEEP") == 1
    assert [r.run_id for r in store.list_runs(1, offset=1, search="sheep")] == ["done"]
