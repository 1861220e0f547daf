"""One round of sampling: every live attempt's processes, GPUs and directory, and the node.

:meth:`Sampler.sample` is blocking (it reads /proc, walks directories and asks NVML): the daemon
runs it on a thread every ``--metrics-interval`` seconds and sends the :class:`Metrics` message
it returns.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

from bourse.agent.metrics.gpus import GpuMeter, GpuReading
from bourse.agent.metrics.processes import CpuMeter, ProcessTable, read_processes
from bourse.protocol.agent import Metrics
from bourse.protocol.metrics import DiskSample, JobSample, Sample

MAX_WALK = 200_000  # directory entries counted per attempt; past it the size is a floor
SIZE_EVERY_S = 60.0  # a work dir is walked at most this often (it can hold a dataset)

Key = tuple[str, int]


@dataclass(frozen=True)
class LiveAttempt:
    job_id: str
    attempt: int
    pid: int  # the shim's: the job's process group
    root: Path  # the attempt's directory
    container: bool = False  # its processes are the engine's, not the shim's children
    gpus: tuple[str, ...] | None = None  # the devices it was given (None: not said)

    @property
    def key(self) -> Key:
        return (self.job_id, self.attempt)


class Sampler:
    def __init__(self, work_dir: Path, cache_dir: Path, gpus: GpuMeter, *,
                 cache_used: Callable[[], int] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.work_dir, self.cache_dir, self.gpus = work_dir, cache_dir, gpus
        self.cache_used, self.clock = cache_used, clock
        self._meters: dict[Key, CpuMeter] = {}
        self._sizes: dict[Key, tuple[float, int | None]] = {}  # when walked, bytes
        psutil.cpu_percent(None)  # the first call only starts the machine-wide measure

    def sample(self, attempts: Sequence[LiveAttempt]) -> Metrics:
        gpus = self.gpus.read()
        table = ProcessTable.scan()
        jobs = [self._job(a, table, gpus) for a in attempts]
        live = {a.key for a in attempts}
        self._meters = {k: m for k, m in self._meters.items() if k in live}
        self._sizes = {k: v for k, v in self._sizes.items() if k in live}
        return Metrics(jobs=jobs, node=self._node(gpus))

    def _job(self, attempt: LiveAttempt, table: ProcessTable,
             gpus: list[GpuReading]) -> JobSample:
        pids = table.job_pids(attempt.pid)
        procs = read_processes(pids)
        now = self.clock()
        meter = self._meters.setdefault(attempt.key, CpuMeter())
        cpu = meter.measure(procs, now)
        gpus_held = [g.sample for g in gpus if holds(attempt, g, pids)]
        if attempt.container:  # the tree is the engine's client: say nothing of the container
            return JobSample(job_id=attempt.job_id, attempt=attempt.attempt, time=now,
                             work_bytes=self._size(attempt, now), gpus=gpus_held)
        return JobSample(job_id=attempt.job_id, attempt=attempt.attempt, time=now,
                         cpu_percent=cpu, memory_bytes=sum(p.rss for p in procs),
                         processes=len(procs), work_bytes=self._size(attempt, now),
                         gpus=gpus_held)

    def _size(self, attempt: LiveAttempt, now: float) -> int | None:
        walked = self._sizes.get(attempt.key)
        if walked is None or now - walked[0] >= SIZE_EVERY_S:
            walked = self._sizes[attempt.key] = (now, tree_size(attempt.root))
        return walked[1]

    def _node(self, gpus: list[GpuReading]) -> Sample:
        memory = psutil.virtual_memory()
        cpus = psutil.cpu_count() or 1
        return Sample(time=self.clock(), cpu_percent=psutil.cpu_percent(None) * cpus,
                      memory_bytes=memory.total - memory.available,
                      memory_total_bytes=memory.total,
                      cache_bytes=self.cache_used() if self.cache_used else None,
                      gpus=[g.sample for g in gpus],
                      disks=disks({"work dir": self.work_dir, "cache": self.cache_dir}))


def holds(attempt: LiveAttempt, gpu: GpuReading, pids: set[int] | frozenset[int]) -> bool:
    """Whether the attempt holds this GPU: it was given it (a container's processes are
    hidden from the agent, so this is all that tells for them), or its processes use it (a
    job of an older coordinator, given nothing by name)."""
    given = attempt.gpus or ()
    return (gpu.sample.uuid is not None and gpu.sample.uuid in given) or bool(gpu.pids & pids)


def tree_size(root: Path, limit: int = MAX_WALK) -> int | None:
    """Bytes a directory tree takes on disk (allocated blocks; hard links counted once);
    None when it is gone."""
    if not root.exists():
        return None
    seen: set[tuple[int, int]] = set()
    total, stack, count = 0, [str(root)], 0
    while stack and count < limit:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            count += 1
            total += _entry_size(entry, stack, seen)
    return total


def _entry_size(entry: os.DirEntry[str], stack: list[str], seen: set[tuple[int, int]]) -> int:
    try:
        if entry.is_dir(follow_symlinks=False):
            stack.append(entry.path)
            return 0
        st = entry.stat(follow_symlinks=False)
    except OSError:
        return 0
    if st.st_nlink > 1:
        if (st.st_dev, st.st_ino) in seen:
            return 0
        seen.add((st.st_dev, st.st_ino))
    return st.st_blocks * 512


def disks(paths: dict[str, Path]) -> list[DiskSample]:
    """One sample per filesystem among ``paths`` (labels joined when they share one)."""
    by_device: dict[int, tuple[list[str], os.statvfs_result]] = {}
    for label, path in paths.items():
        where = _existing(path)
        try:
            device, stat = os.stat(where).st_dev, os.statvfs(where)
        except OSError:
            continue
        by_device.setdefault(device, ([], stat))[0].append(label)
    return [_disk(labels, stat) for labels, stat in by_device.values()]


def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _disk(labels: Iterable[str], stat: os.statvfs_result) -> DiskSample:
    total = stat.f_blocks * stat.f_frsize
    used = total - stat.f_bavail * stat.f_frsize  # full when users can write no more
    return DiskSample(label=" and ".join(labels), used_bytes=used, total_bytes=total)
