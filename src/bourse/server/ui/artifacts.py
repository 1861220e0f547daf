"""A tracked run's artifacts on its page: each file below ``tracking/<project>/<run>/`` by its
path relative to the run, with its size, when it was written and a download link (an ARTIFACT
link, ``ui.links``; served by ``ui.downloads``), made at render time for the run's project."""

from __future__ import annotations

from dataclasses import dataclass

from bourse.core.errors import InvalidInput, StorageError
from bourse.server.services import tracking_artifacts as ta
from bourse.server.ui import links
from bourse.server.ui.guard import Ctx
from bourse.server.ui.links import Kind
from bourse.storage.store import ObjectInfo

LISTED = 200  # a run's page lists its first this many artifacts, and says how many more
UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


@dataclass(frozen=True)
class ArtifactRow:
    path: str  # relative to the run's artifacts, nested parts joined by "/"
    size: int
    modified: float | None  # seconds since the epoch; None when the store gives no time
    link: str


@dataclass(frozen=True)
class RunArtifacts:
    """What the page shows: ``stored`` is False on an exchange without a store, ``problem``
    says why the store could not list them (the rest of the page still renders)."""

    stored: bool
    rows: tuple[ArtifactRow, ...] = ()
    total: int = 0
    size: int = 0
    problem: str | None = None

    @property
    def more(self) -> int:
        return self.total - len(self.rows)


def size_text(size: int) -> str:
    """Bytes as a person reads them: ``512 B``, ``1.5 KiB``, ``3.0 GiB``."""
    value, unit = float(size), 0
    while value >= 1024 and unit < len(UNITS) - 1:
        value, unit = value / 1024, unit + 1
    return f"{size} B" if unit == 0 else f"{value:.1f} {UNITS[unit]}"


def rows_of(found: list[ObjectInfo], key: bytes, project: str, run_id: str,
            now: float) -> tuple[ArtifactRow, ...]:
    """The first ``LISTED`` artifacts, each linked; one whose path could not be a link (no
    upload through the MLflow routes makes one) is listed without a link."""
    rows = []
    for info in found[:LISTED]:
        try:
            target = links.artifact_target(run_id, info.key)
        except InvalidInput:
            link = ""
        else:
            link = links.url(key, links.grant(Kind.ARTIFACT, target, project, now))
        modified = info.last_modified.timestamp() if info.last_modified else None
        rows.append(ArtifactRow(info.key, info.size, modified, link))
    return tuple(rows)


async def run_artifacts(ctx: Ctx, project: str, run_id: str) -> RunArtifacts:
    """The run's artifacts, for a session that was shown the run (its scope was checked)."""
    if ctx.state.dataplane is None:
        return RunArtifacts(stored=False)
    try:
        found = await ta.objects(ctx.state.dataplane, project, run_id)
    except StorageError as exc:
        return RunArtifacts(stored=True, problem=f"the store did not list them: {exc.message}")
    rows = rows_of(found, links.signing_key(ctx.state.key), project, run_id, ctx.state.clock())
    return RunArtifacts(True, rows, len(found), sum(i.size for i in found))
