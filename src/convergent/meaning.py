"""Whether a tool's result says something new: `compare` it with the previous result.

A call repeated while nothing happens can still come back with other bytes: a status
``running (as of 12:00:07)`` polled again reads ``running (as of 12:00:09)``, a response
carries a fresh ``X-Request-Id``, a test run ``took 23ms`` then ``took 31ms``. Such a
result has not moved. `compare` takes the previous result of the same call and the new
one, and finds their differences: the two are the same only where *every* difference is
a value that changes while nothing happens, in a form that says so unambiguously.

Set aside (on both sides, the same kind):

- time stamps: ISO 8601 with a time, with or without fraction and zone
  (``2026-11-28T10:26:05.123+01:00``, ``2026-11-28 10:26:05``), Python logging
  (``2026-11-28 10:26:05,123``), RFC 1123 and other written dates with a time
  (``Sat, 28 Nov 2026 10:26:05 GMT``, ``Nov 28, 2026, 10:26 AM``), ``ctime`` and syslog
  (``Nov 28 10:26:05``), the common log format (``28/Nov/2026:10:26:05 +0000``), clock
  times with seconds or a.m./p.m. (``10:26:05``, ``0:00:01``, ``9:41 PM``) and a minute
  after ``at``, ``as of``, ``since`` (``at 12:00``);
- durations in seconds or less, by their unit (``23ms``, ``in 41 ms``, ``0.53s``,
  ``12 seconds``), and compound durations that end in seconds (``1m23.456s``,
  ``1h 2m 3s``);
- relative times (``5 seconds ago``, ``about an hour ago``, ``just now``);
- ephemeral ports (32768 and up) after a host (``127.0.0.1:53412``,
  ``localhost:40001``) or the word ``port``;
- temporary names (``/tmp/tmpab12cd_x``, ``tmp.Xy12AbC9zQ``);
- W3C trace contexts (``00-<32 hex>-<16 hex>-01``);
- the value of a field or label that names a request, trace, span, correlation id, a
  nonce, an ETag or a signature (``X-Request-Id: ...``, ``Request ID: ...``,
  ``"trace_id": ...``, ``nonce=...``, ``X-Amz-Signature=...``), and of
  one that names a time, an expiry or a duration (``"updated_at"``, ``"start_time"``,
  ``"timestamp"``, ``"date"``, ``"expires"``, ``"ttl"``, ``"took"``, ``"duration_ms"``,
  ``createdAt``) when both values are numbers or both text with a digit (``null`` then
  a time is progress).

Kept (a difference there is progress):

- every bare number, of any size: a count, a byte count, an epoch that no label names;
- ids the result reports as its subject, by any name but those above: a commit, a
  sha, a job, build, deployment, ticket, order or payment id, a cursor, ``last_id``,
  a receipt, a UUID that no label calls a request or trace;
- statuses and words, percentages, sizes, versions, a file's ``line:column``;
- a date alone (``2026-11-28``, ``Nov 28, 2026``: a due date or a free slot that moved);
- durations in minutes or longer (``done in 5 min``, ``ETA 2 h``: a countdown moves
  with the work) unless they say ``ago`` or end in seconds;
- ``mm:ss`` and ``hh:mm`` without a.m./p.m. or ``at`` (``3:20 remaining``).

Results are compared as text, JSON included: a JSON field's name is the label before
its value, so ``"request_id": "..."`` is set aside and ``"job_id": "..."`` kept; the same
fields in another order count as a change. The work is bounded: equal texts are equal
at the speed of a byte comparison; otherwise the walk jumps from one difference to the
next by comparing slices, looks at a few dozen characters around each difference, and
stops at the first one that counts. Past `MAX_DIFFERENCES` differences, or a difference
past the first `MEANING_CHARS` characters, the texts differ.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["MAX_DIFFERENCES", "MEANING_CHARS", "Comparison", "compare", "same_meaning"]

MEANING_CHARS = 262_144
"""Characters of a result examined for volatile values: a difference past them counts."""

MAX_DIFFERENCES = 64
"""Differences examined in one comparison: past them, the texts differ."""

_MAX_SET_ASIDE_SHOWN = 8
_LOOK_BACK = 48
"""Characters before a difference where the volatile value around it may start."""
_LOOK_AHEAD = 64
"""Characters after a difference where that value must end."""
_LABEL_LOOK_BACK = 96
"""Characters before a difference searched for a label and the start of its value."""
_CANDIDATES = 4
"""Places before a difference, nearest first, where a volatile value around it is sought."""
_VALUE_CHARS = 200
"""The longest labelled value set aside."""


@dataclass(frozen=True, slots=True)
class Comparison:
    """What a result's differences from the previous one are."""

    same: bool
    """Every difference is a value that changes while nothing happens (or there is none)."""
    set_aside: tuple[str, ...] = ()
    """What was set aside, each once, in the order met: a field's name as written
    (``updated_at``), else the kind of value (``time stamp``, ``duration``...)."""
    at: int = -1
    """Where in the new text the first difference that counts is (-1: none)."""
    examined: int = 0
    """Differences examined."""


_SAME = Comparison(True)

_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
    r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
_WEEKDAY = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*\.?"
_FRACTION = r"(?:[.,]\d{1,9})?"
_HOUR = r"(?:[01]?\d|2[0-3])"
_CLOCK = _HOUR + r":[0-5]\d:[0-5]\d" + _FRACTION
"""A clock time with seconds."""
_CLOCK_MINUTES = _HOUR + r":[0-5]\d(?::[0-5]\d" + _FRACTION + r")?"
"""A clock time, seconds optional (part of a date, where it is unambiguous)."""
_MERIDIEM = r"\s?[AaPp]\.?[Mm]\.?"
_ZONE = r"(?:\s?(?:Z|UTC|GMT|[+-]\d{2}(?::?\d{2})?)(?![A-Za-z]))?"
_ZONE_NAME = r"(?:\s(?:GMT|UTC|[+-]\d{4}|[A-Z]{2,5}))?"

_TIME_STAMP = "|".join(
    (
        r"\d{4}-[01]\d-[0-3]\d[T ]" + _CLOCK_MINUTES + _ZONE,  # ISO 8601, Python logging
        r"\d{4}[01]\d[0-3]\dT[0-2]\d[0-5]\d[0-5]\d(?:\.\d{1,9})?Z?",  # ISO 8601 basic
        _WEEKDAY + r",?\s+\d{1,2}[ -]" + _MONTH + r"[ -]\d{2,4}\s+" + _CLOCK_MINUTES + _ZONE_NAME,
        _WEEKDAY + r"\s+" + _MONTH + r"\s+\d{1,2}\s+" + _CLOCK + _ZONE_NAME + r"\s+\d{4}",  # ctime
        _MONTH + r"\s+\d{1,2}\s+" + _CLOCK + r"(?:\s+\d{4})?",  # syslog
        _MONTH
        + r"\.?\s+\d{1,2}(?:st|nd|rd|th)?,?\s+\d{4},?\s+(?:at\s+)?"
        + _CLOCK_MINUTES
        + r"(?:"
        + _MERIDIEM
        + r")?"
        + _ZONE_NAME,
        r"\d{1,2}\s+" + _MONTH + r"\.?,?\s+\d{4},?\s+" + _CLOCK_MINUTES + _ZONE_NAME,
        r"\d{1,2}/" + _MONTH + r"/\d{4}:" + _CLOCK + r"(?:\s[+-]\d{4})?",  # common log format
        r"\d{1,2}/\d{1,2}/\d{2,4},?\s+" + _CLOCK_MINUTES + r"(?:" + _MERIDIEM + r")?",
        _CLOCK + r"(?:" + _MERIDIEM + r")?" + _ZONE,
        _HOUR + r":[0-5]\d" + _MERIDIEM,
        r"(?:(?<=\bat )|(?<=\bof )|(?<=\bsince )|(?<=\buntil ))" + _HOUR + r":[0-5]\d" + _ZONE,
    )
)
_SUBSECOND = r"(?:ns|[µμu]s|msecs?|ms|millis(?:econds?)?|(?:micro|nano)seconds?)"
_SECOND = r"(?:seconds?|secs?|s)"
_COARSE = r"(?:days?|d|hours?|hrs?|h|minutes?|mins?|m)(?![A-Za-z])"
_DURATION = "|".join(
    (
        r"(?:\d++\s?"
        + _COARSE
        + r",?\s?)+\d++(?:[.,]\d++)?\s?(?:"
        + _SUBSECOND
        + "|"
        + _SECOND
        + ")",
        r"\d++(?:[.,]\d++)?\s?(?:" + _SUBSECOND + "|" + _SECOND + ")",
    )
)
_UNIT_AGO = (
    r"(?:seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h|days?|d|weeks?|wks?|w|months?|mos?"
    r"|years?|yrs?|y)(?![A-Za-z])"
)
_AGO = (
    r"(?:(?:about|over|almost|nearly|less than)\s)?(?:(?:\d++|an?|a few|few|several)\s?"
    + _UNIT_AGO
    + r",?\s?)+ago|just now|(?:a )?moments? ago"
)
_HOST = (
    r"(?:\d{1,3}(?:\.\d{1,3}){3}|localhost|\[[0-9A-Fa-f:.]++\]|"
    r"[A-Za-z0-9-]++(?:\.[A-Za-z0-9-]++)++)"
)
_PORT = _HOST + r":(?P<port>\d{5})|(?i:port)\s?[:=]?\s?(?P<port_word>\d{5})"
_TEMP = r"tmp[a-z0-9_]{8}|tmp\.[A-Za-z0-9]{10}"
_TRACE = r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}"

_FORMS = (
    ("time stamp", _TIME_STAMP),
    ("relative time", _AGO),
    ("duration", _DURATION),
    ("ephemeral port", _PORT),
    ("temporary name", _TEMP),
    ("trace id", _TRACE),
)
_FORM_BODY = "|".join(f"(?P<f{n}>{body})" for n, (_, body) in enumerate(_FORMS))
_END = r"(?![A-Za-z0-9_])"
_FORM = re.compile(f"(?:{_FORM_BODY}){_END}")
"""A volatile value by its form, matched where a token starts."""
_TOKEN_START = re.compile(r"(?<![A-Za-z0-9_.:+-])[A-Za-z0-9\[]")
"""Where a token may start: a letter, digit or ``[`` after anything but a token's own
characters (so never inside a name, a number, a path's ``line:column``, a version)."""

_ID_LABEL = (
    r"(?i:(?:[a-z0-9]+[-_. ])*(?:request[-_ ]?id|req[-_]?id|trace[-_ ]?id|trace[-_]?context"
    r"|traceparent|tracestate|sentry[-_]trace|span[-_ ]?id|correlation[-_ ]?id|c?nonce"
    r"|e[-_]?tag|cf[-_]ray|amz[-_]cf[-_]id|amz[-_]id[-_]2|signature|sig))"
)
_TIME_WORDS = (
    r"time|timestamp|ts|datetime|date|expires|expiry|expiration|ttl|uptime|took|duration"
    r"|elapsed|latency|last[-_]modified|server[-_]timing|x[-_]runtime"
)
_TIME_SUFFIXES = (
    r"at|time|timestamp|ts|date|datetime|ms|us|ns|secs?|seconds|millis|micros|nanos|duration"
    r"|elapsed|latency|took"
)
_TIME_LABEL = (
    r"(?:(?i:(?:[a-z0-9]+[-_.])*(?:" + _TIME_WORDS + r"))"
    r"|(?i:(?:[a-z0-9]+[-_.])+(?:" + _TIME_SUFFIXES + r"))"
    r"|[a-z][A-Za-z0-9]*(?:At|Time|Timestamp|Ts|Date|Ms|Millis|Seconds|Secs|Duration"
    r"|Elapsed|Latency))"
)
_LABEL = re.compile(r"(?P<id>" + _ID_LABEL + r")|(?P<time>" + _TIME_LABEL + r")")
_LABELS_BEFORE = tuple(
    re.compile(head + r"\s*[:=]\s*(?P<quote>[\"']?)(?P<label>[A-Za-z0-9_. -]{1,64})")
    for head in (r"(?P<head>[^\s\"',;&}\])]*)", r"(?P<head>[^\"\n]*\"(?:/W)?)")
)
"""Read backwards from a difference: the start of a value (bare, or quoted), its
separator (``:``, ``=``), and the label before it (a field's name, a header, ``key=``)."""
_QUOTED = re.compile(r"\"(?:[^\"\\\n]|\\.)*\"")
_BARE = re.compile(r"[^\s\"',;&}\])]*")
_DIGIT = re.compile(r"\d")


def same_meaning(before: str, after: str) -> bool:
    """Whether ``after`` says what ``before`` said: every difference is volatile.

    ``before`` is the previous result of the same call, ``after`` the new one; see the
    module's docstring for what is set aside and what is kept.
    """
    return before == after or compare(before, after).same


def compare(before: str, after: str, *, max_differences: int = MAX_DIFFERENCES) -> Comparison:
    """How ``after`` differs from ``before``: the same, or where it first differs.

    Args:
        before: The previous result of the same call.
        after: The new result.
        max_differences: Differences examined at most; past them the texts differ.
    """
    if before == after:
        return _SAME
    i = j = 0
    size_before, size_after = len(before), len(after)
    set_aside: list[str] = []
    examined = 0
    while True:
        common = _common_prefix(before, i, after, j)
        i += common
        j += common
        if i == size_before and j == size_after:
            return Comparison(True, tuple(set_aside), -1, examined)
        if examined >= max_differences or j >= MEANING_CHARS:
            return Comparison(False, tuple(set_aside), j, examined)
        examined += 1
        found = _volatile(before, i - common, i, after, j - common, j)
        if found is None:
            return Comparison(False, tuple(set_aside), j, examined)
        what, i, j = found
        if what not in set_aside and len(set_aside) < _MAX_SET_ASIDE_SHOWN:
            set_aside.append(what)


def _common_prefix(a: str, i: int, b: str, j: int) -> int:
    """How many characters ``a[i:]`` and ``b[j:]`` have in common at their start.

    Slices of growing size are compared (at the speed of a byte comparison), then the
    mismatching one is halved: the work is proportional to the common part.
    """
    limit = min(len(a) - i, len(b) - j)
    done, size = 0, 32
    while done < limit:
        size = min(size, limit - done)
        if a.startswith(b[j + done : j + done + size], i + done):
            done += size
            size *= 2
            continue
        low, high = done, done + size  # the common part ends in [low, high)
        while high - low > 1:
            middle = (low + high) // 2
            if a.startswith(b[j + low : j + middle], i + low):
                low = middle
            else:
                high = middle
        return low
    return limit


def _volatile(
    a: str, floor_a: int, i: int, b: str, floor_b: int, j: int
) -> tuple[str, int, int] | None:
    """The volatile values around a difference (``a[i]`` against ``b[j]``), if they are.

    Returns what they are and where each ends; None: the difference counts. Values
    start at or after the floors (where the texts last differed) and at the same
    distance from the difference on both sides.
    """
    labelled = _labelled(a, floor_a, i, b, j)
    if labelled is not None:
        return labelled
    shift = j - i
    floor = max(floor_a, floor_b - shift, i - _LOOK_BACK)
    starts = [start.start() for start in _TOKEN_START.finditer(a, floor, i + 1)]
    for first in starts[: -_CANDIDATES - 1 : -1]:  # the nearest first
        match_a = _FORM.match(a, first, i + _LOOK_AHEAD)
        if match_a is None or match_a.end() < i:
            continue
        match_b = _FORM.match(b, first + shift, j + _LOOK_AHEAD)
        if match_b is None or match_b.end() < j or match_b.lastgroup != match_a.lastgroup:
            continue
        if match_a.end() == i and match_b.end() == j:
            continue  # both end where the texts differ: the difference is after them
        if match_a.end() == i + _LOOK_AHEAD or match_b.end() == j + _LOOK_AHEAD:
            continue  # cut by the window: not known to end there
        name = match_a.lastgroup
        assert name is not None
        kind = _FORMS[int(name[1:])][0]
        if kind == "ephemeral port" and not (_ephemeral(match_a) and _ephemeral(match_b)):
            continue
        return kind, match_a.end(), match_b.end()
    return None


def _ephemeral(match: re.Match[str]) -> bool:
    port = match.group("port") or match.group("port_word")
    return port is not None and 32768 <= int(port) <= 65535


def _labelled(a: str, floor_a: int, i: int, b: str, j: int) -> tuple[str, int, int] | None:
    """The values of a label that says they are volatile, if the difference is in them."""
    backwards = a[max(floor_a, i - _LABEL_LOOK_BACK) : i][::-1]
    for pattern in _LABELS_BEFORE:
        found = pattern.match(backwards)
        if found is None:
            continue
        name = found.group("label")[::-1].strip()
        kind = _label_kind(name)
        if kind is None and name == "at" and found.group("quote") == '"':
            kind = "time"  # "at" names a time only as a JSON field
        if kind is not None:
            break
    else:
        return None
    start_a = i - len(found.group("head"))
    start_b = j - (i - start_a)
    end_a, end_b = _value_end(a, start_a), _value_end(b, start_b)
    if end_a is None or end_b is None or end_a <= i and end_b <= j:
        return None
    value_a, value_b = a[start_a:end_a], b[start_b:end_b]
    if (value_a[:1] == '"') != (value_b[:1] == '"'):
        return None  # a string against anything else: the value changed its kind
    if value_a in ("", '""') or value_b in ("", '""'):
        return None  # there was no value, or there is none now
    if kind == "time" and not (_timelike(value_a) and _timelike(value_b)):
        return None
    return name, end_a, end_b


@lru_cache(maxsize=1024)
def _label_kind(name: str) -> str | None:
    """Whether a label names an id (``"id"``) or a time (``"time"``) set aside; None: neither."""
    label = _LABEL.fullmatch(name)
    if label is None or label.lastgroup == "time" and " " in name:
        return None  # a time's label is one word: "total at this time: 5" counts
    return label.lastgroup


def _value_end(text: str, start: int) -> int | None:
    """Where the value that starts at ``start`` ends (None: too long to be one)."""
    if text.startswith('W/"', start):  # a weak ETag
        start += 2
    pattern = _QUOTED if text.startswith('"', start) else _BARE
    match = pattern.match(text, start, start + _VALUE_CHARS + 2)
    if match is None or match.end() == start + _VALUE_CHARS + 2:
        return None
    return match.end()


def _timelike(value: str) -> bool:
    """A time's value: a number, or text with a digit (not ``null``, ``""``, ``never``)."""
    return _DIGIT.search(value) is not None
