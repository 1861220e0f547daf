"""A cloud's spot interruption notice, read from its instance metadata: pure.

EC2 serves ``/latest/meta-data/spot/instance-action`` (IMDSv2): 404 while there is no notice,
then 200 with ``{"action": "terminate" | "stop" | "hibernate", "time": "2026-12-01T12:00:00Z"}``
about two minutes before the instance goes at ``time`` (UTC). :func:`parse_notice` turns an
answer into a :class:`Notice`; :func:`seconds_left` says how long the node has left.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlsplit

EXAMPLE_URL = "http://169.254.169.254"  # EC2's link-local metadata address
ACTIONS = ("terminate", "stop", "hibernate")  # what EC2 documents; another word is kept as is
MAX_ACTION = 64


class BadNotice(ValueError):
    """An answer that is neither "no notice" nor a notice we can read."""


@dataclass(frozen=True)
class Notice:
    """The machine is taken back: ``action`` at ``at`` (seconds since the epoch, UTC)."""

    action: str
    at: float

    def describe(self) -> str:
        when = datetime.fromtimestamp(self.at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return f"spot interruption notice: {self.action} at {when}"


def parse_notice(status: int, body: str) -> Notice | None:
    """The notice an ``instance-action`` answer holds; None for 404 (no notice)."""
    if status == 404:
        return None
    if status != 200:
        raise BadNotice(f"the metadata service answered HTTP {status}")
    try:
        data = json.loads(body)
    except ValueError:
        raise BadNotice(f"not JSON: {body[:80]!r}") from None
    if not isinstance(data, dict):
        raise BadNotice(f"not a JSON object: {body[:80]!r}")
    return Notice(action=_action(data.get("action")), at=parse_time(data.get("time")))


def _action(value: object) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_ACTION:
        raise BadNotice(f"action {value!r} is not one of {', '.join(ACTIONS)}")
    return value.strip().lower()


def parse_time(value: object) -> float:
    """An ISO 8601 time (EC2 writes ``2026-12-01T12:00:00Z``); one without a zone is UTC."""
    if not isinstance(value, str):
        raise BadNotice(f"time {value!r} is not an ISO 8601 string")
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        raise BadNotice(f"time {value!r} is not an ISO 8601 time") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def seconds_left(notice: Notice, now: float, cap: float = 3600.0) -> float:
    """Seconds until the machine goes, from ``now``: 0 once past, at most ``cap``."""
    return min(cap, max(0.0, notice.at - now))


def base_url(url: str) -> str:
    """A metadata service's base URL, without a trailing slash; ValueError saying why not."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname or " " in parts.netloc:
        raise ValueError(f"{url!r} is not an http:// URL, e.g. {EXAMPLE_URL}")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(f"{url!r} has a path: give the service's base URL, e.g. {EXAMPLE_URL}")
    return f"{parts.scheme}://{parts.netloc}"
