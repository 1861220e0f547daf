"""``bourse logs``: a job's output, stdout to stdout and stderr to stderr; ``-f`` follows it."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable

import click

from bourse.cli import client as seam
from bourse.cli.errors import handles_errors
from bourse.core.states import JobState
from bourse.protocol.api import JobView, LogChunkView
from bourse.sdk.client import Client
from bourse.sdk.logs import LogDecoder

EXIT_CANCELLED = 130  # what a shell reports for a command stopped by SIGINT


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
            click.echo(f"--- attempt {chunk.attempt} ---", err=True)
        self._last_attempt = chunk.attempt
        _write(chunk.stream, self._decoder.decode(chunk))

    def finish(self) -> None:
        for stream, text in self._decoder.finish():
            _write(stream, text)


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


def follow_job(client: Client, job_id: str, printer: LogPrinter,
               on_job: Callable[[JobView], None] = lambda job: None) -> JobView:
    """Print the job's output until it ends; returns its final view."""
    final: JobView | None = None
    for item in client.follow(job_id):
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


def print_all(chunks: Iterable[LogChunkView], printer: LogPrinter) -> None:
    for chunk in chunks:
        printer.chunk(chunk)
    printer.finish()


@click.command()
@click.argument("job_id")
@click.option("-f", "--follow", "follow", is_flag=True,
              help="Keep printing until the job ends, then exit with its exit code.")
@click.option("--attempt", type=click.IntRange(min=1), help="Only this attempt's output.")
@handles_errors
def logs(job_id: str, follow: bool, attempt: int | None) -> None:
    """Print a job's output so far (stdout to stdout, stderr to stderr)."""
    printer = LogPrinter(attempt)
    with seam.open_client() as client:
        if not follow:
            print_all(client.iter_logs(job_id), printer)
            return
        try:
            final = follow_job(client, job_id, printer)
        except KeyboardInterrupt:
            sys.exit(EXIT_CANCELLED)
    finish(final)
