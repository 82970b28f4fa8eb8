"""Every replayed tool declared as docs/loop.md tells users to: reads, idempotent calls, writes.

The replay's readers declare only the tools each benchmark marks as reads; a user declares
writes too. Inside `declaring`, this process's replays (`convergent.replay.replay` with one
worker) declare every tool of the corpora of docs/evidence.md so: τ-bench and τ²-bench
tools that do not read are writes (their domains mark them ``WRITE``); BFCL's functions
are declared by what they do (reads, idempotent settings, writes); SWE-agent's ``edit``,
``create`` and ``submit`` are writes; a shell (``bash``) declares nothing. Measurement
only: it replaces how the replay builds its tools.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import convergent.replay._replayer as replayer
from convergent.replay._tool_kinds import (
    BFCL_READ_ONLY,
    SWE_AGENT_READ_ONLY,
    TAU_READ_ONLY,
    TAU_TERMINAL,
)
from convergent.tools import Tool

BFCL_READS = set(BFCL_READ_ONLY) | {
    "cat",
    "diff",
    "du",
    "find",
    "grep",
    "head",
    "ls",
    "pwd",
    "sort",
    "tail",
    "wc",
    "add",
    "divide",
    "logarithm",
    "max_value",
    "mean",
    "min_value",
    "multiply",
    "percentage",
    "power",
    "round_number",
    "square_root",
    "standard_deviation",
    "sum_values",
    "imperial_si_conversion",
    "gallon_to_liter",
    "liter_to_gallon",
    "compute_exchange_rate",
    "estimate_distance",
    "estimate_drive_feasibility_by_mileage",
    "list_all_airports",
    "list_users",
    "search_messages",
    "search_tweets",
    "display_log",
    "displayCarStatus",
    "check_tire_pressure",
    "find_nearest_tire_shop",
    "filter_stocks_by_price",
    "retrieve_invoice",
    "view_messages_sent",
    "message_get_login_status",
    "posting_get_login_status",
    "ticket_get_login_status",
    "trading_get_login_status",
    "travel_get_login_status",
    "verify_traveler_information",
}
BFCL_IDEMPOTENT = {
    "setCruiseControl",
    "setHeadlights",
    "set_budget_limit",
    "set_navigation",
    "lockDoors",
    "authenticate_travel",
    "authenticate_twitter",
    "message_login",
    "ticket_login",
    "trading_login",
    "activateParkingBrake",
    "pressBrakePedal",
    "releaseBrakePedal",
    "adjustClimateControl",
    "startEngine",
    "touch",
    "mkdir",
    "edit_ticket",
    "trading_logout",
}
WRITES = {
    "add_contact",
    "add_to_watchlist",
    "book_flight",
    "cancel_booking",
    "cancel_order",
    "close_ticket",
    "comment",
    "contact_customer_support",
    "cp",
    "create_ticket",
    "delete_message",
    "echo",
    "exec",
    "fillFuelTank",
    "fund_account",
    "mention",
    "mv",
    "place_order",
    "post_tweet",
    "purchase_insurance",
    "register_credit_card",
    "remove_stock_from_watchlist",
    "resolve_ticket",
    "retweet",
    "rm",
    "rmdir",
    "send_message",
    "withdraw_funds",
    "cd",
}
SWE_AGENT_WRITES = {"edit", "create", "submit"}
TAU_NOT_WRITES = TAU_TERMINAL | {"get_input_from_user"}


def declared(name: str, trajectory: Any) -> tuple[bool | None, bool]:
    """``(read_only, idempotent)`` of a replayed tool, as its benchmark's user declares it.

    A shell's commands (mini-swe-agent's, SWE-agent's ``bash``) declare nothing.
    """
    if name in trajectory.read_only:
        return True, True
    if trajectory.read_only & TAU_READ_ONLY:
        return (None, False) if name in TAU_NOT_WRITES else (False, False)
    if trajectory.read_only & BFCL_READ_ONLY:
        if name.startswith("get_") or name in BFCL_READS:
            return True, True
        if name in BFCL_IDEMPOTENT:
            return False, True
        return (False, False) if name in WRITES else (None, False)
    if trajectory.read_only & SWE_AGENT_READ_ONLY and name in SWE_AGENT_WRITES:
        return False, False
    return None, False


def _tools(recording: Any, trajectory: Any, turn: Any) -> list[Tool]:
    """The replayed turn's tools, each declared."""

    def make(name: str) -> Tool:
        async def answer(**arguments: Any) -> str:
            return recording.answer(name, arguments)

        read_only, idempotent = declared(name, trajectory)
        return Tool.from_schema(
            name=name,
            description=name,
            parameters={"type": "object"},
            function=answer,
            terminal=name in trajectory.terminal,
            read_only=read_only,
            idempotent=idempotent,
        )

    names = {c.name for reply in turn for c in reply.calls if replayer._is_tool_name(c.name)}
    return [make(n) for n in sorted(names)]


@contextmanager
def declaring() -> Iterator[None]:
    """This process's replays declare every tool inside the block (see the module)."""
    before = replayer._tools
    replayer._tools = _tools
    try:
        yield
    finally:
        replayer._tools = before
