"""The audit trail: every mutating call and every agent session is recorded, with secrets
masked; the hash chain exposes an edited, deleted or inserted row."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from route_requests import request_for, routes
from server_harness import Exchange, Live, until
from sqlalchemy import delete, update

from bourse.server.db.schema import AuditRecord
from bourse.server.services.audit import masked

pytestmark = pytest.mark.anyio
READ_ONLY = {"GET", "HEAD"}


async def _records(exchange: Exchange, **params: Any) -> list[dict[str, Any]]:
    response = await exchange.client.get("/api/v1/audit", params=params)
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["records"]
    return found


async def _verdict(exchange: Exchange) -> dict[str, Any]:
    response = await exchange.client.get("/api/v1/audit/verify")
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


async def test_every_mutating_route_is_recorded_with_its_outcome(exchange: Exchange) -> None:
    job = await exchange.submit()
    node_id, _ = await exchange.enroll("n0")
    token = (await exchange.client.post("/api/v1/tokens", json={})).json()["id"]
    ids = {"job_id": job["id"], "node_id": node_id, "sha256": "a" * 64, "token_id": token,
           "name": "SOME_SECRET", "run_id": "r-audit"}
    expected = []
    for method, path in routes(exchange):
        if method in READ_ONLY:
            continue
        response = await exchange.client.request(**request_for(method, path, ids))
        expected.append((f"{method} {path}", str(response.status_code)))
    recorded = [(r["action"], r["outcome"]) for r in await _records(exchange, limit=10000)]
    assert len(expected) >= 8
    for item in expected:
        assert item in recorded
    assert not [r for r in recorded if r[0].startswith(("GET", "HEAD"))]


async def test_a_record_says_who_from_where_what_and_masks_secrets(exchange: Exchange) -> None:
    made = await exchange.client.post("/api/v1/tokens", json={"name": "ci"})
    await exchange.submit(env={"API_KEY": "plain-text-in-env"})
    records = await _records(exchange)
    token_record = next(r for r in records if r["action"] == "POST /api/v1/tokens")
    assert token_record["actor_kind"] == "user" and token_record["actor"].startswith("tok-")
    assert token_record["source"] == "127.0.0.1"
    assert token_record["params"]["body"] == {"name": "ci"}
    assert made.json()["token"] not in str(records)
    job_record = next(r for r in records if r["action"] == "POST /api/v1/jobs")
    assert job_record["params"]["body"]["env"] == {"API_KEY": "***"}
    assert "plain-text-in-env" not in str(records)


@pytest.mark.parametrize("value, expected", [
    ({"token": "abc", "token_id": "tok-1"}, {"token": "***", "token_id": "tok-1"}),
    ({"nested": [{"password": "p"}]}, {"nested": [{"password": "***"}]}),
    ("bse_u_abcdef", "***"), ({"aws_secret_access_key": "k"}, {"aws_secret_access_key": "***"}),
    ({"name": "n", "value": ""}, {"name": "n", "value": ""})])
def test_masking(value: Any, expected: Any) -> None:
    assert masked(value) == expected


async def test_refused_calls_are_recorded_as_anonymous(exchange: Exchange) -> None:
    response = await exchange.client.post("/api/v1/jobs", json={}, headers={
        "Authorization": "Bearer bse_u_wrong"})
    assert response.status_code == 401
    record = (await _records(exchange))[-1]
    assert (record["actor_kind"], record["outcome"]) == ("anonymous", "401")


async def test_agent_sessions_are_recorded(live: Live,
                                           agent_factory: Callable[..., Any]) -> None:
    exchange = live.exchange
    agent = await agent_factory("worker")
    await agent.close()

    async def ended() -> bool:
        return any(r["outcome"] == "ended" for r in await _records(exchange))

    await until(ended)
    sessions = [r for r in await _records(exchange) if r["action"] == "agent session"]
    assert [(r["actor"], r["actor_kind"], r["outcome"]) for r in sessions] == [
        (agent.node_id, "node", "connected"), (agent.node_id, "node", "ended")]


async def test_an_untouched_chain_verifies(exchange: Exchange) -> None:
    for _ in range(3):
        await exchange.submit()
    verdict = await _verdict(exchange)
    assert verdict == {"ok": True, "checked": 3, "problems": []}


async def test_concurrent_calls_share_commits_and_keep_one_chain(exchange: Exchange) -> None:
    submitted = await asyncio.gather(*(exchange.submit(name=f"burst-{n}") for n in range(40)))
    assert len({job["id"] for job in submitted}) == 40
    assert await _verdict(exchange) == {"ok": True, "checked": 40, "problems": []}
    recorded = [r for r in await _records(exchange) if r["action"] == "POST /api/v1/jobs"]
    assert sorted(r["params"]["body"]["name"] for r in recorded) == sorted(
        f"burst-{n}" for n in range(40))


async def _tamper(exchange: Exchange, how: str) -> None:
    async with exchange.state.db.write() as session:
        if how == "edit":
            await session.execute(update(AuditRecord).where(AuditRecord.id == 2)
                                  .values(outcome="403"))
        elif how == "delete-middle":
            await session.execute(delete(AuditRecord).where(AuditRecord.id == 2))
        elif how == "delete-last":
            await session.execute(delete(AuditRecord).where(AuditRecord.id == 4))
        else:  # rewrite a row and its hash without the server key
            await session.execute(update(AuditRecord).where(AuditRecord.id == 2)
                                  .values(actor="someone-else", hash="f" * 64))


@pytest.mark.parametrize("how, problem", [
    ("edit", "row 2 was changed"), ("delete-middle", "rows 2..2 are missing"),
    ("delete-last", "rows were deleted"), ("forge", "row 2 was changed")])
async def test_tampering_is_detected(exchange: Exchange, how: str, problem: str) -> None:
    for _ in range(4):
        await exchange.submit()
    await _tamper(exchange, how)
    verdict = await _verdict(exchange)
    assert not verdict["ok"]
    assert any(problem in p for p in verdict["problems"]), verdict


async def test_members_see_their_projects_records_only(exchange: Exchange) -> None:
    member = {"Authorization": f"Bearer {await exchange.project_token('alpha-corp')}"}
    await exchange.client.post("/api/v1/jobs", json={"command": ["true"]}, headers=member)
    await exchange.submit()  # the admin's, in the default project
    mine = await exchange.client.get("/api/v1/audit", headers=member)
    assert [r["project"] for r in mine.json()["records"]] == ["alpha-corp"]
    refused = await exchange.client.get("/api/v1/audit/verify", headers=member)
    assert refused.status_code == 403


async def test_since_and_cursor_page_the_trail(exchange: Exchange) -> None:
    for _ in range(3):
        await exchange.submit()
        exchange.clock.advance(10)
    first = await exchange.client.get("/api/v1/audit", params={"limit": 2})
    assert [r["id"] for r in first.json()["records"]] == [1, 2]
    rest = await exchange.client.get("/api/v1/audit", params={"after": first.json()["cursor"]})
    assert [r["id"] for r in rest.json()["records"]] == [3]
    since = await _records(exchange, since=exchange.clock() - 15)
    assert [r["id"] for r in since] == [3]
