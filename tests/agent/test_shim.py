"""The /bin/sh shim on real processes: signals, exit file, builtins; and /proc inspection."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from bourse.agent import shim
from bourse.agent.shim import AttemptDir

ENV = {"PATH": "/usr/bin:/bin"}


def run(tmp_path: Path, command: list[str]) -> tuple[AttemptDir, int]:
    adir = AttemptDir.of(tmp_path, "j", 1)
    adir.create()
    return adir, shim.spawn(adir, adir.work, command, ENV)


def wait_for(path: Path, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists() or not path.read_bytes():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.005)


def test_sigterm_to_the_group_stops_the_job_and_the_shim_records_it(tmp_path: Path) -> None:
    adir, pid = run(tmp_path, ["sh", "-c", "echo up; exec sleep 30"])
    assert os.getpgid(pid) == pid
    wait_for(adir.stdout)
    os.killpg(pid, signal.SIGTERM)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 143
    assert shim.read_int(adir.exit_file) == 143
    assert sorted(p.name for p in adir.root.iterdir() if p.is_file()) == ["exit", "pid"]


def test_exit_status_of_builtins_and_missing_commands(tmp_path: Path) -> None:
    for command, code in ((["exit", "3"], 3), (["no-such-command-xyz"], 127), (["true"], 0)):
        adir, pid = run(tmp_path / str(code), command)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == code
        assert shim.read_int(adir.exit_file) == code
        assert shim.read_int(adir.pid_file) == pid
    assert b"not found" in AttemptDir.of(tmp_path / "127", "j", 1).stderr.read_bytes()


def test_the_exit_file_does_not_depend_on_the_jobs_path(tmp_path: Path) -> None:
    adir = AttemptDir.of(tmp_path, "j", 1)
    adir.create()
    pid = shim.spawn(adir, adir.work, ["/bin/sh", "-c", "exit 9"], {"PATH": "/nowhere"})
    os.waitpid(pid, 0)
    assert shim.read_int(adir.exit_file) == 9


def test_start_time_tells_a_live_process_from_a_dead_one(tmp_path: Path) -> None:
    _, pid = run(tmp_path, ["sleep", "30"])
    started = shim.start_time(pid)
    assert started is not None
    assert shim.is_alive(pid, started)
    assert not shim.is_alive(pid, started + 1)  # as if the pid had been reused
    assert shim.start_time(pid, since=time.time() + 60) is None
    os.killpg(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while shim.is_alive(pid, started):  # until it is a zombie, which is not alive
        assert time.monotonic() < deadline
        time.sleep(0.005)
    os.waitpid(pid, 0)
    assert shim.start_time(pid) is None


def test_dot_job_ids_stay_inside_the_jobs_folder(tmp_path: Path) -> None:
    assert AttemptDir.of(tmp_path, "..", 1).root.parent.parent == tmp_path / "jobs"
