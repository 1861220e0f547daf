"""Confirmation before a destructive command: ``-y/--yes``, else a question on a terminal.

Without a terminal to ask on (a script, CI, a pipe into stdin) and without ``--yes`` the
command does nothing and says to pass ``--yes``: a script never hangs on a prompt it cannot
answer, nor destroys something because no one was there to say no.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from bourse.core.errors import BourseError, InvalidInput

F = TypeVar("F", bound=Callable[..., Any])


class Declined(BourseError):
    """The person at the terminal answered no: nothing was done."""

    exit_code = 1


def yes_option(command: F) -> F:
    """The ``-y/--yes`` flag, passed to the command as ``yes``."""
    return click.option("-y", "--yes", is_flag=True,
                        help="Do it without asking (needed without a terminal).")(command)


def terminal() -> bool:
    """Whether someone can answer: stdin and stderr (where the question goes) are terminals."""
    return sys.stdin.isatty() and sys.stderr.isatty()


def confirm(question: str, *, yes: bool, what: str) -> None:
    """Return when the action may go ahead; raise when it may not. ``what`` names the action
    in the refusal ("stop 3 jobs")."""
    if yes:
        return
    if not terminal():
        raise InvalidInput(f"{what}: no terminal to confirm on", field="--yes",
                           hint="pass --yes (or -y) to do it without asking")
    if not click.confirm(question, default=False, err=True):
        raise Declined(f"{what}: not confirmed; nothing was done")
