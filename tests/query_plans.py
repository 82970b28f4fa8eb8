"""What a `RunStore` asks SQLite, and the plan SQLite makes for it: for tests of queries."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from convergent.durability.sqlite import RunStore

Query = tuple[str, tuple[Any, ...]]


def recorded_queries(store: RunStore, monkeypatch: pytest.MonkeyPatch) -> list[Query]:
    """Every read query ``store`` runs from now on, with its parameters, in order."""
    ran: list[Query] = []
    query = store.query

    def recording(sql: str, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        ran.append((sql, tuple(params)))
        return query(sql, ran[-1][1])

    monkeypatch.setattr(store, "query", recording)
    return ran


def outer_plan(store: RunStore, query: Query) -> list[str]:
    """The steps of SQLite's plan for ``query``, without those of its subqueries.

    It is asked past `recorded_queries`, which it would add to.
    """
    sql, params = query
    plan = RunStore.query(store, f"EXPLAIN QUERY PLAN {sql}", params)
    return [detail for _, parent, _, detail in plan if parent == 0]
