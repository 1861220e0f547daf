"""Where bourse's exceptions become CLI exit codes: 0 ok, 1 no result, 2 bad input."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

import click
from pydantic import ValidationError

from bourse.core.errors import BourseError, InvalidInput

EXIT_OK, EXIT_NO_RESULT, EXIT_BAD_INPUT = 0, 1, 2
F = TypeVar("F", bound=Callable[..., Any])


def handles_errors(command: F) -> F:
    """Turn a BourseError into ``error: ...`` on stderr and its exit code; a request body
    the CLI built from bad flags (a pydantic error) is bad input too, never a traceback."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except BourseError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except ValidationError as exc:
            click.echo(f"error: {invalid(exc)}", err=True)
            sys.exit(EXIT_BAD_INPUT)

    return wrapper  # type: ignore[return-value]


def invalid(exc: ValidationError) -> InvalidInput:
    """The first of pydantic's errors, with the path of its field (and our own words when
    one of our validators raised it)."""
    error = exc.errors()[0]
    field = ".".join(str(p) for p in error["loc"]) or None
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, InvalidInput):
        return InvalidInput(cause.message, field=field or cause.field, hint=cause.hint)
    return InvalidInput(error["msg"].removeprefix("Value error, "), field=field)
