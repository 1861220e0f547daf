"""``bourse secrets``: the project's secrets. A value is read from stdin or a hidden prompt,
never from the command line (where ``ps`` and the shell's history would keep it)."""

from __future__ import annotations

import sys

import click

from bourse.cli import client as seam
from bourse.cli.confirm import confirm, yes_option
from bourse.cli.errors import handles_errors
from bourse.cli.render import clock, echo_json, table
from bourse.cli.suggest import SuggestingGroup
from bourse.core.errors import InvalidInput


@click.group(cls=SuggestingGroup, invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
@handles_errors
def secrets(ctx: click.Context, as_json: bool) -> None:
    """List the project's secrets (names only); `secrets set NAME`, `secrets rm NAME`."""
    if ctx.invoked_subcommand is not None:
        return
    with seam.open_client() as client:
        found = client.secrets()
    if as_json:
        echo_json(found)
        return
    click.echo(table(("NAME", "CREATED", "UPDATED"),
                     [[s.name, clock(s.created_at), clock(s.updated_at)] for s in found]))


def read_value() -> str:
    """The value: stdin when it is not a terminal (one trailing newline dropped), else a
    hidden prompt asked twice."""
    if not sys.stdin.isatty():
        value = sys.stdin.read().removesuffix("\n")
    else:
        value = click.prompt("value", hide_input=True, confirmation_prompt=True)
    if not value:
        raise InvalidInput("the secret's value is empty", field="value",
                           hint="pipe it in: `bourse secrets set NAME < file`")
    return value


@secrets.command("set")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def set_secret(name: str, as_json: bool) -> None:
    """Create or replace a secret; jobs name it with `bourse run --secret NAME`."""
    value = read_value()
    with seam.open_client() as client:
        made = client.set_secret(name, value)
    if as_json:
        echo_json(made)
        return
    click.echo(f"secret {made.name} set", err=True)


@secrets.command("rm")
@click.argument("name")
@yes_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def remove_secret(name: str, yes: bool, as_json: bool) -> None:
    """Delete a secret (jobs already started keep the value they got; asks first, -y does
    not)."""
    confirm(f"delete secret {name}? jobs that name it will fail to start", yes=yes,
            what=f"delete secret {name}")
    with seam.open_client() as client:
        gone = client.delete_secret(name)
    if as_json:
        echo_json(gone)
        return
    click.echo(f"secret {gone.name} deleted", err=True)
