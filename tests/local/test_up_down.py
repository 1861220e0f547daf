"""``bourse up`` and ``bourse down`` as real processes: what is already running for a data dir
is adopted, never doubled, and ``down`` stops all of it (``bourse.local``)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from bourse.local.processes import free_port

pytestmark = pytest.mark.slow
CLI_TIMEOUT_S = 180.0


class Up:
    """The real ``bourse up``/``down`` on one data dir, under a BOURSE_HOME of its own;
    every pid it ever reported is remembered, so that the test can kill what is left."""

    def __init__(self, root: Path) -> None:
        self.data_dir = root / "local"
        self.env = {**os.environ, "BOURSE_HOME": str(root / "home"), "PYTHONUNBUFFERED": "1"}
        self.port = free_port()
        self.seen: dict[int, float] = {}  # pid -> start time

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "bourse", *args, "--data-dir",
                               str(self.data_dir)], env=self.env, text=True,
                              capture_output=True, timeout=CLI_TIMEOUT_S, check=False)

    def up(self, agents: int = 2) -> dict[str, Any]:
        done = self.cli("up", "--agents", str(agents), "--port", str(self.port),
                        "--keep-alive", "1", "--json")
        assert done.returncode == 0, done.stderr + self.logs()
        status: dict[str, Any] = json.loads(done.stdout)
        for pid in [status["server_pid"], *status["agent_pids"]]:
            self.remember(int(pid))
        return status

    def remember(self, pid: int) -> None:
        with contextlib.suppress(psutil.NoSuchProcess):
            self.seen.setdefault(pid, psutil.Process(pid).create_time())

    def weed_pid(self) -> int:
        pid = int((self.data_dir / "server" / "seaweed" / "weed.pid").read_text())
        self.remember(pid)
        return pid

    def logs(self) -> str:
        return "\n".join(f"--- {log} ---\n{log.read_text(errors='replace')[-3000:]}"
                         for log in sorted(self.data_dir.glob("*/*.log")))

    def kill_left(self) -> list[int]:
        """SIGKILL whatever the test saw and is still running (the same process: same start
        time); the pids killed."""
        left = [pid for pid, started in self.seen.items() if running(pid, started)]
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        return left


def running(pid: int, started: float | None = None) -> bool:
    try:
        proc = psutil.Process(pid)
        return proc.status() != psutil.STATUS_ZOMBIE and (
            started is None or proc.create_time() == started)
    except psutil.NoSuchProcess:
        return False


def wait_gone(pid: int, timeout: float = 30.0) -> None:
    with contextlib.suppress(psutil.NoSuchProcess):
        psutil.Process(pid).wait(timeout)


@pytest.fixture
def local(tmp_path: Path) -> Iterator[Up]:
    made = Up(tmp_path)
    try:
        yield made
    finally:
        made.kill_left()


def test_up_after_a_coordinator_crash_keeps_the_agents_and_down_stops_everything(
        local: Up) -> None:
    first = local.up(agents=2)
    agents = set(first["agent_pids"])
    first_store = local.weed_pid()
    os.kill(int(first["server_pid"]), signal.SIGKILL)
    wait_gone(int(first["server_pid"]))

    second = local.up(agents=2)

    assert second["server_pid"] != first["server_pid"]  # the dead coordinator was restarted
    assert set(second["agent_pids"]) == agents
    store = local.weed_pid()
    assert store != first_store  # the killed coordinator's store was stopped, one started
    live = [pid for pid, started in local.seen.items() if running(pid, started)]
    assert sorted(live) == sorted({*agents, second["server_pid"], store})

    done = local.cli("down")

    assert done.returncode == 0, done.stderr
    left = [pid for pid, started in local.seen.items() if running(pid, started)]
    assert left == [], f"left running: {left}\n{done.stdout}"
    for pid in [*agents, second["server_pid"]]:
        assert str(pid) in done.stdout


def test_down_finds_what_runs_without_its_record_and_stops_the_orphaned_store(
        local: Up) -> None:
    first = local.up(agents=2)
    store = local.weed_pid()
    os.kill(int(first["server_pid"]), signal.SIGKILL)  # its store runs on, in its own session
    wait_gone(int(first["server_pid"]))
    (local.data_dir / "up.json").unlink()  # the agents are found by their work dirs' locks

    done = local.cli("down")

    assert done.returncode == 0, done.stderr
    left = [pid for pid, started in local.seen.items() if running(pid, started)]
    assert left == [], f"left running: {left}\n{done.stdout}"
    assert f"store (pid {store})" in done.stdout
    assert "agent-0" in done.stdout and "agent-1" in done.stdout


def test_down_leaves_alone_a_process_that_reused_a_recorded_pid(local: Up) -> None:
    """A record of an older bourse (pids only) whose pids now belong to someone else."""
    strangers = [subprocess.Popen(["sleep", "60"], start_new_session=True) for _ in range(2)]
    try:
        local.data_dir.mkdir(parents=True)
        (local.data_dir / "up.json").write_text(json.dumps({
            "url": "http://127.0.0.1:9", "server_pid": strangers[0].pid,
            "agent_pids": [strangers[1].pid]}))

        done = local.cli("down")

        assert done.returncode == 0, done.stderr
        assert [p.poll() for p in strangers] == [None, None]  # still running
        assert "already gone: agent-0" in done.stdout and "coordinator" in done.stdout
        assert not (local.data_dir / "up.json").exists()
    finally:
        for proc in strangers:
            proc.kill()
            proc.wait()
