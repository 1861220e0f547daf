"""What the two fuzzers share: the example budget, hypothesis settings for CI, and a bridge
from hypothesis (which runs its examples synchronously, in a worker thread) to the test's
event loop, where the exchange runs.

``BOURSE_FUZZ_EXAMPLES`` sets the budget (examples per API operation and mode; sequences of
agent frames) for a longer run; every run is derandomized, so reproducible (docs/security.md).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from hypothesis import HealthCheck, Phase, settings

T = TypeVar("T")
BUDGET_ENV = "BOURSE_FUZZ_EXAMPLES"


def budget(default: int) -> int:
    return int(os.environ.get(BUDGET_ENV, default))


def fuzz_settings(examples: int) -> settings:
    """Derandomized, no example database, no shrinking (a failure prints the example as
    found; CI time stays bounded), no deadline (the machine is shared)."""
    return settings(max_examples=examples, derandomize=True, database=None, deadline=None,
                    phases=(Phase.explicit, Phase.generate), print_blob=False,
                    suppress_health_check=list(HealthCheck))


class Bridge:
    """Runs coroutines on the loop that created it, from another thread."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    async def call(self, function: Callable[[], None]) -> None:
        """Run a hypothesis test (``function``) in a thread while this loop keeps serving."""
        await asyncio.to_thread(function)
