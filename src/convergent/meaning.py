"""What a tool's result means, for telling a repeat from progress: `meaning`.

Two results of the same call that differ only in what changes without anything
happening (the clock, a fresh id) say the same thing: a status ``running (as of
12:00:07)`` polled again as ``running (as of 12:00:09)`` has not moved, and a payment
confirmed as ``payment P-1001 sent`` then ``payment P-1002 sent`` was made twice. Before
the stop rules compare results, `meaning` replaces such values with a placeholder.

Replaced (each by a placeholder naming its kind):

- dates and times: ISO 8601 (``2026-11-28T10:26:55Z``, ``2026-11-28``), clock times
  (``12:00:07``, ``9:41 PM``), written dates (``Nov 28, 2026``, ``28 Nov 2026``,
  ``Sat, 28 Nov 2026``), numeric dates (``11/28/2026``), and Unix timestamps in
  seconds or milliseconds (10 or 13 digits from 2001 to 2286);
- measured durations with a fraction (``in 0.53s``, ``12.1 ms``);
- identifiers: UUIDs, hexadecimal runs of 8 or more characters with a digit (hashes,
  ``0x7f3a9c2e`` addresses), mixed letter-and-digit tokens of 12 or more characters
  (``msg_01XFDUDYJgAACzvn``), prefixed serials (``P-1001``, ``req_8842``, ``#10234``), and
  the value of a field whose name says it is an id or a time (``"request_id": 7``,
  ``created_at=...``, ``pid 4242``).

Kept, because they change when something happens: counts and short numbers (``3
failing``), percentages (``40 %``), statuses and words, sizes, and integers with a unit
(``done in 5 min``).

The rule is conservative: a text it leaves alone is compared byte for byte, as before.
Only the first `MEANING_CHARS` characters are read; the rest is compared as it is.
"""

from __future__ import annotations

import re

__all__ = ["MEANING_CHARS", "meaning"]

MEANING_CHARS = 262_144
"""Characters of a result read for volatile values; the rest is compared as it is."""

_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
    r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
_ZONE = r"(?:Z|[+-]\d{2}:?\d{2})?"
_HOUR_MINUTE = r"(?:[01]?\d|2[0-3]):[0-5]\d"
_SECONDS = r":[0-5]\d(?:[.,]\d{1,9})?"

_CANDIDATE = re.compile(r"(?<![A-Za-z0-9_.:+#/-])[A-Za-z0-9_.:+#/-]*?\d[A-Za-z0-9_.:+#/-]*")
"""A run of characters with a digit: every volatile value is (or ends in) one. It is
tried only where a run starts, so a long run without a digit costs one pass."""

_KINDS = re.compile(
    "|".join(
        (
            r"(?P<iso>\d{4}-\d{2}-\d{2}(?:T"
            + _HOUR_MINUTE
            + r"(?:"
            + _SECONDS
            + r")?"
            + _ZONE
            + r")?)",
            r"(?P<uuid>[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12})",
            r"(?P<clock>" + _HOUR_MINUTE + _SECONDS + _ZONE + r")",
            r"(?P<minute>" + _HOUR_MINUTE + r")",
            r"(?P<slash>\d{1,2}/\d{1,2}/\d{4})",
            r"(?P<hex>(?:0x)?(?=[0-9A-Fa-f]*[A-Fa-f])[0-9A-Fa-f]{8,})",
            r"(?P<epoch>(?:1[5-9]|2[0-2])\d{8}(?:\d{3}|\.\d+)?)",
            r"(?P<decimal>\d+\.\d+)(?P<unit>ms|s|sec|secs|seconds|us|µs|ns)?",
            r"(?P<serial>(?:[A-Za-z]{1,12}[-_#]|#)\d{3,})",
            r"(?P<token>(?:[A-Za-z]{1,10}[_-])?(?:(?=(?:[A-Za-z]*\d){3})(?=(?:\d*[A-Za-z]){3})"
            r"[A-Za-z0-9]{12,}|(?=[A-Za-z0-9]*[a-z])(?=[A-Za-z0-9]*[A-Z])[A-Za-z0-9]{16,}))",
        )
    )
)
"""What a candidate run is, when it is volatile as a whole."""

_ID_KEY_BEFORE = re.compile(
    r"(?:\b(?:[A-Za-z]+[_-])*(?:id|ids|uuid|guid|etag|nonce|receipt|timestamp|ts)"
    r"|\b(?:[A-Za-z]+[_-])*(?:created|updated|modified|expires|issued|generated)_(?:at|on)"
    r"|\b[a-z]+(?:Id|ID|Ids|Uuid|Timestamp|At))[\"']?\s*[:=]\s*[\"']?$"
)
"""A field named as an id or a time just before a value (JSON, key=value, key: value)."""
_TIME_WORD_BEFORE = re.compile(r"\b(?:at|of|on|since|until) $")
_MERIDIEM_AFTER = re.compile(r"\s?[AaPp]\.?[Mm]\b\.?")
_UNIT_AFTER = re.compile(r" ?(?:ms|s|sec|secs|seconds|us|µs|ns)\b")
_WRITTEN_DATE = re.compile(
    r"\b(?:(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,?\s+)?(?:\d{1,2}\s+"
    + _MONTH
    + r"\.?,?\s+\d{4}|"
    + _MONTH
    + r"\.?\s+\d{1,2}(?:st|nd|rd|th)?,?\s+\d{4})"
)
_MONTH_HINT = re.compile(_MONTH + r"\.?,?\s+\d|\d\s+" + _MONTH)
_WINDOW = 48
"""Characters looked at before a candidate for the name of its field."""


def meaning(text: str, *, serials: bool = True) -> str:
    """``text`` with its volatile values (times, dates, ids) replaced by placeholders.

    Two results with the same meaning are the same result for the stop rules; see the
    module's docstring for what is replaced and what is kept. Idempotent.

    Args:
        text: A tool's result.
        serials: Replace prefixed serials (``P-1001``) too: right for what a call that may
            change something returns (a receipt), not for a read (``chunk_0042`` may be
            progress).
    """
    head = text if len(text) <= MEANING_CHARS else text[:MEANING_CHARS]
    if _MONTH_HINT.search(head):
        head = _WRITTEN_DATE.sub("<date>", head)
    parts: list[str] = []
    done = 0
    for match in _CANDIDATE.finditer(head):
        start, end = match.span()
        run = match.group()
        trimmed = run.rstrip(".:-/")
        end -= len(run) - len(trimmed)
        kind = _kind(head, trimmed, start, end, serials)
        if kind is None:
            continue
        if kind == "unit":  # a decimal and its unit, apart: both go
            unit = _UNIT_AFTER.match(head, end)
            assert unit is not None
            end, kind = unit.end(), "duration"
        elif kind == "meridiem":
            meridiem = _MERIDIEM_AFTER.match(head, end)
            assert meridiem is not None
            end, kind = meridiem.end(), "clock"
        parts.append(head[done:start])
        parts.append(f"<{kind}>")
        done = end
    if not parts and len(text) <= MEANING_CHARS:
        return head
    parts.append(head[done:])
    if len(text) > MEANING_CHARS:
        parts.append(text[MEANING_CHARS:])
    return "".join(parts)


def _kind(text: str, run: str, start: int, end: int, serials: bool) -> str | None:
    """What the candidate ``run`` at ``start:end`` is, if it is volatile."""
    if _ID_KEY_BEFORE.search(text, max(start - _WINDOW, 0), start):
        return "value"
    match = _KINDS.fullmatch(run)
    if match is None:
        return None
    kind = match.lastgroup
    if kind == "minute":  # 12:00 is a time only with a.m./p.m. or "at 12:00"
        if _MERIDIEM_AFTER.match(text, end):
            return "meridiem"
        if _TIME_WORD_BEFORE.search(text, max(start - 8, 0), start):
            return "clock"
        return None
    if kind in ("decimal", "unit"):  # a measured duration: a fraction with a unit
        if match.group("unit"):
            return "duration"
        return "unit" if _UNIT_AFTER.match(text, end) else None
    if kind == "serial" and not serials:
        return None
    return kind
