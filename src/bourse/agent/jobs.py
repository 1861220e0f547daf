"""What an agent's work dir says about its jobs, for whoever must stop them while no agent
runs (``bourse down``): jobs outlive their agent by design (a restarted agent re-adopts them),
so stopping a node's work means stopping them too."""

from __future__ import annotations

import signal
from pathlib import Path

from bourse.agent.shim import is_alive, signal_group
from bourse.agent.spool import AttemptStatus, Spool

SPOOL_FILE = "spool.db"


def kill_jobs(work_dir: Path) -> list[int]:
    """SIGKILL the process group of every attempt the agent of ``work_dir`` started that still
    runs — each one still the process it started (same pid and start time, never a reused
    pid); returns their pids. Not for a running agent: it would report them lost."""
    path = work_dir / SPOOL_FILE
    if not path.exists():
        return []
    spool, killed = Spool(path), []
    try:
        for record in spool.attempts(AttemptStatus.STARTING, AttemptStatus.RUNNING):
            if record.pid and is_alive(record.pid, record.proc_start):
                signal_group(record.pid, signal.SIGKILL)
                killed.append(record.pid)
    finally:
        spool.close()
    return killed
