"""``bourse run``: pack the working directory, submit a job, stream its output, exit with its code.

    bourse run --gpu a100 -- python train.py --epochs 3
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import click

from bourse.cli import client as seam
from bourse.cli.data import data_fields, data_options
from bourse.cli.errors import handles_errors
from bourse.cli.logs import finish, follow_job, printer_for
from bourse.cli.offers import compute_from_flags, compute_options
from bourse.core.errors import InvalidInput
from bourse.core.states import JobState
from bourse.core.units import parse_duration
from bourse.protocol.api import JobView
from bourse.protocol.common import MAX_PENDING_TIMEOUT_S, Port, parse_port
from bourse.sdk.bundle import human_size, pack
from bourse.sdk.client import Client
from bourse.sdk.core import job_spec
from bourse.sdk.inputs import resolve_local_inputs
from bourse.storage.copyplan import Plan
from bourse.storage.transfer import TransferResult


def parse_env(pairs: tuple[str, ...], environ: dict[str, str] | None = None) -> dict[str, str]:
    """``K=V`` pairs; a bare ``K`` takes its value from the local environment."""
    local = dict(os.environ) if environ is None else environ
    env: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            if name not in local:
                raise InvalidInput(f"{name} is not set here", field="env",
                                   hint="write --env NAME=VALUE")
            value = local[name]
        env[name] = value
    return env


def pending_seconds(text: str | None) -> float | None:
    """``--pending-timeout``: seconds, more than none and at most a year."""
    if text is None:
        return None
    seconds = parse_duration(text, field="pending-timeout")
    if not 0 < seconds <= MAX_PENDING_TIMEOUT_S:
        raise InvalidInput(f"--pending-timeout {text}: write a duration from 1s to 365d",
                           field="pending-timeout")
    return seconds


def parse_ports(values: tuple[str, ...]) -> list[Port]:
    try:
        return [parse_port(value) for value in values]
    except ValueError as exc:
        raise InvalidInput(str(exc), field="port",
                           hint="write --port 6006 or --port 6006:keep") from None


def upload_code(client: Client, root: Path) -> str:
    """Pack ``root`` and upload it unless the exchange has it; returns its SHA-256."""
    with tempfile.TemporaryDirectory(prefix="bourse-") as tmp:
        bundle = pack(root, out=Path(tmp) / "code.tar.gz")
        for warning in bundle.warnings:
            click.echo(f"warning: {warning}", err=True)
        uploaded = client.ensure_bundle(bundle.path, bundle.sha256)
    where = "uploaded" if uploaded else "already on the exchange"
    click.echo(f"code: {bundle.file_count} files, {human_size(bundle.size)}, {where}", err=True)
    return bundle.sha256


def report_input(name: str, plan: Plan, result: TransferResult) -> None:
    """One line per local input: what went up, or that the store had it already."""
    where = plan.dest.text
    if not result.copied:
        click.echo(f"input {name}: already in the store at {where}", err=True)
        return
    size = human_size(sum(i.size for i in result.copied))
    click.echo(f"input {name}: {len(result.copied)} file(s), {size}, uploaded to {where}",
               err=True)


class StatusLine:
    """Says on stderr, once per change, why the job is waiting and where it was placed."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._last = ""
        self._explained: set[int] = set()  # attempts whose placement reason was shown

    def __call__(self, job: JobView) -> None:
        text = self.describe(job)
        if text and text != self._last:
            click.echo(f"bourse: {text}", err=True)
            self._last = text

    def describe(self, job: JobView) -> str:
        if job.state == JobState.PENDING:
            return job.state + (f": {job.pending_reason}" if job.pending_reason else "")
        if job.state.terminal:
            return ""
        detail = self._client.job(job.id)
        current = next((a for a in detail.attempts if a.number == job.attempt), None)
        if current is None:
            return job.state
        text = f"{job.state} on {current.node_name or current.node_id} (attempt {job.attempt})"
        if current.placement and current.number not in self._explained:
            self._explained.add(current.number)
            text += f": {current.placement}"
            _, far, where = current.placement.partition("; cross-region: ")
            if far:
                click.echo(f"warning: placed cross-region ({where}); expect egress charges "
                           "and slower reads", err=True)
        if job.progress:  # the node preparing it: "inputs: 1.2 GB / 2.0 GB, 310 MB/s"
            text += f" - {job.progress}"
        return text


@click.command(context_settings={"allow_interspersed_args": False})
@compute_options
@data_options
@click.option("--name", help="A name to recognise the job by.")
@click.option("--env", "env_pairs", multiple=True, metavar="K=V",
              help="Environment variable for the job (repeatable); a bare K copies it from here.")
@click.option("--port", "ports", multiple=True, metavar="N[:keep]",
              help="A port the job serves on 127.0.0.1, proxied at /jobs/ID/ports/N/ "
                   "(repeatable); N:keep forwards the whole path, for servers given that "
                   "prefix as their base URL.")
@click.option("--secret", "secrets", multiple=True, metavar="NAME",
              help="A project secret the job gets as the variable NAME (repeatable).")
@click.option("--max-retries", type=click.IntRange(0, 100),
              help="Attempts after a lost node (default 3).")
@click.option("--pending-timeout", metavar="DURATION",
              help="Fail the job if it waits this long to be placed (e.g. 90s, 10m, 2h; each "
                   "time it waits). Default: wait as long as it takes, saying why.")
@click.option("--detach", "-d", is_flag=True,
              help="Print the job id and return at once (an app: submit its flow driver as "
                   "a job and print the run id).")
@click.option("--no-code", is_flag=True, help="Do not pack and upload the current directory.")
@click.option("--local", is_flag=True,
              help="For an app (bourse run app.py): run every stage as a local process.")
@click.option("--run-id", hidden=True, help="For an app: the run id (a detached driver's).")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@handles_errors
def run(command: tuple[str, ...], *, name: str | None, env_pairs: tuple[str, ...],
        ports: tuple[str, ...], secrets: tuple[str, ...], max_retries: int | None,
        pending_timeout: str | None, detach: bool, no_code: bool, local: bool, run_id: str | None,
        **flags: Any) -> None:
    """Run COMMAND on the exchange with the current directory as its code, or run an app:
    `bourse run app.py [ARGS]` runs the app (`app = App(...)`) in app.py, each stage a job.

    Exits with the job's exit code (130 if it was cancelled). Ctrl-C detaches; the job keeps
    running. An app with --detach runs its flow driver as a job too: `bourse runs` follows it.

    An app's run lasts as long as this process: closing the terminal, `kill` or Ctrl-C cancel
    its stages, and the exchange cancels them when this process dies outright (its lease
    lapses). Use --detach for a run that outlives the terminal.
    """
    from bourse.cli.run_app import is_app

    if is_app(command):
        _run_app(command, local=local, detach=detach, run_id=run_id)
        return
    if local:
        raise click.UsageError("--local runs apps (bourse run app.py); for a command, run it "
                               "directly")
    spec_fields = {"name": name, "env": parse_env(env_pairs),
                   "compute": compute_from_flags(flags), "max_retries": max_retries,
                   "ports": parse_ports(ports),
                   "project_secrets": list(secrets) or None,
                   "pending_timeout_s": pending_seconds(pending_timeout)}
    data = data_fields(flags)  # --input, --output, --checkpoint
    with seam.open_client() as client:
        bundle = None if no_code else upload_code(client, Path.cwd())
        if data["inputs"]:  # local paths uploaded, replaced by their URIs
            data["inputs"] = resolve_local_inputs(client, data["inputs"], report=report_input)
        spec_fields |= data
        job = client.submit(job_spec(list(command), bundle=bundle, **spec_fields))
        if detach:
            click.echo(job.id)
            return
        click.echo(f"bourse: submitted {job.id}", err=True)
        final = _attach(client, job)
    finish(final)


def _run_app(command: tuple[str, ...], *, local: bool, detach: bool,
             run_id: str | None) -> None:
    from bourse.cli.run_app import detach_app, run_app

    if not detach:
        run_app(Path(command[0]), command[1:], local=local, run_id=run_id)
        return
    if local:
        raise click.UsageError("--detach submits the flow driver to the exchange; --local "
                               "runs it here: choose one")
    driver = detach_app(Path(command[0]), command[1:], upload_code)
    assert driver.spec.run is not None
    click.echo(driver.spec.run)
    click.echo(f"bourse: run {driver.spec.run} detached: its flow driver is job {driver.id}\n"
               f"  follow it: bourse logs -f {driver.id}\n"
               f"  its stages: bourse runs show {driver.spec.run}", err=True)


def _attach(client: Client, job: JobView) -> JobView:
    status = StatusLine(client)
    status(job)
    try:
        return follow_job(client, job.id, printer_for(job.spec.compute.num_nodes),
                          on_job=status)
    except KeyboardInterrupt:
        click.echo(f"\ndetached from {job.id}; it keeps running.\n"
                   f"  reattach: bourse logs -f {job.id}\n"
                   f"  stop:     bourse stop {job.id}", err=True)
        sys.exit(130)
