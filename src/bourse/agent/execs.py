"""``bourse exec`` on the node: a command run beside a job, in its work dir and environment,
its output streamed back and its exit code reported; on a pseudo-terminal when asked.

The runtime saves each attempt's cwd and environment next to it when it starts the process
(``beside.json``, mode 0600: the environment may hold the attempt's store keys) and deletes it
when the process has ended, so an exec sees what the job sees, even after an agent restart,
and the keys do not outlive the attempt on disk. An exec runs in a session of its own and
is killed (its whole process group) when its stream ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import json
import os
import pty
import shutil
import signal
import struct
import sys
import termios
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bourse.agent.shim import AttemptDir
from bourse.agent.users import JobUser
from bourse.protocol.stream import ExecTarget, StreamResize
from bourse.tunnel.stream import Stream, StreamClosed

BESIDE = "beside.json"
# Make the pty the session's controlling terminal, then become the command (job control and
# ^C work as in a login shell).
_CTTY = ("import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
         "os.execvp(sys.argv[1], sys.argv[1:])")
KILL_GRACE_S = 2.0


@dataclass(frozen=True)
class Beside:
    cwd: Path
    env: dict[str, str]
    image: str | None = None  # a container job's image: exec does not enter containers yet
    uid: int | None = None  # the job's own user (`bourse.agent.users`); None: the agent's


def save_beside(adir: AttemptDir, cwd: Path, env: dict[str, str],
                image: str | None = None, uid: int | None = None) -> None:
    """Written in place, before the process starts (so before anyone can ask to exec beside
    it); a file cut short by a crash reads as none (``load_beside``). No temporary file and
    rename: each file made costs a start as much as the rest of it on a busy disk."""
    fd = os.open(adir.root / BESIDE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:  # dumps: the C encoder (dump streams through Python's)
        out.write(json.dumps({"cwd": str(cwd), "env": env, "image": image, "uid": uid}))


def drop_beside(adir: AttemptDir) -> None:
    """Once the job's process has ended: nothing runs beside it any more, and the environment
    (the attempt's store keys) must not outlive the attempt on disk."""
    for path in (adir.root / BESIDE, (adir.root / BESIDE).with_suffix(".tmp")):  # .tmp: left
        path.unlink(missing_ok=True)  # by agents before 2026-11-30, which wrote it and renamed


def load_beside(adir: AttemptDir) -> Beside | None:
    try:
        raw = json.loads((adir.root / BESIDE).read_text())
        image, uid = raw.get("image"), raw.get("uid")
        return Beside(Path(raw["cwd"]), {str(k): str(v) for k, v in raw["env"].items()},
                      str(image) if image else None, None if uid is None else int(uid))
    except (OSError, ValueError, KeyError, AttributeError, TypeError):
        return None


def shell_argv(env: dict[str, str], tty: bool) -> list[str]:
    """The shell: bash when the node has it, else sh; interactive on a terminal (without
    one it reads commands from stdin: ``echo pwd | bourse exec JOB``)."""
    shell = shutil.which("bash", path=env.get("PATH")) or "/bin/sh"
    return [shell, "-i"] if tty else [shell]


async def run_exec(stream: Stream, target: ExecTarget, beside: Beside,
                   opened: Callable[[], None]) -> None:
    """Run the command, pump its streams; close ``stream`` with its exit code."""
    argv = target.argv or shell_argv(beside.env, target.tty)
    if beside.uid is not None:  # as the job's own user, like the job
        argv = JobUser(beside.uid).wrap(argv)
    try:
        if target.tty:
            code = await _run_tty(stream, argv, target, beside, opened)
        else:
            code = await _run_pipes(stream, argv, beside, opened)
    except OSError as exc:
        stream.close(error=f"cannot run {argv[0]!r} beside the job: {exc.strerror or exc}")
        return
    stream.close(exit_code=code)


def _exit_code(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


async def _run_pipes(stream: Stream, argv: list[str], beside: Beside,
                     opened: Callable[[], None]) -> int | None:
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=beside.cwd, env=beside.env, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True)
    opened()
    assert proc.stdin and proc.stdout and proc.stderr
    feeder = asyncio.create_task(_feed_pipe(stream, proc.stdin, proc.pid))
    try:
        await asyncio.gather(_drain_pipe(stream, proc.stdout, 1),
                             _drain_pipe(stream, proc.stderr, 2))
        return _exit_code(await proc.wait())
    except StreamClosed:
        return None
    finally:
        feeder.cancel()
        await _kill(proc)


async def _feed_pipe(stream: Stream, stdin: asyncio.StreamWriter, pid: int) -> None:
    with contextlib.suppress(OSError):
        while data := (await stream.read())[1]:
            stdin.write(data)
            await stdin.drain()
        stdin.close()
    _hang_up_if_closed(stream, pid)


def _hang_up_if_closed(stream: Stream, pid: int) -> None:
    """The user went away (the stream was closed, not just its input): end the command."""
    if stream.closed is not None:
        _signal_group(pid, signal.SIGHUP)


async def _drain_pipe(stream: Stream, pipe: asyncio.StreamReader, fd: int) -> None:
    while True:
        data = await pipe.read(await stream.credit())
        if not data:
            return
        await stream.write(data, fd)


async def _run_tty(stream: Stream, argv: list[str], target: ExecTarget, beside: Beside,
                   opened: Callable[[], None]) -> int | None:
    master, slave = pty.openpty()
    try:
        _set_size(master, target.rows, target.cols)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-I", "-S", "-c", _CTTY, *argv, cwd=beside.cwd, env=beside.env,
            stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    except BaseException:
        os.close(master)
        raise
    finally:
        os.close(slave)
    os.set_blocking(master, False)
    stream.on_resize = lambda m: _resize(master, m)
    opened()
    feeder = asyncio.create_task(_feed_fd(stream, master, proc.pid))
    try:
        await _drain_fd(stream, master)
        return _exit_code(await proc.wait())
    except StreamClosed:
        return None
    finally:
        feeder.cancel()
        await _kill(proc)
        os.close(master)


def _set_size(fd: int, rows: int, cols: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def _resize(fd: int, message: StreamResize) -> None:
    with contextlib.suppress(OSError):
        _set_size(fd, message.rows, message.cols)


async def _drain_fd(stream: Stream, fd: int) -> None:
    """The terminal's output until the command (and all that holds the pty) has ended."""
    while True:
        size = await stream.credit()
        await _ready(fd, reading=True)
        try:
            data = os.read(fd, size)
        except BlockingIOError:
            continue
        except OSError as exc:  # EIO: the last holder of the pty's other end is gone
            if exc.errno == errno.EIO:
                return
            raise
        if not data:
            return
        await stream.write(data)


async def _feed_fd(stream: Stream, fd: int, pid: int) -> None:
    with contextlib.suppress(OSError):
        while data := (await stream.read())[1]:
            view = memoryview(data)
            while view:
                await _ready(fd, reading=False)
                with contextlib.suppress(BlockingIOError):
                    view = view[os.write(fd, view):]
        if stream.closed is None:
            os.write(fd, b"\x04")  # end of input: ^D, as a terminal's user would type it
    _hang_up_if_closed(stream, pid)


async def _ready(fd: int, reading: bool) -> None:
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()
    add, remove = ((loop.add_reader, loop.remove_reader) if reading
                   else (loop.add_writer, loop.remove_writer))

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    add(fd, wake)
    try:
        await ready
    finally:
        remove(fd)


async def _kill(proc: asyncio.subprocess.Process) -> None:
    """End the exec's whole session: SIGHUP (a terminal hung up), SIGKILL after a grace."""
    if proc.returncode is None:
        _signal_group(proc.pid, signal.SIGHUP)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), KILL_GRACE_S)
    _signal_group(proc.pid, signal.SIGKILL)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(proc.wait(), KILL_GRACE_S)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
