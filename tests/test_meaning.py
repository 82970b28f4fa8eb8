"""`compare`: what changes while nothing happens is set aside; every other difference counts."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from convergent.meaning import (
    MAX_DIFFERENCES,
    MEANING_CHARS,
    Comparison,
    compare,
    same_meaning,
)

patient = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
"""Drawing texts of many kinds is slow on a busy machine: time is not what is tested."""

# --- volatile values: pairs of the same kind ----------------------------------------------

day = st.builds("2026-{:02d}-{:02d}".format, st.integers(1, 12), st.integers(1, 28))
clock = st.builds(
    "{:02d}:{:02d}:{:02d}".format, st.integers(0, 23), st.integers(0, 59), st.integers(0, 59)
)
fraction = st.integers(0, 999).map("{:03d}".format)
zone = st.sampled_from(["Z", "+00:00", "-05:00", "+0530", ""])
iso = st.builds("{}T{}{}".format, day, clock, zone) | st.builds(
    "{}T{}.{}{}".format, day, clock, fraction, zone
)
logging_stamp = st.builds("{} {},{}".format, day, clock, fraction)
weekday = st.sampled_from(["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"])
month = st.sampled_from(["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Nov", "Dec"])
rfc_1123 = st.builds("{}, {:02d} {} 2026 {} GMT".format, weekday, st.integers(1, 28), month, clock)
syslog = st.builds("{} {:2d} {}".format, month, st.integers(1, 28), clock)
twelve_hour = st.builds(
    "{}:{:02d} {}".format, st.integers(1, 12), st.integers(0, 59), st.sampled_from(["AM", "PM"])
)
time_stamp = iso | logging_stamp | rfc_1123 | syslog | clock | twelve_hour
duration = (
    st.builds("{}ms".format, st.integers(0, 99_999))
    | st.builds("{} ms".format, st.integers(0, 99_999))
    | st.builds("{:.2f}s".format, st.floats(0, 999))
    | st.builds("{}s".format, st.integers(0, 9_999))
    | st.builds("{}m{:.3f}s".format, st.integers(1, 59), st.floats(0, 59))
    | st.builds("{}h{}m{}s".format, st.integers(1, 9), st.integers(0, 59), st.integers(0, 59))
)
ago = st.builds(
    "{} {} ago".format,
    st.integers(1, 59),
    st.sampled_from(["seconds", "minutes", "hours", "days", "s", "min"]),
) | st.sampled_from(["just now", "a few seconds ago", "about an hour ago"])
port = st.builds(
    "{}:{}".format,
    st.sampled_from(["127.0.0.1", "localhost", "0.0.0.0", "[::1]", "db.internal.example"]),
    st.integers(32768, 65535),
)
temp_name = st.builds(
    "/tmp/tmp{}".format, st.text("abcdefghijklmnopqrstuvwxyz0123456789_", min_size=8, max_size=8)
)
hex_chars = "0123456789abcdef"
traceparent = st.builds(
    "00-{}-{}-01".format,
    st.text(hex_chars, min_size=32, max_size=32),
    st.text(hex_chars, min_size=16, max_size=16),
)
uuid = st.uuids().map(str)
request_header = st.builds("X-Request-Id: {}".format, uuid | st.text(hex_chars, min_size=8))
trace_field = st.builds('"trace_id": "{}"'.format, st.text(hex_chars, min_size=16, max_size=32))
time_field = st.builds('"updated_at": "{}"'.format, iso)
expiry_field = st.builds('"expires_at": {}'.format, st.integers(1_500_000_000, 2_000_000_000))
took_field = st.builds('"took": {}'.format, st.integers(0, 10**6))

VOLATILE = {
    "time stamp": time_stamp,
    "duration": duration,
    "relative time": ago,
    "ephemeral port": port,
    "temporary name": temp_name,
    "trace context": st.builds("traceparent: {}".format, traceparent),
    "request id": request_header,
    "trace id field": trace_field,
    "time field": time_field,
    "expiry field": expiry_field,
    "duration field": took_field,
}
PROSE = [
    "job build-17 running (as of {})",
    "[{}] GET /v1/orders/42 200",
    "Ran 4 tests: 1 failed; {}",
    "INFO server ready: {} (3 workers)",
    "{}",
]
JSON_TEMPLATES = [
    '{{"status": "running", "job": "build-17", "meta": {{{}}}, "items": [1, 2, 3]}}',
    '[{{"id": "a1", "progress": 40}}, {{{}, "count": 1500000000}}]',
]


def in_json(value: str) -> str:
    return value if value.startswith('"') else json.dumps({"note": value})[1:-1]


CONTEXTS = [(template, str) for template in PROSE] + [
    (template, in_json) for template in JSON_TEMPLATES
]
"""Where a value stands: in prose as it is, in JSON as a field or in a string."""


@patient
@given(st.sampled_from(sorted(VOLATILE)), st.sampled_from(CONTEXTS), st.data())
def test_results_that_differ_only_in_volatile_values_are_the_same(
    kind: str, context: tuple[str, Callable[[str], str]], data: st.DataObject
) -> None:
    template, placed = context
    first, second = data.draw(VOLATILE[kind]), data.draw(VOLATILE[kind])
    before, after = template.format(placed(first)), template.format(placed(second))
    assert same_meaning(before, after), (before, after)


@patient
@given(st.lists(st.sampled_from(sorted(VOLATILE)), min_size=2, max_size=6), st.data())
def test_many_volatile_values_in_one_result_are_all_set_aside(
    kinds: list[str], data: st.DataObject
) -> None:
    lines = [("line {} at {}", kind) for kind in kinds]
    before = "\n".join(text.format(n, data.draw(VOLATILE[k])) for n, (text, k) in enumerate(lines))
    after = "\n".join(text.format(n, data.draw(VOLATILE[k])) for n, (text, k) in enumerate(lines))
    assert same_meaning(before, after), (before, after)


# --- progress: pairs that must differ -----------------------------------------------------

count = st.integers(0, 10**15)
PROGRESS_TEMPLATES = [
    "{} failing",
    "downloaded {} bytes",
    '{{"count": {}, "status": "ok"}}',
    "total={} at 2026-11-28T10:26:05Z",
    "{} items in 0.5s",
]


@patient
@given(st.sampled_from(PROGRESS_TEMPLATES), count, count)
def test_a_bare_number_of_any_size_is_progress(template: str, first: int, second: int) -> None:
    assume(first != second)
    assert not same_meaning(template.format(first), template.format(second))


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (1_500_000_000, 1_500_000_001),
        (1_764_325_565, 1_764_325_570),
        (9_999_999_999, 1_000_000_000),
    ],
)
@pytest.mark.parametrize("template", PROGRESS_TEMPLATES)
def test_ten_and_thirteen_digit_counts_are_progress(template: str, first: int, second: int) -> None:
    assert not same_meaning(template.format(first), template.format(second))
    assert not same_meaning(template.format(first * 1000), template.format(second * 1000))


sha = st.text(hex_chars, min_size=7, max_size=64)
subject = {
    "ticket": st.integers(1000, 10**6).map("TICKET-{}".format),
    "serial": st.integers(1000, 10**6).map("P-{}".format),
    "chunk": st.integers(0, 9999).map("chunk_{:04d}".format),
    "sha": sha,
    "uuid": uuid,
    "status": st.sampled_from(["queued", "running", "succeeded", "failed", "cancelled"]),
}
SUBJECT_TEMPLATES = [
    "next: {}",
    "pushed {} to main",
    'job_id: "{}"',
    '{{"job_id": "{}", "status": "created"}}',
    '{{"deployment": {{"id": "{}"}}, "at": "2026-11-28T10:26:05Z"}}',
    '{{"commit": "{}", "took": 12}}',
    '{{"last_id": "{}", "cursor": "c1"}}',
    "order {} confirmed in 23ms",
    "sha256: {}",
]


@patient
@given(st.sampled_from(sorted(subject)), st.sampled_from(SUBJECT_TEMPLATES), st.data())
def test_an_id_or_status_the_result_reports_is_progress(
    kind: str, template: str, data: st.DataObject
) -> None:
    first, second = data.draw(subject[kind]), data.draw(subject[kind])
    assume(first != second)
    assert not same_meaning(template.format(first), template.format(second))


@patient
@given(st.sampled_from(sorted(VOLATILE)), st.sampled_from(sorted(subject)), st.data())
def test_progress_beside_a_volatile_value_still_counts(
    volatile: str, kind: str, data: st.DataObject
) -> None:
    new, old = data.draw(subject[kind]), data.draw(subject[kind])
    assume(new != old)
    before = f"{data.draw(VOLATILE[volatile])} {old} done"
    after = f"{data.draw(VOLATILE[volatile])} {new} done"
    assert not same_meaning(before, after)


# --- the counter-examples, one by one ------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("TICKET-1001", "TICKET-1002"),
        ("downloaded 1500000000 bytes", "downloaded 1500000001 bytes"),
        ("Received 2299999999 bytes", "Received 2300000000 bytes"),
        ("pushed 3f2a9c1e0b to origin/main", "pushed 7d41b0e9aa to origin/main"),
        (
            '{"job_id": "0b6f6e52-3a2e-4d65-9a3c-1c0f1e1d7a10"}',
            '{"job_id": "9d4e1b2c-77aa-4c1e-8f00-5e6d7c8b9a01"}',
        ),
        (
            "deployment 0b6f6e52-3a2e-4d65-9a3c-1c0f1e1d7a10 created",
            "deployment 9d4e1b2c-77aa-4c1e-8f00-5e6d7c8b9a01 created",
        ),
        ("sha256:" + "a" * 64, "sha256:" + "a" * 63 + "b"),
        ('{"last_id": 41, "items": []}', '{"last_id": 42, "items": []}'),
        ("payment P-1001 sent", "payment P-1002 sent"),
        ('{"completed_at": null}', '{"completed_at": "2026-11-28T10:26:05Z"}'),
    ],
    ids=[
        "ticket",
        "byte-count",
        "byte-count-top",
        "git-sha",
        "uuid-job",
        "uuid-deployment",
        "sha256",
        "last-id",
        "receipt",
        "completed",
    ],
)
def test_the_progress_once_taken_for_a_clock_or_an_id_counts(before: str, after: str) -> None:
    assert not same_meaning(before, after)


@pytest.mark.parametrize(
    ("before", "after", "kind"),
    [
        ("2026-11-28 10:26:05,123 INFO ok", "2026-11-28 10:26:07,981 INFO ok", "time stamp"),
        ("tests took 23ms", "tests took 41ms", "duration"),
        ("done in 41ms", "done in 9ms", "duration"),
        ("elapsed 1m23.456s", "elapsed 1m24.002s", "duration"),
        ("updated 5 seconds ago", "updated 12 seconds ago", "relative time"),
        ("listening on 127.0.0.1:53412", "listening on 127.0.0.1:40991", "ephemeral port"),
        ("wrote /tmp/tmpab12cd_x/out.txt", "wrote /tmp/tmp9z8y7x6w/out.txt", "temporary name"),
        (
            "traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "traceparent",
        ),
        (
            "X-Request-Id: 0b6f6e52-3a2e-4d65-9a3c-1c0f1e1d7a10\nstatus: running",
            "X-Request-Id: 9d4e1b2c-77aa-4c1e-8f00-5e6d7c8b9a01\nstatus: running",
            "X-Request-Id",
        ),
        (
            "Date: Sat, 28 Nov 2026 10:26:55 GMT",
            "Date: Sat, 28 Nov 2026 10:27:01 GMT",
            "time stamp",
        ),
        ("Nov 28 10:26:05 host cron[1]: ok", "Nov 28 10:26:09 host cron[1]: ok", "time stamp"),
    ],
)
def test_the_volatile_values_once_missed_are_set_aside(before: str, after: str, kind: str) -> None:
    found = compare(before, after)
    assert found.same
    assert found.set_aside == (kind,)


def test_a_json_result_sets_aside_fields_named_for_what_they_are() -> None:
    before = {"status": "running", "request_id": "req_81", "updated_at": "2026-11-28T10:26:05Z"}
    after = {"status": "running", "request_id": "req_93", "updated_at": "2026-11-28T10:26:09Z"}
    found = compare(json.dumps(before), json.dumps(after))
    assert found == Comparison(True, ("request_id", "updated_at"), -1, 2)
    moved = json.dumps({**after, "status": "done"})
    assert not compare(json.dumps(before), moved).same


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (
            "Request ID: 7f3a9c2e\nError: quota exceeded",
            "Request ID: 1b2c3d4e\nError: quota exceeded",
        ),
        (
            "https://b.s3.amazonaws.com/f?X-Amz-Date=20261128T102605Z&X-Amz-Expires=300"
            "&X-Amz-Signature=ab12cd34",
            "https://b.s3.amazonaws.com/f?X-Amz-Date=20261128T102705Z&X-Amz-Expires=300"
            "&X-Amz-Signature=9f8e7d6c",
        ),
        (
            '{"requestId": "r1", "spanId": "s1", "createdAt": 17}',
            '{"requestId": "r2", "spanId": "s2", "createdAt": 18}',
        ),
        ('ETag: W/"5e3a"\ncontent', 'ETag: W/"7b1c"\ncontent'),
    ],
)
def test_labels_of_headers_query_strings_and_camel_case_fields_are_read(
    before: str, after: str
) -> None:
    assert same_meaning(before, after)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ('{"ts": 1764325565}', '{"ts": 1764325570}'),
        ("createdAt=1764325565123 ok", "createdAt=1764325570456 ok"),
        ('{"duration_ms": 1500000000}', '{"duration_ms": 1500000001}'),
        ('{"at": "10:26"}', '{"at": "10:27"}'),
    ],
)
def test_an_epoch_is_a_time_where_its_name_says_so(before: str, after: str) -> None:
    assert same_meaning(before, after)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("processing chunk_0042", "processing chunk_0043"),
        ("a.py:12:34: E501 line too long", "a.py:40:10: E501 line too long"),
        ("3:20 remaining", "3:10 remaining"),
        ("done in 5 min", "done in 3 min"),
        ("FAILED test_parse_utf8_input", "FAILED test_parse_utf16_input"),
        ("version 1.2.3", "version 1.2.4"),
        ("listening on 127.0.0.1:8080", "listening on 127.0.0.1:8081"),
        ("due 2026-11-28", "due 2026-11-29"),
        ("now: 5 items", "now: 6 items"),
        ("total at this time: 5", "total at this time: 6"),
        ('{"updated_at": "never"}', '{"updated_at": "2026-11-28T10:26:05Z"}'),
        ('{"a": 1, "b": 2}', '{"b": 2, "a": 1}'),
    ],
)
def test_what_could_be_progress_is_kept(before: str, after: str) -> None:
    assert not same_meaning(before, after)


def test_the_first_difference_that_counts_is_located() -> None:
    found = compare("at 10:26:05 3 failing", "at 10:26:09 2 failing")
    assert not found.same and found.at == len("at 10:26:09 ")
    assert found.set_aside == ("time stamp",)


def test_past_the_cap_of_differences_the_texts_differ() -> None:
    lines = [f"step {n} took {{}}ms" for n in range(MAX_DIFFERENCES + 1)]
    before = "\n".join(line.format(10) for line in lines)
    after = "\n".join(line.format(20) for line in lines)
    assert not compare(before, after).same
    assert compare(before, after, max_differences=MAX_DIFFERENCES + 1).same
    assert not compare("took 1ms", "took 2ms", max_differences=0).same


def test_a_difference_past_the_examined_head_counts() -> None:
    head = "x" * MEANING_CHARS
    assert not same_meaning(head + " took 1ms", head + " took 2ms")
    assert same_meaning("took 1ms " + head, "took 2ms " + head)


@patient
@given(st.text(max_size=200), st.text(max_size=200))
def test_a_text_is_the_same_as_itself_and_the_comparison_never_fails(
    first: str, second: str
) -> None:
    assert same_meaning(first, first)
    assert isinstance(compare(first, second), Comparison)
    assert compare(first, second).same == compare(second, first).same


def test_huge_texts_of_digits_differ_at_once() -> None:
    digits = "1234567890" * 26_214
    assert not compare(digits, digits[:-1] + "1").same
    assert not compare(digits, "0" + digits[1:]).same
