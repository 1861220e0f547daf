"""Local mode: every stage is a local subprocess, no coordinator — same code, same data layout.

Outputs and checkpoints are directories under ``<project>/.bourse/runs/<run>/<stage>/``,
addressed as ``file://`` URIs, and passed to later stages exactly as on an exchange.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import click

from bourse.app.cache import ResultCache, cache_key
from bourse.app.call import (
    Call,
    StagePrinter,
    encode_script_call,
    encode_work_call,
    find_result,
)
from bourse.app.context import Backend
from bourse.app.data import Data
from bourse.app.handle import Done, Handle
from bourse.app.result import Result
from bourse.app.work import PythonScript, Work
from bourse.core.errors import InvalidInput
from bourse.storage.jobenv import CHECKPOINT_VAR, input_var, output_var
from bourse.storage.uri import parse_uri

TAIL_LINES = 20


class LocalHandle(Handle):
    def __init__(self, work: Work, call: Call, proc: subprocess.Popen[str], *,
                 outputs: dict[str, Data], checkpoint: str, started: float) -> None:
        super().__init__(work.name)
        self.call, self.proc, self.outputs = call, proc, outputs
        self.checkpoint, self.started = checkpoint, started
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        printer = StagePrinter(self.work_name, click.echo)
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            printer.line(line.rstrip("\n"))

    def _wait(self) -> tuple[Result, str]:
        code = self.proc.wait()
        self._reader.join()
        text = "\n".join(self.lines)
        _, value = find_result(text)
        status = "SUCCEEDED" if code == 0 else "FAILED"
        result = Result(self.work_name, status, code, None, self.outputs if code == 0 else {},
                        self.checkpoint, value, node="local", placement="local subprocess",
                        duration_s=time.monotonic() - self.started)
        return result, "\n".join(self.lines[-TAIL_LINES:])


class LocalBackend(Backend):
    def __init__(self, root: Path, run_id: str) -> None:
        self.root, self.run_id = root.resolve(), run_id
        self.run_dir = self.root / ".bourse" / "runs" / run_id
        self.cache = ResultCache(self.root)

    def submit(self, work: Work, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Handle:
        work.check()
        python = sys.executable
        call = (encode_script_call(work, args, kwargs, python) if isinstance(work, PythonScript)
                else encode_work_call(work, args, kwargs, self.root, python))
        key = cache_key(call, code="local") if work.cache else None
        if key is not None and (hit := self.cache.get(key)) is not None:
            click.echo(f"[{work.name}] cached: reusing the result of an identical call")
            return Done(hit)
        handle = self._start(work, call)
        return _Caching(handle, self.cache, key) if key else handle

    def _start(self, work: Work, call: Call) -> LocalHandle:
        stage_dir = self.run_dir / work.name
        outputs = {name: stage_dir / "outputs" / name for name in call.outputs}
        checkpoint = stage_dir / "checkpoints"
        for path in (*outputs.values(), checkpoint):
            path.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **work.env, **call.env,
               CHECKPOINT_VAR: checkpoint.as_uri() + "/"}
        env.update({output_var(n): str(p) for n, p in outputs.items()})
        env.update({input_var(n): str(_local_path(u)) for n, u in call.inputs.items()})
        env.update({input_var(n) + "_URI": u for n, u in call.inputs.items()})
        proc = subprocess.Popen(call.command, cwd=self.root, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, bufsize=1)
        click.echo(f"[{work.name}] started locally (pid {proc.pid})")
        return LocalHandle(work, call, proc,
                           outputs={n: Data(p.as_uri() + "/") for n, p in outputs.items()},
                           checkpoint=checkpoint.as_uri() + "/", started=time.monotonic())


class _Caching(Handle):
    """Remembers a successful result under its cache key."""

    def __init__(self, inner: Handle, cache: ResultCache, key: str) -> None:
        super().__init__(inner.work_name)
        self.inner, self.cache, self.key = inner, cache, key

    def _wait(self) -> tuple[Result, str]:
        result, tail = self.inner._wait()
        if result.ok:
            self.cache.put(self.key, result)
        return result, tail


def _local_path(uri: str) -> Path:
    parsed = parse_uri(uri, field="input")
    if parsed.scheme != "file":
        raise InvalidInput(f"local mode reads file:// inputs; {uri} is in an object store",
                           field="input", hint="run on an exchange (without --local), or "
                                               "copy the data locally and pass file:// URIs")
    return Path("/" + parsed.key)
