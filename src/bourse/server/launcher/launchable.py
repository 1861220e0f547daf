"""What a project could launch now (``bourse offers --launchable``): the places the launcher
would try for a Compute, best first, by the same rules it launches by — the enabled clouds'
offers, less what the project may not launch on and what failed lately (blocked)."""

from __future__ import annotations

from dataclasses import dataclass

from bourse.core.compute import Compute
from bourse.core.launch import blocked_by
from bourse.core.match import Match, explain
from bourse.server.db.schema import Project
from bourse.server.launcher import decide
from bourse.server.launcher.launcher import Launcher
from bourse.server.services import launches

NO_CLOUDS = ("this exchange launches on no cloud: its coordinator was started without clouds "
             "(docs/clouds.md: enabling a cloud); `bourse offers --exchange` lists its live "
             "nodes")
SEARCHED = 50  # matches asked of the clouds' index before the project's rules narrow them


@dataclass(frozen=True)
class Launchable:
    places: list[Match]
    notes: list[str]


async def launchable(launcher: Launcher, compute: Compute, project_id: str,
                     limit: int, explain_all: bool) -> Launchable:
    now = launcher.clock()
    async with launcher.db.read() as session:
        blocks = await launches.blocks(session, now)
        project = await session.get(Project, project_id)
    clouds = launcher.clouds
    wanted = max(limit, SEARCHED)
    found = clouds.matches(compute, wanted)
    on_demand = (clouds.matches(compute.model_copy(update={"spot": "never"}), wanted)
                 if compute.spot == "prefer" else [])
    allowed = tuple(project.clouds) if project and project.clouds is not None else None
    places, blocked = decide.candidates(compute, found, on_demand, blocks=blocks, now=now,
                                        clouds=allowed)
    notes = [f"cloud {name}: disabled ({status.reason})"
             for name, status in sorted(clouds.status.items()) if not status.enabled]
    if allowed is not None:
        notes.append(f"this project may launch only on {', '.join(allowed) or 'no cloud'}")
    for m in blocked[:10]:
        block = blocked_by(m.offer, m.spot, blocks, now)
        if block is not None:
            notes.append(f"blocked: {decide.describe(m)}: {block.reason} "
                         f"(for {block.until - now:.0f} s more)")
    if explain_all or not places:
        notes += explain(compute, clouds.offers()).lines()
    return Launchable(places[:limit], notes)
