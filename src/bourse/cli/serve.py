"""``bourse serve FILE`` and ``bourse services``: services (issue 20, docs/serving.md).

``serve`` reads a task file with a ``service:`` section, packs the code as ``bourse run``
does, and applies the version: the first time it creates the service and prints its URL;
again with a changed file it starts a rollout, which the coordinator advances or rolls back
on its gateway's figures. ``services`` lists them, ``show`` says what each version does and
what was decided, ``rollback`` ends a rollout by hand, ``stop`` stops every replica.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from bourse.cli import client as seam
from bourse.cli.confirm import confirm, yes_option
from bourse.cli.errors import handles_errors
from bourse.cli.render import clock, echo_json, table
from bourse.cli.run import upload_code
from bourse.cli.suggest import SuggestingGroup
from bourse.protocol.services import ServiceView
from bourse.tasks.load import load_any
from bourse.tasks.serving import apply_body
from bourse.tasks.spec import code_root


@click.command()
@click.argument("task_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--no-code", is_flag=True, help="Do not pack and upload the task's workdir.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def serve(task_file: Path, no_code: bool, as_json: bool) -> None:
    """Start a service from a task file, or roll out its changed version; prints its URL."""
    loaded = load_any(task_file)
    for note in loaded.notes:
        click.echo(f"bourse: note ({loaded.kind}): {note}", err=True)
    task = loaded.task
    apply_body(task_file, task, None)  # refuse a file without a service before packing
    with seam.open_client() as client:
        bundle = None if no_code else upload_code(client, code_root(task, task_file))
        view = client.apply_service(apply_body(task_file, task, bundle))
        url = client.url.rstrip("/") + view.url
    if as_json:
        echo_json(view)
        return
    click.echo(url)
    click.echo(f"bourse: {_state_line(view)}", err=True)


def _state_line(view: ServiceView) -> str:
    if view.canary is not None:
        return (f"service {view.name}: rolling out version {view.canary} over version "
                f"{view.stable}; `bourse services show {view.name}` follows it")
    return f"service {view.name}: version {view.stable} serves"


@click.group(cls=SuggestingGroup, invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
@handles_errors
def services(ctx: click.Context, as_json: bool) -> None:
    """List services; `services show NAME`, `rollback NAME`, `stop NAME`."""
    if ctx.invoked_subcommand is not None:
        return
    with seam.open_client() as client:
        found = client.services()
    if as_json:
        echo_json(found)
        return
    click.echo(table(("NAME", "STATE", "STABLE", "CANARY", "WEIGHTS", "URL"),
                     [[s.name, s.state, _n(s.stable), _n(s.canary), _weights(s), s.url]
                      for s in found]))


def _n(value: int | None) -> str:
    return "-" if value is None else f"v{value}"


def _weights(view: ServiceView) -> str:
    return " ".join(f"v{v.number}:{v.weight}%" for v in view.versions if v.weight) or "-"


@services.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def show(name: str, as_json: bool) -> None:
    """Versions (weight, replicas, the gateway's last minute) and the decisions made."""
    with seam.open_client() as client:
        detail = client.service(name)
    if as_json:
        echo_json(detail)
        return
    click.echo(f"{detail.name} ({detail.project}) {detail.state}  {detail.url}")
    click.echo(table(("VERSION", "STATE", "WEIGHT", "READY", "REQ/S", "ERRORS", "P50", "P99"),
                     [[f"v{v.number}", v.state, f"{v.weight}%", f"{v.ready}/{v.replicas}",
                       *_figures(v.figures)] for v in detail.versions]))
    for event in detail.events[-20:]:
        version = f" v{event.version}" if event.version is not None else ""
        click.echo(f"{clock(event.time)}  {event.kind}{version}: {event.message}")


def _figures(figures: dict[str, Any]) -> list[str]:
    if not figures.get("requests"):
        return ["-", "-", "-", "-"]
    return [f"{figures['rps']:.1f}", f"{figures['error_rate']:.1%}",
            f"{figures['p50_ms']:.0f} ms", f"{figures['p99_ms']:.0f} ms"]


@services.command("rollback")
@click.argument("name")
@yes_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def rollback(name: str, yes: bool, as_json: bool) -> None:
    """End the rollout in progress: its traffic goes back to the stable version (asks
    first; -y does not)."""
    confirm(f"roll back the new version of service {name}?", yes=yes,
            what=f"roll back service {name}")
    with seam.open_client() as client:
        view = client.rollback_service(name)
    if as_json:
        echo_json(view)
        return
    click.echo(f"service {view.name}: rolled back; version {view.stable} serves", err=True)


@services.command("stop")
@click.argument("name")
@yes_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def stop(name: str, yes: bool, as_json: bool) -> None:
    """Stop every replica of the service (asks first; -y does not). `bourse serve FILE`
    starts it again."""
    confirm(f"stop service {name} and all its replicas?", yes=yes, what=f"stop service {name}")
    with seam.open_client() as client:
        view = client.stop_service(name)
    if as_json:
        echo_json(view)
        return
    click.echo(f"service {view.name}: stopped", err=True)
