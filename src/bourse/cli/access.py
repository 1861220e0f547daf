"""``bourse login``, ``bourse projects`` and ``bourse tokens``: who may use the exchange."""

from __future__ import annotations

import os
import time
from typing import cast

import click

from bourse.cli import client as seam
from bourse.cli.confirm import confirm, yes_option
from bourse.cli.errors import handles_errors
from bourse.cli.render import clock, echo_json, table
from bourse.cli.suggest import SuggestingGroup
from bourse.core.units import parse_duration
from bourse.protocol.access import MAX_TOKEN_LIFETIME_S, Role, TokenView
from bourse.sdk.client import Client
from bourse.sdk.config import save_credentials
from bourse.sdk.contexts import check_name

TOKEN_HEADERS = ("ID", "NAME", "PROJECT", "ROLE", "CREATED", "EXPIRES", "STATUS")


@click.command()
@click.argument("url")
@click.option("--token", help="The API token (asked for when left out, so it is not in the "
              "shell's history).")
@click.option("--name", metavar="CONTEXT", help="The context to write (default: the one "
              "--context or BOURSE_CONTEXT names, else `default`).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def login(url: str, token: str | None, name: str | None, as_json: bool) -> None:
    """Check a token against an exchange and keep both as a context, made current (file
    mode 0600; `bourse context` lists and switches them)."""
    context = check_name(name or os.environ.get("BOURSE_CONTEXT") or "default")
    secret = token or click.prompt("token", hide_input=True)
    with Client(url, secret) as client:
        client.jobs(limit=1)  # refused here, not at the next command, if the token is wrong
    path = save_credentials(url, secret, context=context)
    if as_json:
        echo_json({"url": url, "context": context, "current": True, "file": str(path)})
        return
    click.echo(f"logged in to {url}; context {context} (current) in {path}", err=True)


@click.group(cls=SuggestingGroup, invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
@handles_errors
def projects(ctx: click.Context, as_json: bool) -> None:
    """List projects (all of them for an admin); `projects create NAME` makes one."""
    if ctx.invoked_subcommand is not None:
        return
    with seam.open_client() as client:
        found = client.projects()
    if as_json:
        echo_json(found)
        return
    rows = [[p.name, ",".join(p.required_tags) or "-", clock(p.created_at)] for p in found]
    click.echo(table(("NAME", "REQUIRED TAGS", "CREATED"), rows))


@projects.command("create")
@click.argument("name")
@click.option("--require-tag", "tags", multiple=True,
              help="A compliance tag every node running its jobs must carry (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def create_project(name: str, tags: tuple[str, ...], as_json: bool) -> None:
    """Create a project (admin)."""
    with seam.open_client() as client:
        made = client.create_project(name, tags)
    if as_json:
        echo_json(made)
        return
    click.echo(made.name)


@click.group(cls=SuggestingGroup)
def tokens() -> None:
    """API tokens (admin): create, list, revoke."""


@tokens.command("create")
@click.option("--project", default="default", show_default=True)
@click.option("--role", type=click.Choice(["member", "provider", "admin"]), default="member",
              show_default=True)
@click.option("--name", help="A label shown by `tokens list`.")
@click.option("--expires", help="Lifetime: 45s, 90m, 12h, 30d, 2w, at most 5 years "
              "(default: never).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def create_token(project: str, role: str, name: str | None, expires: str | None,
                 as_json: bool) -> None:
    """Create a token; it is printed once and only its hash is kept."""
    lifetime = (parse_duration(expires, field="--expires", at_most=MAX_TOKEN_LIFETIME_S)
                if expires else None)
    with seam.open_client() as client:
        made = client.create_token(project, cast(Role, role), name=name,
                                   expires_in_s=lifetime)
    if as_json:
        echo_json(made)
        return
    click.echo(made.token)
    until = f"until {clock(made.expires_at)}" if made.expires_at else "with no expiry"
    click.echo(f"token {made.id}: {made.role} of project {made.project}, valid {until}; "
               "it is shown only this once", err=True)


def _status(token: TokenView, now: float) -> str:
    if token.revoked_at is not None:
        return "revoked"
    if token.expires_at is not None and token.expires_at <= now:
        return "expired"
    return "active"


@tokens.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def list_tokens(as_json: bool) -> None:
    """Every user token: never its secret."""
    with seam.open_client() as client:
        found = client.tokens()
    if as_json:
        echo_json(found)
        return
    now = time.time()
    rows = [[t.id, t.name or "-", t.project, t.role, clock(t.created_at),
             clock(t.expires_at), _status(t, now)] for t in found]
    click.echo(table(TOKEN_HEADERS, rows))


@tokens.command("revoke")
@click.argument("token_id")
@yes_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def revoke_token(token_id: str, yes: bool, as_json: bool) -> None:
    """Revoke a token: refused from its next request on (asks first; -y does not)."""
    confirm(f"revoke token {token_id}? whatever uses it stops working", yes=yes,
            what=f"revoke token {token_id}")
    with seam.open_client() as client:
        revoked = client.revoke_token(token_id)
    if as_json:
        echo_json(revoked)
        return
    click.echo(f"revoked {revoked.id}", err=True)


def _limits() -> click.Command:
    from bourse.cli.clouds import limits
    return limits


projects.add_command(_limits())
