"""A fleet of simulated agents (``bourse.agent.sim``) for benchmarks: enrolled through the API,
connected over the real WebSocket, run on an event loop of their own in a background thread
(so that a benchmark's own ``asyncio.run`` calls go on beside them)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import Counter
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import httpx

from bourse.agent.sim import SimAgent, SimConfig, websocket_dial
from bourse.protocol.common import Capabilities

CONNECTING = 64  # dials at a time (a fleet comes up in waves, as machines boot)


def no_room() -> Capabilities:
    """A node that cannot take work: no free CPU (as a full node)."""
    return Capabilities(hostname="sim", cpus=0, memory_gib=0, disk_free_gib=0, os="Linux",
                        python="3.11", agent_version="sim")


def room(cpus: int = 1) -> Capabilities:
    return Capabilities(hostname="sim", cpus=cpus, memory_gib=4, disk_free_gib=10, os="Linux",
                        python="3.11", agent_version="sim")


async def enrol(url: str, token: str, names: list[str], concurrency: int = 8) -> list[str]:
    """A node credential per name, from the enrolment endpoints (two requests each)."""
    queue = list(enumerate(names))[::-1]
    found: dict[int, str] = {}

    async def worker(client: httpx.AsyncClient) -> None:
        while queue:
            i, name = queue.pop()
            made = await client.post("/api/v1/enrollments", json={"name": name},
                                     headers={"Authorization": f"Bearer {token}"})
            made.raise_for_status()
            enrolled = await client.post("/api/v1/agent/enroll", json={"name": name},
                                         headers={"Authorization":
                                                  f"Bearer {made.json()['token']}"})
            enrolled.raise_for_status()
            found[i] = enrolled.json()["credential"]

    async with httpx.AsyncClient(base_url=url, timeout=120) as client:
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
    return [found[i] for i in range(len(names))]


@dataclass
class Connected:
    enrol_s: float
    connect_s: float  # first dial to last welcome (or to the timeout)
    welcomed: int  # agents welcomed by then


class Fleet:
    def __init__(self, url: str, token: str, count: int, *, caps: Capabilities,
                 keep_alive_s: float, prefix: str = "sim", **config: Any) -> None:
        self.url, self.token, self.count, self.caps = url, token, count, caps
        self.keep_alive_s, self.prefix, self.config = keep_alive_s, prefix, config
        self.agents: list[SimAgent] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._tasks: list[asyncio.Task[None]] = []
        self._marks: list[tuple[int, int]] = []
        self._credentials: list[str] = []

    def _call(self, coroutine: Any) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        return future.result()

    def enrol(self) -> float:
        """Enrol every agent (``start`` does, if this was not called); seconds taken."""
        t0 = time.perf_counter()
        if not self._thread.is_alive():
            self._thread.start()
        self._credentials = self._call(enrol(self.url, self.token, self.names))
        return time.perf_counter() - t0

    @property
    def names(self) -> list[str]:
        return [f"{self.prefix}-{i}" for i in range(self.count)]

    def start(self, timeout_s: float = 600.0) -> Connected:
        """Connect every agent; returns when all are welcomed, or at the timeout."""
        if not self.count:
            return Connected(0.0, 0.0, 0)
        enrol_s = self.enrol() if not self._credentials else 0.0
        found: Connected = self._call(self._start(timeout_s))
        found.enrol_s = enrol_s
        return found

    async def _start(self, timeout_s: float) -> Connected:
        t0 = time.perf_counter()
        names, credentials = self.names, self._credentials
        ws = self.url.replace("http://", "ws://", 1) + "/api/v1/agent/ws"
        self.agents = [SimAgent(SimConfig(name, self.caps, keep_alive_s=self.keep_alive_s,
                                          **self.config),
                                websocket_dial(ws, credential, self.keep_alive_s))
                       for name, credential in zip(names, credentials, strict=True)]
        gate = asyncio.Semaphore(CONNECTING)

        async def connect(agent: SimAgent) -> None:
            async with gate:
                self._tasks.append(asyncio.create_task(agent.run()))
                await agent.welcomed.wait()

        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*(connect(a) for a in self.agents)),
                                   timeout_s)
        return Connected(0.0, time.perf_counter() - t0,
                         sum(1 for a in self.agents if a.welcomed.is_set()))

    def mark(self) -> None:
        """Start a measurement window: ``window()`` counts only what follows."""
        self._marks = self._call(self._counts())

    async def _counts(self) -> list[tuple[int, int]]:
        return [(len(a.stats.ack_s), a.stats.beats_sent) for a in self.agents]

    def window(self) -> tuple[list[float], int]:
        """(ack waits in s, heartbeats sent) since ``mark``."""
        counts: list[tuple[int, int]] = self._call(self._counts())
        acks = [s for a, (acked, _) in zip(self.agents, self._marks, strict=True)
                for s in a.stats.ack_s[acked:]]
        sent = sum(now[1] - then[1] for now, then in zip(counts, self._marks, strict=True))
        return acks, sent

    def closed(self) -> int:
        """Agents whose connection the coordinator closed."""
        return sum(1 for a in self.agents if a.stats.closed is not None)

    def close_reasons(self) -> Counter[tuple[int, str]]:
        return Counter((a.stats.closed.code, a.stats.closed.reason[:60]) for a in self.agents
                       if a.stats.closed is not None)

    def stop(self) -> None:
        async def cancel() -> None:
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._thread.is_alive():
            self._call(cancel())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

