"""``bourse logs``: a job's output, stdout to stdout and stderr to stderr; ``-f`` follows it.

A gang's members (``compute.num_nodes`` > 1) write at once: their output is shown line by
line, each line prefixed with its member's rank (``[rank 1] ...``), one line buffer per member
and stream so that a line split across chunks is prefixed once and members' lines never mix.
``--rank`` shows one member's output as it is; a one-node job's output is never prefixed.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from typing import Protocol

import click

from bourse.cli import client as seam
from bourse.cli import complete
from bourse.cli.errors import handles_errors
from bourse.core.compute import MAX_NODES
from bourse.core.states import JobState
from bourse.protocol.api import JobView, LogChunkView
from bourse.sdk.client import Client
from bourse.sdk.logs import LogDecoder, LogLine, LogLines

EXIT_CANCELLED = 130  # what a shell reports for a command stopped by SIGINT


class Printer(Protocol):
    def chunk(self, chunk: LogChunkView) -> None: ...

    def finish(self) -> None: ...


def _mark(attempt: int) -> None:
    click.echo(f"--- attempt {attempt} ---", err=True)


class LogPrinter:
    """Writes chunks to the matching stream; marks where a new attempt's output starts."""

    def __init__(self, attempt: int | None = None) -> None:
        self.attempt = attempt
        self._decoder = LogDecoder()
        self._last_attempt: int | None = None

    def chunk(self, chunk: LogChunkView) -> None:
        if self.attempt is not None and chunk.attempt != self.attempt:
            return
        if self._last_attempt is not None and chunk.attempt != self._last_attempt:
            _mark(chunk.attempt)
        self._last_attempt = chunk.attempt
        _write(chunk.stream, self._decoder.decode(chunk))

    def finish(self) -> None:
        for stream, text in self._decoder.finish():
            _write(stream, text)


class LinePrinter:
    """Writes whole lines with ``write``; an attempt's unfinished lines end where the next
    attempt's output starts (marked unless ``marks`` is off)."""

    def __init__(self, write: Callable[[LogLine], None], attempt: int | None = None, *,
                 marks: bool = True) -> None:
        self.write, self.attempt, self.marks = write, attempt, marks
        self._lines = LogLines()
        self._last_attempt: int | None = None

    def chunk(self, chunk: LogChunkView) -> None:
        if self.attempt is not None and chunk.attempt != self.attempt:
            return
        if self._last_attempt is not None and chunk.attempt != self._last_attempt:
            self.finish()
            if self.marks:
                _mark(chunk.attempt)
        self._last_attempt = chunk.attempt
        for line in self._lines.feed(chunk):
            self.write(line)

    def finish(self) -> None:
        for line in self._lines.finish():
            self.write(line)


def prefixed(line: LogLine) -> None:
    click.echo(f"[rank {line.rank}] {line.text}", err=line.stream == "stderr")


def json_line(line: LogLine) -> None:
    click.echo(json.dumps({"attempt": line.attempt, "rank": line.rank, "stream": line.stream,
                           "text": line.text, "time": line.time}, ensure_ascii=False))


def printer_for(members: int, attempt: int | None = None, as_json: bool = False) -> Printer:
    """JSON lines; a gang's lines prefixed with their rank; or a job's output as it is."""
    if as_json:
        return LinePrinter(json_line, attempt, marks=False)
    if members > 1:
        return LinePrinter(prefixed, attempt)
    return LogPrinter(attempt)


def _write(stream: str, text: str) -> None:
    if text:
        click.echo(text, nl=False, err=stream == "stderr")


def exit_code_for(job: JobView) -> int:
    """The job's exit code as a process exit code: 0, its own code, 130 cancelled, else 1."""
    if job.state == JobState.SUCCEEDED:
        return 0
    if job.state == JobState.CANCELLED:
        return EXIT_CANCELLED
    code = job.exit_code
    if code is None or code == 0:
        return 1
    if code < 0:  # killed by signal -code, reported as a shell does
        return min(128 - code, 255)
    return code if code <= 255 else 1


def ending(job: JobView) -> str | None:
    """The line to print when a job did not succeed."""
    if job.state == JobState.SUCCEEDED:
        return None
    if job.state == JobState.CANCELLED:
        return f"job {job.id} was cancelled" + (f": {job.reason}" if job.reason else "")
    code = f" with exit code {job.exit_code}" if job.exit_code is not None else ""
    return f"job {job.id} failed{code}" + (f": {job.reason}" if job.reason else "")


def follow_job(client: Client, job_id: str, printer: Printer,
               on_job: Callable[[JobView], None] = lambda job: None, *,
               rank: int | None = None) -> JobView:
    """Print the job's output (one member's with ``rank``) until it ends; its final view."""
    final: JobView | None = None
    for item in client.follow(job_id, rank=rank):
        if isinstance(item, LogChunkView):
            printer.chunk(item)
        else:
            final = item
            on_job(item)
    printer.finish()
    assert final is not None  # follow always ends with the job's final view
    return final


def finish(job: JobView) -> None:
    """Report how the job ended and exit with its code."""
    line = ending(job)
    if line:
        click.echo(line, err=True)
    sys.exit(exit_code_for(job))


def print_all(chunks: Iterable[LogChunkView], printer: Printer) -> None:
    for chunk in chunks:
        printer.chunk(chunk)
    printer.finish()


@click.command()
@click.argument("job_id", shell_complete=complete.job_ids)
@click.option("-f", "--follow", "follow", is_flag=True,
              help="Keep printing until the job ends, then exit with its exit code.")
@click.option("--attempt", type=click.IntRange(min=1), help="Only this attempt's output.")
@click.option("--rank", type=click.IntRange(min=0, max=MAX_NODES - 1),
              help="Only this gang member's output (0 to --nodes - 1), without prefixes.")
@click.option("--json", "as_json", is_flag=True,
              help='JSON lines: {"attempt", "rank", "stream", "text", "time"} per line of '
                   'output (time: when the node read it, in Unix seconds).')
@handles_errors
def logs(job_id: str, follow: bool, attempt: int | None, rank: int | None,
         as_json: bool) -> None:
    """Print a job's output so far (stdout to stdout, stderr to stderr); a gang's lines
    prefixed with their member's rank."""
    with seam.open_client() as client:
        one = rank is not None or as_json  # no prefixes to add: no need to know the members
        members = 1 if one else client.job(job_id).spec.compute.num_nodes
        printer = Counting(printer_for(members, attempt, as_json))
        if not follow:
            print_all(client.iter_logs(job_id, rank=rank), printer)
            say_if_pruned(client, job_id, printer.count)
            return
        try:
            final = follow_job(client, job_id, printer, rank=rank)
        except KeyboardInterrupt:
            sys.exit(EXIT_CANCELLED)
        say_if_pruned(client, job_id, printer.count)
    finish(final)


class Counting:
    """A printer that counts the chunks it was given."""

    def __init__(self, inner: Printer) -> None:
        self.inner, self.count = inner, 0

    def chunk(self, chunk: LogChunkView) -> None:
        self.count += 1
        self.inner.chunk(chunk)

    def finish(self) -> None:
        self.inner.finish()


def say_if_pruned(client: Client, job_id: str, printed: int) -> None:
    """An empty log of a job whose logs the exchange deleted says so, on stderr."""
    if printed == 0 and client.logs(job_id, 0, limit=1).pruned:
        click.echo(f"the logs of {job_id} were deleted by the exchange's log retention "
                   "(`bourse server --log-retention`)", err=True)
