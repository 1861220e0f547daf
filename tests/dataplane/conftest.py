"""Fixtures of the data-plane tests (helpers in dataplane_harness.py): one real exchange with
its embedded store per test module (and xdist worker), torn down whatever happens; a failing
test's report carries the tails of every log, SeaweedFS's included."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from dataplane_harness import DataExchange, start, stop


@pytest.fixture(scope="module")
def dx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DataExchange]:
    made: list[DataExchange] = []
    root = tmp_path_factory.mktemp("dataplane")
    try:
        made.append(start(root))
        yield made[0]
    finally:
        if made:
            stop(made[0].exchange)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    report = yield
    if report.failed:
        for value in getattr(item, "funcargs", {}).values():
            if isinstance(value, DataExchange):
                report.sections.append(("process logs (tails)", value.logs()))
    return report
