"""``Backend``: where a run's stages go. One path for every backend — check the stage, encode
the call, look it up in the cache, start it (again, if it fails and has retries left) — and
two places to start it: local processes (``local``) or jobs on an exchange (``exchange``).

The cache is never a reason for a flow to fail: when the data behind an input (or a cached
result's output) cannot be read to key or check it, the stage runs, and says why."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import click

from bourse.app.cache import ResultCache, cache_key
from bourse.app.call import Call, encode_script_call, encode_work_call
from bourse.app.handle import Done, Handle
from bourse.app.result import Result
from bourse.app.work import PythonScript, Work
from bourse.sdk.errors import ApiError, Unreachable
from bourse.storage.errors import StorageError

# what reading the data behind a URI may raise: the store's or the exchange's failures, and a
# local file's; anything else (a URI the backend cannot use at all) stops the flow
UNREADABLE = (StorageError, ApiError, Unreachable, OSError)


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
        key, hit = self.lookup(work, call) if work.cache else (None, None)
        if hit is not None:
            where = f"job {hit.job_id}" if hit.job_id else "an earlier run"
            click.echo(f"[{work.name}] cached: reusing the result of {where}")
            pass_back(work, hit)
            return Done(hit)
        slot = self.slot(work.name)
        handle: Handle = PassingBack(Retrying(lambda: self.start(work, call, slot), work), work)
        return Caching(handle, self, key) if key is not None else handle

    def lookup(self, work: Work, call: Call) -> tuple[str | None, Result | None]:
        """The call's cache key (None when its inputs cannot be read) and the result stored
        under it, if that result's outputs are still as they were stored."""
        inputs = self.digests(work.name, call.inputs, "input",
                              "running the stage; its result will not be cached")
        if inputs is None:
            return None, None
        key = cache_key(call, self.code(), work.env, inputs)
        entry = self.cache.get(key)
        if entry is None:
            return key, None
        uris = {name: data.uri for name, data in entry.result.outputs.items()}
        now = self.digests(work.name, uris, "output of the cached result",
                           "running the stage again")
        if now is not None and now != entry.outputs:
            click.echo(f"[{work.name}] cache: the outputs of the cached result changed or are "
                       "gone since it was stored; running the stage again")
        return key, entry.result if now == entry.outputs else None

    def digests(self, stage: str, uris: Mapping[str, str], what: str,
                then: str) -> dict[str, str] | None:
        """``name -> digest`` of the data behind each URI; None when one cannot be read,
        said on the console with what happens ``then``."""
        found: dict[str, str] = {}
        for name, uri in uris.items():
            try:
                found[name] = self.digest(uri)
            except UNREADABLE as exc:
                click.echo(f"[{stage}] cache: cannot read {what} {name!r} at {uri} ({exc}); "
                           f"{then}")
                return None
        return found

    def slot(self, stage: str) -> str:
        """Where this call's outputs go, unique in the run: the stage's name, then
        ``<name>-2``, ``<name>-3``... for later calls of a stage of the same name."""
        with self._calls_lock:
            self._calls[stage] += 1
            count = self._calls[stage]
        return stage if count == 1 else f"{stage}-{count}"

    @abstractmethod
    def begin(self) -> None:
        """The run starts (on an exchange: its driver takes the run's lease)."""

    @abstractmethod
    def end(self) -> None:
        """The flow returned or raised: the run is over; nothing is cancelled."""

    @abstractmethod
    def stop(self, why: str) -> None:
        """The driver was stopped: stop every stage of the run that is still going."""

    @abstractmethod
    def digest(self, uri: str) -> str:
        """A hash of the data behind ``uri`` as it is now; raises one of ``UNREADABLE`` when
        it cannot be read."""

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


class PassingBack(Handle):
    """Once the stage succeeded, sets what its body set on ``self`` on the Work in the flow,
    as Lightning passes a LightningWork's state back to its flow."""

    def __init__(self, inner: Handle, work: Work) -> None:
        super().__init__(inner.work_name)
        self.inner, self.work = inner, work

    def _wait(self) -> tuple[Result, str]:
        result, tail = self.inner._wait()
        pass_back(self.work, result)
        return result, tail


def pass_back(work: Work, result: Result) -> None:
    """The attributes a successful stage's body set (JSON values), onto ``work``."""
    if result.ok:
        for name, value in result.attributes.items():
            setattr(work, name, value)


class Caching(Handle):
    """Remembers a successful result under its cache key, with its outputs' digests."""

    def __init__(self, inner: Handle, backend: Backend, key: str) -> None:
        super().__init__(inner.work_name)
        self.inner, self.backend, self.key = inner, backend, key

    def _wait(self) -> tuple[Result, str]:
        result, tail = self.inner._wait()
        if result.ok:
            uris = {name: data.uri for name, data in result.outputs.items()}
            outputs = self.backend.digests(self.work_name, uris, "output",
                                           "its result is not cached")
            if outputs is not None:
                self.backend.cache.put(self.key, result, outputs)
        return result, tail
