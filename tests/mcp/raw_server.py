"""A stdio MCP server written by hand, for what a server built with the SDK cannot send.

Run as ``python raw_server.py PLAN.json``. The plan (a JSON object) says:

- ``tools``: the ``tools/list`` entries, sent as they are (any ``inputSchema``);
- ``initialize``: ``"answer"`` (default) or ``"never"`` (read requests, answer none);
- ``list_error``: answer ``tools/list`` with this error message instead of the tools;
- ``noise``: a line written to stdout before each answer (garbage for the client);
- ``results``: per tool name, what a call answers: ``{"text": N}`` (N characters),
  ``{"nested": N}`` (structured content N levels deep) or ``{"echo": true}`` (the
  arguments as JSON text, the default).
"""

from __future__ import annotations

import json
import sys
from typing import Any


def _line(message_id: Any, result: dict[str, Any]) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": message_id, "result": result})


def _call_answer(plan: dict[str, Any], message_id: Any, params: dict[str, Any]) -> str:
    how = plan.get("results", {}).get(params["name"], {"echo": True})
    if "text" in how:
        return _line(message_id, {"content": [{"type": "text", "text": "x" * how["text"]}]})
    if "nested" in how:  # written out by hand: json.dumps cannot nest this deep
        nested = '{"a":' * how["nested"] + "1" + "}" * how["nested"]
        result = '{"content":[],"structuredContent":' + nested + "}"
        return '{"jsonrpc":"2.0","id":' + json.dumps(message_id) + ',"result":' + result + "}"
    text = json.dumps(params.get("arguments", {}), sort_keys=True)
    return _line(message_id, {"content": [{"type": "text", "text": text}]})


def _answer(plan: dict[str, Any], message: dict[str, Any]) -> str | None:
    method, message_id = message.get("method"), message.get("id")
    if message_id is None:
        return None  # a notification
    if method == "initialize":
        if plan.get("initialize", "answer") == "never":
            return None
        version = message["params"]["protocolVersion"]
        info = {"name": "raw", "version": "1"}
        capabilities = {"tools": {}}
        return _line(
            message_id,
            {"protocolVersion": version, "capabilities": capabilities, "serverInfo": info},
        )
    if method == "tools/list" and "list_error" in plan:
        error = {"code": -32603, "message": plan["list_error"]}
        return json.dumps({"jsonrpc": "2.0", "id": message_id, "error": error})
    if method == "tools/list":
        return _line(message_id, {"tools": plan.get("tools", [])})
    if method == "tools/call":
        return _call_answer(plan, message_id, message["params"])
    if method == "ping":
        return _line(message_id, {})
    error = {"code": -32601, "message": f"method not found: {method}"}
    return json.dumps({"jsonrpc": "2.0", "id": message_id, "error": error})


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as handle:
        plan: dict[str, Any] = json.load(handle)
    for line in sys.stdin:
        answer = _answer(plan, json.loads(line))
        if answer is None:
            continue
        if "noise" in plan:
            sys.stdout.write(plan["noise"] + "\n")
        sys.stdout.write(answer + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
