"""Where bourse's exceptions become CLI exit codes: 0 ok, 1 no result, 2 bad input."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

import click

from bourse.core.errors import BourseError

EXIT_OK, EXIT_NO_RESULT, EXIT_BAD_INPUT = 0, 1, 2
F = TypeVar("F", bound=Callable[..., Any])


def handles_errors(command: F) -> F:
    """Turn a BourseError into ``error: ...`` on stderr and its exit code."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except BourseError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)

    return wrapper  # type: ignore[return-value]
