"""The provider seam: what the exchange asks of a cloud to turn an offer into a node.

A provider is synchronous and stateless between calls (the launcher runs it in a thread): it
checks its credentials, launches one instance for a :class:`LaunchSpec`, lists the instances
the exchange tagged, and terminates instances. A provider that can also place a multi-node
job's members close together and open them to each other implements :class:`GangPlacement`
(EC2: a cluster placement group, a security group between its members). Every failure of a call is a
:class:`CloudError` whose ``failure`` (``core.launch.Failure``) says what the exchange does
next — try another zone, block a region's family, fail the job, disable the cloud, back off.
New clouds implement :class:`Provider`; nothing else in the coordinator knows a cloud's API.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, runtime_checkable

from bourse.core.launch import Failure
from bourse.core.offer import Offer

# Tags every launched instance carries (the reconciler touches only instances with TAG_EXCHANGE
# equal to its exchange's id).
TAG_EXCHANGE = "bourse:exchange"
TAG_LAUNCH = "bourse:launch"
TAG_NODE = "bourse:node"
TAG_JOB = "bourse:job"
TAG_PROJECT = "bourse:project"
TAG_GANG = "bourse:gang"  # the gang launch its instance (or placement group) belongs to


@dataclass(frozen=True)
class LaunchSpec:
    """One instance to launch. ``client_token``: the idempotency token, recorded before the
    call (the same token twice never makes two instances). ``zone``: the zone *id* of the
    catalogue (``use1-az1``) or None for any zone of the region. ``max_price``: the spot bid
    ($/h), None for the on-demand price as the cap."""

    launch_id: str
    exchange_id: str
    node_id: str
    project_id: str
    region: str
    instance_type: str
    user_data: str
    client_token: str
    zone: str | None = None
    spot: bool = False
    max_price: float | None = None
    job_id: str | None = None
    disk_gib: int | None = None
    image: str | None = None  # the machine image; None: the provider's default
    gang: str | None = None  # the gang launch it is a member of
    placement_group: str | None = None  # the gang's (``GangPlace``)
    security_groups: tuple[str, ...] = ()  # the gang's; none: the provider's default

    def tags(self) -> dict[str, str]:
        out = {TAG_EXCHANGE: self.exchange_id, TAG_LAUNCH: self.launch_id,
               TAG_NODE: self.node_id, TAG_PROJECT: self.project_id}
        if self.job_id:
            out[TAG_JOB] = self.job_id
        if self.gang:
            out[TAG_GANG] = self.gang
        return out


class CloudState(StrEnum):
    """An instance's state in the cloud's own words (EC2's; other providers map theirs)."""

    PENDING = "pending"
    RUNNING = "running"
    SHUTTING_DOWN = "shutting-down"
    TERMINATED = "terminated"
    STOPPING = "stopping"
    STOPPED = "stopped"


ENDED = frozenset({CloudState.SHUTTING_DOWN, CloudState.TERMINATED})


@dataclass(frozen=True)
class Instance:
    """An instance as the cloud reports it. ``state``: the cloud's word, lower case
    (``pending``, ``running``, ``shutting-down``, ``terminated``, ``stopping``, ``stopped``)."""

    id: str
    region: str
    instance_type: str
    state: str
    zone: str | None = None  # the zone id when the cloud gives one, else its name
    spot: bool = False
    launched_at: float | None = None
    tags: Mapping[str, str] = field(default_factory=dict)

    @property
    def alive(self) -> bool:
        """Running or about to: it costs money (or will)."""
        return self.state not in ENDED

    @property
    def launch_id(self) -> str | None:
        return self.tags.get(TAG_LAUNCH)


@dataclass(frozen=True)
class CloudCheck:
    """What ``bourse clouds`` says of one cloud: whether it can launch, and if not why."""

    cloud: str
    enabled: bool
    reason: str | None = None  # why not (no credentials, a permission missing), or a note
    regions: tuple[str, ...] = ()
    identity: str | None = None  # the account / principal the credentials are for


class CloudError(Exception):
    """A cloud call failed. ``code``: the cloud's error code (``InsufficientInstanceCapacity``);
    ``message``: the cloud's own words; ``where``: region/zone/type tried, for the table."""

    def __init__(self, failure: Failure, code: str, message: str, *, where: str = "",
                 quota: str | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.failure, self.code, self.message = failure, code, message
        self.where, self.quota = where, quota


class Provider(Protocol):
    """One cloud account. Every method may raise :class:`CloudError`."""

    name: str  # the provider name of its catalogue's offers ("aws")

    def check(self) -> CloudCheck:
        """Whether the credentials work and may launch (cheap: one or two read calls)."""
        ...

    def launch(self, spec: LaunchSpec) -> Instance:
        """Launch one instance; with a ``client_token`` already used, the instance it made."""
        ...

    def tagged(self, exchange_id: str, regions: Sequence[str]) -> list[Instance]:
        """Every instance tagged with ``exchange_id`` in ``regions`` that is not terminated."""
        ...

    def terminate(self, region: str, instance_ids: Sequence[str]) -> None:
        """Terminate instances (already terminated or unknown ids are not an error)."""
        ...


@dataclass(frozen=True)
class GangPlace:
    """Where a gang's members are launched, made once before the first of them.
    ``placement_group``: None when the instance type has none (``note`` says so, for the
    job's timeline); ``security_groups``: those that let the members reach each other."""

    placement_group: str | None = None
    security_groups: tuple[str, ...] = ()
    note: str | None = None


@runtime_checkable
class GangPlacement(Protocol):
    """A cloud that places a gang's members close together and lets them reach each other.
    A provider without it has a gang's members launched in one zone as they are."""

    def place_gang(self, exchange_id: str, gang: str, region: str, zone: str | None,
                   instance_type: str) -> GangPlace:
        """Make (or find again) the gang's placement group and network rules."""
        ...

    def gang_groups(self, exchange_id: str, regions: Sequence[str]) -> list[tuple[str, str]]:
        """(region, gang id) of every placement group tagged with ``exchange_id``."""
        ...

    def release_gang(self, region: str, gang: str) -> bool:
        """Delete the gang's placement group: True once it is gone (or was never made),
        False while instances are still in it."""
        ...


@runtime_checkable
class OfferSource(Protocol):
    """A provider that lists its own offers (a cluster's nodes) instead of a shipped
    catalogue; asked again on every reconcile pass."""

    def offers(self) -> list[Offer]:
        ...


@runtime_checkable
class Explains(Protocol):
    """A provider whose machines may wait unstarted (a pod no node takes): past
    ``pending_timeout_s`` the launch ends, in the words of :meth:`explain`."""

    pending_timeout_s: float

    def explain(self, region: str, instance_id: str) -> str | None:
        """Why the machine is not started yet; None when it is (or nothing says)."""
        ...
