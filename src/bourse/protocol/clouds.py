"""REST bodies of launched capacity: the clouds, their launches, a project's limits."""

from __future__ import annotations

from pydantic import Field

from bourse.core.states import LaunchState
from bourse.protocol.common import Wire

CLOUD_PATTERN = r"^[a-z][a-z0-9-]{0,31}$"
MAX_CAP = 1_000_000.0  # $/h or $/day: more is a typo


class LaunchFiguresView(Wire):
    """How the cloud delivered the machines launched there (``core.launch_figures``): the
    launches requested in the last ``window_s``."""

    window_s: float
    launches: int = 0
    enrolled: int = 0  # its agent enrolled
    failed: int = 0  # no instance, or ended without enrolling (boot timeout)
    in_flight: int = 0  # requested or booting, not enrolled yet
    withdrawn: int = 0  # ended before enrolling because its job ended first
    success_rate: float | None = None  # enrolled / (enrolled + failed)
    ready_median_s: float | None = None  # request to enrolment, over the enrolled
    ready_p90_s: float | None = None


class CloudView(Wire):
    name: str
    enabled: bool
    reason: str | None = None  # why not, or a note
    regions: list[str] = Field(default_factory=list)
    identity: str | None = None
    offers: int = 0  # launchable offers (the catalogue's, as refreshed)
    prices: str = "the shipped catalogue"  # where offers' prices and zones come from
    prices_fetched_at: float | None = None  # when the cloud's API answered
    launch_figures: LaunchFiguresView | None = None  # None: not enabled here


class CloudList(Wire):
    clouds: list[CloudView]
    idle_timeout_s: float | None = None
    boot_timeout_s: float | None = None
    note: str | None = None  # e.g. "no cloud is enabled: start the server with --cloud aws"


class LaunchView(Wire):
    id: str
    node_id: str
    node_name: str | None = None
    job_id: str | None = None
    project: str
    provider: str
    region: str
    zone: str | None = None
    instance_type: str
    spot: bool
    price: float
    on_demand: float | None = None
    instance_id: str | None = None
    state: LaunchState
    requested_at: float
    launched_at: float | None = None
    enrolled_at: float | None = None
    terminated_at: float | None = None
    reason: str | None = None
    cost: float = 0.0  # launch to termination (or now), at its price
    up_s: float = 0.0  # launch to termination (or now): the time it cost
    boot_s: float | None = None  # launch to enrolment
    busy_s: float = 0.0  # attempts ran on it
    idle_s: float = 0.0  # up, enrolled, and not running attempts


class LaunchList(Wire):
    launches: list[LaunchView]


class ProjectLimits(Wire):
    """What a project may launch: on which clouds (None: every enabled one) and up to what
    spending (None: no cap). Fields left out are left as they are."""

    clouds: list[str] | None = Field(default=None, max_length=16)
    cap_hour: float | None = Field(default=None, ge=0, le=MAX_CAP)
    cap_day: float | None = Field(default=None, ge=0, le=MAX_CAP)


class ProjectLimitsView(Wire):
    name: str
    clouds: list[str] | None = None
    cap_hour: float | None = None
    cap_day: float | None = None
    running_per_hour: float = 0.0  # its live launched nodes
    spent_today: float = 0.0  # its launched nodes since 00:00 UTC
