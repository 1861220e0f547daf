"""The spot interruption notice's answer, read as EC2 writes it (docs: "Spot Instance
interruption notices", instance-action), and the time it leaves."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bourse.core.interruption import (
    BadNotice,
    Notice,
    base_url,
    parse_notice,
    parse_time,
    seconds_left,
)

NOON = datetime(2026, 12, 1, 12, 0, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(("status", "body", "notice"), [
    (404, "Not Found", None),
    (404, "", None),
    (200, '{"action": "terminate", "time": "2026-12-01T12:00:00Z"}', Notice("terminate", NOON)),
    (200, '{"action": "stop", "time": "2026-12-01T12:00:00Z"}', Notice("stop", NOON)),
    (200, '{"action": "hibernate", "time": "2026-12-01T12:00:00Z"}', Notice("hibernate", NOON)),
    (200, '{"action": "Terminate", "time": "2026-12-01T12:00:00+00:00"}',
     Notice("terminate", NOON)),
    (200, '{"action": "terminate", "time": "2026-12-01T13:00:00+01:00"}',
     Notice("terminate", NOON)),
    (200, '{"action": "terminate", "time": "2026-12-01T12:00:00"}', Notice("terminate", NOON)),
    (200, '{"action": "terminate", "time": "2026-12-01T12:00:00.000Z", "extra": 1}',
     Notice("terminate", NOON)),
    (200, '{"action": "rebalance", "time": "2026-12-01T12:00:00Z"}', Notice("rebalance", NOON)),
])
def test_answers_read_as_notices(status: int, body: str, notice: Notice | None) -> None:
    assert parse_notice(status, body) == notice


@pytest.mark.parametrize(("status", "body", "says"), [
    (500, "oops", "HTTP 500"),
    (401, "", "HTTP 401"),
    (200, "<html>captive portal</html>", "not JSON"),
    (200, '["terminate"]', "not a JSON object"),
    (200, '{"time": "2026-12-01T12:00:00Z"}', "action None"),
    (200, '{"action": "", "time": "2026-12-01T12:00:00Z"}', "action ''"),
    (200, '{"action": 3, "time": "2026-12-01T12:00:00Z"}', "action 3"),
    (200, '{"action": "terminate"}', "time None"),
    (200, '{"action": "terminate", "time": 1796126400}', "not an ISO 8601 string"),
    (200, '{"action": "terminate", "time": "tomorrow"}', "not an ISO 8601 time"),
])
def test_other_answers_are_refused_saying_why(status: int, body: str, says: str) -> None:
    with pytest.raises(BadNotice, match=says.replace("(", r"\(")):
        parse_notice(status, body)


@pytest.mark.parametrize(("now", "cap", "left"), [
    (NOON - 120, 3600, 120.0),
    (NOON - 0.5, 3600, 0.5),
    (NOON, 3600, 0.0),
    (NOON + 30, 3600, 0.0),  # past: the machine may go at any moment
    (NOON - 7200, 3600, 3600.0),  # a far notice is capped (a reclaim's notice is at most 1 h)
    (NOON - 7200, 60, 60.0),
])
def test_seconds_left(now: float, cap: float, left: float) -> None:
    assert seconds_left(Notice("terminate", NOON), now, cap) == left


def test_a_notice_describes_itself_in_utc() -> None:
    assert Notice("stop", NOON).describe() == (
        "spot interruption notice: stop at 2026-12-01T12:00:00Z")
    assert parse_time(" 2026-12-01T12:00:00Z ") == NOON


@pytest.mark.parametrize(("url", "base"), [
    ("http://169.254.169.254", "http://169.254.169.254"),
    ("http://169.254.169.254/", "http://169.254.169.254"),
    ("http://[fd00:ec2::254]", "http://[fd00:ec2::254]"),
    (" http://127.0.0.1:8111 ", "http://127.0.0.1:8111"),
])
def test_metadata_urls(url: str, base: str) -> None:
    assert base_url(url) == base


@pytest.mark.parametrize(("url", "says"), [
    ("169.254.169.254", "not an http:// URL"),
    ("ftp://169.254.169.254", "not an http:// URL"),
    ("http://", "not an http:// URL"),
    ("http://169.254.169.254/latest/meta-data", "has a path"),
    ("http://169.254.169.254?x=1", "has a path"),
])
def test_bad_metadata_urls_say_why(url: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        base_url(url)
