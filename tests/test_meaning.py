"""`meaning`: what changes without anything happening is set aside; progress is kept."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from convergent.meaning import MEANING_CHARS, meaning

clock = st.builds(
    "{:02d}:{:02d}:{:02d}".format,
    st.integers(0, 23),
    st.integers(0, 59),
    st.integers(0, 59),
)
iso = st.builds(
    "2026-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}Z".format,
    st.integers(1, 12),
    st.integers(1, 28),
    st.integers(0, 23),
    st.integers(0, 59),
    st.integers(0, 59),
)
uuid = st.uuids().map(str)
digest = st.binary(min_size=8, max_size=20).map(lambda b: "a" + b.hex())
epoch = st.integers(1_500_000_000, 2_199_999_999).map(str)
receipt = st.builds("P-{}".format, st.integers(1000, 999_999))
duration = st.builds("{:.3f}s".format, st.floats(0.001, 99.0))
request_id = st.builds('"request_id": "req_{}"'.format, st.integers(0, 10**9))

KINDS = [clock, iso, uuid, digest, epoch, receipt, duration, request_id]
TEMPLATES = [
    "job build-17 running (as of {})",
    "payment {} of 15.00 EUR to ACME sent",
    '{{"status": "ok", "at": "{}"}}',
    "Ran 4 tests in {}: 1 failed",
    "last seen {} by the monitor",
]


@given(st.sampled_from(TEMPLATES), st.sampled_from(KINDS), st.data())
def test_texts_that_differ_only_in_a_volatile_value_mean_the_same(
    template: str, kind: st.SearchStrategy[str], data: st.DataObject
) -> None:
    first, second = data.draw(kind), data.draw(kind)
    assert meaning(template.format(first)) == meaning(template.format(second))


@given(st.text(max_size=300))
def test_meaning_is_idempotent(text: str) -> None:
    once = meaning(text)
    assert meaning(once) == once


@given(st.integers(0, 500), st.integers(0, 500))
def test_counts_and_percentages_are_progress(first: int, second: int) -> None:
    for template in ("{} failing", "running {} % done", "{} files left", "step {} of 900"):
        same = meaning(template.format(first)) == meaning(template.format(second))
        assert same == (first == second), template


@given(st.sampled_from(["running", "queued", "done", "failed"]), clock, clock)
def test_a_status_that_moved_is_progress_beside_a_clock(
    status: str, first: str, second: str
) -> None:
    moved = meaning(f"running (as of {first})") != meaning(f"{status} (as of {second})")
    assert moved == (status != "running")


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("processing chunk_0042", "processing chunk_0043"),
        ("a.py:12:34: E501 line too long", "a.py:40:10: E501 line too long"),
        ("3:20 remaining", "3:10 remaining"),
        ("done in 5 min", "done in 3 min"),
        ("FAILED test_parse_utf8_input", "FAILED test_parse_utf16_input"),
        ("version 1.2.3", "version 1.2.4"),
    ],
)
def test_what_a_read_says_stays_when_it_could_be_progress(first: str, second: str) -> None:
    assert meaning(first, serials=False) != meaning(second, serials=False)


def test_a_receipt_is_set_aside_for_a_write_and_kept_for_a_read() -> None:
    assert meaning("payment P-1001 sent") == meaning("payment P-1002 sent")
    assert meaning("payment P-1001 sent", serials=False) != meaning(
        "payment P-1002 sent", serials=False
    )


@pytest.mark.parametrize(
    "text",
    [
        "Sat, 28 Nov 2026 10:26:55 GMT",
        "Nov 28, 2026",
        "on 11/28/2026",
        "at 12:00",
        "9:41 PM",
        "object at 0x7f3a9c2e10",
        "msg_01XFDUDYJgAACzvnptvVoYEL",
        '{"timezone": "UTC", "datetime": "2026-11-28T10:26:55+00:00"}',
        "transactionId: 99812",
    ],
)
def test_each_kind_of_volatile_value_is_replaced(text: str) -> None:
    assert meaning(text) != text
    assert "<" in meaning(text)


def test_only_the_head_of_a_huge_result_is_read() -> None:
    tail = "x" * MEANING_CHARS + " at 12:00:01"
    assert meaning(tail).endswith("12:00:01")
    assert meaning("at 12:00:01 " + "x" * MEANING_CHARS).startswith("at <clock>")
