"""Where stages run: the backend of the current app run (local processes or an exchange)."""

from __future__ import annotations

import contextvars
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bourse.app.backend import Backend

_IN_JOB = "BOURSE_IN_STAGE"

_current: contextvars.ContextVar[Backend | None] = contextvars.ContextVar("backend",
                                                                         default=None)


def backend() -> Backend:
    found = _current.get()
    if found is None:  # a stage called outside App.run(): the configured exchange
        from bourse.app.exchange import ExchangeBackend

        found = ExchangeBackend.default()
        _current.set(found)
    return found


_results: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar("results",
                                                                          default=None)


@contextmanager
def using(chosen: Backend) -> Iterator[list[Any]]:
    """Run stages on ``chosen``; yields the list their Results are recorded in, in the order
    they ended."""
    token, recorded = _current.set(chosen), _results.set([])
    try:
        found = _results.get()
        assert found is not None
        yield found
    finally:
        _current.reset(token)
        _results.reset(recorded)


def record(result: Any) -> None:
    found = _results.get()
    if found is not None:
        found.append(result)


def enter_job() -> None:
    """Mark this process as running a stage's body (``work.run`` then runs it here)."""
    os.environ[_IN_JOB] = "1"


def inside_job() -> bool:
    return os.environ.get(_IN_JOB) == "1"
