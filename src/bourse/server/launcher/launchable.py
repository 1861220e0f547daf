"""What a project could launch now (``bourse offers --launchable``): the places the launcher
would try for a Compute, best first, by the same rules it launches by — the enabled clouds'
offers, less what the project may not launch on and what failed lately (blocked)."""

from __future__ import annotations

from dataclasses import dataclass

from bourse.core.compute import Compute
from bourse.core.match import Match, explain
from bourse.server.db.schema import Project
from bourse.server.launcher import decide
from bourse.server.launcher.launcher import SEARCHED, Launcher, block_reason
from bourse.server.services import launches

NO_CLOUDS = ("this exchange launches on no cloud: its coordinator was started without clouds "
             "(docs/clouds.md: enabling a cloud); `bourse offers --exchange` lists its live "
             "nodes")


@dataclass(frozen=True)
class Launchable:
    places: list[Match]
    notes: list[str]


async def launchable(launcher: Launcher, compute: Compute, project_id: str,
                     limit: int, explain_all: bool) -> Launchable:
    now = launcher.clock()
    await launcher.rate(now)
    async with launcher.db.read() as session:
        blocks = await launches.blocks(session, now)
        project = await session.get(Project, project_id)
    _, places, blocked, allowed = launcher.places(compute, project, blocks,
                                                  max(limit, SEARCHED))
    clouds = launcher.clouds
    notes = [f"cloud {name}: disabled ({status.reason})"
             for name, status in sorted(clouds.status.items()) if not status.enabled]
    if allowed is not None:
        notes.append(f"this project may launch only on {', '.join(allowed) or 'no cloud'}")
    notes += [f"blocked: {decide.describe(m)}: {block_reason(m, blocks, now)}"
              for m in blocked[:10]]
    if explain_all or not places:
        notes += explain(compute, clouds.offers()).lines()
    return Launchable(places[:limit], notes)
