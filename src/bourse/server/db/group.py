"""Group commit: requests that each need a small write transaction share one.

Callers queue an item and wait; one drain task writes every item queued so far in a single
transaction, then hands each caller its own outcome. Each caller still returns only once its
item is committed (or refused), but concurrent callers share one commit, one connection and
one turn at SQLite's write lock instead of queueing for one each. Nothing waits to gather:
the first item of a quiet moment is written at once, and items arriving meanwhile form the
next group.

``apply`` writes a group inside the transaction and returns one outcome per item, in order:
a result, or the exception that item is refused with (then it must have written nothing,
so that the others can still commit). When ``apply`` or the commit raises instead (a
database error), the transaction is rolled back and the group's items are written again one
per transaction, so that only the item that causes it fails, with that exception.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from sqlalchemy.ext.asyncio import AsyncSession

from bourse.server.db.database import Database

T = TypeVar("T")
R = TypeVar("R")
Apply = Callable[[AsyncSession, Sequence[T]], Awaitable[Sequence[R | Exception]]]


class GroupCommit(Generic[T, R]):
    def __init__(self, db: Database, apply: Apply[T, R]) -> None:
        self.db, self.apply = db, apply
        self._queue: list[tuple[T, asyncio.Future[R]]] = []
        self._drain: asyncio.Task[None] | None = None
        self.groups = 0  # transactions written, for tests and benchmarks

    async def write(self, item: T) -> R:
        """Write ``item`` with whatever else is queued; its outcome once committed."""
        done: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._queue.append((item, done))
        if self._drain is None or self._drain.done():
            # a task of its own: a caller that goes away never stops the others' commit
            self._drain = asyncio.ensure_future(self._drain_all())
        return await done

    async def _drain_all(self) -> None:
        while self._queue:
            group, self._queue = self._queue, []
            await self._write(group)

    async def _write(self, group: list[tuple[T, asyncio.Future[R]]]) -> None:
        try:
            async with self.db.write() as session:
                outcomes = await self.apply(session, [item for item, _ in group])
            self.groups += 1
        except Exception as exc:
            if len(group) == 1:
                _settle([group[0][1]], [exc])
                return
            for entry in group:  # one item's failure must not fail the others: each alone
                await self._write([entry])
        except BaseException as exc:  # cancelled at shutdown: tell the callers, then stop
            _settle([done for _, done in group], [exc] * len(group))
            raise
        else:
            _settle([done for _, done in group], outcomes)


def _settle(waiting: Sequence[asyncio.Future[R]],
            outcomes: Sequence[R | BaseException]) -> None:
    for done, outcome in zip(waiting, outcomes, strict=True):
        if done.done():  # its caller went away
            continue
        if isinstance(outcome, asyncio.CancelledError):
            done.cancel()
        elif isinstance(outcome, BaseException):
            done.set_exception(outcome)
        else:
            done.set_result(outcome)
