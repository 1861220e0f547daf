"""The event loop the coordinator and the agent run on (``bourse.cli.loop``)."""

from __future__ import annotations

import asyncio

import pytest
import uvloop

from bourse.cli import loop


async def _loop_type() -> type[asyncio.AbstractEventLoop]:
    return type(asyncio.get_running_loop())


def test_long_running_commands_run_on_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BOURSE_EVENT_LOOP", raising=False)
    assert issubclass(loop.run(_loop_type()), uvloop.Loop)


def test_asyncio_s_own_loop_on_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOURSE_EVENT_LOOP", "asyncio")
    assert not issubclass(loop.run(_loop_type()), uvloop.Loop)


def test_an_unknown_loop_name_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOURSE_EVENT_LOOP", "tokio")
    with pytest.raises(loop.InvalidInput, match="BOURSE_EVENT_LOOP"):
        loop.run(_loop_type())
