"""The ``thought`` of a structured reply, read out of its JSON while it streams.

A model on the structured protocol writes ``{"thought": "...", "tool_calls": [...]}``
(in either order). `ThoughtStream` reads that JSON text as it arrives, once, and gives
back the decoded characters of the top-level ``thought`` string as soon as they are
written, so they can be shown as the model's text. It also notices, as early as the
text allows, that the ``tool_calls`` array holds at least one call.
"""

from __future__ import annotations

__all__ = ["ThoughtStream"]

_SIMPLE_ESCAPES = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}


def _unescaped(escape: str) -> str | None:
    """The text a JSON escape stands for; None while the escape is incomplete."""
    if len(escape) < 2:
        return None
    if escape[1] != "u":
        return _SIMPLE_ESCAPES.get(escape[1], escape)
    if len(escape) < 6:
        return None
    try:
        return chr(int(escape[2:6], 16))
    except ValueError:
        return escape


def _is_high_surrogate(text: str) -> bool:
    return len(text) == 1 and 0xD800 <= ord(text) <= 0xDBFF


def _is_low_surrogate(text: str) -> bool:
    return len(text) == 1 and 0xDC00 <= ord(text) <= 0xDFFF


class ThoughtStream:
    """Reads a structured reply's JSON text piece by piece (see the module).

    Args:
        key: The top-level field whose string value is streamed.
        calls_key: The top-level field holding the list of tool calls.
    """

    def __init__(self, key: str = "thought", calls_key: str = "tool_calls") -> None:
        self.key = key
        self.calls_key = calls_key
        self.calls = False
        """Whether the reply's tool-call list has shown a first call."""
        self._depth = 0
        self._in_string = False
        self._role = ""  # "key", "value" (the streamed one) or "" (any other string)
        self._skip = False
        self._chars: list[str] = []
        self._last_key = ""
        self._value_next = False
        self._calls_open = False
        self._escape = ""
        self._high = ""

    def feed(self, text: str) -> str:
        """Read the next piece of the reply; return the thought's new characters."""
        out: list[str] = []
        for char in text:
            if self._in_string:
                if self._role == "value":
                    self._thought_char(char, out)
                else:
                    self._string_char(char)
            else:
                self._structure_char(char)
        return "".join(out)

    def _string_char(self, char: str) -> None:
        """A character inside a string that is not streamed (a key or another value)."""
        if self._skip:
            self._skip = False
        elif char == "\\":
            self._skip = True
        elif char == '"':
            self._in_string = False
            if self._role == "key":
                self._last_key = "".join(self._chars)
            self._role = ""
            return
        if self._role == "key":
            self._chars.append(char)

    def _structure_char(self, char: str) -> None:
        """A character between strings: braces, brackets, colons, commas, literals."""
        if char.isspace():
            return
        if self._calls_open:
            self._calls_open = False
            self.calls = self.calls or char != "]"
        at_top = self._depth == 1
        if char == '"':
            self._in_string = True
            if at_top and not self._value_next:
                self._role, self._chars = "key", []
            elif at_top and self._last_key == self.key:
                self._role = "value"
            else:
                self._role = ""
            self._value_next = False
        elif char in "{[":
            if at_top and self._value_next and char == "[" and self._last_key == self.calls_key:
                self._calls_open = True
            self._depth += 1
            self._value_next = False
        elif char in "}]":
            self._depth -= 1
        elif char == ":" and at_top:
            self._value_next = True
        elif at_top:
            self._value_next = False

    def _thought_char(self, char: str, out: list[str]) -> None:
        """A character of the streamed string, decoded as soon as it is complete."""
        if self._escape:
            self._escape += char
            text = _unescaped(self._escape)
            if text is None:
                return
            self._escape = ""
            if _is_high_surrogate(text) and not self._high:
                self._high = text  # the other half of the pair comes next
                return
            out.append(self._paired(text))
            return
        if char == "\\":
            self._escape = char
            return
        if self._high:
            out.append("\ufffd")
            self._high = ""
        if char == '"':
            self._in_string = False
            self._role = ""
        else:
            out.append(char)

    def _paired(self, text: str) -> str:
        """``text``, joined to a pending high surrogate when it completes the pair."""
        high, self._high = self._high, ""
        if not high:
            return text
        if _is_low_surrogate(text):
            return (high + text).encode("utf-16", "surrogatepass").decode("utf-16")
        return "\ufffd" + text
