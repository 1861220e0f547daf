"""A coordinator with a launcher over a scripted cloud, for the launcher's tests.

``ScriptedCloud`` implements the provider seam (``bourse.clouds.base.Provider``) in memory:
instances are made and listed like a cloud would, and a script of errors per (zone, type,
spot) makes chosen calls fail with the class the real provider would raise; ``PlacingCloud``
also places gangs (``clouds.base.GangPlacement``) as EC2 does, a placement group per gang. The
launch path against the real EC2 API (moto) is in ``tests/clouds``; this one exercises the
coordinator's decisions around it, on both databases, with a controlled clock.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from server_harness import Exchange, open_exchange

from bourse.clouds.base import (
    TAG_GANG,
    CloudCheck,
    CloudError,
    CloudState,
    GangPlace,
    Instance,
    LaunchSpec,
    OfferSource,
)
from bourse.core.launch import Failure
from bourse.market.catalogs import catalog_offers
from bourse.server.config import CloudsConfig
from bourse.server.launcher.clouds import Clouds
from bourse.server.launcher.launcher import Launcher


@dataclass
class ScriptedCloud:
    name: str = "aws"
    # (zone or "*", instance type or "*", "spot" | "on-demand" | "*") -> errors to raise, in
    # turn (None: that call succeeds)
    errors: dict[tuple[str, str, str], list[CloudError | None]] = field(default_factory=dict)
    instances: dict[str, Instance] = field(default_factory=dict)
    calls: list[LaunchSpec] = field(default_factory=list)
    terminated: list[str] = field(default_factory=list)
    tokens: dict[str, str] = field(default_factory=dict)  # client token -> instance id
    _ids: Any = field(default_factory=lambda: itertools.count(1))

    def check(self) -> CloudCheck:
        return CloudCheck(self.name, True, None, ("us-east-1",), "arn:aws:iam::123:user/t")

    def fail(self, failure: Failure, code: str, *, zone: str = "*", instance_type: str = "*",
             market: str = "*", times: int = 1, quota: str | None = None,
             after: int = 0) -> None:
        """Fail ``times`` matching calls, once ``after`` matching calls have succeeded."""
        key = (zone, instance_type, market)
        self.errors.setdefault(key, []).extend([None] * after)
        self.errors[key].extend(
            CloudError(failure, code, f"scripted {code}", where=zone, quota=quota)
            for _ in range(times))

    def launch(self, spec: LaunchSpec) -> Instance:
        self.calls.append(spec)
        if spec.client_token in self.tokens:
            return self.instances[self.tokens[spec.client_token]]
        market = "spot" if spec.spot else "on-demand"
        for key in itertools.product((spec.zone or "*", "*"), (spec.instance_type, "*"),
                                     (market, "*")):
            if self.errors.get(key):
                error = self.errors[key].pop(0)
                if error is None:
                    break
                raise error
        instance = Instance(f"i-{next(self._ids):08x}", spec.region, spec.instance_type,
                            "pending", spec.zone, spec.spot, None, spec.tags())
        self.instances[instance.id] = instance
        self.tokens[spec.client_token] = instance.id
        return instance

    def tagged(self, exchange_id: str, regions: Sequence[str]) -> list[Instance]:
        return [i for i in self.instances.values()
                if i.tags.get("bourse:exchange") == exchange_id and i.alive]

    def terminate(self, region: str, instance_ids: Sequence[str]) -> None:
        for instance_id in instance_ids:
            self.terminated.append(instance_id)
            if instance_id in self.instances:
                self.instances[instance_id] = replace(self.instances[instance_id],
                                                      state=CloudState.TERMINATED)

    def alive(self) -> list[Instance]:
        return [i for i in self.instances.values() if i.alive]


@dataclass
class PlacingCloud(ScriptedCloud):
    """A scripted cloud that places gangs: a placement group per gang, as EC2 makes them, none
    for ``no_cluster`` types (as EC2's t3 has none), and one security group; a group in use
    is not deleted, as EC2 refuses."""

    groups: dict[str, tuple[str, str]] = field(default_factory=dict)  # gang -> region, exchange
    released: list[str] = field(default_factory=list)
    no_cluster: set[str] = field(default_factory=set)

    def place_gang(self, exchange_id: str, gang: str, region: str, zone: str | None,
                   instance_type: str) -> GangPlace:
        if instance_type in self.no_cluster:
            return GangPlace(None, ("sg-gang",), f"{instance_type} has no cluster placement")
        self.groups[gang] = (region, exchange_id)
        return GangPlace(f"bourse-{gang}", ("sg-gang",))

    def gang_groups(self, exchange_id: str, regions: Sequence[str]) -> list[tuple[str, str]]:
        return [(region, gang) for gang, (region, exchange) in self.groups.items()
                if exchange == exchange_id and region in regions]

    def release_gang(self, region: str, gang: str) -> bool:
        if any(i.tags.get(TAG_GANG) == gang for i in self.alive()):
            return False
        if self.groups.pop(gang, None) is not None:
            self.released.append(gang)
        return True

    def gang_of(self, gang: str) -> list[Instance]:
        return [i for i in self.alive() if i.tags.get(TAG_GANG) == gang]


@dataclass
class Launching:
    exchange: Exchange
    launcher: Launcher
    cloud: ScriptedCloud
    user_data: list[dict[str, Any]]  # what each launch's user data was made from

    async def tick(self) -> Any:
        return await self.launcher.tick(self.exchange.clock())

    async def cycle(self) -> Any:
        """A scheduler pass, then a launcher tick (what a submit causes)."""
        await self.exchange.tick()
        return await self.tick()


async def _no_sleep(_seconds: float) -> None:
    return None


@contextlib.asynccontextmanager
async def launching(tmp_path: Path, database_url: str, *, cloud: ScriptedCloud | None = None,
                    regions: tuple[str, ...] = ("us-east-1", "us-west-2", "eu-west-1"),
                    allow_unverified: bool = True, run_scheduler: bool = False,
                    dataplane: Any = None, provider: str = "aws",
                    **clouds: Any) -> AsyncIterator[Launching]:
    """An exchange (no scheduler loop: tests tick) with a launcher over ``cloud`` (and a
    data plane, when given); ``provider``: the cloud's name, whose catalogue it sells."""
    cfg = CloudsConfig(**({"idle_timeout_s": 600.0, "boot_timeout_s": 900.0} | clouds))
    cloud = cloud or ScriptedCloud()
    offers = [] if isinstance(cloud, OfferSource) else [  # a cluster lists its own
        o for o in catalog_offers((provider,)) if o.region in regions]
    tmp_path.mkdir(parents=True, exist_ok=True)
    async with open_exchange(tmp_path, database_url, clouds=cfg, run_scheduler=run_scheduler,
                             allow_unverified=allow_unverified, dataplane=dataplane) as exchange:
        state = exchange.state
        made: list[dict[str, Any]] = []

        def user_data(**fields: Any) -> str:
            made.append(fields)
            return "#!/bin/sh\necho booting\n"

        launcher = Launcher(state.db, Clouds({provider: cloud}, cfg, offers={provider: offers}),
                            state.config, state.hub.connections, state.notifier,
                            clock=exchange.clock, user_data=user_data, sleep=_no_sleep)
        await launcher.clouds.check()
        state.launcher = launcher
        state.scheduler.launcher = launcher
        state.scheduler.memo.launchable = launcher.clouds.launchable
        state.scheduler.memo.note = launcher.note
        yield Launching(exchange, launcher, cloud, made)
