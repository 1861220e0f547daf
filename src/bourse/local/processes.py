"""Starting and stopping bourse processes in the background.

A process is known by its pid *and* its start time (`Process`): a pid alone may be reused by
an unrelated process once ours has ended, and ``bourse down`` must never signal one of those.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bourse.agent.shim import start_time

POLL_S = 0.05


@dataclass(frozen=True, slots=True)
class Process:
    """One process by pid and start time (clock ticks since boot, as the agent records its
    jobs: ``shim.start_time``); ``started`` None: a record written before start times were
    kept, checked by its command line only."""

    pid: int
    started: int | None = None

    def to_json(self) -> dict[str, int | None]:
        return {"pid": self.pid, "started": self.started}


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether ``bourse server`` could listen on ``port`` (it sets SO_REUSEADDR too, so the
    connections of a coordinator that just died, in TIME_WAIT, do not hold the port)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def spawn(args: Sequence[str], log: Path, env: dict[str, str] | None = None) -> Process:
    """``python -m bourse ARGS`` in its own session, output appended to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "bourse", *args], stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=env)
    return Process(proc.pid, start_time(proc.pid))


def identify(pid: int) -> Process | None:
    """The process running as ``pid`` now, with its start time; None when there is none."""
    started = start_time(pid)
    return None if started is None else Process(pid, started)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return False  # a child of ours that ended: reaped now
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def command_line(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def running(process: Process, marker: str) -> bool:
    """Whether ``process`` still runs: the same pid, started at the same time (or, for a
    record without a start time, with ``marker`` among its arguments)."""
    return same(process) and (process.started is not None
                              or marker in command_line(process.pid))


def same(process: Process) -> bool:
    """The pid runs (not a zombie) and started when ``process`` did, if that is known."""
    if not alive(process.pid):
        return False
    now = start_time(process.pid)
    return now is not None and process.started in (None, now)


def stop_all(processes: Sequence[Process], grace_s: float = 15.0) -> list[Process]:
    """SIGTERM each process's group (just the process when it leads none), wait for all of
    them, SIGKILL what is left after ``grace_s``; the processes that had to be killed.
    The caller has checked that they are its own (`running`)."""
    for process in processes:
        _signal(process, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    left = list(processes)
    while left and time.monotonic() < deadline:
        time.sleep(POLL_S)
        left = [p for p in left if same(p)]
    for process in left:
        _signal(process, signal.SIGKILL)
    for process in left:
        _wait_gone(process)
    return left


def stop(process: Process, grace_s: float = 15.0) -> bool:
    """`stop_all` for one process: True if it had to be killed."""
    return bool(stop_all([process], grace_s))


def _signal(process: Process, number: signal.Signals) -> None:
    if not same(process):
        return  # ended (and its pid maybe reused) since it was checked
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(process.pid) == process.pid:
            os.killpg(process.pid, number)
        else:
            os.kill(process.pid, number)


def _wait_gone(process: Process, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while same(process) and time.monotonic() < deadline:
        time.sleep(POLL_S)
