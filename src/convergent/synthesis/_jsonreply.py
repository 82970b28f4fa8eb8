"""Read a JSON object out of a model's reply text."""

from __future__ import annotations

import re
from typing import Any

from convergent._json import load_json

__all__ = ["loads_object"]

_FENCE = re.compile(r"^```[a-zA-Z0-9_-]*\s*\n(.*)\n\s*```$", re.DOTALL)


def loads_object(text: str) -> dict[str, Any]:
    """Parse ``text`` as one JSON object, tolerating a surrounding Markdown code fence.

    Raises:
        ValueError: If the text is not JSON or not an object; the message says which.
    """
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group(1).strip()
    data = load_json(stripped)  # its UnusableJson is a ValueError saying why
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    return data
