"""Progress of the CLI's long steps (packing and uploading code; a job waiting to run), on
stderr.

On a terminal a step is a rich bar with bytes, speed and time left, gone when the step ends;
anywhere else (a CI log, a pipe) it is a plain line at most every few seconds, so a log shows
that something moves without filling up. A step that ends quickly shows nothing either way,
and nothing at all is shown when stdout carries JSON: commands pass ``enabled=False`` there.

A step is a callable ``report(done, total)`` in bytes, which is what the SDK's ``pack`` and
``ensure_bundle`` take as ``progress``; it shows nothing until the first call, so a step that
never happens (a bundle the exchange already has) leaves no trace.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click

from bourse.sdk.bundle import human_size

if TYPE_CHECKING:
    from rich.console import Console
    from rich.live import Live
    from rich.progress import Progress, TaskID
    from rich.spinner import Spinner

Report = Callable[[int, int], None]
QUIET_S = 0.5  # a step shorter than this shows nothing
PLAIN_EVERY_S = 5.0  # a plain line at most this often


def stderr_is_terminal() -> bool:
    if os.environ.get("TERM") == "dumb":
        return False
    return sys.stderr.isatty()


class PlainStep:
    """One line per few seconds: ``packing code: 40.0 MiB / 86.0 MiB (46 %)``."""

    def __init__(self, label: str, clock: Callable[[], float] = time.monotonic,
                 every_s: float = PLAIN_EVERY_S) -> None:
        self.label, self.clock, self.every_s = label, clock, every_s
        self.started = clock()
        self.last: float | None = None  # when a line was last written
        self.done = self.total = 0

    def __call__(self, done: int, total: int) -> None:
        self.done, self.total = done, total
        now = self.clock()
        due = self.started + QUIET_S if self.last is None else self.last + self.every_s
        if now >= due and done < total:
            self.last = now
            click.echo(f"{self.label}: {line(done, total, now - self.started)}", err=True)

    def close(self) -> None:
        """The last line, if any was written: where the step ended."""
        if self.last is not None:
            click.echo(f"{self.label}: {line(self.done, self.total, self.clock() - self.started)}",
                       err=True)


def line(done: int, total: int, elapsed: float) -> str:
    share = f" ({100 * done // total} %)" if total else ""
    speed = f", {human_size(done / elapsed)}/s" if elapsed > 0 else ""
    return f"{human_size(done)} / {human_size(total)}{share}{speed}"


class BarStep:
    """A rich bar on stderr, started at the first report after ``QUIET_S``."""

    def __init__(self, label: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.label, self.clock = label, clock
        self.started = clock()
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    def __call__(self, done: int, total: int) -> None:
        if self._bar is None:
            if self.clock() < self.started + QUIET_S or done >= total:
                return
            self._start()
        assert self._bar is not None and self._task is not None
        self._bar.update(self._task, completed=done, total=total)

    def _start(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        self._bar = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                             TransferSpeedColumn(), TimeRemainingColumn(),
                             console=Console(stderr=True), transient=True)
        self._bar.start()
        self._task = self._bar.add_task(self.label, total=None)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


@contextmanager
def step(label: str, *, enabled: bool = True) -> Iterator[Report]:
    """A ``report(done, total)`` for one step, shown as this module says."""
    if not enabled:
        yield _ignore
        return
    shown = BarStep(label) if stderr_is_terminal() else PlainStep(label)
    try:
        yield shown
    finally:
        shown.close()


def _ignore(done: int, total: int) -> None:
    return None


class Waiting:
    """While a job waits to run (placed, its inputs arriving, its environment building, a
    machine launching for it): on a terminal a rich spinner with what it waits for and for how
    long (counted at each refresh, from when it began to wait), the once-per-change lines
    printed above it; gone once the job runs or ends. Off a terminal it shows nothing (the
    lines alone say it). The job's own output is never redirected (stdout stays stdout)."""

    def __init__(self, *, enabled: bool | None = None, console: Console | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.enabled = stderr_is_terminal() if enabled is None else enabled
        self._console, self._clock = console, clock
        self._started: float | None = None
        self.text = ""
        self._live: Live | None = None
        self._spinner: Spinner | None = None

    def say(self, text: str) -> None:
        """A line that stays (above the spinner, when one turns)."""
        if self._live is not None and self._console is not None:
            self._console.print(text, markup=False, highlight=False)
        else:
            click.echo(text, err=True)

    def label(self) -> str:
        """What the spinner says now: the reason and the time waited so far."""
        started = self._clock() if self._started is None else self._started
        return f"{self.text} ({waited(self._clock() - started)})"

    def __rich__(self) -> Spinner:
        assert self._spinner is not None
        self._spinner.update(text=self.label())
        return self._spinner

    def show(self, text: str) -> None:
        """Turn (or keep turning) with ``text``."""
        if not self.enabled:
            return
        self.text = text
        if self._started is None:
            self._started = self._clock()
        if self._live is None:
            from rich.console import Console
            from rich.live import Live
            from rich.spinner import Spinner

            self._console = self._console or Console(stderr=True)
            self._spinner = Spinner("dots")
            self._live = Live(self, console=self._console, transient=True,
                              refresh_per_second=4, redirect_stdout=False,
                              redirect_stderr=False)
            self._live.start()

    def stop(self) -> None:
        """Gone; a later wait (a retried attempt) counts its time from its own start."""
        self._started = None
        if self._live is not None:
            self._live.stop()
            self._live = None


def waited(seconds: float) -> str:
    """``8 s``, ``2 min 05 s``."""
    whole = int(seconds)
    return f"{whole} s" if whole < 60 else f"{whole // 60} min {whole % 60:02d} s"
