"""``bourse context``: the exchanges this user works with, one of them current
(``sdk.contexts``); ``bourse --context NAME`` uses another for one command."""

from __future__ import annotations

import os
import sys

import click

from bourse.cli.confirm import confirm, yes_option
from bourse.cli.errors import handles_errors
from bourse.cli.render import echo_json, table
from bourse.core.errors import InvalidInput
from bourse.sdk.config import resolve
from bourse.sdk.contexts import (
    Context,
    Contexts,
    check_name,
    check_token,
    check_url,
    load_contexts,
    save_contexts,
)


@click.group("context")
def context() -> None:
    """Named exchanges (a URL and a token each), one of them current, as kubectl's contexts.

    `bourse --context NAME COMMAND` (or BOURSE_CONTEXT=NAME) uses another for one command;
    BOURSE_URL and BOURSE_TOKEN, when set, win over any context.
    """


@context.command("add")
@click.argument("name")
@click.option("--url", required=True, help="The exchange's URL, e.g. https://bourse.example.com.")
@click.option("--token", help="The API token. It shows in the shell's history and the "
              "process list: prefer --token-stdin.")
@click.option("--token-stdin", is_flag=True, help="Read the token from standard input, e.g. "
              "`pass bourse/prod | bourse context add prod --url URL --token-stdin`.")
@click.option("--use", "make_current", is_flag=True,
              help="Make it the current context (the first context always is).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def add(name: str, url: str, token: str | None, token_stdin: bool, make_current: bool,
        as_json: bool) -> None:
    """Add a context (or replace the one of that name). The token is kept in a file only
    you can read (mode 0600) and never shown again."""
    entry = Context(check_name(name), check_url(url), check_token(_token(token, token_stdin)))
    before = load_contexts()
    after = before.put(entry, use=make_current)
    path = save_contexts(after)
    verb = "replaced" if before.find(name) else "added"
    current = ("it is the current context" if after.current == name else
               f"the current one is still {after.current} (`bourse context use {name}`)")
    if as_json:
        echo_json({"name": name, "url": entry.url, "action": verb, "file": str(path),
                   "current": after.current})
        return
    click.echo(f"{verb} context {name} ({entry.url}) in {path}; {current}", err=True)


def _token(token: str | None, from_stdin: bool) -> str:
    if token is not None and from_stdin:
        raise InvalidInput("give the token once", field="--token",
                           hint="use --token or --token-stdin, not both")
    if from_stdin:
        return sys.stdin.readline()
    if token is not None:
        return token
    if not interactive():
        raise InvalidInput("no token given", field="--token",
                           hint="pipe it in with --token-stdin (or give --token)")
    return str(click.prompt("token", hide_input=True))


def interactive() -> bool:
    """Whether someone can answer a question (tests replace it)."""
    return sys.stdin.isatty()


@context.command("use")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def use(name: str, as_json: bool) -> None:
    """Make NAME the current context: every later command (and `Client()`) uses it."""
    after = load_contexts().use(name)
    save_contexts(after)
    entry = after.get(name)
    if as_json:
        echo_json({"current": name, "url": entry.url})
        return
    click.echo(f"current context: {name} ({entry.url})", err=True)


@context.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def list_contexts(as_json: bool) -> None:
    """The contexts, the one in use marked (never their tokens)."""
    contexts = load_contexts()
    in_use = _in_use(contexts)
    rows = [{"name": c.name, "url": c.url, "current": c.name == in_use}
            for c in contexts.entries]
    if as_json:
        echo_json(rows)
        return
    if not rows:
        click.echo("no contexts: `bourse context add NAME --url URL --token-stdin` adds one",
                   err=True)
        return
    click.echo(table(("CURRENT", "NAME", "URL"),
                     [["*" if r["current"] else "", str(r["name"]), str(r["url"])]
                      for r in rows]))


def _in_use(contexts: Contexts) -> str | None:
    """The context commands use: BOURSE_CONTEXT's (``--context``) or the current one."""
    chosen = os.environ.get("BOURSE_CONTEXT")
    return chosen if chosen and contexts.find(chosen) else contexts.current


@context.command("show")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def show(as_json: bool) -> None:
    """The exchange commands use now, and where its URL and token come from (the token is
    never shown)."""
    found = resolve(None, None)
    selected = ("BOURSE_CONTEXT (or --context)" if os.environ.get("BOURSE_CONTEXT") else
                "current")
    view = {"context": found.context, "selected_by": selected if found.context else None,
            "url": found.credentials.url, "url_from": found.url_from,
            "token_from": found.token_from, "file": str(found.path)}
    if as_json:
        echo_json(view)
        return
    click.echo(f"context: {found.context or '-'}" +
               (f" ({selected})" if found.context else " (none: the environment alone)"))
    click.echo(f"url:     {found.credentials.url} (from {found.url_from})")
    click.echo(f"token:   set (from {found.token_from})")
    click.echo(f"file:    {found.path}")


@context.command("rm")
@click.argument("name")
@yes_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def remove(name: str, yes: bool, as_json: bool) -> None:
    """Remove a context and its token from this machine (the token stays valid on the
    exchange: `bourse tokens revoke` ends it)."""
    contexts = load_contexts()
    entry = contexts.get(name)
    confirm(f"remove context {name} ({entry.url})?", yes=yes, what=f"remove context {name}")
    after = contexts.remove(name)
    save_contexts(after)
    if as_json:
        echo_json({"removed": name, "current": after.current})
        return
    note = "" if after.current else "; no context is current now (`bourse context use NAME`)"
    click.echo(f"removed context {name}{note}", err=True)
