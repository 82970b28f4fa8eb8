"""Replays the provider HTTP exchanges of `exchanges/` through httpx's MockTransport.

The exchanges are written by hand from each provider's documented wire format (see
`exchanges/README.md`); none was recorded from a live service.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import httpx2

EXCHANGES = Path(__file__).parent / "exchanges"


class Replay:
    """Answers each request with the next exchange's response and keeps the requests."""

    def __init__(self, *names: str, status: int = 200) -> None:
        self.bodies = [json.loads((EXCHANGES / f"{name}.json").read_text()) for name in names]
        self.status = status
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []

    def __call__(self, request: Any) -> Any:
        self.requests.append(json.loads(request.content or b"{}"))
        self.paths.append(request.url.path)
        module = httpx2 if type(request).__module__.startswith("httpx2") else httpx
        if not self.bodies:
            return module.Response(500, json={"error": {"message": "no more exchanges"}})
        return module.Response(self.status, json=self.bodies.pop(0))

    def client(self) -> httpx.AsyncClient:
        """An httpx client for SDKs built on httpx."""
        return httpx.AsyncClient(transport=httpx.MockTransport(self))

    def client2(self) -> httpx2.AsyncClient:
        """An httpx2 client for SDKs built on httpx2."""
        return httpx2.AsyncClient(transport=httpx2.MockTransport(self))
