"""Command groups that suggest the nearest command for a mistyped one:
``no command 'jbos'; did you mean 'jobs'?``."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

import click

CUTOFF, SPREAD = 0.6, 0.1


def nearest(name: str, known: Iterable[str]) -> list[str]:
    """Known names close to ``name`` (``difflib``'s ratio at least 0.6 and within 0.1 of the
    closest), else those it begins; at most three, the closest first."""
    names = list(known)
    scored = sorted(((difflib.SequenceMatcher(None, name, n).ratio(), n) for n in names),
                    key=lambda pair: -pair[0])
    best = scored[0][0] if scored else 0.0
    close = [n for score, n in scored if score >= max(CUTOFF, best - SPREAD)]
    prefixed = [n for n in names if name and n.startswith(name) and n not in close]
    return (close + prefixed)[:3]


def unknown(name: str, known: Iterable[str]) -> str:
    """The message for a command that does not exist."""
    close = nearest(name, known)
    if not close:
        return f"no command {name!r}; `--help` lists the commands"
    return f"no command {name!r}; did you mean " + " or ".join(repr(c) for c in close) + "?"


class SuggestingGroup(click.Group):
    """A group whose unknown subcommand errors name the nearest known ones; ``aliases``: other
    names of its commands, accepted but not listed (``fleets rm`` for ``fleets remove``)."""

    aliases: dict[str, str] = {}  # noqa: RUF012 (read only; a group sets its own)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return super().get_command(ctx, self.aliases.get(cmd_name, cmd_name))

    def resolve_command(self, ctx: click.Context, args: list[str]
                        ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0]
        if not name.startswith("-") and self.get_command(ctx, name) is None and not (
                ctx.token_normalize_func and
                self.get_command(ctx, ctx.token_normalize_func(name))):
            ctx.fail(unknown(name, self.list_commands(ctx)))
        return super().resolve_command(ctx, args)
