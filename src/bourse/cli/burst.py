"""``bourse burst``: move a running training to other compute and carry on (docs/burst.md).

- ``bourse burst JOB --gpu a100:8 --nodes 2``: the job's attempt checkpoints and exits; the
  job continues with the new Compute from that checkpoint (``services.burst``).
- ``bourse burst --here ...``: the local run started in this folder (``python train.py``
  with ``BourseCheckpoint``) saves to its checkpoint prefix in the store and exits; its
  folder becomes a code bundle and a job with the new Compute goes on from the checkpoint
  (``sdk.handover``).
- ``bourse burst JOB --local``: back again: the job checkpoints and ends, and its command
  goes on here, from the same checkpoint, with store credentials of a grant.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from bourse.cli import client as seam
from bourse.cli import complete
from bourse.cli.errors import handles_errors
from bourse.cli.offers import compute_from_flags, compute_kwargs, compute_options
from bourse.cli.render import echo_json
from bourse.core.errors import InvalidInput
from bourse.core.states import JobState
from bourse.core.units import parse_duration
from bourse.extras import needs
from bourse.sdk import handover
from bourse.sdk.client import Client

if TYPE_CHECKING:
    from bourse.protocol.api import JobDetail
    from bourse.storage.store import Opener


@click.command()
@click.argument("job_id", required=False, shell_complete=complete.job_ids)
@compute_options
@click.option("--here", is_flag=True, help="Move the local run started in this folder "
              "(or BOURSE_BURST_DIR) to the exchange.")
@click.option("--local", "to_local", is_flag=True,
              help="Move the job off the exchange: it goes on here, from its checkpoint.")
@click.option("--notice", default="60s", show_default=True,
              help="Time the run gets to checkpoint and exit (SIGTERM, then SIGKILL).")
@click.option("--reason", help="Why, for the job's timeline.")
@click.option("--wait", "wait_s", default="10m", show_default=True,
              help="--here: how long to wait for the run to save and leave.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def burst(job_id: str | None, here: bool, to_local: bool, notice: str, reason: str | None,
          wait_s: str, as_json: bool, **flags: Any) -> None:
    """Move a running training to other compute; it carries on from its checkpoint."""
    notice_s = parse_duration(notice, field="--notice")
    if here == (job_id is not None):
        raise click.UsageError("name a JOB, or --here for the local run in this folder")
    if to_local and (here or compute_kwargs(flags)):
        raise click.UsageError("--local takes a JOB and no Compute flags")
    if not to_local and not compute_kwargs(flags):
        raise click.UsageError("say where to: Compute flags (--gpu a100:8 --nodes 2 ...), "
                               "or --local")
    with seam.open_client() as client:
        if here:
            _here(client, flags, reason, parse_duration(wait_s, field="--wait"), as_json)
        elif to_local:
            _to_local(client, job_id or "", notice_s, reason, as_json)
        else:
            result = client.burst(job_id or "", compute_from_flags(flags), notice_s=notice_s,
                                  reason=reason)
            if as_json:
                echo_json(result)
                return
            click.echo(f"job {result.job_id}: attempt {result.attempt} checkpoints to "
                       f"{result.checkpoint} and exits (within {result.notice_s:g} s); it "
                       f"goes on from {result.moved_from} to {result.moved_to}")


def _here(client: Client, flags: dict[str, Any], reason: str | None, wait_s: float,
          as_json: bool) -> None:
    compute = compute_from_flags(flags)
    folder = handover.control_dir()
    handover.request(folder, compute, reason or "bourse burst --here")
    click.echo(f"asked the run watching {folder} to save and hand over...", err=True)
    handed = handover.wait_handed(folder, wait_s)
    from bourse.cli.run import upload_code

    bundle = upload_code(client, Path(handed.cwd))
    job = client.submit(handover.job_spec(handed, compute, bundle))
    if as_json:
        echo_json({"job": job, "handed": handed.__dict__})
        return
    click.echo(f"job {job.id} goes on from step {handed.step} ({handed.checkpoint}) on "
               f"{compute.describe()}")


def _to_local(client: Client, job_id: str, notice_s: float, reason: str | None,
              as_json: bool) -> None:
    result = client.burst(job_id, local=True, notice_s=notice_s, reason=reason)
    click.echo(f"job {job_id}: attempt {result.attempt} checkpoints to {result.checkpoint}; "
               "waiting for it to end...", err=True)
    ended = client.wait(job_id, poll_s=0.25, timeout_s=notice_s + 120)  # the user waits
    if ended.state != JobState.CANCELLED or "local run" not in (ended.reason or ""):
        raise InvalidInput(f"job {job_id} ended {ended.state} ({ended.reason}): nothing to go "
                           "on from here", field="job")
    # a user may read a job's own prefix, not write it: the checkpoint moves to the home
    target = f"{client.data_home().home}burst/{job_id}/checkpoints/"
    grant = client.data_credentials(read=[result.checkpoint], write=[target])
    env = {**os.environ, **handover_env(grant.store.model_dump(), target),
           **run_env(client, ended)}
    with needs("bourse burst --local", ("data",)):
        from bourse.storage.remote import Stores
        from bourse.storage.settings import StoreSettings
    step = asyncio.run(carry(Stores(StoreSettings.from_env(env)), result.checkpoint, target))
    command = ended.spec.command
    if as_json:
        echo_json({"job": job_id, "checkpoint": target, "step": step, "command": command})
    click.echo(f"going on here from step {step} ({target}): {' '.join(command)}", err=True)
    started = time.monotonic()
    code = subprocess.call(command, env=env)
    click.echo(f"local run ended with status {code} after {time.monotonic() - started:.0f} s",
               err=True)
    sys.exit(code)


async def carry(opener: Opener, source: str, target: str) -> int | None:
    """Copy the newest complete checkpoint under ``source`` to ``target`` (files, then its
    marker, as any save); its step. Nothing to copy is an error: the job saved nothing."""
    from bourse.storage.checkpoint import latest_complete, save_checkpoint

    latest = await latest_complete(opener, source)
    if latest is None:
        raise InvalidInput(f"no complete checkpoint under {source}: the job saved nothing "
                           "to go on from", field="checkpoint")
    store = opener(latest.uri)
    with tempfile.TemporaryDirectory(prefix="bourse-burst-") as tmp:
        for item in latest.files:
            path = Path(tmp, item.key.removeprefix(latest.uri.key))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(bytes(await store.get(item.key)))
        await save_checkpoint(opener, Path(tmp), target, step=latest.step)
    return latest.step


def run_env(client: Client, job: JobDetail) -> dict[str, str]:
    """The job's tracking run goes on from here (the same run, its step axis continued): the
    variables a job gets, with the user's own token (it may write the project's runs), unless
    the job points MLflow elsewhere."""
    if "MLFLOW_TRACKING_URI" in job.spec.env:
        return {}
    return {"MLFLOW_TRACKING_URI": client.url, "MLFLOW_RUN_ID": job.id,
            "MLFLOW_TRACKING_TOKEN": client.token}


def handover_env(store: dict[str, Any], checkpoint: str) -> dict[str, str]:
    """What a local run needs to go on from the job's checkpoint: its prefix, that it is a
    resumption, and the grant's store endpoint and key."""
    env = {"BOURSE_CHECKPOINT_URI": checkpoint, "BOURSE_RESUME": "1",
           "AWS_ACCESS_KEY_ID": store["access_key_id"],
           "AWS_SECRET_ACCESS_KEY": store["secret_access_key"]}
    if store.get("session_token"):
        env["AWS_SESSION_TOKEN"] = store["session_token"]
    if store.get("endpoint"):
        env["BOURSE_S3_ENDPOINT"] = store["endpoint"]
    if store.get("region"):
        env["AWS_REGION"] = store["region"]
    if store.get("path_style") is not None:
        env["BOURSE_S3_PATH_STYLE"] = "1" if store["path_style"] else "0"
    return env
