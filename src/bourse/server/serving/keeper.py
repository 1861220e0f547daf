"""The service keeper: every ``every_s`` one pass over the running services (``run_once``).

In one transaction per pass it notes replicas whose job ended, judges each rollout's step on
the gateway's figures (``core.rollout``) and applies the verdict with its reason (timeline,
audit), brings each live version to the replica count its traffic asks for
(``core.autoscale``: a dead replica is replaced here), and writes the figures rows the charts
read. After the commit it sends the cancels, hands the gateway its table and probes replicas
that are not ready yet. One coordinator runs it (leases across replicas are future work).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.autoscale import Scaling, desired
from bourse.core.rollout import Step, Verdict, judge
from bourse.core.states import JobState
from bourse.protocol.services import ServicePolicy
from bourse.protocol.stream import PortTarget
from bourse.server.commands import Command
from bourse.server.db.schema import Job, ServiceReplica, ServiceRow, ServiceVersion
from bourse.server.services import audit, secrets
from bourse.server.services import serving as svc
from bourse.server.services.jobs import cancel_row
from bourse.server.serving.gateway import Gateway, Replica, ReplicaInfo, Route
from bourse.server.state import ServerState
from bourse.server.streams.proxy import probe_http

log = logging.getLogger(__name__)
FIGURES_EVERY_S = 5.0
RATE_WINDOW_S = 10.0


@dataclass
class Pass:
    """What one pass decided, to act on after its commit."""

    commands: list[Command] = field(default_factory=list)
    routes: list[tuple[ServiceRow, dict[int, int], list[ReplicaInfo]]] = field(
        default_factory=list)
    audits: list[audit.Entry] = field(default_factory=list)
    submitted: int = 0


class ServiceKeeper:
    def __init__(self, state: ServerState, every_s: float = 0.5) -> None:
        self.state = state
        self.gateway: Gateway = state.gateway
        self.every_s = every_s
        self._lower_since: dict[tuple[str, int], float | None] = {}
        self._figures_at: dict[str, float] = {}
        self._probes: set[asyncio.Task[None]] = set()

    async def run_once(self, now: float | None = None) -> Pass:
        now = self.state.clock() if now is None else now
        done = Pass()
        async with self.state.db.write() as session:
            services = (await session.scalars(select(ServiceRow).where(
                ServiceRow.state == svc.RUNNING))).all()
            for service in services:
                await self._tick(session, service, now, done)
        self._hand_over(done, now)  # first: no request goes to a replica being stopped
        self.state.hub.send(done.commands)
        if done.submitted or done.commands:
            self.state.notifier.notify()
            self.state.scheduler.kick()
        for entry in done.audits:
            await self.state.record_audit(entry)
        return done

    def _hand_over(self, done: Pass, now: float) -> None:
        keys = set()
        for service, weights, infos in done.routes:
            route = self.gateway.sync(service.id, service.project_id, service.name, weights,
                                      infos)
            keys.add((service.project_id, service.name))
            for replica in route.replicas.values():
                if self._due(replica, now):
                    self._start_probe(replica)
        self.gateway.keep_only(keys)

    @staticmethod
    def _due(replica: Replica, now: float) -> bool:
        info = replica.info
        return (not replica.ready and not replica.probing and info.running_since is not None
                and now - info.running_since >= info.initial_delay_s)

    def _start_probe(self, replica: Replica) -> None:
        replica.probing = True
        task = asyncio.get_running_loop().create_task(self._probe(replica))
        self._probes.add(task)
        task.add_done_callback(self._probes.discard)

    async def _probe(self, replica: Replica) -> None:
        info = replica.info
        tunnels = self.state.hub.tunnels
        try:
            carrier = self.state.hub.connections.get(info.node_id or "")
            if carrier is None:
                return
            stream = await tunnels.open(carrier, info.job_id, info.attempt,
                                        PortTarget(port=info.port),
                                        timeout=info.readiness_timeout_s)
            try:
                status = await asyncio.wait_for(probe_http(stream, info.readiness_path),
                                                info.readiness_timeout_s)
            finally:
                tunnels.close(stream)
            if 200 <= status < 400:
                replica.ready = replica.ever_ready = True
        except Exception as exc:  # not ready yet: probed again next pass
            log.debug("readiness probe of %s: %s", info.job_id, exc)
        finally:
            replica.probing = False

    async def _tick(self, session: AsyncSession, service: ServiceRow, now: float,
                    done: Pass) -> None:
        versions = {v.number: v for v in await svc.versions_of(session, service.id)}
        replicas = await self._note_ended(session, service, now)
        route = self.gateway.route(service.project_id, service.name)
        if route is not None and service.canary is not None:
            await self._judge(session, service, versions, route, now=now, done=done)
        for number in (service.stable, service.canary):
            if number is not None:
                await self._scale(session, service, versions[number], replicas, route=route,
                                  now=now, done=done)
        replicas = await svc.live_replicas(session, service.id)
        steps = _steps(versions, service.canary)
        done.routes.append((service, svc.weights_of(service, steps),
                            _infos(replicas, versions)))
        if route is not None:
            self._figures_row(session, service, route, now)

    async def _note_ended(self, session: AsyncSession, service: ServiceRow,
                          now: float) -> list[tuple[ServiceReplica, Job]]:
        alive = []
        for replica, job in await svc.live_replicas(session, service.id):
            if not JobState(job.state).terminal:
                alive.append((replica, job))
                continue
            replica.ended = True
            if not job.cancel_requested:
                svc.add_service_event(session, service, now, "replica",
                                      f"replica {job.id} ended {job.state}"
                                      f"{': ' + job.reason if job.reason else ''}; replacing it",
                                      version=replica.version)
        return alive

    async def _judge(self, session: AsyncSession, service: ServiceRow,
                     versions: dict[int, ServiceVersion], route: Route, *, now: float,
                     done: Pass) -> None:
        assert service.canary is not None and service.step is not None
        canary = versions[service.canary]
        rules = svc.rules_of(ServicePolicy.model_validate(canary.policy))
        step = Step(service.step, service.step_since or now, service.rollout_since or now,
                    ready=route.ever_ready(canary.number))
        mine = route.figures(canary.number, now, since=step.since)
        stable = (route.figures(service.stable, now) if service.stable is not None
                  else route.figures(canary.number, now))
        decision = judge(rules, step, mine, stable, now)
        if decision.verdict is Verdict.HOLD:
            return
        data = {"canary": mine.as_dict(), "stable": stable.as_dict(), "step": service.step}
        if decision.verdict is Verdict.ROLL_BACK:
            done.commands += await svc.roll_back(session, service, decision.reason, now)
            action = "service.roll_back"
        else:
            done.commands += await svc.advance(session, service, rules.steps,
                                               reason=decision.reason, now=now, data=data)
            action = "service.advance"
        done.audits.append(audit.Entry(time=now, actor="coordinator", actor_kind="system",
                                       project_id=service.project_id, source="service-keeper",
                                       action=action, target=f"/svc/{service.project_id}/"
                                       f"{service.name}", outcome="ok",
                                       params={"version": canary.number,
                                               "reason": decision.reason, **data}))

    async def _scale(self, session: AsyncSession, service: ServiceRow, version: ServiceVersion,
                     replicas: Sequence[tuple[ServiceReplica, Job]], *, route: Route | None,
                     now: float, done: Pass) -> None:
        if version.number not in (service.stable, service.canary):
            return  # rolled back or promoted over in this pass
        policy = ServicePolicy.model_validate(version.policy)
        mine = [(r, j) for r, j in replicas
                if r.version == version.number and not r.ended and not j.cancel_requested]
        figures = None if route is None else route.figures(
            version.number, now, since=now - RATE_WINDOW_S)
        # the latency asks again only once every replica it has serves: a p99 over the
        # target would otherwise double the count at each pass before the new ones take load
        settled = route is not None and _serving(route, version.number) >= len(mine)
        scaling = Scaling(max(policy.min_replicas, 1), policy.max_replicas, policy.target_rps,
                          target_p99_ms=policy.target_p99_ms)
        key = (service.id, version.number)
        want, self._lower_since[key] = desired(
            scaling, len(mine), figures.rps if figures else 0.0, self._lower_since.get(key),
            now, p99_ms=figures.p99_ms if figures and settled else None)
        for _ in range(want - len(mine)):
            await self._add_replica(session, service, version, now)
            done.submitted += 1
        for _replica, job in _surplus(mine, len(mine) - want):
            done.commands += cancel_row(session, job, now,
                                        f"service {service.name}: scaled down")

    async def _add_replica(self, session: AsyncSession, service: ServiceRow,
                           version: ServiceVersion, now: float) -> None:
        box = secrets.SecretBox(self.state.key) if self.state.key else None
        await svc.add_replicas(session, service, version.number, 1, now=now,
                               store=self.state.store_root, box=box)

    def _figures_row(self, session: AsyncSession, service: ServiceRow, route: Route,
                     now: float) -> None:
        if now - self._figures_at.get(service.id, 0.0) < FIGURES_EVERY_S:
            return
        self._figures_at[service.id] = now
        data: dict[str, Any] = {}
        for version in route.weights:
            figures = route.figures(version, now, since=now - FIGURES_EVERY_S)
            if figures.requests:
                data[str(version)] = figures.as_dict() | {"weight": route.weights[version]}
        if data:
            svc.add_service_event(session, service, now, "figures", "", data=data)

    async def run(self) -> None:
        try:
            while True:
                try:
                    await self.run_once()
                except Exception:
                    log.exception("the service keeper's pass failed; retrying")
                await asyncio.sleep(self.every_s)
        finally:
            for task in list(self._probes):
                task.cancel()
            with contextlib.suppress(Exception):
                await asyncio.gather(*self._probes, return_exceptions=True)


def _steps(versions: dict[int, ServiceVersion], canary: int | None) -> list[int] | None:
    if canary is None:
        return None
    return list(ServicePolicy.model_validate(versions[canary].policy).steps)


def _surplus(mine: list[tuple[ServiceReplica, Job]],
             count: int) -> list[tuple[ServiceReplica, Job]]:
    """The replicas to stop first: those not running yet, then the newest."""
    if count <= 0:
        return []
    order = sorted(mine, key=lambda rj: (rj[1].state == JobState.RUNNING.value,
                                         -rj[0].created_at))
    return order[:count]


def _infos(replicas: Sequence[tuple[ServiceReplica, Job]],
           versions: dict[int, ServiceVersion]) -> list[ReplicaInfo]:
    infos = []
    for replica, job in replicas:
        if job.state != JobState.RUNNING.value or job.cancel_requested:
            continue
        policy = ServicePolicy.model_validate(versions[replica.version].policy)
        infos.append(ReplicaInfo(job.id, replica.version, replica.port, job.node_id,
                                 job.attempt, job.updated_at, policy.readiness_path,
                                 policy.readiness_timeout_s, policy.initial_delay_s))
    return infos


def _serving(route: Route, version: int) -> int:
    """How many of the version's replicas take traffic (their readiness probe answered)."""
    return sum(1 for r in route.replicas.values() if r.info.version == version and r.ready)
