"""The agent daemon: dials out to the coordinator and runs what it is given.

One WebSocket carries everything. The node never listens on a port, so it works behind NAT and
firewalls that allow only outbound connections. WebSocket pings every ``keep_alive_s`` keep
idle-dropping middleboxes (a load balancer that cuts idle TCP after 20 minutes) from closing
it, and a heartbeat message every ``keep_alive_s`` tells the coordinator the node is alive and
what it runs. On any failure the agent reconnects with exponential backoff and full jitter, and
replays from its spool everything not yet acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import websockets
from websockets.exceptions import InvalidStatus

from bourse.agent import credentials, imds, interpreter, socket
from bourse.agent.attempt import base_env
from bourse.agent.bundles import BundleCache, BundleError, bundle_source
from bourse.agent.containers import ContainerJobs, find_engine
from bourse.agent.data import NodeData, default_cache_limit
from bourse.agent.environment import JobEnvironments
from bourse.agent.envs import EnvManager
from bourse.agent.fence import Lease
from bourse.agent.hooks import HookChain
from bourse.agent.indexes import PackageSources, pip_sources
from bourse.agent.isolation import for_agent
from bourse.agent.metrics import LiveAttempt, Sampler, open_gpu_meter
from bourse.agent.probe import probe
from bourse.agent.probe.report import ProbeOptions, run_probe
from bourse.agent.runtime import Runtime
from bourse.agent.session import Session
from bourse.agent.spool import Spool
from bourse.channel import Channel, ChannelClosed
from bourse.core.backoff import backoff_delay
from bourse.core.cuda import PYTORCH_INDEX
from bourse.core.interruption import Notice
from bourse.core.ratelimit import LogLimit
from bourse.protocol.agent import (
    CancelJob,
    Envelope,
    Hello,
    Preempt,
    StartJob,
    Welcome,
)
from bourse.protocol.common import Capabilities, Declared, ProbeReport
from bourse.protocol.stream import STREAMS_FEATURE
from bourse.tunnel.loopback import host_mark

log = logging.getLogger("bourse.agent")
BACKOFF_BASE_S, BACKOFF_CAP_S = 0.2, 10.0
BACKOFF_KEEP_ALIVES = 0.25  # reconnect attempts are at most this many keep-alives apart


@dataclass(frozen=True)
class AgentConfig:
    server: str
    work_dir: Path
    name: str
    token: str | None = None
    keep_alive_s: float = 20.0
    cpus: int | None = None
    declared: Declared | None = None
    verify_every_s: float = 24 * 3600.0
    storage_mb: int = 100
    cache_bytes: int | None = None  # the input cache's limit; default: see data.py
    spot: Spot | None = None  # sold as interruptible capacity, reclaimable with notice
    provider: str | None = None
    region: str | None = None  # where the node is (a cloud region or a site name)
    network: str | None = None  # hosts it reaches (multi-node jobs run within one)
    address: str | None = None  # where those hosts reach it
    sources: PackageSources | None = None  # job environments' packages; None: pip's config
    torch_index: str = PYTORCH_INDEX
    metrics_interval_s: float = 5.0  # 0: send no resource samples
    job_users: str = "auto"  # auto | on | off: see bourse.agent.isolation
    tmpfs_size: str | None = None  # a tmpfs of this size on each attempt's work/ and tmp/
    log_limit: LogLimit = field(default_factory=LogLimit)  # per job; rate 0: none
    python: interpreter.JobPython | None = None  # what jobs run with; None: the agent's own


@dataclass(frozen=True)
class Spot:
    price: float | None = None  # $/h; None: a share of the list price (placement)
    notice_url: str | None = None  # watch this metadata service's interruption notice (IMDSv2)
    notice_every_s: float = imds.POLL_S


def advertised(caps: Capabilities, config: AgentConfig) -> Capabilities:
    """What the probe measured, with what the provider sells it as (spot, provider, region)."""
    return caps.model_copy(update={
        "interruptible": config.spot is not None,
        "spot_price": config.spot.price if config.spot else None,
        "provider": config.provider, "region": config.region,
        "network": config.network, "address": config.address,
        "job_python": config.python.tool() if config.python else None})


Dial = Callable[[], contextlib.AbstractAsyncContextManager[Channel]]


class Agent:
    def __init__(self, config: AgentConfig, rng: Callable[[], float] = random.random,
                 dial: Dial | None = None) -> None:
        """``dial``: how to reach the coordinator (default: its WebSocket, ``agent.socket``;
        tests give an in-memory channel, ``bourse.channel.memory_pair``)."""
        self.python = config.python or interpreter.find()
        self.config, self.rng, self._dial = replace(config, python=self.python), rng, dial
        self.work_dir = private_dir(config.work_dir)  # the spool holds attempts' store keys
        self.isolation = for_agent(config.job_users, config.tmpfs_size, self.work_dir)
        interpreter.check_job_users(self.python, self.isolation)
        self.environ = interpreter.job_environ(os.environ, self.python)  # jobs' PATH, HOME
        self.spool = Spool(self.work_dir / "spool.db")
        self.lease = Lease(self.work_dir / "lease")
        self.isolation.secure(self.work_dir)
        self.data = NodeData(self.work_dir / "cache", config.cache_bytes or default_cache_limit(
            shutil.disk_usage(self.work_dir).free))
        self.caps: Capabilities | None = None  # what the last hello said (GPUs, driver)
        self.runtime = Runtime(self.work_dir, self.spool, hooks=self._hooks(),
                               isolation=self.isolation, log_limit=config.log_limit,
                               lease=self.lease, environ=self.environ)
        self.sampler = Sampler(self.work_dir, self.work_dir / "cache", open_gpu_meter(),
                               cache_used=self.data.cache.used)
        self.cred: credentials.NodeCredential | None = None
        self.bundles: BundleCache | None = None
        self._starting: dict[tuple[str, int], asyncio.Task[None]] = {}
        self._background: set[asyncio.Task[None]] = set()
        self.failures = 0
        self.report: ProbeReport | None = None
        self.fingerprint: str | None = None  # of the hardware, from the last hello
        self.session: Session | None = None  # the welcomed connection, while there is one
        self.notice: Notice | None = None  # the cloud's interruption notice, once given
        self.stopped_at: float | None = None  # when its jobs were stopped on it
        self._preempted: dict[tuple[str, int], float] = {}  # attempt -> its SIGKILL deadline

    def _hooks(self) -> HookChain:
        """Environment first (its PATH), then data (its variables), then the container
        runtime (which wraps the command)."""
        config = self.config
        envs = EnvManager(self.work_dir / "envs", self.python.path, site=self.python.purelib,
                          sources=config.sources or pip_sources())
        return HookChain(
            JobEnvironments(envs, self.node_facts, path=base_env(self.environ)["PATH"],
                            torch_base=config.torch_index),
            self.data, ContainerJobs(find_engine(), self.node_facts))

    def node_facts(self) -> Capabilities | None:
        return self.caps

    def live(self) -> list[LiveAttempt]:
        return [LiveAttempt(*attempt) for attempt in self.runtime.live()]

    @property
    def ws_url(self) -> str:
        base = self.config.server.rstrip("/")
        return base.replace("https://", "wss://", 1).replace("http://", "ws://", 1) + \
            "/api/v1/agent/ws"

    async def run(self) -> None:
        """Enrol if needed, re-adopt jobs that survived a restart, then stay connected."""
        self.cred = await asyncio.to_thread(
            credentials.ensure, self.config.server.rstrip("/"), self.config.token,
            self.config.name, self.work_dir)
        self.bundles = BundleCache(self.work_dir / "bundles", self.cred.server,
                                   self.cred.credential)
        self.isolation.secure(self.work_dir)  # the credential, the bundles: the agent's only
        await self.runtime.adopt()
        log.info("agent %s (node %s) starting; coordinator %s", self.config.name,
                 self.cred.node_id, self.config.server)
        watching = self._watch_notice()
        try:
            await self._connect_forever()
        finally:
            if watching is not None:
                watching.cancel()
                await asyncio.gather(watching, return_exceptions=True)
            await self.runtime.close()
            self.spool.close()
            self.sampler.gpus.close()

    async def _connect_forever(self) -> None:
        self.failures = 0
        while True:
            try:
                await self._session()
            except InvalidStatus as exc:
                log.error("the exchange at %s refused this node (HTTP %s): its credential is "
                          "unknown or revoked; enrol again with --token (work dir %s)",
                          self.config.server, exc.response.status_code, self.work_dir)
            except (OSError, websockets.WebSocketException, TimeoutError, ChannelClosed) as exc:
                log.warning("connection to %s ended: %s", self.config.server, exc)
            self.failures += 1
            delay = backoff_delay(self.failures, self.rng(), base=BACKOFF_BASE_S,
                                  cap=reconnect_cap(self.config.keep_alive_s))
            log.info("reconnecting in %.1f s", delay)
            await asyncio.sleep(delay)

    def dial(self) -> contextlib.AbstractAsyncContextManager[Channel]:
        if self._dial is not None:
            return self._dial()
        assert self.cred is not None
        return socket.dial(self.ws_url, self.cred.credential, self.config.keep_alive_s)

    async def _session(self) -> None:
        keep_alive = self.config.keep_alive_s
        async with self.dial() as channel:
            session = Session(self, channel)
            caps = advertised(await asyncio.to_thread(probe, self.work_dir, self.config.cpus),
                              self.config)
            self.fingerprint, self.caps = caps.fingerprint, caps
            hello_at = time.time()
            await session.send(lambda: Hello(name=self.config.name, capabilities=caps,
                                             running=self.runtime.running(),
                                             keep_alive_s=keep_alive,
                                             declared=self.config.declared,
                                             features=[STREAMS_FEATURE],
                                             host=host_mark()))
            welcome = Envelope.model_validate(json.loads(
                await asyncio.wait_for(channel.receive(), 15)))
            if welcome.type != "welcome":
                raise websockets.WebSocketException(f"expected welcome, got {welcome.type}")
            welcomed = Welcome.model_validate(welcome.body)
            session.accepts = frozenset(welcomed.accepts)
            self.lease.arm(welcomed.loss_window_s, hello_at)
            log.info("connected as node %s", welcomed.node_id)
            self.failures = 0  # a welcomed session resets the backoff
            self.session = session
            try:
                await self._tell_notice(session)  # before the replay of the jobs' ends
                await session.run()
            finally:
                self.session = None

    async def current_report(self) -> ProbeReport:
        """The last probe report, measured again when due or when the hardware changed."""
        stale = self.report is None or self.report_due_in() <= 0 or (
            self.fingerprint is not None and self.report.fingerprint != self.fingerprint)
        if stale:
            options = ProbeOptions(self.work_dir, storage_mb=self.config.storage_mb,
                                   python=self.python.path)
            self.report = await asyncio.to_thread(run_probe, options)
            log.info("probe: %s GPU(s), checks in %.1f s", len(self.report.gpus),
                     self.report.checks_s)
        assert self.report is not None
        return self.report

    def report_due_in(self) -> float:
        if self.report is None:
            return 0.0
        return self.report.probed_at + self.config.verify_every_s - time.time()

    def start(self, message: StartJob) -> None:
        key = (message.job_id, message.attempt)
        if key not in self._starting:
            task = asyncio.create_task(self._start(message))
            self._starting[key] = task
            task.add_done_callback(lambda _t: self._starting.pop(key, None))

    async def _start(self, message: StartJob) -> None:
        bundle = None
        if message.spec.bundle:
            assert self.bundles is not None
            try:
                bundle = await self.bundles.fetch(message.spec.bundle, *bundle_source(message))
            except BundleError as exc:
                self.runtime.reject(message, exc.message)
                return
            except OSError as exc:  # the node's disk: said at once, not left to the lease
                self.runtime.reject(message, f"the bundle could not be stored on this node: "
                                             f"{exc}")
                return
        await self.runtime.start(message, bundle)

    def cancel(self, message: CancelJob) -> None:
        task = asyncio.create_task(self.runtime.cancel(
            message.job_id, message.attempt, message.grace_s, message.reason, message.stale))
        self._background.add(task)
        task.add_done_callback(self._background.discard)


    def preempt(self, message: Preempt) -> None:
        """The node is reclaimed: every attempt gets SIGTERM, and SIGKILL at the notice's end
        (an attempt already given an earlier end is left to it)."""
        log.warning("preemption notice: %s; stopping jobs within %.0f s", message.reason,
                    message.notice_s)
        deadline = time.time() + message.notice_s
        for ref in self.runtime.running():
            key = (ref.job_id, ref.attempt)
            if self._preempted.get(key, float("inf")) <= deadline:
                continue
            self._preempted[key] = deadline
            self.cancel(CancelJob(job_id=ref.job_id, attempt=ref.attempt,
                                  grace_s=message.notice_s,
                                  reason=f"preempted: {message.reason}"))

    def _watch_notice(self) -> asyncio.Task[None] | None:
        spot = self.config.spot
        if spot is None or spot.notice_url is None:
            return None
        log.info("watching the spot interruption notice at %s every %g s", spot.notice_url,
                 spot.notice_every_s)
        return asyncio.create_task(
            imds.watcher(spot.notice_url, spot.notice_every_s, self.interrupted).run())

    async def interrupted(self, notice: Notice) -> None:
        """The cloud takes the machine back: tell the coordinator (which reclaims the node),
        and stop the jobs within the notice whether it heard or not — the machine goes."""
        if notice == self.notice:
            return
        self.notice, self.stopped_at = notice, time.time()
        log.warning("%s", notice.describe())
        self.preempt(imds.preempt(notice, self.stopped_at))  # the SIGTERMs go when this yields
        if self.session is not None:
            # takes the send lock (FIFO) before yielding: it goes out before the jobs' ends
            await self._tell_notice(self.session)

    async def _tell_notice(self, session: Session) -> None:
        if self.notice is None or "interruption" not in session.accepts:
            return
        with contextlib.suppress(OSError, websockets.WebSocketException, ChannelClosed):
            await session.send(imds.interruption(self.notice, time.time(), self.stopped_at))


def reconnect_cap(keep_alive_s: float) -> float:
    """The longest wait between reconnect attempts: a fraction of the keep-alive (so a node
    is back well within its loss window after a blink or a coordinator restart), and never
    more than BACKOFF_CAP_S."""
    return min(BACKOFF_CAP_S, max(BACKOFF_BASE_S, keep_alive_s * BACKOFF_KEEP_ALIVES))


def private_dir(path: Path) -> Path:
    """``path``, created if needed and readable by this user only."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


async def run_agent(config: AgentConfig) -> None:
    agent = Agent(config)
    with contextlib.suppress(asyncio.CancelledError):
        await agent.run()
