"""Tools that change nothing, and tools that hand off, as each recording's producer says.

τ²-bench marks each tool of its domains ``READ``, ``WRITE``, ``THINK`` or ``GENERIC``
(``src/tau2/domains/*/tools.py``); τ-bench's airline and retail tools carry the same
names. Claude Code, SWE-agent and BFCL's file system name their reading tools in their
own documentation. A tool missing from these lists is treated as one that may change
state, so a loop is only ever claimed on evidence the recording gives.
"""

from __future__ import annotations

__all__ = [
    "BFCL_READ_ONLY",
    "CLAUDE_CODE_READ_ONLY",
    "SWE_AGENT_READ_ONLY",
    "TAU_READ_ONLY",
    "TAU_TERMINAL",
]

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

CLAUDE_CODE_READ_ONLY = frozenset(
    {"Read", "Glob", "Grep", "LS", "NotebookRead", "WebFetch", "WebSearch", "TodoRead"}
)
"""Claude Code's tools that read files or the web and change nothing."""

SWE_AGENT_READ_ONLY = frozenset(
    {"open", "goto", "scroll_up", "scroll_down", "search_dir", "search_file", "find_file"}
)
"""SWE-agent's file viewer and search commands."""

BFCL_READ_ONLY = frozenset({"pwd", "ls", "cat", "grep", "find", "du", "wc", "tail", "diff", "sort"})
"""BFCL's file-system functions that only read (``GorillaFileSystem``)."""
