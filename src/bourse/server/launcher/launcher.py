"""The launcher: turns waiting jobs that no node can take into launched nodes, and ends them.

Each tick (``tick``, driven by ``run`` on every kick from the scheduler and at least every
second): (1) every live launch moves on (``decide.verdict``): a node verified as its offer
said is ready; one that is not, or that did not enrol within the boot timeout, is terminated
and its offer blocked; an idle one past the idle timeout, a lost one, one whose job ended
before it booted, are terminated; (2) for each due pending job that no connected node can take
and no launch is under way for, the best launchable offer is launched, failing over through
zones, regions and offers by the class of each error (``core.launch``), within the project's
clouds and spending caps; a multi-node job's N machines are launched together, all or
nothing (``gangs``). Cloud calls run in threads, outside any transaction; the launch row
and its idempotency token are committed before the call (``services.launches``). The
reconciler (``reconcile``, at start and every ``reconcile_every_s``) matches the cloud's
tagged instances with the rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from bourse import __version__
from bourse.clouds.base import CloudError, Instance, LaunchSpec, Provider
from bourse.core.compute import Compute
from bourse.core.launch import (
    Failure,
    LaunchBlock,
    Try,
    blocked_by,
    blocks_for,
    boot_block,
    over_cap,
    table,
)
from bourse.core.match import Match
from bourse.core.placement import fits_any
from bourse.core.states import JobState, LaunchState
from bourse.server.agents.connections import Connections
from bourse.server.config import ServerConfig
from bourse.server.db.database import Database
from bourse.server.db.schema import Attempt, Job, Launch, Node, Project
from bourse.server.launcher import decide, gangs, pending
from bourse.server.launcher.clouds import REFRESH_EVERY_S, RELIST_AFTER_S, Clouds
from bourse.server.launcher.decide import THROTTLE_BACKOFF_S, try_of
from bourse.server.launcher.reconcile import RESTART_GRACE_S, reconcile
from bourse.server.notifier import Notifier
from bourse.server.services import launch_figures, launches
from bourse.server.services.capacity import live_capacity
from bourse.server.services.jobs import active_attempt_states
from bourse.server.services.lifecycle import set_job_state
from bourse.server.services.specs import spec_of

log = logging.getLogger(__name__)
WAITING_PER_TICK = 8
SEARCHED = 50  # matches asked of the clouds' index before the project's rules narrow them
RATE_EVERY_S = 60.0  # the clouds' launch success rates are read again this often
CRASH_AT = "BOURSE_TEST_CRASH_AT"  # fault tests: die at a step of a launch (docs/clouds.md)

UserData = Callable[..., str]


@dataclass
class Ending:
    launch_id: str
    provider: str
    region: str
    instance_id: str | None
    node_id: str


@dataclass
class TickReport:
    launched: list[str] = field(default_factory=list)  # launch ids
    terminated: list[str] = field(default_factory=list)
    failed_jobs: list[str] = field(default_factory=list)
    tries: list[Try] = field(default_factory=list)


class Launcher:
    def __init__(self, db: Database, clouds: Clouds, config: ServerConfig,
                 connections: Connections, notifier: Notifier, *,
                 clock: Callable[[], float] = time.time,
                 user_data: UserData | None = None,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.db, self.clouds, self.config = db, clouds, config
        self.connections, self.notifier, self.clock = connections, notifier, clock
        self.user_data = user_data or _default_user_data
        self.sleep = sleep
        self.in_flight: set[str] = set()  # launches whose cloud call runs in this process
        self.notes: dict[str, str] = {}  # shape -> why its jobs wait although clouds are on
        self._wake = asyncio.Event()
        self._exchange: str | None = None
        self._rated_at = -RATE_EVERY_S
        self.started_at = clock()  # launches requested before have no call in progress

    def kick(self) -> None:
        self._wake.set()

    def note(self, shape: str) -> str | None:
        return self.notes.get(shape)

    # --- the loop --------------------------------------------------------------------------

    async def run(self) -> None:
        await self.clouds.check()
        self.started_at = self.clock()
        # at start, and again once the cloud had time to list what a crash left unrecorded
        passes = [self.started_at, self.started_at + RESTART_GRACE_S + 1.0]
        next_refresh = self.clock() + REFRESH_EVERY_S
        while True:
            try:
                if self.clock() >= next_refresh:
                    next_refresh = self.clock() + REFRESH_EVERY_S
                    await self.clouds.refresh()
                if self.clock() >= passes[0]:
                    passes = passes[1:] or [self.clock() + self.config.clouds.reconcile_every_s]
                    await self.reconcile()
                await self.tick()
            except Exception:
                log.exception("launcher pass failed; retrying on the next one")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.config.tick_interval_s)
            self._wake.clear()

    async def tick(self, now: float | None = None) -> TickReport:
        report = TickReport()
        now = self.clock() if now is None else now
        endings = await self._advance(now)
        report.terminated = await self._terminate(endings)
        await self._launch_waiting(now, report)
        if report.launched or report.terminated or report.failed_jobs:
            self.notifier.notify()
        return report

    async def exchange_id(self) -> str:
        if self._exchange is None:
            async with self.db.write() as session:
                self._exchange = await launches.exchange_id(session)
        return self._exchange

    # --- (1) live launches -----------------------------------------------------------------

    async def _advance(self, now: float) -> list[Ending]:
        cfg = self.config.clouds
        endings: list[Ending] = []
        stuck = await pending.stuck(self.db, self.clouds, self.in_flight, now)
        async with self.db.write() as session:
            judged: dict[str, tuple[Launch, decide.Facts, decide.Verdict]] = {}
            jobs: dict[str, Job | None] = {}
            for launch in await launches.live(session):
                if launch.id in self.in_flight:
                    continue
                node = await session.get(Node, launch.node_id)
                job = await session.get(Job, launch.job_id) if launch.job_id else None
                facts = await _facts(session, launch, node, job,
                                     needs_verification=not self.config.allow_unverified)
                judged[launch.id] = (launch, facts, pending.verdict(
                    stuck.get(launch.id), facts) or decide.verdict(
                    facts, now, boot_timeout_s=cfg.boot_timeout_s,
                    idle_timeout_s=cfg.idle_timeout_s))
                jobs[launch.id] = job
            broken = await gangs.broken(session, judged, self.in_flight)
            sizes = Counter(launch.gang for launch, _, _ in judged.values() if launch.gang)
            for launch_id, (launch, _, found) in judged.items():
                ending = await self._apply(session, launch, jobs[launch_id],
                                           broken.get(launch_id, found), now,
                                           members=sizes.get(launch.gang or "", 1))
                if ending is not None:
                    endings.append(ending)
        return endings

    async def _apply(self, session: AsyncSession, launch: Launch, job: Job | None,
                     found: decide.Verdict, now: float, *, members: int) -> Ending | None:
        """Carry out a verdict (``members``: how many launches of its gang are live)."""
        if found.step == "terminate":
            if launch.state != LaunchState.TERMINATING:
                log.info("launch %s (%s): terminating: %s", launch.id, launch.instance_type,
                         found.reason)
                await launches.mark_terminating(session, launch, found.reason, now)
            if found.block:
                offer = launches.offer_of(launch)
                await launches.add_blocks(session, [boot_block(offer, launch.spot, now,
                                                               found.reason)], now)
            return Ending(launch.id, launch.provider, launch.region, launch.instance_id,
                          launch.node_id)
        if found.step == "ready":
            launch.state = LaunchState.READY
        elif found.step == "busy":
            launch.idle_since = None
        elif found.step == "idle" and launch.idle_since is None:
            launch.idle_since = now
        elif found.step == "wait" and job is not None and job.state == JobState.PENDING:
            _say(job, f"{_launching(launch, members)} — {now - launch.requested_at:.0f} s"
                      f"{' (booting)' if launch.state == LaunchState.BOOTING else ''}")
        return None

    async def _terminate(self, endings: list[Ending]) -> list[str]:
        done: list[str] = []
        for end in endings:
            await self.connections.close(end.node_id, "instance terminated")
            provider = self.clouds.providers.get(end.provider)
            if provider is not None and end.instance_id is not None:
                try:
                    await asyncio.to_thread(provider.terminate, end.region, [end.instance_id])
                except CloudError as exc:
                    log.warning("terminating %s failed (%s); retrying next tick",
                                end.instance_id, exc)
                    continue
            done.append(end.launch_id)
        async with self.db.write() as session:
            await launches.terminated(session, done, self.clock())
        return done

    # --- (2) waiting jobs ------------------------------------------------------------------

    async def _launch_waiting(self, now: float, report: TickReport) -> None:
        if not self.clouds.enabled:
            return
        async with self.db.read() as session:
            jobs = await launches.waiting_jobs(session, now, WAITING_PER_TICK)
        if not jobs:
            return
        await self.clouds.relist(RELIST_AFTER_S)  # a cluster's nodes, as they are now
        await self.rate(now)
        async with self.db.read() as session:
            rooms = await live_capacity(session, self.config.allow_unverified)
            blocks = await launches.blocks(session, now)
            projects = {p.id: p for p in (await session.scalars(
                select(Project).where(Project.id.in_({j.project_id for j in jobs}))
            )).all()}
        for job in jobs:
            compute = spec_of(job).compute
            if fits_any(compute, [r for r in rooms if r.node.serves(job.project_id)]):
                continue  # placement's: a node that serves its project has room for it
            await self._launch_for(job, projects.get(job.project_id), blocks, report)

    async def rate(self, now: float) -> None:
        """The clouds' launch success rates onto their offers (read every RATE_EVERY_S)."""
        if self._rated_at <= now < self._rated_at + RATE_EVERY_S:
            return
        self._rated_at = now
        async with self.db.read() as session:
            self.clouds.rate(await launch_figures.success_rates(session, now))

    def places(self, compute: Compute, project: Project | None, blocks: list[LaunchBlock],
               wanted: int = SEARCHED) -> tuple[list[Match], list[Match], list[Match],
                                                tuple[str, ...] | None]:
        """Where ``compute`` could be launched for ``project``: (the clouds' matches, the
        places to try best first, those left out by a block, the project's clouds or None for
        any). ``wanted``: matches asked of the clouds' index (of each kind, spot and
        on-demand, under ``spot: prefer``)."""
        found = self.clouds.matches(compute, wanted)
        on_demand = (self.clouds.matches(compute.model_copy(update={"spot": "never"}), wanted)
                     if compute.spot == "prefer" else [])
        allowed = tuple(project.clouds) if project and project.clouds is not None else None
        places, blocked = decide.candidates(compute, found, on_demand, blocks=blocks,
                                            now=self.clock(), clouds=allowed)
        return found, places, blocked, allowed

    async def _launch_for(self, job: Job, project: Project | None, blocks: list[LaunchBlock],
                          report: TickReport) -> None:
        compute = spec_of(job).compute
        found, places, blocked, allowed = self.places(compute, project, blocks)
        shape = job.shape or ""
        if not places:
            self.notes[shape] = _nothing_to_launch(found, blocked, allowed, blocks, self.clock())
            return
        tries: list[Try] = []
        for place in places:
            if len(tries) >= self.config.clouds.max_tries:
                break
            if blocked_by(place.offer, place.spot, blocks, self.clock()):
                continue  # a failure of this pass blocked it (a quota: the whole family)
            capped = await self._over_cap(job, project, place.price, compute.num_nodes)
            if capped is not None:
                self.notes[shape] = f"not launching {_count(compute.num_nodes)}" \
                                    f"{decide.describe(place)}: {capped}"
                return
            outcome = await (self._try(job, place, tries, blocks) if compute.num_nodes == 1
                             else gangs.launch_gang(self, job, place, tries, blocks))
            if outcome in ("launched", "failed"):
                self.notes.pop(shape, None)
                (report.launched if outcome == "launched" else report.failed_jobs).append(job.id)
                report.tries += tries
                return
        report.tries += tries
        self.notes[shape] = (f"no launch succeeded ({len(tries)} tried; each place stays "
                             f"blocked for a while, then is tried again):\n{table(tries)}")

    async def _over_cap(self, job: Job, project: Project | None, price: float,
                        nodes: int) -> str | None:
        if project is None or (project.cap_hour is None and project.cap_day is None):
            return None
        now = self.clock()
        async with self.db.read() as session:
            hourly, spent = await launches.project_spend(session, job.project_id,
                                                         launches.day_start(now), now)
        return over_cap(price, hourly, spent, project.cap_hour, project.cap_day, nodes=nodes)

    async def _try(self, job: Job, place: Match, tries: list[Try],
                   blocks: list[LaunchBlock]) -> str:
        """One place: "launched", "failed" (the job failed), or "next"."""
        provider = self.clouds.providers.get(place.offer.provider)
        if provider is None or place.offer.provider not in self.clouds.enabled:
            return "next"
        requested = await self._request(job, place)
        if requested is None:
            return "failed"  # the job is no longer waiting
        spec = await self.make_spec(requested, place)
        for attempt, backoff in enumerate((*THROTTLE_BACKOFF_S, None)):
            try:
                _crash_at("before-call")
                instance = await self._call(provider, spec)
            except CloudError as exc:
                outcome = await self._failed(job, place, requested, exc, tries=tries,
                                             blocks=blocks)
                if exc.failure is Failure.THROTTLE and backoff is not None:
                    log.info("throttled by %s (try %d); backing off %.1f s", provider.name,
                             attempt + 1, backoff)
                    await self.sleep(backoff)
                    requested = await self._request(job, place)
                    if requested is None:
                        return "failed"
                    spec = await self.make_spec(requested, place)
                    continue
                return outcome
            _crash_at("after-call")
            await self._record(requested, instance, place, tries)
            return "launched"
        return "next"

    async def _call(self, provider: Provider, spec: LaunchSpec) -> Instance:
        self.in_flight.add(spec.launch_id)
        try:
            return await asyncio.to_thread(provider.launch, spec)
        finally:
            self.in_flight.discard(spec.launch_id)

    async def _request(self, job: Job, place: Match) -> launches.Requested | None:
        now = self.clock()
        async with self.db.write() as session:
            row = await session.get(Job, job.id, with_for_update=True)
            if row is None or row.state != JobState.PENDING:
                return None
            requested = await launches.request(
                session, row, place, now, boot_timeout_s=self.config.clouds.boot_timeout_s)
            _say(row, f"{_launching(requested.launch)} — 0 s")
        _crash_at("after-request")
        return requested

    async def make_spec(self, requested: launches.Requested, place: Match, *,
                        network: str | None = None) -> LaunchSpec:
        """The launch of ``requested``'s instance; ``network``: a gang member's."""
        launch, node = requested.launch, requested.node
        offer = place.offer
        url = self.config.clouds.agent_url or self.config.url
        sla = self.config.clouds.sla_of(offer.provider)
        text = self.user_data(
            server_url=url, enrol_token=requested.enrol_secret, node_name=node.name,
            version=__version__, provider=offer.provider, region=offer.region,
            zone=offer.zone, instance_type=offer.instance_type, spot=place.spot,
            spot_price=place.price if place.spot else None, price=place.price,
            **({"network": network} if network is not None else {}),
            **({"declared_sla": sla} if sla is not None else {}))
        return LaunchSpec(launch_id=launch.id, exchange_id=await self.exchange_id(),
                          node_id=node.id, project_id=launch.project_id, region=offer.region,
                          instance_type=offer.instance_type, user_data=text,
                          client_token=launch.client_token, zone=offer.zone, spot=place.spot,
                          job_id=launch.job_id,
                          image=self.config.clouds.image_of(offer.provider))

    async def _record(self, requested: launches.Requested, instance: Instance,
                      place: Match, tries: list[Try]) -> None:
        now = self.clock()
        async with self.db.write() as session:
            kept = await launches.launched(session, requested.launch.id, instance, now)
        tries.append(try_of(place, "launched", instance.id))
        if kept is None:  # ended while the call ran: it must not live on
            provider = self.clouds.providers[place.offer.provider]
            await asyncio.to_thread(provider.terminate, place.offer.region, [instance.id])
        log.info("launched %s %s for job %s: %s", instance.id, decide.describe(place),
                 requested.launch.job_id, requested.launch.id)
        self.notifier.notify()

    async def _failed(self, job: Job, place: Match, requested: launches.Requested,
                      exc: CloudError, *, tries: list[Try], blocks: list[LaunchBlock]) -> str:
        now = self.clock()
        detail = f"{exc.code}: {exc.message}" + (f" (quota: {exc.quota})" if exc.quota else "")
        tries.append(try_of(place, exc.failure.value, detail))
        found = blocks_for(exc.failure, place.offer, place.spot, now, detail)
        blocks += found
        async with self.db.write() as session:
            await launches.failed(session, requested.launch.id, detail, now)
            await launches.add_blocks(session, found, now)
            if exc.failure is Failure.CONFIG:
                await self.fail_job(session, job.id, place, detail, now)
        if exc.failure is Failure.AUTH:
            self.clouds.disable(place.offer.provider, f"launching was refused: {detail}")
        log.info("launch of %s failed (%s): %s", decide.describe(place), exc.failure, detail)
        return "failed" if exc.failure is Failure.CONFIG else "next"

    @staticmethod
    async def fail_job(session: AsyncSession, job_id: str, place: Match, detail: str,
                       now: float) -> None:
        """The cloud refused the request itself: the job fails (another place would too)."""
        job = await session.get(Job, job_id, with_for_update=True)
        if job is None or job.state != JobState.PENDING:
            return
        job.reason = (f"launching {decide.describe(place)} failed: {detail} (the cloud "
                      "refused the request itself: another zone would refuse it too)")
        job.pending_reason = None
        set_job_state(session, job, JobState.FAILED, now, job.reason)

    # --- the reconciler --------------------------------------------------------------------

    async def reconcile(self) -> list[str]:
        """Match the clouds' tagged instances with the launch rows: terminate instances no
        live launch owns, adopt those a crash left unrecorded, and end launches whose instance
        is gone. Returns the instance ids it terminated. A cluster's offers are listed again
        first (its nodes come and go)."""
        await self.clouds.relist()
        return await reconcile(self)


async def _facts(session: AsyncSession, launch: Launch, node: Node | None,
                 job: Job | None, *, needs_verification: bool) -> decide.Facts:
    active = 0
    if node is not None and launch.state == LaunchState.READY:
        active = await session.scalar(select(func.count()).select_from(
            Attempt).where(Attempt.node_id == node.id,
                                    Attempt.state.in_(active_attempt_states()))) or 0
    checks = ""
    if node is not None and node.verification_status == "fail" and node.verification:
        checks = "; ".join(c.get("reason", "") for c in node.verification.get("checks", [])
                           if c.get("status") == "fail")
    return decide.Facts(
        state=LaunchState(launch.state), requested_at=launch.requested_at,
        node_state=node.state if node is not None else None,
        verification=node.verification_status if node is not None else None,
        failed_checks=checks, job_ended=job is None or JobState(job.state).terminal,
        active=int(active), idle_since=launch.idle_since,
        enrolled=launch.enrolled_at is not None, needs_verification=needs_verification)


def _nothing_to_launch(found: list[Match], blocked: list[Match], allowed: tuple[str, ...] | None,
                       blocks: list[LaunchBlock], now: float) -> str:
    if blocked:
        rows = [try_of(m, "blocked", block_reason(m, blocks, now)) for m in blocked[:10]]
        return ("every launchable offer that fits is blocked for now (it failed lately):\n"
                + table(rows))
    if found and allowed is not None:
        return f"the project may launch only on {', '.join(allowed) or 'no cloud'}"
    return "no offer of the enabled clouds fits it"


def block_reason(m: Match, blocks: list[LaunchBlock], now: float) -> str:
    block = blocked_by(m.offer, m.spot, blocks, now)
    return f"{block.reason} (for {block.until - now:.0f} s more)" if block else ""


def _count(nodes: int) -> str:
    return f"{nodes} x " if nodes > 1 else ""


def _launching(launch: Launch, members: int = 1) -> str:
    where = launch.region + (f" ({launch.zone})" if launch.zone else "")
    kind = "spot" if launch.spot else "on-demand"
    return f"launching {_count(members)}{launch.provider} {where} {launch.instance_type} {kind}"


def _say(job: Job, text: str) -> None:
    if job.pending_reason != text:
        job.pending_reason = text


def _crash_at(step: str) -> None:
    if os.environ.get(CRASH_AT) == step:
        log.critical("%s=%s: dying here, as a fault test asked", CRASH_AT, step)
        os._exit(137)


def _default_user_data(**fields: object) -> str:
    from bourse.clouds.userdata import user_data
    return user_data(**fields)  # type: ignore[arg-type]
