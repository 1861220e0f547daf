"""Single submits are group-committed (``server.submitter``, ``db.group``): concurrent ones
share one transaction, each caller still gets its own job or its own refusal, a refusal
leaves nothing behind, and a transaction that fails fails only its own group."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from server_harness import Exchange, job_spec
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.errors import InvalidInput
from bourse.protocol.common import JobSpec
from bourse.server.db.group import GroupCommit
from bourse.server.db.schema import Event, Job
from bourse.server.services import jobs

pytestmark = pytest.mark.anyio


def spec(**extra: object) -> JobSpec:
    return JobSpec.model_validate(job_spec(**extra))


async def _project(exchange: Exchange) -> str:
    job = await exchange.submit(name="first")
    async with exchange.state.db.read() as session:
        found = await session.get(Job, job["id"])
    assert found is not None
    return found.project_id


async def _count(exchange: Exchange, what: type[Job] | type[Event]) -> int:
    async with exchange.state.db.read() as session:
        return int(await session.scalar(select(func.count()).select_from(what)) or 0)


async def test_concurrent_submits_share_one_transaction_each_with_its_own_job(
        exchange: Exchange) -> None:
    project = await _project(exchange)
    state = exchange.state
    assert state.submitter is not None
    before = state.submitter.group.groups
    made = await asyncio.gather(*(state.submit(spec(name=f"g-{n}"), project)
                                  for n in range(10)))
    assert state.submitter.group.groups == before + 1
    assert len({job.id for job in made}) == 10
    for n, job in enumerate(made):
        shown = await exchange.job(job.id)
        assert shown["name"] == f"g-{n}" and shown["state"] == "PENDING"
        assert [e["message"] for e in await exchange.events(job.id)] == ["submitted"]
    listed = (await exchange.client.get("/api/v1/jobs", params={"limit": 100})).json()["jobs"]
    assert {j["id"] for j in listed} >= {job.id for job in made}


async def test_a_refused_submit_leaves_nothing_and_its_group_is_accepted(
        exchange: Exchange) -> None:
    project = await _project(exchange)
    jobs_before, events_before = await _count(exchange, Job), await _count(exchange, Event)
    outcomes = await asyncio.gather(
        exchange.state.submit(spec(name="ok-1"), project),
        exchange.state.submit(spec(name="no-secret", project_secrets=["MISSING"]), project),
        exchange.state.submit(spec(name="ok-2"), project),
        exchange.state.submit(spec(name="no-bundle", bundle="b" * 64), project),
        return_exceptions=True)
    accepted = [o for o in outcomes if isinstance(o, Job)]
    refused = [o for o in outcomes if isinstance(o, BaseException)]
    assert [j.name for j in accepted] == ["ok-1", "ok-2"]
    assert [type(e) for e in refused] == [InvalidInput, InvalidInput]
    assert [e.field for e in refused if isinstance(e, InvalidInput)] == [
        "project_secrets", "bundle"]
    assert await _count(exchange, Job) == jobs_before + 2
    assert await _count(exchange, Event) == events_before + 2


async def test_a_failed_transaction_is_retried_item_by_item_and_only_its_cause_fails(
        exchange: Exchange) -> None:
    project = await _project(exchange)
    jobs_before = await _count(exchange, Job)
    root = exchange.state.store_root

    async def apply(session: AsyncSession, names: Sequence[str]) -> list[Job | Exception]:
        made: list[Job | Exception] = [
            await jobs.submit_job(session, spec(name=n), project, exchange.clock(), root)
            for n in names]
        if "boom" in names:  # as a database error would: after writing, before the commit
            raise RuntimeError("the database refused the transaction")
        return made

    group: GroupCommit[str, Job] = GroupCommit(exchange.state.db, apply)
    outcomes = await asyncio.gather(group.write("a"), group.write("boom"), group.write("b"),
                                    return_exceptions=True)
    assert [o.name if isinstance(o, Job) else str(o) for o in outcomes] == [
        "a", "the database refused the transaction", "b"]
    assert group.groups == 2  # a alone, b alone; the group and boom were rolled back
    async with exchange.state.db.read() as session:
        names = (await session.scalars(select(Job.name))).all()
    assert await _count(exchange, Job) == jobs_before + 2
    assert "boom" not in names and {"a", "b"} <= set(names)
    after = await asyncio.gather(group.write("c"), group.write("d"))
    assert [j.name for j in after] == ["c", "d"] and group.groups == 3


async def test_a_caller_that_goes_away_does_not_stop_its_group(exchange: Exchange) -> None:
    project = await _project(exchange)
    jobs_before = await _count(exchange, Job)
    leaving = asyncio.ensure_future(exchange.state.submit(spec(name="leaves"), project))
    staying = asyncio.ensure_future(exchange.state.submit(spec(name="stays"), project))
    await asyncio.sleep(0)  # both are queued, their group not yet written
    leaving.cancel()
    assert (await staying).name == "stays"
    with pytest.raises(asyncio.CancelledError):
        await leaving
    # the job of a caller that went away is still accepted, as one whose response was lost
    assert await _count(exchange, Job) == jobs_before + 2
