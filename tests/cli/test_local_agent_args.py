"""The agents a local exchange starts: their command lines (``bourse.local.exchange``)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
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


def _python(folder: Path, mode: int = 0o755) -> Path:
    """A stand-in interpreter in ``folder``/bin (what is checked is who may reach it)."""
    (folder / "bin").mkdir(parents=True)
    python = folder / "bin" / "python"
    python.write_text("#!/bin/sh\n")
    python.chmod(mode)
    return python


@pytest.fixture
def public_dir() -> Iterator[Path]:
    """A folder every user may enter (pytest's own temp root is private to its user)."""
    with tempfile.TemporaryDirectory(dir="/tmp") as made:
        os.chmod(made, 0o755)
        yield Path(made)


def test_job_users_stay_on_auto_where_they_can_run_the_python(public_dir: Path) -> None:
    python = _python(public_dir / "env")
    os.chmod(public_dir / "env", 0o755)
    assert local.python_unreachable(python, public_dir / "env") is None
    assert local.job_users_args(0, python, public_dir / "env") == []


def test_job_users_are_off_where_the_python_is_in_a_private_home(public_dir: Path) -> None:
    home = public_dir / "root"
    python = _python(home / ".pyenv")
    os.chmod(home, 0o700)  # as /root is
    why = local.python_unreachable(python, home / ".pyenv")
    assert why is not None and f"cannot enter {home}" in why
    assert local.job_users_args(0, python, home / ".pyenv") == ["--job-users", "off"]
    assert local.job_users_args(1000, python, home / ".pyenv") == []  # not root: no job users


def test_job_users_are_off_where_only_the_owner_may_execute_the_python(
        public_dir: Path) -> None:
    python = _python(public_dir / "env", mode=0o700)
    os.chmod(public_dir / "env", 0o755)
    assert "may not execute" in (local.python_unreachable(python, public_dir / "env") or "")
    assert local.job_users_args(0, python, public_dir / "env") == ["--job-users", "off"]


def test_the_agent_gets_what_job_users_args_decides(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local, "job_users_args", lambda euid, python, prefix: ["--job-users",
                                                                              "off"])
    args = agent_args(tmp_path, monkeypatch)
    assert args[args.index("--job-users") + 1] == "off"
