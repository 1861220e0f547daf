"""``bourse exec``: run a command beside a running job, on its node, in its work dir and
environment; exit with the command's exit code.

    bourse exec j-123 -- nvidia-smi
    bourse exec j-123            # an interactive shell (on a terminal)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
import termios
import tty
from collections.abc import Iterator

import click

from bourse.cli import complete
from bourse.cli.errors import handles_errors
from bourse.protocol.stream import CHUNK, ExecTarget
from bourse.sdk.exec import ExecSession


@click.command(context_settings={"allow_interspersed_args": False})
@click.option("--tty/--no-tty", "-t/-T", default=None,
              help="Run on a terminal (default: when no command is given and stdin is one).")
@click.argument("job_id", shell_complete=complete.job_ids)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@handles_errors
def exec_(job_id: str, command: tuple[str, ...], tty: bool | None) -> None:
    """Run COMMAND beside job JOB_ID (a shell when there is none) and exit with its code.

    Output streams as it comes; stdin is forwarded when it is not a terminal (a pipe or a
    file), and on a terminal (--tty) keystrokes, Ctrl-C and window resizes reach the command.
    """
    if command[:1] == ("--",):  # `bourse exec JOB -- CMD`: click keeps the separator
        command = command[1:]
    use_tty = (not command and sys.stdin.isatty()) if tty is None else tty
    size = shutil.get_terminal_size()
    target = ExecTarget(argv=list(command), tty=use_tty, rows=size.lines, cols=size.columns)
    sys.exit(asyncio.run(_run(job_id, target)))


async def _run(job_id: str, target: ExecTarget) -> int:
    async with ExecSession.open(None, None, job_id, target) as session:
        with _raw_terminal(target.tty):
            feeder = asyncio.create_task(_feed(session, target.tty))
            try:
                await _print(session)
            finally:
                feeder.cancel()
                await asyncio.gather(feeder, return_exceptions=True)
    code = session.exit_code
    return 255 if code is None else code & 0xFF


async def _print(session: ExecSession) -> None:
    outputs = {1: sys.stdout.buffer, 2: sys.stderr.buffer}
    async for fd, data in session.output():
        out = outputs.get(fd, sys.stdout.buffer)
        out.write(data)
        out.flush()


async def _feed(session: ExecSession, on_tty: bool) -> None:
    """stdin to the command; on a terminal, window sizes too."""
    loop = asyncio.get_running_loop()
    if on_tty:
        loop.add_signal_handler(signal.SIGWINCH, lambda: loop.create_task(_resize(session)))
    elif sys.stdin.isatty():  # a command without a terminal: it reads no keystrokes
        await session.eof()
        return
    try:
        while data := await _read_stdin():
            await session.send(data)
        await session.eof()
    finally:
        if on_tty:
            loop.remove_signal_handler(signal.SIGWINCH)


async def _read_stdin() -> bytes:
    loop = asyncio.get_running_loop()
    fd = sys.stdin.fileno()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    try:
        loop.add_reader(fd, wake)
    except PermissionError:  # a regular file: always readable, not pollable
        return os.read(fd, CHUNK)
    try:
        await ready
    finally:
        loop.remove_reader(fd)
    return os.read(fd, CHUNK)


async def _resize(session: ExecSession) -> None:
    size = shutil.get_terminal_size()
    with contextlib.suppress(Exception):
        await session.resize(size.lines, size.columns)


@contextlib.contextmanager
def _raw_terminal(on_tty: bool) -> Iterator[None]:
    """The local terminal in raw mode (keys go to the remote one as typed), restored after."""
    if not (on_tty and sys.stdin.isatty()):
        yield
        return
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    tty.setraw(fd)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
