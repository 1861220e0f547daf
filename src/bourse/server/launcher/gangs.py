"""Gang launches: the N machines of a multi-node job, launched together, all or nothing.

For a job whose Compute has ``num_nodes = N > 1`` one place of the fail-over is N instances of
one offer, in its zone. The N launch rows (sharing one gang id) are committed before any cloud
call; then the cloud places the gang (``clouds.base.GangPlacement``; on EC2 a cluster
placement group of its own when the type supports one, and the exchange's security group open
between its members), and the members are launched one after another, each retried with its
own token while the cloud throttles. A member the cloud refuses ends the gang: the members
already launched are terminated, the other rows fail, the place is blocked as a one-node
launch's would be, and the next place is tried as a whole. Each member's agent is started with
``--network <provider>:<zone>`` (``network_of``), so placement puts the gang on them; its
address is the agent's default, the one it reaches the coordinator from: its private address.

A gang that never came up whole ends whole (``decide.broken_gang``): a coordinator killed
between members leaves rows without an instance, which the reconciler fails; the launcher's
next pass then terminates the members that did boot. The reconciler deletes a gang's
placement group once no launch of its gang is live (``sweep``).
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from sqlalchemy.ext.asyncio import AsyncSession

from bourse.clouds.base import CloudError, GangPlace, GangPlacement, Instance, LaunchSpec, Provider
from bourse.core.launch import Failure, LaunchBlock, Try, blocks_for
from bourse.core.match import Match
from bourse.core.offer import Offer
from bourse.core.states import JobState, LaunchState
from bourse.server.db.schema import Job, Launch
from bourse.server.ids import new_id
from bourse.server.launcher import decide
from bourse.server.launcher.decide import THROTTLE_BACKOFF_S, try_of
from bourse.server.services import launches
from bourse.server.services.lifecycle import add_event
from bourse.server.services.specs import spec_of

if TYPE_CHECKING:
    from bourse.server.launcher.launcher import Launcher

log = logging.getLogger(__name__)


def network_of(offer: Offer) -> str:
    """The network a gang's members declare: its cloud and zone (``aws:use1-az1``). Members
    of two gangs in one zone may make up a third: they share the security group."""
    return f"{offer.provider}:{offer.zone or offer.region}"


class _Ended(Exception):
    """A member's launch was ended while the cloud made its instance (the job ended)."""


@dataclass
class _Gang:
    """One gang launch under way: its place, its rows, and the members launched so far."""

    job: Job
    place: Match
    provider: Provider
    members: list[launches.Requested]
    where: GangPlace | None = None  # None: not placed yet, or the cloud places no gang
    placed: bool = False
    launched: list[Instance] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.members[0].launch.gang or ""

    @property
    def size(self) -> int:
        return len(self.members)

    def launched_ids(self) -> list[str]:
        """The launch ids of the members launched so far."""
        return [m.launch.id for m in self.members[:len(self.launched)]]


async def launch_gang(launcher: Launcher, job: Job, place: Match, tries: list[Try],
                      blocks: list[LaunchBlock]) -> str:
    """One place for a gang: "launched", "failed" (the job failed or no longer waits), or
    "next" (every member launched was terminated)."""
    provider = launcher.clouds.providers.get(place.offer.provider)
    if provider is None or place.offer.provider not in launcher.clouds.enabled:
        return "next"
    members = await _request(launcher, job, place, spec_of(job).compute.num_nodes)
    if members is None:
        return "failed"
    gang = _Gang(job, place, provider, members)
    ids = {m.launch.id for m in members}
    launcher.in_flight |= ids  # the reconciler leaves a gang under way alone
    try:
        return await _launch(launcher, gang, tries, blocks)
    finally:
        launcher.in_flight -= ids


async def _request(launcher: Launcher, job: Job, place: Match,
                   size: int) -> list[launches.Requested] | None:
    now, gang = launcher.clock(), new_id("g")
    async with launcher.db.write() as session:
        row = await session.get(Job, job.id, with_for_update=True)
        if row is None or row.state != JobState.PENDING:
            return None
        members = [await launches.request(session, row, place, now, gang=gang,
                                          boot_timeout_s=launcher.config.clouds.boot_timeout_s)
                   for _ in range(size)]
        row.pending_reason = f"launching {size} nodes together: {decide.describe(place)} each"
    return members


async def _launch(launcher: Launcher, gang: _Gang, tries: list[Try],
                  blocks: list[LaunchBlock]) -> str:
    try:
        gang.where = await _place(launcher, gang)
        gang.placed = True
        for member in gang.members:
            spec = await launcher.make_spec(member, gang.place, network=network_of(
                gang.place.offer))
            instance = await _call(launcher, gang.provider, _placed(spec, gang))
            gang.launched.append(instance)
            await _record(launcher, gang, member, instance)
    except CloudError as exc:
        return await _give_up(launcher, gang, exc, tries, blocks)
    except _Ended:
        await _abandon(launcher, gang, "its job ended while its gang was launched", None)
        return "failed"
    tries.append(try_of(gang.place, "launched", ", ".join(i.id for i in gang.launched)))
    log.info("launched gang %s of job %s: %d x %s (%s)", gang.id, gang.job.id, gang.size,
             decide.describe(gang.place), ", ".join(i.id for i in gang.launched))
    launcher.notifier.notify()
    return "launched"


async def _place(launcher: Launcher, gang: _Gang) -> GangPlace | None:
    if not isinstance(gang.provider, GangPlacement):
        return None
    offer = gang.place.offer
    where = await asyncio.to_thread(gang.provider.place_gang, await launcher.exchange_id(),
                                    gang.id, offer.region, offer.zone, offer.instance_type)
    if where.note:
        async with launcher.db.write() as session:
            add_event(session, gang.job.id, gang.job.attempt, "info", launcher.clock(),
                      message=where.note)
    return where


def _placed(spec: LaunchSpec, gang: _Gang) -> LaunchSpec:
    where = gang.where or GangPlace()
    return replace(spec, gang=gang.id, placement_group=where.placement_group,
                   security_groups=where.security_groups)


async def _call(launcher: Launcher, provider: Provider, spec: LaunchSpec) -> Instance:
    """Launch one member, backing off and trying again with its token while throttled."""
    for backoff in THROTTLE_BACKOFF_S:
        try:
            return await asyncio.to_thread(provider.launch, spec)
        except CloudError as exc:
            if exc.failure is not Failure.THROTTLE:
                raise
            log.info("throttled by %s; backing off %.1f s", provider.name, backoff)
            await launcher.sleep(backoff)
    return await asyncio.to_thread(provider.launch, spec)


async def _record(launcher: Launcher, gang: _Gang, member: launches.Requested,
                  instance: Instance) -> None:
    async with launcher.db.write() as session:
        kept = await launches.launched(session, member.launch.id, instance, launcher.clock())
    if kept is None:  # ended while the call ran: the gang cannot come up
        raise _Ended


async def _give_up(launcher: Launcher, gang: _Gang, exc: CloudError, tries: list[Try],
                   blocks: list[LaunchBlock]) -> str:
    """A member failed: end the gang (terminating what was launched), block the place, and
    say whether the next place is tried."""
    now, done = launcher.clock(), len(gang.launched)
    detail = f"{exc.code}: {exc.message}" + (f" (quota: {exc.quota})" if exc.quota else "")
    which = f"member {done + 1} of {gang.size}" if gang.placed else "placing the gang"
    tries.append(try_of(gang.place, exc.failure.value, f"{which}: {detail}"))
    found = blocks_for(exc.failure, gang.place.offer, gang.place.spot, now, detail)
    blocks += found
    why = f"its gang could not be launched whole ({which}: {detail})"
    async with launcher.db.write() as session:
        await launches.add_blocks(session, found, now)
        if exc.failure is Failure.CONFIG:
            await launcher.fail_job(session, gang.job.id, gang.place, detail, now)
    await _abandon(launcher, gang, why, detail)
    if exc.failure is Failure.AUTH:
        launcher.clouds.disable(gang.place.offer.provider, f"launching was refused: {detail}")
    log.info("gang launch of %d x %s failed at %s (%s): %s", gang.size,
             decide.describe(gang.place), which, exc.failure, detail)
    return "failed" if exc.failure is Failure.CONFIG else "next"


async def _abandon(launcher: Launcher, gang: _Gang, why: str, detail: str | None) -> None:
    """End every row of the gang (``detail``: the failing member's own reason) and terminate
    the members launched."""
    async with launcher.db.write() as session:
        await _end_rows(session, gang, detail, why, launcher.clock())
    await _terminate(launcher, gang)


async def _end_rows(session: AsyncSession, gang: _Gang, detail: str | None, why: str,
                    now: float) -> None:
    launched = set(gang.launched_ids())
    for member in gang.members:
        row = await session.get(Launch, member.launch.id, with_for_update=True)
        if row is None or row.state not in (LaunchState.REQUESTED, LaunchState.BOOTING):
            continue
        if row.id in launched or row.instance_id is not None:
            await launches.mark_terminating(session, row, why, now)
        else:
            await launches.failed(session, row.id, detail if detail and row.id == _failing(
                gang) else why, now)


def _failing(gang: _Gang) -> str:
    return gang.members[min(len(gang.launched), gang.size - 1)].launch.id


async def _terminate(launcher: Launcher, gang: _Gang) -> None:
    """Terminate the members launched; their rows end now, or on the launcher's next pass if
    the call fails (they stay ``terminating``). The placement group goes when it can."""
    offer = gang.place.offer
    ids = [i.id for i in gang.launched]
    try:
        if ids:
            await asyncio.to_thread(gang.provider.terminate, offer.region, ids)
            async with launcher.db.write() as session:
                await launches.terminated(session, gang.launched_ids(), launcher.clock())
        if isinstance(gang.provider, GangPlacement) and gang.placed:
            await asyncio.to_thread(gang.provider.release_gang, offer.region, gang.id)
    except CloudError as exc:
        log.warning("ending gang %s: %s; the launcher and the reconciler retry", gang.id, exc)


# --- gangs that never came up whole ---------------------------------------------------------

async def broken(session: AsyncSession, judged: Mapping[str, tuple[Launch, decide.Facts,
                                                                   decide.Verdict]],
                 skip: set[str]) -> dict[str, decide.Verdict]:
    """The verdicts that end the members of gangs that never came up whole, by launch id
    (``judged``: this pass's live launches; ``skip``: launches whose call runs now)."""
    gangs = {launch.gang for launch, _, _ in judged.values() if launch.gang}
    rows: dict[str, list[Launch]] = defaultdict(list)
    for row in await launches.gang_members(session, gangs):
        rows[row.gang or ""].append(row)
    ending = {i for i, (_, _, v) in judged.items() if v.step == "terminate"}
    out: dict[str, decide.Verdict] = {}
    for members in rows.values():
        if any(m.id in skip for m in members):
            continue
        found = decide.broken_gang([_member(m, judged) for m in members], ending)
        reason = _why_broken(members, ending)
        out |= {launch_id: decide.Verdict("terminate", reason) for launch_id in found
                if launch_id in judged}
    return out


def _member(row: Launch, judged: Mapping[str, tuple[Launch, decide.Facts,
                                                    decide.Verdict]]) -> decide.Member:
    facts = judged[row.id][1] if row.id in judged else None
    return decide.Member(row.id, LaunchState(row.state), busy=bool(facts and facts.active))


def _why_broken(members: Sequence[Launch], ending: set[str]) -> str:
    dead = next((m for m in members if m.state in (LaunchState.FAILED,
                                                    LaunchState.TERMINATING,
                                                    LaunchState.TERMINATED)
                 or m.id in ending), None)
    what = f": {dead.reason}" if dead is not None and dead.reason else ""
    return f"its gang never came up whole (a member ended{what})"


# --- placement groups ------------------------------------------------------------------------

async def sweep(launcher: Launcher, name: str, provider: Provider) -> list[str]:
    """Delete the placement groups of gangs with no live launch (EC2 refuses while the
    instances shut down: the next pass tries again). Returns the gangs whose group went."""
    if not isinstance(provider, GangPlacement):
        return []
    async with launcher.db.read() as session:
        if not await launches.any_gang(session, name):
            return []  # never a gang: no call (nor a warning where the policy lacks it)
    exchange = await launcher.exchange_id()
    try:
        groups = await asyncio.to_thread(provider.gang_groups, exchange,
                                         launcher.clouds.regions(name))
    except CloudError as exc:
        log.warning("reconciling %s: listing placement groups failed: %s", name, exc)
        return []
    async with launcher.db.read() as session:
        live = await launches.live_gangs(session, {gang for _, gang in groups})
    gone: list[str] = []
    for region, gang in groups:
        if gang in live:
            continue
        try:
            if await asyncio.to_thread(provider.release_gang, region, gang):
                gone.append(gang)
        except CloudError as exc:
            log.warning("deleting gang %s's placement group failed: %s", gang, exc)
    return gone
