"""``Backend``: where a run's stages go. One path for every backend — check the stage, encode
the call, look it up in the cache, start it (again, if it fails and has retries left) — and
two places to start it: local processes (``local``) or jobs on an exchange (``exchange``)."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from bourse.app.cache import ResultCache, cache_key
from bourse.app.call import Call, encode_script_call, encode_work_call
from bourse.app.handle import Done, Handle
from bourse.app.result import Result
from bourse.app.work import PythonScript, Work


class Backend(ABC):
    """Runs stages: ``submit`` validates a call before anything runs, then starts it and
    returns a handle whose ``result()`` blocks."""

    python = "python"  # the interpreter a stage's job runs

    def __init__(self, root: Path, run_id: str) -> None:
        self.root, self.run_id = root.resolve(), run_id
        self.cache = ResultCache(self.root)
        self._calls: Counter[str] = Counter()
        self._calls_lock = threading.Lock()

    def submit(self, work: Work, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Handle:
        work.check()
        call = (encode_script_call(work, args, kwargs, self.python)
                if isinstance(work, PythonScript)
                else encode_work_call(work, args, kwargs, self.root, self.python))
        key = cache_key(call, self.code(), work.env) if work.cache else None
        if key is not None and (hit := self.cache.get(key)) is not None:
            where = f"job {hit.job_id}" if hit.job_id else "an earlier run"
            click.echo(f"[{work.name}] cached: reusing the result of {where}")
            return Done(hit)
        slot = self.slot(work.name)
        handle: Handle = Retrying(lambda: self.start(work, call, slot), work)
        return Caching(handle, self.cache, key) if key is not None else handle

    def slot(self, stage: str) -> str:
        """Where this call's outputs go, unique in the run: the stage's name, then
        ``<name>-2``, ``<name>-3``... for later calls of a stage of the same name."""
        with self._calls_lock:
            self._calls[stage] += 1
            count = self._calls[stage]
        return stage if count == 1 else f"{stage}-{count}"

    @abstractmethod
    def code(self) -> str:
        """What identifies the project's code in cache keys."""

    @abstractmethod
    def start(self, work: Work, call: Call, slot: str) -> Handle:
        """Start one run of the call; its outputs under ``slot``."""


class Retrying(Handle):
    """Starts the stage, and again while it fails and ``work.retries`` allows."""

    def __init__(self, start: Callable[[], Handle], work: Work) -> None:
        super().__init__(work.name)
        self._start, self.retries = start, work.retries
        self.inner: Handle = start()

    def _wait(self) -> tuple[Result, str]:
        for attempt in range(self.retries + 1):
            result, tail = self.inner._wait()
            if result.ok or attempt == self.retries:
                break
            click.echo(f"[{self.work_name}] {result.status}; retrying "
                       f"({attempt + 1}/{self.retries})")
            self.inner = self._start()
        return result, tail


class Caching(Handle):
    """Remembers a successful result under its cache key."""

    def __init__(self, inner: Handle, cache: ResultCache, key: str) -> None:
        super().__init__(inner.work_name)
        self.inner, self.cache, self.key = inner, cache, key

    def _wait(self) -> tuple[Result, str]:
        result, tail = self.inner._wait()
        if result.ok:
            self.cache.put(self.key, result)
        return result, tail
