"""What the τ-bench family's tools do, as the benchmark itself declares it.

τ²-bench marks each tool of its domains ``READ``, ``WRITE``, ``THINK`` or ``GENERIC``
(``src/tau2/domains/*/tools.py`` of sierra-research/tau2-bench); τ-bench's airline and
retail tools carry the same names. Reads, ``think`` and ``calculate`` change nothing; a
tool missing from this list is treated as one that may change state.
"""

from __future__ import annotations

TAU_READ_ONLY = frozenset(
    {
        # airline
        "get_reservation_details",
        "get_user_details",
        "list_all_airports",
        "search_direct_flight",
        "search_onestop_flight",
        "get_flight_status",
        # retail
        "find_user_id_by_name_zip",
        "find_user_id_by_email",
        "get_order_details",
        "get_product_details",
        "get_item_details",
        "list_all_product_types",
        # telecom
        "get_customer_by_phone",
        "get_customer_by_id",
        "get_customer_by_name",
        "get_details_by_id",
        "get_bills_for_customer",
        "get_data_usage",
        # pure: a thought or an arithmetic result
        "think",
        "calculate",
    }
)
"""Agent tools of τ-bench and τ²-bench that only read."""

TAU_TERMINAL = frozenset({"transfer_to_human_agents"})
"""Tools that hand the customer to a human: the agent's run ends there."""
