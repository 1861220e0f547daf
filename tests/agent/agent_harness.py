"""Helpers of the agent tests: a stand-in coordinator that reads and acks the spool, and an
agent (spool + runtime over a temp dir) that can be stopped and restarted like the daemon."""

from __future__ import annotations

import asyncio
import base64
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bourse.agent import shim
from bourse.agent.runtime import Runtime
from bourse.agent.shim import AttemptDir
from bourse.agent.spool import Spool
from bourse.protocol.agent import DataPlan, JobEvent, LogChunk, StartJob
from bourse.protocol.common import JobSpec
from bourse.protocol.track import TrackBatch


class Coordinator:
    """Reads the outbox in order like the daemon's sender, validates every body against the
    wire models, de-duplicates by (job, attempt, seq) as the real coordinator does, and acks."""

    def __init__(self, spool: Spool, *, ack: bool = True) -> None:
        self.spool = spool
        self.ack = ack
        self.after = 0
        self.bodies: dict[tuple[str, int, int], dict[str, Any]] = {}
        self.order: list[tuple[str, int, int]] = []  # first reception order
        self.tracks: list[TrackBatch] = []  # the tracking records, as sent

    def reconnect(self, spool: Spool) -> None:
        """A new agent (or connection): everything unacknowledged is read again."""
        self.spool = spool
        self.after = 0

    def poll(self) -> int:
        rows = self.spool.pending(self.after, 1000)
        for row in rows:
            body = row.body()
            if row.type == "track":  # a tracking record (its own seq): kept apart
                self.tracks.append(TrackBatch.model_validate(body))
                continue
            model = JobEvent if row.type == "job_event" else LogChunk
            model.model_validate(body)
            key = (body["job_id"], body["attempt"], body["seq"])
            if key in self.bodies:
                assert self.bodies[key] == body, f"seq {key} re-used for different content"
            else:
                self.bodies[key] = body
                self.order.append(key)
        if rows:
            self.after = rows[-1].id
            if self.ack:
                self.spool.ack([r.id for r in rows])
        return len(rows)

    async def until(self, done: Callable[[], bool], timeout: float = 10.0) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            self.poll()
            if done():
                return
            assert loop.time() < deadline, "timed out waiting"
            await asyncio.sleep(0.01)

    def items(self, job_id: str, attempt: int = 1) -> list[dict[str, Any]]:
        keys = sorted(k for k in self.bodies if k[:2] == (job_id, attempt))
        return [self.bodies[k] for k in keys]

    def events(self, job_id: str, attempt: int = 1) -> list[dict[str, Any]]:
        return [b for b in self.items(job_id, attempt) if "kind" in b]

    def event(self, job_id: str, kind: str, attempt: int = 1) -> dict[str, Any] | None:
        found = [e for e in self.events(job_id, attempt) if e["kind"] == kind]
        assert len(found) <= 1, f"{len(found)} {kind} events"
        return found[0] if found else None

    def exited(self, job_id: str, attempt: int = 1) -> Callable[[], bool]:
        return lambda: self.event(job_id, "exited", attempt) is not None

    def stream(self, job_id: str, name: str, attempt: int = 1) -> bytes:
        """The stream reassembled, checking that chunks are contiguous and in seq order."""
        out = bytearray()
        for body in self.items(job_id, attempt):
            if body.get("stream") == name:
                assert body["offset"] == len(out), "gap or overlap in the log chunks"
                out += base64.b64decode(body["data"])
        return bytes(out)


class Agent:
    """A spool and a runtime over one temp dir, like the daemon holds them."""

    def __init__(self, root: Path, **runtime_options: Any) -> None:
        self.root = root
        self.options = {"poll_interval": 0.01, **runtime_options}
        self.spool = Spool(root / "spool.db")
        self.runtime = Runtime(root / "work", self.spool, **self.options)
        self.coordinator = Coordinator(self.spool)
        self.stopped = False

    async def start(self, job_id: str, command: list[str], *, attempt: int = 1,
                    bundle: Path | None = None, bundle_sha: str | None = None,
                    env: dict[str, str] | None = None, spec_env: dict[str, str] | None = None,
                    gpus: list[str] | None = None, data: DataPlan | None = None,
                    **spec: Any) -> None:
        """``env`` is what the exchange sets (``StartJob.env``), ``spec_env`` the user's,
        ``gpus`` the devices the exchange gave the attempt, ``data`` its data plan."""
        msg = StartJob(job_id=job_id, attempt=attempt, env=env or {}, gpus=gpus, data=data,
                       spec=JobSpec(command=command, env=spec_env or {}, bundle=bundle_sha,
                                    **spec))
        await self.runtime.start(msg, bundle)

    def dir(self, job_id: str, attempt: int = 1) -> AttemptDir:
        return AttemptDir.of(self.root / "work", job_id, attempt)

    async def stop(self) -> None:
        """The agent goes away; its jobs keep running."""
        if not self.stopped:
            await self.runtime.close()
            self.spool.close()
            self.stopped = True

    async def restart(self) -> None:
        await self.stop()
        self.stopped = False
        self.spool = Spool(self.root / "spool.db")
        self.runtime = Runtime(self.root / "work", self.spool, **self.options)
        self.coordinator.reconnect(self.spool)
        await self.runtime.adopt()

    def kill_jobs(self) -> None:
        """Clean up after a test: kill what its jobs left running."""
        spool = Spool(self.root / "spool.db")
        for record in spool.attempts():
            if record.pid is not None and shim.is_alive(record.pid, record.proc_start):
                shim.signal_group(record.pid, signal.SIGKILL)
        spool.close()
