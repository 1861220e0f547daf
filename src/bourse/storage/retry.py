"""Retry of transient store failures: the policy is pure (attempt number in, delay out); the
shell sleeps through an injectable ``sleep`` so tests never wait."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from bourse.storage.errors import StoreUnavailable

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """``attempts`` tries in all, waiting ``base * 2**n`` seconds (at most ``cap``) between
    them. Only `StoreUnavailable` (connection errors, timeouts, 5xx, throttling) is retried:
    access denied or a missing object will not change by trying again."""

    attempts: int = 4
    base: float = 0.5
    cap: float = 10.0

    def delay(self, failures: int) -> float | None:
        """Seconds to wait after ``failures`` failed tries, or None when it is time to give up."""
        if failures >= self.attempts:
            return None
        return min(self.cap, self.base * 2.0 ** (failures - 1))


Sleep = Callable[[float], Awaitable[None]]


async def retrying(call: Callable[[], Awaitable[T]], policy: RetryPolicy, what: str, *,
                      sleep: Sleep = asyncio.sleep) -> T:
    """``call()``, tried again after transient failures as ``policy`` allows."""
    failures = 0
    while True:
        try:
            return await call()
        except StoreUnavailable as exc:
            failures += 1
            delay = policy.delay(failures)
            if delay is None:
                raise
            log.warning("%s failed (%s); retry %d/%d in %.1fs", what, exc.message, failures,
                        policy.attempts - 1, delay)
            await sleep(delay)
