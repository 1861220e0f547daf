"""The simulated AWS account (moto behind the fault proxy), one per session, emptied before
each test that uses it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sim as simulator


@pytest.fixture(scope="session")
def _account() -> Iterator[simulator.Sim]:
    running = simulator.start()
    yield running
    running.stop()


@pytest.fixture
def sim(_account: simulator.Sim) -> simulator.Sim:
    _account.reset()
    return _account
