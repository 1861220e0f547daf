"""Fixtures of the UI tests: ``site`` (the app in process, for the plain HTTP tests); the browser
tests' fixtures are in ``test_browser.py``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from ui_site import Site, open_site


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def site(tmp_path: Path) -> AsyncIterator[Site]:
    async with open_site(tmp_path) as opened:
        yield opened
