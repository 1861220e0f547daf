"""The spot interruption notice of a cloud instance, watched through its metadata service.

EC2's instance metadata service, version 2 (IMDSv2): a session token is asked for with
``PUT /latest/api/token`` (its lifetime in ``X-aws-ec2-metadata-token-ttl-seconds``), and
every read carries it in ``X-aws-ec2-metadata-token``; a read without a valid one is refused
with 401. The notice is ``GET /latest/meta-data/spot/instance-action`` (parsed by
``core.interruption``). :class:`NoticeWatcher` polls it every few seconds, renews the token
before it lapses (and at once on a 401), logs the first failure of a run of them and keeps
polling: a metadata service that blinks must never stop the agent. Each notice is delivered
once; the daemon turns it into the reclaim path (``Agent.interrupted``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

import httpx

from bourse.core.interruption import (
    EXAMPLE_URL,
    BadNotice,
    Notice,
    base_url,
    parse_notice,
    seconds_left,
)
from bourse.protocol.agent import Interruption, Preempt

log = logging.getLogger("bourse.agent.imds")
DEFAULT_URL = EXAMPLE_URL  # EC2's link-local metadata address
URL_ENV = "BOURSE_METADATA_URL"
TOKEN_PATH = "/latest/api/token"
ACTION_PATH = "/latest/meta-data/spot/instance-action"
TTL_HEADER = "X-aws-ec2-metadata-token-ttl-seconds"
TOKEN_HEADER = "X-aws-ec2-metadata-token"
TOKEN_TTL_S = 21600  # six hours, the most IMDSv2 gives
RENEW_AT = 0.9  # of a token's lifetime
TIMEOUT_S = 2.0  # the service is on the machine itself: anything slower is a failure
POLL_S = 5.0


class MetadataError(Exception):
    """The metadata service did not answer as IMDSv2 does."""


class QuietPolls(logging.Filter):
    """httpx logs every request at INFO: a look every 5 s would fill the agent's log with
    "404 Not Found". What the looks find is logged here instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not any(ACTION_PATH in str(arg) for arg in record.args or ())


def quiet_polls() -> None:
    logger = logging.getLogger("httpx")
    if not any(isinstance(f, QuietPolls) for f in logger.filters):
        logger.addFilter(QuietPolls())


class Metadata:
    """Reads from an IMDSv2 service with a session token, renewed before it lapses."""

    def __init__(self, url: str, *, ttl_s: int = TOKEN_TTL_S,
                 clock: Callable[[], float] = time.monotonic,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        # trust_env=False: the service is on the machine itself, never behind a proxy
        self._http = httpx.AsyncClient(base_url=base_url(url), timeout=TIMEOUT_S,
                                       trust_env=False, transport=transport)
        self.ttl_s, self.clock = ttl_s, clock
        self._token: str | None = None
        quiet_polls()
        self._renew_at = 0.0

    async def aclose(self) -> None:
        await self._http.aclose()

    async def token(self) -> str:
        if self._token is None or self.clock() >= self._renew_at:
            asked = self.clock()
            response = await self._http.put(TOKEN_PATH, headers={TTL_HEADER: str(self.ttl_s)})
            if response.status_code != 200 or not response.text.strip():
                raise MetadataError(f"no session token: HTTP {response.status_code} to PUT "
                                    f"{TOKEN_PATH} (is IMDSv2 enabled on this instance?)")
            self._token, self._renew_at = response.text.strip(), asked + self.ttl_s * RENEW_AT
        return self._token

    async def get(self, path: str) -> tuple[int, str]:
        """(HTTP status, body) of a read; a token the service refuses is renewed once."""
        response = await self._read(path)
        if response.status_code == 401:  # lapsed, or the service forgot it: a new one
            self._token = None
            response = await self._read(path)
        return response.status_code, response.text

    async def _read(self, path: str) -> httpx.Response:
        return await self._http.get(path, headers={TOKEN_HEADER: await self.token()})


class NoticeWatcher:
    """Polls the interruption notice; ``poll_once`` is one look, ``run`` the loop."""

    def __init__(self, metadata: Metadata, on_notice: Callable[[Notice], Awaitable[None]],
                 *, interval_s: float = POLL_S) -> None:
        self.metadata, self.on_notice, self.interval_s = metadata, on_notice, interval_s
        self.seen: set[Notice] = set()
        self.failing: str | None = None  # the error of the current run of failures

    async def poll_once(self) -> Notice | None:
        """A notice not seen before, else None; a failure is logged and swallowed."""
        try:
            notice = parse_notice(*await self.metadata.get(ACTION_PATH))
        except (httpx.HTTPError, MetadataError, BadNotice) as exc:
            self._failed(f"{type(exc).__name__}: {exc}")
            return None
        if self.failing is not None:
            log.info("the metadata service answers again")
            self.failing = None
        if notice is None or notice in self.seen:
            return None
        self.seen.add(notice)
        return notice

    def _failed(self, error: str) -> None:
        if self.failing is None:
            log.warning("cannot read the spot interruption notice (still trying every "
                        "%g s): %s", self.interval_s, error)
        self.failing = error

    async def run(self) -> None:
        try:
            while True:
                await self._once()
                await asyncio.sleep(self.interval_s)
        finally:
            await self.metadata.aclose()

    async def _once(self) -> None:
        try:
            notice = await self.poll_once()
            if notice is not None:
                await self.on_notice(notice)
        except Exception:  # a bug here must not take the agent (and its jobs) down
            log.exception("watching the spot interruption notice failed; still watching")


def watcher(url: str, interval_s: float,
            on_notice: Callable[[Notice], Awaitable[None]]) -> NoticeWatcher:
    return NoticeWatcher(Metadata(url), on_notice, interval_s=interval_s)


def interruption(notice: Notice, now: float, stopped_at: float | None = None) -> Interruption:
    """What the coordinator is told: the time left from ``now``, and when the node stopped
    its jobs on it."""
    return Interruption(notice_s=seconds_left(notice, now), action=notice.action,
                        reason=notice.describe(), stopped_at=stopped_at)


def preempt(notice: Notice, now: float) -> Preempt:
    """What the node does by itself: its jobs stop within the time left."""
    return Preempt(notice_s=seconds_left(notice, now), reason=notice.describe())
