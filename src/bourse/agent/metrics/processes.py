"""A job's processes and what they use: CPU share between two readings, resident memory
(Linux: the process table is read from /proc).

A job's processes are its shim's process group (the shim starts a new session, and its pid is
the group's id) plus the shim's descendants that left the group (``setsid`` launchers).
CPU is measured from each process's CPU time: the share over the interval is the CPU seconds
added since the previous reading divided by the seconds elapsed (100 % is one core). A process
is known by (pid, start time), so a reused pid never inherits another's time.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import psutil

ProcKey = tuple[int, float]  # (pid, start time)


@dataclass(frozen=True)
class ProcReading:
    key: ProcKey
    cpu_s: float  # user + system seconds so far
    rss: int


@dataclass(frozen=True)
class ProcessTable:
    """Every process this agent can see, by process group and by parent: read once per
    sampling round (psutil's ``children()`` would scan /proc again for each job)."""

    groups: Mapping[int, list[int]]
    children: Mapping[int, list[int]]

    @classmethod
    def scan(cls) -> ProcessTable:
        groups: dict[int, list[int]] = {}
        children: dict[int, list[int]] = {}
        for pid in psutil.pids():
            ids = _parent_and_group(pid)
            if ids is not None:
                children.setdefault(ids[0], []).append(pid)
                groups.setdefault(ids[1], []).append(pid)
        return cls(groups, children)

    def job_pids(self, root: int) -> set[int]:
        """The job's process group, and the shim's descendants that left it."""
        pids = set(self.groups.get(root, ()))
        seen, stack = {root}, [root]
        while stack:
            for child in self.children.get(stack.pop(), ()):
                if child not in seen:
                    seen.add(child)
                    pids.add(child)
                    stack.append(child)
        return pids


def _parent_and_group(pid: int) -> tuple[int, int] | None:
    """(ppid, pgid) from one read of /proc/<pid>/stat (fields 4 and 5, after the command name,
    which may itself hold spaces and parentheses); None for a process gone meanwhile."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2:].split()
    return int(fields[1]), int(fields[2])


def read_processes(pids: Iterable[int]) -> list[ProcReading]:
    found = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            with proc.oneshot():
                times = proc.cpu_times()
                found.append(ProcReading((pid, proc.create_time()), times.user + times.system,
                                         proc.memory_info().rss))
    return found


def cpu_percent(previous: Mapping[ProcKey, float] | None, since: float | None,
                current: Iterable[ProcReading], now: float) -> float | None:
    """The CPU share over ``since..now``; with no previous reading, the average since the
    oldest process started. A process new since ``since`` counts all its CPU time."""
    current = list(current)
    if not current:
        return 0.0
    if previous is None or since is None:
        start = min(r.key[1] for r in current)
        used = sum(r.cpu_s for r in current)
    else:
        start = since
        used = sum(r.cpu_s - previous.get(r.key, 0.0) for r in current)
    elapsed = now - start
    if elapsed <= 0:
        return None
    return max(0.0, used / elapsed * 100)


class CpuMeter:
    """Remembers one job's last reading to turn CPU times into a share."""

    def __init__(self) -> None:
        self._last: dict[ProcKey, float] | None = None
        self._at: float | None = None

    def measure(self, current: list[ProcReading], now: float) -> float | None:
        share = cpu_percent(self._last, self._at, current, now)
        self._last, self._at = {r.key: r.cpu_s for r in current}, now
        return share
