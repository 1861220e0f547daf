"""Conventions every command keeps: --json where it prints data, -y where it destroys, a
suggestion for a mistyped command."""

from __future__ import annotations

import json
from collections.abc import Iterator

import click
import pytest
from click.testing import CliRunner

from bourse.cli.main import COMMANDS, cli
from bourse.cli.suggest import nearest, unknown

# commands that print no data of their own to offer as JSON, and why
NO_JSON = {
    "exec": "the command's own output and exit code",
    "audit export": "CSV: --csv is the machine-readable form",
    "demo": "a narrated walk-through",
    "completion": "a shell script",
    "schema": "a JSON Schema: JSON already",
}
DESTRUCTIVE = ("stop", "tokens revoke", "secrets rm", "nodes reclaim", "runs stop",
               "context rm", "rm", "services stop", "services rollback", "fleets remove")


def commands() -> Iterator[tuple[str, click.Command]]:
    """Every command and subcommand, by its full name (``nodes show``)."""
    ctx = click.Context(cli)

    def walk(command: click.Command, name: str) -> Iterator[tuple[str, click.Command]]:
        yield name, command
        if isinstance(command, click.Group):
            for sub in command.list_commands(ctx):
                found = command.get_command(ctx, sub)
                assert found is not None
                yield from walk(found, f"{name} {sub}")

    for name in COMMANDS:
        command = cli.get_command(ctx, name)
        assert command is not None, name
        yield from walk(command, name)


def flags(command: click.Command) -> set[str]:
    return {o for p in command.params if isinstance(p, click.Option) for o in p.opts}


def test_every_command_that_prints_data_offers_json() -> None:
    # a group that only holds subcommands prints its help, nothing else
    printing = {name: c for name, c in commands()
                if not isinstance(c, click.Group) or c.invoke_without_command}
    lacking = sorted(name for name, c in printing.items()
                     if "--json" not in flags(c) and name not in NO_JSON)
    assert lacking == [], f"add --json to these, or to NO_JSON with a reason: {lacking}"
    stale = sorted(set(NO_JSON) - set(printing))
    assert stale == [], f"NO_JSON names commands that do not exist: {stale}"
    needless = sorted(n for n in NO_JSON if "--json" in flags(printing[n]))
    assert needless == [], f"these have --json now: drop them from NO_JSON: {needless}"


def test_destructive_commands_take_yes() -> None:
    found = dict(commands())
    assert all({"-y", "--yes"} <= flags(found[name]) for name in DESTRUCTIVE)


@pytest.mark.parametrize(("args", "says"), [
    (["jbos"], "no command 'jbos'; did you mean 'jobs'?"),
    (["secret"], "no command 'secret'; did you mean 'secrets'?"),
    (["jobs", "shwo"], "no command 'shwo'; did you mean 'show'?"),
    (["tokens", "revok"], "no command 'revok'; did you mean 'revoke'?"),
    (["xyzzy"], "no command 'xyzzy'; `--help` lists the commands"),
])
def test_a_mistyped_command_names_the_nearest(args: list[str], says: str) -> None:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2
    assert says in result.stderr


def test_nearest_prefers_the_closest_then_prefixes() -> None:
    assert nearest("lgos", ["logs", "login", "launches"]) == ["logs"]
    assert nearest("c", ["cost", "clouds", "jobs"]) == ["cost", "clouds"]
    assert nearest("", ["cost"]) == []
    assert unknown("nods", ["nodes", "offers"]) == "no command 'nods'; did you mean 'nodes'?"


def test_json_of_a_command_is_one_document(exchange: object) -> None:
    result = CliRunner().invoke(cli, ["jobs", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == []
