"""The ``project`` fixture: an empty project directory, and no leftovers in this process from
the app modules the in-process runs imported."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from app_harness import Project
from exchange_harness import ExchangeUnderTest, local_exchange


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    root = tmp_path / "project"
    root.mkdir()
    path, modules = list(sys.path), set(sys.modules)
    yield Project(root)
    sys.path[:] = path  # the loader puts the app's folder first on sys.path
    for name in set(sys.modules) - modules:
        if name == "__bourse_app__" or str(tmp_path) in str(getattr(sys.modules[name],
                                                                     "__file__", "")):
            del sys.modules[name]


@pytest.fixture(scope="session")
def exchange(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExchangeUnderTest]:
    """One real local exchange per test worker, shared by the tests that need one."""
    with local_exchange(tmp_path_factory.mktemp("exchange")) as running:
        yield running
