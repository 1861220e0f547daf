"""What the launcher does with each launch and each waiting job — pure, table-tested.

``verdict``: a live launch's next step from what its rows say (ready, idle, busy, or
terminate, and whether to block its offer); ``broken_gang``: the members a gang that never came
up whole ends with. ``candidates``: the places to try for a job, best first: the job's matches
under its spot policy, and under ``prefer`` the on-demand side of each offer after them by
price (then by the cloud's measured launch success rate, the offer's ``sla``), less what is
blocked.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal

from bourse.core.compute import Compute
from bourse.core.launch import LaunchBlock, Try, blocked_by
from bourse.core.launch_figures import WITHDRAWN
from bourse.core.match import Match
from bourse.core.states import LaunchState, NodeState
from bourse.core.units import describe_duration

Step = Literal["wait", "ready", "busy", "idle", "terminate"]
THROTTLE_BACKOFF_S = (0.5, 1.0, 2.0)  # a throttled call is made again after each of these


@dataclass(frozen=True)
class Facts:
    """One live launch as its rows say it is."""

    state: LaunchState
    requested_at: float
    node_state: str | None  # None: the node row is gone
    verification: str | None  # the node's verification status
    failed_checks: str = ""  # why verification failed
    job_ended: bool = False  # the job it was launched for is over (or gone)
    active: int = 0  # attempts on the node
    idle_since: float | None = None
    enrolled: bool = False
    needs_verification: bool = True  # False: the exchange places on unverified nodes


@dataclass(frozen=True)
class Verdict:
    step: Step
    reason: str = ""
    block: bool = False  # block the offer (it did not deliver)


def verdict(f: Facts, now: float, *, boot_timeout_s: float,
            idle_timeout_s: float) -> Verdict:
    if f.state is LaunchState.TERMINATING:
        return Verdict("terminate", "terminating")
    if f.node_state is None:
        return Verdict("terminate", "its node row is gone")
    if f.state is LaunchState.READY:
        return _ready(f, now, idle_timeout_s)
    return _in_flight(f, now, boot_timeout_s)


def _in_flight(f: Facts, now: float, boot_timeout_s: float) -> Verdict:
    if f.verification == "fail":
        return Verdict("terminate", f"not what the offer said: {f.failed_checks}", block=True)
    verified = f.verification in ("pass", "warn") or not f.needs_verification
    if verified and f.node_state == NodeState.ONLINE:
        return Verdict("ready")
    if now - f.requested_at > boot_timeout_s:
        return Verdict("terminate", f"did not enrol within the boot timeout "
                                    f"({describe_duration(boot_timeout_s)})", block=True)
    if f.job_ended and not f.enrolled:
        return Verdict("terminate", WITHDRAWN)  # no failure of the cloud's
    return Verdict("wait")


def _ready(f: Facts, now: float, idle_timeout_s: float) -> Verdict:
    if f.node_state == NodeState.LOST:
        return Verdict("terminate", "its agent was lost")
    if f.active:
        return Verdict("busy")
    if f.node_state == NodeState.RECLAIMED:  # the next launch goes to another zone or market
        return Verdict("terminate", "reclaimed by the cloud (spot interruption)", block=True)
    if f.idle_since is not None and now - f.idle_since >= idle_timeout_s:
        return Verdict("terminate", f"idle for {describe_duration(idle_timeout_s)} "
                                    "(idle timeout)")
    return Verdict("idle")


@dataclass(frozen=True)
class Member:
    """One launch of a gang as its row says: its state, and whether work runs on its node."""

    launch_id: str
    state: LaunchState
    busy: bool = False


_UP = frozenset({LaunchState.REQUESTED, LaunchState.BOOTING})
_DEAD = frozenset({LaunchState.FAILED, LaunchState.TERMINATING, LaunchState.TERMINATED})


def broken_gang(members: Sequence[Member], ending: Collection[str]) -> list[str]:
    """The members to end with a gang that never came up whole: while one member is still on
    its way up (requested, booting) and another is dead (failed, ended, or in ``ending``, those
    being terminated now), no gang can run on them, so every live member without work goes
    too. Once every member was up, each is a node of its own (idle, lost, ... as any)."""
    dead = [m for m in members if m.state in _DEAD or m.launch_id in ending]
    up = [m for m in members if m.state in _UP and m.launch_id not in ending]
    if not dead or not up:
        return []
    return [m.launch_id for m in members if m.state not in _DEAD and not m.busy
            and m.launch_id not in ending]


def candidates(compute: Compute, found: Sequence[Match], on_demand: Sequence[Match], *,
               blocks: Sequence[LaunchBlock], now: float,
               clouds: Sequence[str] | None = None) -> tuple[list[Match], list[Match]]:
    """(places to try best first, places left out by a block). ``on_demand``: the matches
    of the same Compute with spot never (used under ``prefer``: spot first where it is
    cheaper, then on-demand). A gang's places have a zone: its members are launched in one."""
    pool = list(found) + (list(on_demand) if compute.spot == "prefer" else [])
    seen: set[tuple[str, bool]] = set()
    tries: list[Match] = []
    blocked: list[Match] = []
    for m in sorted(pool, key=lambda m: (m.price, -(m.offer.sla or 0.0), m.offer.id,
                                         not m.spot)):
        if (m.offer.id, m.spot) in seen or (clouds is not None and m.offer.provider not in clouds):
            continue
        if compute.num_nodes > 1 and m.offer.zone is None:
            continue
        seen.add((m.offer.id, m.spot))
        (blocked if blocked_by(m.offer, m.spot, blocks, now) else tries).append(m)
    return tries, blocked


def describe(m: Match) -> str:
    """``aws us-east-1 (use1-az1) p4d.24xlarge spot at $12.40/h``"""
    where = m.offer.region + (f" ({m.offer.zone})" if m.offer.zone else "")
    kind = "spot" if m.spot else "on-demand"
    return f"{m.offer.provider} {where} {m.offer.instance_type} {kind} at ${m.price:.2f}/h"


def try_of(m: Match, outcome: str, detail: str) -> Try:
    return Try(m.offer.provider, m.offer.region, m.offer.zone, m.offer.instance_type, m.spot,
               outcome, detail)
