"""A flow's driver: the process that runs ``Flow.run`` and, while it does, owns the run.

``driving(backend)`` wraps the flow. The run begins (on an exchange the driver takes the
run's lease, renewed in the background: ``bourse.app.lease``) and ends when the flow returns
or raises. A driver that is stopped — SIGHUP (its terminal closed), SIGTERM (``kill``, or a
detached run's driver job cancelled), SIGINT (Ctrl-C) — stops the run's stages, says so, and
exits with 128 + the signal's number; a driver killed outright cannot, and the exchange ends
its run when the lease lapses.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from bourse.app.backend import Backend

STOPPING = (signal.SIGHUP, signal.SIGTERM, signal.SIGINT)
WHY = {signal.SIGHUP: "its driver got SIGHUP (the terminal running it closed)",
       signal.SIGTERM: "its driver got SIGTERM", signal.SIGINT: "its driver got SIGINT (Ctrl-C)"}


class DriverStopped(BaseException):
    """A stopping signal reached the driver. A ``BaseException``, as ``KeyboardInterrupt``
    is, so that a flow's ``except Exception`` does not carry on without its stages."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextmanager
def driving(backend: Backend) -> Iterator[None]:
    """Run a flow on ``backend`` as its driver (see the module's docstring)."""
    backend.begin()
    previous = _catch() if threading.current_thread() is threading.main_thread() else {}
    try:
        yield
    except DriverStopped as stopped:
        why = WHY[signal.Signals(stopped.signum)]
        backend.stop(why)
        say(f"bourse: run {backend.run_id} stopped: {why}")
        raise SystemExit(128 + stopped.signum) from None
    except BaseException:
        backend.end()
        raise
    else:
        backend.end()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def say(text: str) -> None:
    """A line on stderr, if there is still one: the terminal of a driver stopped by SIGHUP
    is gone, and writing to it fails (EIO), which must not stop the stopping."""
    with contextlib.suppress(OSError):
        click.echo(text, err=True)


def _catch() -> dict[signal.Signals, Any]:
    return {signum: signal.signal(signum, _stop) for signum in STOPPING}


def _stop(signum: int, _frame: FrameType | None) -> None:
    for other in STOPPING:  # a second signal must not interrupt the stopping itself
        signal.signal(other, signal.SIG_IGN)
    raise DriverStopped(signum)
