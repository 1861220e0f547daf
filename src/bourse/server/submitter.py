"""Single submits, group-committed (``db.group``): jobs submitted one request each by
concurrent clients are written in one transaction per group instead of one each. Each
caller still gets its own job, or its own refusal, only once the group is committed; a
refused job leaves nothing behind, and the others in its group are accepted as if alone.
(``POST /jobs/batch`` stays all-or-nothing: it is one caller's single transaction.)"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.errors import BourseError
from bourse.core.uri import StoreURI
from bourse.protocol.common import JobSpec
from bourse.server.db.database import Database
from bourse.server.db.group import GroupCommit
from bourse.server.db.schema import Job
from bourse.server.services import jobs
from bourse.server.services.secrets import SecretBox


@dataclass(frozen=True)
class Submission:
    spec: JobSpec
    project_id: str
    now: float  # when the request arrived: placement takes jobs oldest first


class Submitter:
    def __init__(self, db: Database, store_root: Callable[[], StoreURI | None],
                 box: Callable[[], SecretBox]) -> None:
        self.store_root, self.box = store_root, box
        self.group: GroupCommit[Submission, Job] = GroupCommit(db, self._submit_all)

    async def submit(self, spec: JobSpec, project_id: str, now: float) -> Job:
        """The job accepted and committed; raises its refusal (``BourseError``)."""
        return await self.group.write(Submission(spec, project_id, now))

    async def _submit_all(self, session: AsyncSession,
                          group: Sequence[Submission]) -> list[Job | Exception]:
        root = self.store_root()
        box = self.box() if any(item.spec.secrets for item in group) else None
        required: dict[str, list[str]] = {}  # each project's compliance tags, read once
        outcomes: list[Job | Exception] = []
        for item in group:
            if item.project_id not in required:
                required[item.project_id] = await jobs.required_tags(session, item.project_id)
            try:
                outcomes.append(await jobs.submit_job(session, item.spec, item.project_id,
                                                      item.now, root,
                                                      required=required[item.project_id],
                                                      box=box))
            except BourseError as refused:  # raised before it wrote anything (submit_job)
                outcomes.append(refused)
        return outcomes
