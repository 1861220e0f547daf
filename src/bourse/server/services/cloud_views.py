"""What ``bourse clouds`` and a project's launch limits show."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.errors import InvalidInput
from bourse.core.launch_figures import LaunchFigures
from bourse.protocol.clouds import CloudList, CloudView, ProjectLimits, ProjectLimitsView
from bourse.server.access import Scope
from bourse.server.config import CLOUDS, CloudsConfig
from bourse.server.launcher.clouds import Prices
from bourse.server.launcher.launcher import Launcher
from bourse.server.services import launches
from bourse.server.services.launch_figures import view_of
from bourse.server.services.projects import get_project

NONE_ENABLED = ("no cloud is enabled: jobs run only on nodes that join the exchange (start the "
                "coordinator with --cloud aws, lambda or kubernetes, or set BOURSE_CLOUDS)")


def cloud_list(launcher: Launcher | None, config: CloudsConfig,
               figures: Mapping[str, LaunchFigures] | None = None) -> CloudList:
    """``figures``: each provider's launch figures (``services.launch_figures``), given to
    the clouds this coordinator launches on."""
    if launcher is None:
        views = [CloudView(name=name, enabled=False, reason="not enabled on this coordinator")
                 for name in CLOUDS]
        return CloudList(clouds=views, note=NONE_ENABLED)
    clouds = launcher.clouds
    views = []
    for name in CLOUDS:
        status = clouds.status.get(name)
        if status is None:
            views.append(CloudView(name=name, enabled=False,
                                   reason="not enabled on this coordinator"))
            continue
        prices = clouds.prices[name]
        views.append(CloudView(name=name, enabled=status.enabled, reason=status.reason,
                               regions=list(status.regions or clouds.regions(name)),
                               identity=status.identity,
                               offers=clouds.catalogue_size(name),
                               prices=_prices(prices),
                               prices_fetched_at=(prices.fetched_at.timestamp()
                                                  if prices.fetched_at else None),
                               launch_figures=view_of((figures or {}).get(name))))
    return CloudList(clouds=views, idle_timeout_s=config.idle_timeout_s,
                     boot_timeout_s=config.boot_timeout_s)


async def limits(session: AsyncSession, name: str, scope: Scope,
                 now: float) -> ProjectLimitsView:
    project = await get_project(session, name, scope)
    hourly, spent = await launches.project_spend(session, project.id,
                                                 launches.day_start(now), now)
    return ProjectLimitsView(name=project.id, clouds=project.clouds, cap_hour=project.cap_hour,
                             cap_day=project.cap_day, running_per_hour=round(hourly, 6),
                             spent_today=round(spent, 6))


async def set_limits(session: AsyncSession, name: str, body: ProjectLimits,
                     scope: Scope) -> None:
    project = await get_project(session, name, scope)
    given = body.model_fields_set
    if "clouds" in given:
        for cloud in body.clouds or []:
            if cloud not in CLOUDS:
                raise InvalidInput(f"unknown cloud {cloud!r}", field="clouds",
                                   hint=f"bourse launches on {', '.join(CLOUDS)}")
        project.clouds = sorted(set(body.clouds)) if body.clouds is not None else None
    if "cap_hour" in given:
        project.cap_hour = body.cap_hour
    if "cap_day" in given:
        project.cap_day = body.cap_day


def _prices(prices: Prices) -> str:
    if prices.fetched_at is None:
        return prices.note or "the shipped catalogue"
    text = f"the cloud's API at {prices.fetched_at:%Y-%m-%d %H:%M} UTC"
    if prices.stale:
        text += (f"; the shipped catalogue in {', '.join(sorted(prices.stale))} (the API "
                 f"failed there: {next(iter(prices.stale.values()))})")
    return text
