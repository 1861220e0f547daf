"""Exchange mode: every stage is a job on a bourse exchange, with the project's code bundle.

Outputs go to ``<store root>runs/<run>/<stage>/<name>/`` and checkpoints to
``.../<stage>/checkpoints/`` in the exchange's store (``s3://bourse/`` on the embedded one);
a second call of a stage of the same name in the run writes under ``<stage>-2/``. Each job
carries its run id, app and stage (``JobSpec.run``, ``app``, ``stage``).
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from pathlib import Path

import click

from bourse.app.backend import Backend
from bourse.app.cache import code_digest, path_digest
from bourse.app.call import Call, StagePrinter, find_attributes, find_result
from bourse.app.data import Data
from bourse.app.driver import say
from bourse.app.handle import Handle
from bourse.app.lease import DriverLease
from bourse.app.result import Outputs, Result
from bourse.app.work import Work
from bourse.core.states import JobState
from bourse.core.uri import parse_uri
from bourse.protocol.api import JobDetail, JobView, LogChunkView
from bourse.protocol.common import JobSpec
from bourse.sdk.bundle import pack
from bourse.sdk.client import Client
from bourse.sdk.errors import ApiError, ApiNotFound, Unreachable
from bourse.sdk.logs import LogDecoder

DEFAULT_STORE_ROOT = "s3://bourse/"
TAIL_LINES = 20


def upload_bundle(client: Client, root: Path) -> str:
    """``root`` packed and uploaded unless the exchange has it; its SHA-256."""
    packed = pack(root)
    try:
        client.ensure_bundle(packed.path, packed.sha256)
    finally:
        packed.path.unlink(missing_ok=True)
    return packed.sha256


class ExchangeHandle(Handle):
    def __init__(self, backend: ExchangeBackend, work: Work, spec: JobSpec) -> None:
        super().__init__(work.name)
        self.backend, self.work, self.spec = backend, work, spec
        self.job: JobView = backend.client.submit(spec)
        click.echo(f"[{work.name}] submitted as job {self.job.id}")

    def _wait(self) -> tuple[Result, str]:
        lines = self._follow()
        detail = self.backend.client.job(self.job.id)
        return self._build(detail, lines), "\n".join(lines[-TAIL_LINES:])

    def _follow(self) -> list[str]:
        """Print the job's output as it comes, prefixed by the stage, until it ends; its
        lines."""
        decoder, lines = LogDecoder(), []
        printer = StagePrinter(self.work_name, click.echo)
        with self.backend.lock:  # one stage streams at a time; the others wait their turn
            for item in self.backend.client.follow(self.job.id):
                if isinstance(item, LogChunkView):
                    for line in decoder.decode(item).splitlines():
                        lines.append(line)
                        printer.line(line)
        return lines

    def _build(self, detail: JobDetail, lines: list[str]) -> Result:
        last = detail.attempts[-1] if detail.attempts else None
        duration = (last.ended_at - last.started_at
                    if last and last.ended_at and last.started_at else None)
        text = "\n".join(lines)
        _, value = find_result(text)
        ok = detail.state == JobState.SUCCEEDED
        outputs = Outputs({n: Data(u) for n, u in self.spec.outputs.items()} if ok else {},
                          stage=self.work_name, declared=self.spec.outputs,
                          status=detail.state)
        return Result(
            self.work_name, detail.state, detail.exit_code, detail.id, outputs,
            self.spec.checkpoint, value, node=last.node_name if last else None,
            placement=last.placement if last else None, duration_s=duration, cost=detail.cost,
            attributes=find_attributes(text))


class ExchangeBackend(Backend):
    def __init__(self, client: Client, root: Path, run_id: str,
                 store_root: str = DEFAULT_STORE_ROOT, app: str | None = None) -> None:
        super().__init__(root, run_id)
        self.client, self.app = client, app
        self.store_root = store_root if store_root.endswith("/") else store_root + "/"
        self.lock = threading.Lock()
        self._bundle: str | None = None
        self._code: str | None = None
        self._lease: DriverLease | None = None

    def begin(self) -> None:
        self._lease = DriverLease(self.client, self.run_id)
        self._lease.start()

    def end(self) -> None:
        if self._lease is None:
            return
        self._lease.stop()
        if self._lease.every_s is not None and self._lease.lost is None:
            with contextlib.suppress(ApiError, Unreachable):  # it lapses if this is lost
                self.client.end_lease(self.run_id)

    def stop(self, why: str) -> None:
        """Cancel the run on the exchange: its jobs that have not ended, and any later."""
        if self._lease is not None:
            self._lease.stop()
        with contextlib.suppress(ApiNotFound):  # nothing submitted and no lease: nothing to stop
            cancelled = self.client.cancel_run(self.run_id, why)
            say(f"bourse: run {self.run_id} cancelled on the exchange; "
                f"{len(cancelled.jobs)} job(s) stopped")

    @classmethod
    def default(cls) -> ExchangeBackend:
        return cls(Client(), Path.cwd(), new_run_id())

    def code(self) -> str:
        if self._code is None:  # results are reused on the exchange that computed them
            self._code = f"{self.client.url}:{code_digest(self.root)}"
        return self._code

    def digest(self, uri: str) -> str:
        """A local file's own digest; what the exchange's store holds at any other URI, as the
        coordinator lists it (the driver has no store credentials of its own)."""
        parsed = parse_uri(uri, field="input")
        if parsed.scheme == "file":
            return path_digest(Path("/" + parsed.key))
        return self.client.data_summary(uri).digest

    def bundle(self) -> str:
        """The project's code, packed and uploaded once per run."""
        if self._bundle is None:
            self._bundle = upload_bundle(self.client, self.root)
        return self._bundle

    def start(self, work: Work, call: Call, slot: str) -> ExchangeHandle:
        return ExchangeHandle(self, work, self.spec(work, call, slot))

    def spec(self, work: Work, call: Call, slot: str) -> JobSpec:
        base = f"{self.store_root}runs/{self.run_id}/{slot}/"
        return JobSpec(command=work.launch(call.command), name=f"{self.run_id}/{slot}",
                       env={**work.env, **call.env}, compute=work.check(),
                       bundle=self.bundle(), inputs=call.inputs,
                       outputs={name: f"{base}{name}/" for name in call.outputs},
                       checkpoint=f"{base}checkpoints/", ports=work.port_specs(),
                       run=self.run_id, app=self.app, stage=slot)


def new_run_id() -> str:
    return f"r-{uuid.uuid4().hex[:10]}"
