"""A fake agent: the coordinator's side of the protocol is real, the node is this script.

It speaks ``bourse.protocol.agent`` over a real WebSocket (the ``websockets`` client library):
hello first, then job events, log chunks and heartbeats, each an :class:`Envelope`. Frames the
coordinator sends are kept in arrival order; acks are collected by message id.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
from collections.abc import Callable, Iterable
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from bourse.core.hardware import Declared
from bourse.protocol.agent import Envelope, Heartbeat, Hello, JobEvent, LogChunk, envelope
from bourse.protocol.common import AttemptRef, Capabilities, Wire

WAIT_S = 10.0  # how long to wait for a frame the coordinator must send (never slept)


class FakeAgent:
    def __init__(self, url: str, node_id: str, credential: str, capabilities: Capabilities,
                 *, name: str = "fake", keep_alive_s: float = 20.0,
                 declared: Declared | None = None) -> None:
        self.url, self.node_id, self.credential = url, node_id, credential
        self.declared = declared  # what its provider claims, said in its hello
        self.capabilities, self.name, self.keep_alive_s = capabilities, name, keep_alive_s
        self.frames: list[Envelope] = []  # received, not yet taken by expect()
        self.acked: set[str] = set()
        self.close_code: int | None = None
        self.close_reason = ""
        self._ws: ClientConnection | None = None
        self._reader: asyncio.Task[None] | None = None
        self._changed = asyncio.Condition()
        self._ids = itertools.count()
        self._seqs: dict[tuple[str, int], itertools.count[int]] = {}

    # --- connection ---------------------------------------------------------------------------

    async def open(self) -> None:
        """Open the socket without saying hello (tests of the first frame use this)."""
        self._ws = await connect(self.url, additional_headers={
            "Authorization": f"Bearer {self.credential}"}, open_timeout=WAIT_S)
        self.close_code = None
        self._reader = asyncio.create_task(self._read())

    async def connect(self, running: Iterable[tuple[str, int]] = ()) -> dict[str, Any]:
        """Open, say hello, and return the welcome."""
        await self.open()
        await self.send_raw(self.frame(Hello(
            name=self.name, capabilities=self.capabilities, keep_alive_s=self.keep_alive_s,
            running=[AttemptRef(job_id=j, attempt=a) for j, a in running],
            declared=self.declared)))
        return await self.expect("welcome")

    async def close(self) -> None:
        if self._ws is not None:
            await self._ws.close()
        if self._reader is not None:
            await self._reader

    async def _read(self) -> None:
        assert self._ws is not None
        try:
            async for text in self._ws:
                frame = Envelope.model_validate(json.loads(text))
                async with self._changed:
                    if frame.type == "ack":
                        self.acked.update(frame.body["ids"])
                    else:
                        self.frames.append(frame)
                    self._changed.notify_all()
        except ConnectionClosed:
            pass
        finally:
            async with self._changed:
                self.close_code = self._ws.close_code or 1006
                self.close_reason = self._ws.close_reason or ""
                self._changed.notify_all()

    async def _until(self, ready: Callable[[], Any]) -> Any:
        async with asyncio.timeout(WAIT_S), self._changed:
            while not (found := ready()):
                if self.close_code is not None:
                    raise ConnectionError(f"connection closed ({self.close_code}) while "
                                          f"waiting; frames: {self.frames}")
                await self._changed.wait()
            return found

    # --- sending ------------------------------------------------------------------------------

    def frame(self, body: Wire) -> str:
        return envelope(f"{self.node_id}:{next(self._ids)}", body).model_dump_json()

    async def send_raw(self, text: str) -> None:
        assert self._ws is not None
        await self._ws.send(text)

    async def send(self, body: Wire, *, ack: bool = True) -> str:
        """Send a message; by default wait until the coordinator acknowledges it."""
        text = self.frame(body)
        msg_id = json.loads(text)["id"]
        await self.send_raw(text)
        if ack:
            await self.wait_acked(msg_id)
        return str(msg_id)

    async def wait_acked(self, *ids: str) -> None:
        await self._until(lambda: set(ids) <= self.acked)

    def next_seq(self, job_id: str, attempt: int) -> int:
        return next(self._seqs.setdefault((job_id, attempt), itertools.count()))

    def job_event(self, job_id: str, attempt: int, kind: str, *, seq: int | None = None,
                  time: float = 0.0, **data: Any) -> JobEvent:
        number = self.next_seq(job_id, attempt) if seq is None else seq
        return JobEvent(job_id=job_id, attempt=attempt, seq=number, kind=kind,  # type: ignore[arg-type]
                        time=time, data=data)

    async def event(self, job_id: str, attempt: int, kind: str, **data: Any) -> str:
        return await self.send(self.job_event(job_id, attempt, kind, **data))

    def log_chunk(self, job_id: str, attempt: int, seq: int, data: bytes, *,
                  stream: str = "stdout", offset: int = 0) -> LogChunk:
        return LogChunk(job_id=job_id, attempt=attempt, seq=seq, stream=stream,  # type: ignore[arg-type]
                        offset=offset, data=base64.b64encode(data).decode(), time=0.0)

    async def log(self, job_id: str, attempt: int, seq: int, data: bytes, *,
                  stream: str = "stdout", offset: int = 0) -> str:
        return await self.send(self.log_chunk(job_id, attempt, seq, data, stream=stream,
                                              offset=offset))

    async def heartbeat(self, running: Iterable[tuple[str, int]] = ()) -> str:
        return await self.send(Heartbeat(
            running=[AttemptRef(job_id=j, attempt=a) for j, a in running], time=0.0))

    async def run_job(self, job_id: str, attempt: int, exit_code: int = 0) -> None:
        """What a healthy node reports for a job: accepted, started, exited."""
        await self.event(job_id, attempt, "accepted")
        await self.event(job_id, attempt, "started", pid=4242)
        await self.event(job_id, attempt, "exited", exit_code=exit_code)

    # --- receiving ----------------------------------------------------------------------------

    async def expect(self, kind: str, **fields: Any) -> dict[str, Any]:
        """The first received frame of this type whose body has these fields; taken."""
        def find() -> Envelope | None:
            for frame in self.frames:
                if frame.type == kind and all(frame.body.get(k) == v
                                              for k, v in fields.items()):
                    return frame
            return None

        frame: Envelope = await self._until(find)
        self.frames.remove(frame)
        return frame.body

    async def barrier(self) -> None:
        """Wait until everything the coordinator had queued for this node has arrived.

        An unknown message type is answered at once with an ``error`` through the same ordered
        outbox as every command, so once the answer is here, nothing queued before it is not.
        """
        probe = f"{self.node_id}:barrier:{next(self._ids)}"
        await self.send_raw(json.dumps({"v": 1, "id": probe, "type": "barrier", "body": {}}))
        body = await self.expect("error", ref=probe)
        assert "unknown message type" in body["message"]

    async def wait_closed(self) -> int:
        code: int = await self._until(lambda: self.close_code)
        return code

    def received(self, kind: str) -> list[dict[str, Any]]:
        return [f.body for f in self.frames if f.type == kind]
