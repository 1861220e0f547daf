"""One agent per work dir (``bourse.agent.lock``): a second agent on the same work dir is
refused with the first one's pid; a killed agent leaves no stale lock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bourse.agent.lock import AgentRunning, hold, holder, lock_path
from bourse.local.processes import free_port

HOLD = ("import sys, time; from pathlib import Path; from bourse.agent.lock import hold\n"
        "with hold(Path(sys.argv[1])):\n    print('held', flush=True); time.sleep(600)")


def test_a_second_holder_is_refused_with_the_first_ones_pid(tmp_path: Path) -> None:
    with hold(tmp_path), pytest.raises(AgentRunning) as refused, hold(tmp_path):
        pass
    assert f"pid {os.getpid()}" in refused.value.message
    assert str(tmp_path) in refused.value.message


def test_holder_names_the_holding_pid_while_it_holds(tmp_path: Path) -> None:
    assert holder(tmp_path) is None  # no lock file yet
    with hold(tmp_path):
        assert holder(tmp_path) == os.getpid()
    assert holder(tmp_path) is None
    with hold(tmp_path):  # free again
        pass


def test_the_lock_file_is_the_agents_only(tmp_path: Path) -> None:
    with hold(tmp_path):
        assert lock_path(tmp_path).stat().st_mode & 0o777 == 0o600


def test_a_killed_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "held\n"
        assert holder(tmp_path) == proc.pid
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert holder(tmp_path) is None
    with hold(tmp_path):
        assert holder(tmp_path) == os.getpid()


def test_bourse_agent_refuses_a_work_dir_another_agent_holds(tmp_path: Path) -> None:
    with hold(tmp_path / "work"):
        done = subprocess.run(
            [sys.executable, "-m", "bourse", "agent", "--server",
             f"http://127.0.0.1:{free_port()}", "--token", "t", "--work-dir",
             str(tmp_path / "work")], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert f"another agent (pid {os.getpid()}) is already running" in done.stderr
    assert "--work-dir" in done.stderr  # how to fix it
