"""Is a running job stalled, is a disk filling up: pure judgements over resource samples.

A job is *stalled* when, over the last ``after_s`` seconds of samples (and it has been sampled
for at least that long):

- the GPUs it uses all sat idle (every sample shows GPUs, none at ``gpu_percent`` or more), or
- it printed nothing and its processes used next to no CPU (every sample under
  ``cpu_percent``, 100 being one core).

A GPU busy in any sample of the window is progress. The first rule catches the training loop
that waits on a dead data loader with the GPU at 0 %; the second the "progress bar stuck at
99 %" — a process that is alive but does nothing. A job that computes, prints, or keeps a GPU
busy in any sample of the window is not stalled, so the flag clears as soon as it becomes
active again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

StallKind = Literal["gpu_idle", "no_progress"]


@dataclass(frozen=True)
class StallRules:
    after_s: float = 300.0
    cpu_percent: float = 2.0  # below this a process tree is idle (100 = one core)
    gpu_percent: float = 5.0  # below this a GPU is idle

    def __post_init__(self) -> None:
        if self.after_s <= 0 or self.cpu_percent < 0 or not 0 <= self.gpu_percent <= 100:
            raise ValueError(f"invalid stall rules: {self}")


@dataclass(frozen=True)
class Reading:
    """What the judgement needs of one sample."""

    time: float
    cpu_percent: float | None
    gpu_utils: tuple[float, ...] = ()  # the job's GPUs' utilisation, percent


@dataclass(frozen=True)
class Stall:
    kind: StallKind
    since: float  # the start of the idle window
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "since": self.since, "message": self.message,
                "evidence": self.evidence}


def assess(readings: Sequence[Reading], last_output: float | None,
           rules: StallRules) -> Stall | None:
    """The stall shown by ``readings`` (any order) and the time of the job's last output, or
    None when the job is active or has not been watched for ``after_s`` yet."""
    if not readings:
        return None
    latest = max(r.time for r in readings)
    start = latest - rules.after_s
    window = [r for r in readings if r.time >= start]
    if min(r.time for r in readings) > start or len(window) < 2:
        return None
    if any(u >= rules.gpu_percent for r in window for u in r.gpu_utils):
        return None  # a busy GPU is progress, whatever the host CPU does
    return _gpu_idle(window, start, rules) or _no_progress(window, start, last_output, rules)


def _gpu_idle(window: list[Reading], start: float, rules: StallRules) -> Stall | None:
    if not all(r.gpu_utils for r in window):
        return None
    busiest = max(max(r.gpu_utils) for r in window)
    if busiest >= rules.gpu_percent:
        return None
    return Stall("gpu_idle", start, (
        f"its GPUs sat idle for {duration(rules.after_s)} (at most {busiest:.0f} % busy)"),
        {"window_s": rules.after_s, "samples": len(window), "max_gpu_percent": busiest})


def _no_progress(window: list[Reading], start: float, last_output: float | None,
                 rules: StallRules) -> Stall | None:
    if last_output is not None and last_output >= start:
        return None
    if any(r.cpu_percent is None for r in window):
        return None
    busiest = max(r.cpu_percent or 0.0 for r in window)
    if busiest >= rules.cpu_percent:
        return None
    latest = start + rules.after_s
    quiet = "printed nothing" if last_output is None else (
        f"printed nothing for {duration(latest - last_output)}")
    return Stall("no_progress", start, (
        f"it {quiet} and used at most {busiest:.1f} % CPU for {duration(rules.after_s)}"),
        {"window_s": rules.after_s, "samples": len(window), "max_cpu_percent": busiest,
         "last_output": last_output})


Disk = tuple[str, int, int]  # (label, used bytes, total bytes)


def filling_disks(previous: Sequence[Disk], current: Sequence[Disk],
                  fraction: float) -> list[Disk]:
    """The disks of ``current`` at or above ``fraction`` full that were not in ``previous``
    (the last sample before): a warning is raised once per crossing, again only after the disk
    went below the mark."""
    was_full = {label for label, used, total in previous if _full(used, total, fraction)}
    return [d for d in current if _full(d[1], d[2], fraction) and d[0] not in was_full]


def _full(used: int, total: int, fraction: float) -> bool:
    return total > 0 and used / total >= fraction


def disk_message(disk: Disk) -> str:
    label, used, total = disk
    return (f"the disk of the node's {label} is {used / total:.0%} full "
            f"({_gib(total - used)} free of {_gib(total)})")


def _gib(size: int) -> str:
    return f"{size / 2**30:.1f} GiB"


def duration(seconds: float) -> str:
    """A short duration: 45 s, 5 min, 2.5 h."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
