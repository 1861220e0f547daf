"""The agents a local exchange starts: their command lines (``bourse.local.exchange``)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from bourse.local import exchange as local


def agent_args(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **settings: Any) -> list[str]:
    started: list[list[str]] = []
    monkeypatch.setattr(local, "spawn", lambda args, log, env=None: started.append(args) or 1)
    client: Any = SimpleNamespace(create_enrollment=lambda name: SimpleNamespace(token="e"))
    local.LocalExchange(tmp_path, **settings)._start_agent(client, "http://h:1", 0, None)
    [args] = started
    return args


def test_agents_sample_at_their_default_unless_told(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    assert "--metrics-interval" not in agent_args(tmp_path, monkeypatch)


def test_an_interval_set_on_the_exchange_reaches_its_agents(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    args = agent_args(tmp_path, monkeypatch, metrics_interval_s=1.0)
    assert args[args.index("--metrics-interval") + 1] == "1.0"
