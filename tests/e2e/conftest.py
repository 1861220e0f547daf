"""Fixtures of the end-to-end tests (the helpers are in harness.py, tcp_proxy.py, netns.py).

``cluster`` owns every process a test starts and kills them all at teardown, pass or fail; when
a test fails its report gets a section with the tail of every process's log.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from harness import Cluster, Exchange
from tcp_proxy import TcpProxy

KEEP_ALIVE_S = 1.0
# Long enough that a busy 2-core machine never delays a heartbeat's acknowledgement past a
# lease (attempts fence themselves just before it ends), short enough that loss tests are quick.
LOSS_WINDOW_S = 10.0


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    report = yield
    if report.failed:
        for cluster in clusters_of(item):
            report.sections.append(("process logs (tails)", cluster.logs()))
    return report


def clusters_of(item: pytest.Item) -> list[Cluster]:
    """The clusters a test used, directly or through an Exchange (of any fixture scope)."""
    found = {}
    for value in getattr(item, "funcargs", {}).values():
        cluster = value.cluster if isinstance(value, Exchange) else value
        if isinstance(cluster, Cluster):
            found[id(cluster)] = cluster
    return list(found.values())


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    made = Cluster(tmp_path)
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def exchange_factory(cluster: Cluster) -> Callable[..., Exchange]:
    """A started coordinator: ``exchange_factory(keep_alive=..., host=..., loss_window=...)``."""

    def make(keep_alive: float = KEEP_ALIVE_S, host: str = "127.0.0.1",
             loss_window: float = LOSS_WINDOW_S) -> Exchange:
        return Exchange(cluster, keep_alive, host, loss_window=loss_window).start()

    return make


@pytest.fixture
def exchange(exchange_factory: Callable[..., Exchange]) -> Exchange:
    return exchange_factory()


@pytest.fixture
def proxy_to(cluster: Cluster) -> Callable[[Exchange], TcpProxy]:
    """A cuttable TCP proxy in front of an exchange's coordinator."""

    def make(exchange: Exchange) -> TcpProxy:
        coordinator = exchange.coordinator
        proxy = TcpProxy(coordinator.host, coordinator.port)
        cluster.closers.append(proxy.close)
        return proxy

    return make
