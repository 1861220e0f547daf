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

import click

from bourse.app.backend import Backend
from bourse.app.cache import code_digest, path_digest
from bourse.app.call import Call, StagePrinter, find_attributes, find_result
from bourse.app.data import Data
from bourse.app.driver import say
from bourse.app.handle import Handle
from bourse.app.requirements import check_local
from bourse.app.result import Outputs, Result
from bourse.app.work import Work
from bourse.core.compute import Compute
from bourse.core.errors import InvalidInput
from bourse.core.states import JobState
from bourse.core.uri import parse_uri
from bourse.storage.jobenv import CHECKPOINT_VAR, input_var, output_var

TAIL_LINES = 20
STOP_GRACE_S = 10.0
# a stage's prints reach the pipe as they happen, and survive its crash, as on an exchange
# (bourse.agent.attempt.JOB_DEFAULTS); the stage's env or this one's may say otherwise
UNBUFFERED = {"PYTHONUNBUFFERED": "1"}


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
        status = JobState.SUCCEEDED if code == 0 else JobState.FAILED
        outputs = Outputs(self.outputs if code == 0 else {}, stage=self.work_name,
                          declared=self.call.outputs, status=status)
        result = Result(self.work_name, status, code, None, outputs, self.checkpoint, value,
                        node="local", placement="local subprocess",
                        duration_s=time.monotonic() - self.started,
                        attributes=find_attributes(text))
        return result, "\n".join(self.lines[-TAIL_LINES:])


class LocalBackend(Backend):
    def __init__(self, root: Path, run_id: str) -> None:
        super().__init__(root, run_id)
        self.run_dir = self.root / ".bourse" / "runs" / run_id
        self.python = sys.executable
        self._code: str | None = None
        self._procs: list[subprocess.Popen[str]] = []

    def begin(self) -> None:
        return None  # no exchange: the stages are this process's children

    def end(self) -> None:
        return None

    def stop(self, why: str) -> None:
        """Stop the stages' processes still running: SIGTERM, then SIGKILL after a grace."""
        running = [p for p in self._procs if p.poll() is None]
        for proc in running:
            proc.terminate()
        for proc in running:
            try:
                proc.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
        say(f"bourse: {len(running)} stage process(es) of run {self.run_id} stopped")

    def code(self) -> str:
        if self._code is None:  # once per run, as the exchange packs the bundle once
            self._code = "local:" + code_digest(self.root)
        return self._code

    def digest(self, uri: str) -> str:
        return path_digest(_local_path(uri))

    def start(self, work: Work, call: Call, slot: str) -> LocalHandle:
        check_local(work.name, _packages(work))
        _one_node(work)
        stage_dir = self.run_dir / slot
        outputs = {name: stage_dir / "outputs" / name for name in call.outputs}
        checkpoint = stage_dir / "checkpoints"
        inputs = {n: _local_path(u) for n, u in call.inputs.items()}
        for path in (*outputs.values(), checkpoint):
            path.mkdir(parents=True, exist_ok=True)
        output_uris = {n: p.as_uri() + "/" for n, p in outputs.items()}
        env = {**UNBUFFERED, **os.environ, **work.env, **call.env,
               CHECKPOINT_VAR: checkpoint.as_uri() + "/"}
        env.update({output_var(n): str(p) for n, p in outputs.items()})
        env.update({output_var(n) + "_URI": u for n, u in output_uris.items()})
        env.update({input_var(n): str(p) for n, p in inputs.items()})
        env.update({input_var(n) + "_URI": u for n, u in call.inputs.items()})
        proc = subprocess.Popen(call.command, cwd=self.root, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, bufsize=1)
        self._procs.append(proc)
        click.echo(f"[{work.name}] started locally (pid {proc.pid})")
        return LocalHandle(work, call, proc,
                           outputs={n: Data(u) for n, u in output_uris.items()},
                           checkpoint=checkpoint.as_uri() + "/", started=time.monotonic())


def _one_node(work: Work) -> None:
    """A local stage is one process on this machine: a multi-node one would wait forever for
    members that never come."""
    nodes = work.compute.num_nodes if isinstance(work.compute, Compute) else 1
    if nodes > 1:
        raise InvalidInput(f"stage {work.name!r} asks for {nodes} nodes, and a local run is "
                           "one process on this machine", field="compute.num_nodes",
                           hint="run the app on an exchange (without --local), or give the "
                                "stage one node to try it locally")


def _packages(work: Work) -> tuple[str, ...]:
    """What the stage needs installed: its compute's packages and a script's requirements."""
    compute = work.compute.packages if isinstance(work.compute, Compute) else ()
    return (*compute, *getattr(work, "requirements", ()))


def _local_path(uri: str) -> Path:
    parsed = parse_uri(uri, field="input")
    if parsed.scheme != "file":
        raise InvalidInput(f"local mode reads file:// inputs; {uri} is in an object store",
                           field="input", hint="run on an exchange (without --local), or "
                                               "copy the data locally and pass file:// URIs")
    return Path("/" + parsed.key)
