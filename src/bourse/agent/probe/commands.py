"""Running the probe's external programs: each with a timeout and a cap on what it may print.

A hung ``nvidia-smi`` (it blocks while a GPU is falling off the bus) or one that prints without
end must cost the probe a bounded time and memory, never the agent.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO

from bourse.core.errors import BourseError

MAX_OUTPUT_BYTES = 16 * 2**20


class CommandError(BourseError):
    """A probe command that could not run, timed out or printed too much."""


@dataclass(frozen=True, slots=True)
class Output:
    returncode: int
    stdout: str
    stderr: str


def which(name: str) -> str | None:
    return shutil.which(name)


def run_command(argv: Sequence[str], *, timeout: float = 20.0,
                limit: int = MAX_OUTPUT_BYTES, env: dict[str, str] | None = None) -> Output:
    """Run ``argv`` to completion; :class:`CommandError` if it cannot start, outlives
    ``timeout`` seconds or prints more than ``limit`` bytes on either stream."""
    try:
        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True, env=env)
    except OSError as exc:
        raise CommandError(f"{argv[0]}: cannot run it ({exc.strerror})") from None
    try:
        stdout, stderr = _collect(proc, argv[0], timeout, limit)
    finally:
        _stop(proc)
    return Output(proc.returncode, stdout.decode(errors="replace"),
                  stderr.decode(errors="replace"))


def _collect(proc: subprocess.Popen[bytes], name: str, timeout: float,
             limit: int) -> tuple[bytes, bytes]:
    assert proc.stdout is not None and proc.stderr is not None
    deadline = time.monotonic() + timeout
    buffers: dict[IO[bytes], bytearray] = {proc.stdout: bytearray(), proc.stderr: bytearray()}
    with selectors.DefaultSelector() as selector:
        for pipe in buffers:
            selector.register(pipe, selectors.EVENT_READ)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise CommandError(f"{name} did not finish within {timeout:g} s")
            for key, _ in selector.select(left):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                buffer = buffers[key.fileobj]  # type: ignore[index]
                buffer += chunk
                if len(buffer) > limit:
                    raise CommandError(f"{name} printed more than {limit} bytes; refused")
    try:
        proc.wait(max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        raise CommandError(f"{name} did not finish within {timeout:g} s") from None
    return bytes(buffers[proc.stdout]), bytes(buffers[proc.stderr])


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Kill what is left of the command's own process group (it ran in a new session)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
