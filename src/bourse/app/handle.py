"""``Handle``: a submitted stage, and ``wait`` for several at once."""

from __future__ import annotations

from abc import ABC, abstractmethod

from bourse.app.context import record
from bourse.app.result import Result, StageFailed


class Handle(ABC):
    """A stage that was submitted. ``result()`` blocks until it ends."""

    def __init__(self, work_name: str) -> None:
        self.work_name = work_name
        self._result: Result | None = None
        self._tail = ""

    def result(self) -> Result:
        """The stage's Result; raises StageFailed (with the log's tail) if it did not succeed."""
        if self._result is None:
            self._result, self._tail = self._wait()
            record(self._result)
        if not self._result.ok:
            raise StageFailed(self._result, self._tail)
        return self._result

    @abstractmethod
    def _wait(self) -> tuple[Result, str]:
        """Block until the stage ends; its Result and the tail of its log."""


class Done(Handle):
    """A stage that needed no run (a cached result)."""

    def __init__(self, result: Result) -> None:
        super().__init__(result.work)
        self._result = result
        record(result)

    def _wait(self) -> tuple[Result, str]:
        assert self._result is not None
        return self._result, ""


def wait(*handles: Handle) -> list[Result]:
    """Wait for every handle; then raise the first failure, if any, else return the Results."""
    failures: list[StageFailed] = []
    results: list[Result] = []
    for handle in handles:
        try:
            results.append(handle.result())
        except StageFailed as exc:
            failures.append(exc)
    if failures:
        raise failures[0]
    return results
