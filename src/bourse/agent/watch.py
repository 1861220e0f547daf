"""How the runtime watches one attempt's process: its state (:class:`Watch`), the moment it
exits (a pidfd, else polling), and the SIGKILL a cancelled job gets when its grace runs out.
Nothing here touches the spool; :mod:`bourse.agent.runtime` reports what it sees."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from bourse.agent import shim
from bourse.agent.shim import AttemptDir
from bourse.agent.spool import AttemptRecord
from bourse.agent.tailer import LogTailer
from bourse.protocol.agent import StartJob

Key = tuple[str, int]


@contextlib.contextmanager
def exit_signal(pid: int) -> Iterator[asyncio.Event]:
    """An event set the moment ``pid`` exits (a Linux pidfd in the event loop), so a job's end
    is seen at once rather than at the next poll; without pidfd support it is never set and
    polling alone notices the exit."""
    exited = asyncio.Event()
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        yield exited
        return
    loop = asyncio.get_running_loop()
    loop.add_reader(fd, exited.set)
    try:
        yield exited
    finally:
        loop.remove_reader(fd)
        os.close(fd)


@dataclass
class Watch:
    """A live attempt's process, as its monitor task sees it."""

    key: Key
    adir: AttemptDir
    pid: int
    started: int | None  # process start time, against pid reuse
    tailer: LogTailer
    kill_at: float | None = None
    stale: bool = False
    child: bool = True  # try waitpid; cleared once it says the process is not ours
    seen_alive: bool = False
    task: asyncio.Task[None] | None = None
    start: StartJob | None = None  # the start message, when this agent launched it

    def start_message(self, record: AttemptRecord) -> StartJob:
        """The attempt's start message: kept from the launch, else read from the spool (an
        adopted attempt); ValueError when the recorded one is unreadable."""
        if self.start is None:
            self.start = StartJob.model_validate_json(record.spec)
        return self.start


@dataclass(frozen=True)
class Ended:
    wait_status: int | None  # None when the process was not our child
    at: float = field(default_factory=time.time)  # when the agent saw the process gone


async def wait_exit(watch: Watch, poll_s: float) -> Ended:
    """Until the process is gone: escalates a cancel whose grace ran out and tails the logs
    (unless the attempt was given up) every ``poll_s``, or at once when it exits."""
    with exit_signal(watch.pid) as exited:
        while True:
            ended = poll_process(watch)
            if ended is not None:
                return ended
            watch.seen_alive = True
            escalate(watch)
            if not watch.stale:
                watch.tailer.step(time.time())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(exited.wait(), poll_s)


def poll_process(watch: Watch) -> Ended | None:
    if watch.child:
        try:
            done, status = shim.reap(watch.pid)
        except ChildProcessError:
            watch.child = False
        else:
            return Ended(status) if done else None
    return None if shim.is_alive(watch.pid, watch.started) else Ended(None)


def escalate(watch: Watch) -> None:
    """SIGKILL once the cancel's grace has run out."""
    if watch.kill_at is not None and time.time() >= watch.kill_at:
        send(watch, signal.SIGKILL)
        watch.kill_at = None


def send(watch: Watch, sig: signal.Signals) -> None:
    """``sig`` to the job's process group, if its process is still the one started."""
    if shim.is_alive(watch.pid, watch.started):
        shim.signal_group(watch.pid, sig)
