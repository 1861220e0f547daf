"""Fixtures of the agent tests (the helpers themselves are in agent_harness.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from agent_harness import Agent


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def agent_factory(tmp_path: Path) -> AsyncIterator[Callable[..., Agent]]:
    made: list[Agent] = []

    def make(root: Path | None = None, **runtime_options: Any) -> Agent:
        """``root``: where the agent's files go (default: under the test's tmp_path)."""
        made.append(Agent(root or tmp_path / f"agent{len(made)}", **runtime_options))
        return made[-1]

    yield make
    for agent in made:
        await agent.stop()
        agent.kill_jobs()


@pytest.fixture
def agent(agent_factory: Callable[..., Agent]) -> Agent:
    return agent_factory()
