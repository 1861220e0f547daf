"""``bourse run``: pack the working directory, submit a job, stream its output, exit with its code.

    bourse run --gpu a100 -- python train.py --epochs 3
"""

from __future__ import annotations

import os
import shlex
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from bourse.cli import client as seam
from bourse.cli import progress
from bourse.cli.data import data_fields, data_options
from bourse.cli.errors import handles_errors
from bourse.cli.logs import finish, follow_job, printer_for
from bourse.cli.offers import compute_from_flags, compute_options
from bourse.core.errors import InvalidInput
from bourse.core.states import JOB_WAITING as WAITING
from bourse.core.states import JobState
from bourse.core.units import parse_duration
from bourse.protocol.api import JobView
from bourse.protocol.common import MAX_PENDING_TIMEOUT_S, Port, parse_port
from bourse.sdk.bundle import human_size, pack
from bourse.sdk.client import Client
from bourse.sdk.core import job_spec

if TYPE_CHECKING:
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
        with progress.step("packing code") as report:
            bundle = pack(root, out=Path(tmp) / "code.tar.gz", progress=report)
        for warning in bundle.warnings:
            click.echo(f"warning: {warning}", err=True)
        with progress.step("uploading code") as report:
            uploaded = client.ensure_bundle(bundle.path, bundle.sha256, progress=report)
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

    def __init__(self, client: Client, waiting: progress.Waiting | None = None) -> None:
        self._client = client
        self._last = ""
        self._explained: set[int] = set()  # attempts whose placement reason was shown
        self._waiting = waiting or progress.Waiting()

    def __call__(self, job: JobView) -> None:
        text = self.describe(job)
        if text and text != self._last:
            self._waiting.say(f"bourse: {text}")
            self._last = text
        if job.state in WAITING and text:
            self._waiting.show(text)
        else:
            self._waiting.stop()

    def stop(self) -> None:
        self._waiting.stop()

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


def run_options(command: Any) -> Any:
    """The flags of ``bourse run`` that a task file's fields have too, and the ways to submit
    (before COMMAND, or after TASK.yaml)."""
    options = [
        click.option("--name", help="A name to recognise the job by."),
        click.option("--env", "env_pairs", multiple=True, metavar="K=V",
                     help="Environment variable for the job (repeatable); a bare K copies it "
                          "from here."),
        click.option("--port", "ports", multiple=True, metavar="N[:keep]",
                     help="A port the job serves on 127.0.0.1, proxied at /jobs/ID/ports/N/ "
                          "(repeatable); N:keep forwards the whole path, for servers given "
                          "that prefix as their base URL."),
        click.option("--secret", "secrets", multiple=True, metavar="NAME",
                     help="A project secret the job gets as the variable NAME (repeatable)."),
        click.option("--max-retries", type=click.IntRange(0, 100),
                     help="Attempts after a lost node (default 3)."),
        click.option("--pending-timeout", metavar="DURATION",
                     help="Fail the job if it waits this long to be placed (e.g. 90s, 10m, "
                          "2h; each time it waits). Default: wait as long as it takes, saying "
                          "why."),
        click.option("--detach", "-d", is_flag=True,
                     help="Print the job id and return at once (an app: submit its flow "
                          "driver as a job and print the run id)."),
        click.option("--no-code", is_flag=True,
                     help="Do not pack and upload the current directory (a task file: its "
                          "workdir)."),
        click.option("--dry-run", is_flag=True,
                     help="Submit nothing: print the job it would be, the offer it would "
                          "take now and at what price, or why nothing fits (exit 1)."),
        click.option("--json", "as_json", is_flag=True, help="With --dry-run: the plan as JSON."),
    ]
    for option in reversed(options):
        command = option(command)
    return compute_options(data_options(command))


def given(options: dict[str, Any]) -> dict[str, Any]:
    """The options that were given (every option of ``run`` defaults to None, () or False)."""
    return {k: v for k, v in options.items() if v is not None and v != () and v is not False}


def option_fields(options: dict[str, Any]) -> dict[str, Any]:
    """The JobSpec fields of the flags, but Compute (None where not given)."""
    fields = {"name": options.get("name"), "env": parse_env(options.get("env_pairs", ())),
              "max_retries": options.get("max_retries"),
              "ports": parse_ports(options.get("ports", ())),
              "project_secrets": list(options.get("secrets", ())) or None,
              "pending_timeout_s": pending_seconds(options.get("pending_timeout"))}
    return fields | data_fields(options)  # --input, --output, --checkpoint


@click.command(context_settings={"allow_interspersed_args": False})
@run_options
@click.option("--local", is_flag=True,
              help="For an app (bourse run app.py): run every stage as a local process.")
@click.option("--run-id", hidden=True, help="For an app: the run id (a detached driver's).")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@handles_errors
def run(command: tuple[str, ...], *, local: bool, run_id: str | None, **options: Any) -> None:
    """Run COMMAND on the exchange with the current directory as its code, run a task file
    (`bourse run task.yaml [FLAGS] [-- ARGS]`, see docs/tasks.md: flags after it override its
    fields), or run an app: `bourse run app.py [ARGS]` runs the app (`app = App(...)`) in
    app.py, each stage a job.

    Exits with the job's exit code (130 if it was cancelled). Ctrl-C detaches; the job keeps
    running. An app with --detach runs its flow driver as a job too: `bourse runs` follows it.

    An app's run lasts as long as this process: closing the terminal, `kill` or Ctrl-C cancel
    its stages, and the exchange cancels them when this process dies outright (its lease
    lapses). Use --detach for a run that outlives the terminal.
    """
    from bourse.cli.run_app import is_app
    from bourse.cli.run_task import is_task_file, run_task

    if is_task_file(command):
        run_task(Path(command[0]), command[1:], given(options))
        return
    if is_app(command):
        if options["dry_run"] or options["as_json"]:
            raise click.UsageError("--dry-run and --json are for a command or a task file, "
                                   "not an app")
        _run_app(command, local=local, detach=options["detach"], run_id=run_id)
        return
    if local:
        raise click.UsageError("--local runs apps (bourse run app.py); for a command, run it "
                               "directly")
    fields = option_fields(options) | {"compute": compute_from_flags(options)}
    submit_job(list(command), fields, None if options["no_code"] else Path.cwd(),
               given(options), shlex.join(command))


def submit_job(command: list[str], fields: dict[str, Any], code: Path | None,
               options: dict[str, Any], summary: str, base: Path | None = None,
               origins: Mapping[str, str] | None = None) -> None:
    """Submit the job (its code packed from ``code``, local inputs read from ``base``, the
    working directory by default) and follow it, print its id (``--detach``), or print what
    it would be (``--dry-run``: local inputs shown as ``file://`` URIs, not uploaded). A
    local input that is not there is refused first, either way, naming the field of the
    task file it came from (``origins``: an imported file's mount) or ``inputs.NAME``."""
    if options.get("as_json") and not options.get("dry_run"):
        raise click.UsageError("--json goes with --dry-run (the plan as JSON)")
    inputs = fields.get("inputs") or {}
    local = local_paths(inputs, base or Path.cwd(), origins or {})
    if options.get("dry_run"):
        from bourse.cli.plan import show_plan

        shown = {n: local[n].as_uri() if n in local else v for n, v in inputs.items()}
        show_plan(job_spec(command, **(fields | {"inputs": shown or None})), code, summary,
                  as_json=bool(options.get("as_json")))
        return
    with seam.open_client() as client:
        from bourse.cli.plan import check_secrets

        check_secrets(client, fields.get("project_secrets") or ())  # before any upload
        bundle = None if code is None else upload_code(client, code)
        if any("://" not in v for v in inputs.values()):  # local paths: uploaded, then URIs
            from bourse.extras import needs

            with needs("a local path as an input", ("data",)):
                from bourse.sdk.inputs import resolve_local_inputs

            fields = fields | {"inputs": resolve_local_inputs(client, inputs, base=base,
                                                                report=report_input)}
        job = client.submit(job_spec(command, bundle=bundle, **fields))
        if options.get("detach"):
            click.echo(job.id)
            return
        click.echo(f"bourse: submitted {job.id}", err=True)
        final = _attach(client, job)
    finish(final)


def local_paths(inputs: Mapping[str, str], base: Path,
                origins: Mapping[str, str]) -> dict[str, Path]:
    """The local paths among ``inputs`` (those that are no store URI), each resolved from
    ``base``; an `InvalidInput` naming the first that does not exist."""
    found: dict[str, Path] = {}
    for name, value in inputs.items():
        if "://" in value:
            continue
        path = base.joinpath(Path(value).expanduser()).resolve()
        if not path.exists():
            field = origins.get(name, f"inputs.{name}")
            raise InvalidInput(f"{value} is neither a store URI nor a local path that exists "
                               f"(looked at {path})", field=field,
                               hint="create it, correct the path, or write an s3:// URI")
        found[name] = path
    return found


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
        status.stop()
        click.echo(f"\ndetached from {job.id}; it keeps running.\n"
                   f"  reattach: bourse logs -f {job.id}\n"
                   f"  stop:     bourse stop {job.id}", err=True)
        sys.exit(130)
    finally:
        status.stop()
