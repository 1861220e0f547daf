"""The audit trail: every mutating call and every agent session is recorded, with secrets
masked; the hash chain exposes an edited, deleted or inserted row."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from route_requests import TRACKING_IDS, request_for, routes
from server_harness import Exchange, Live, open_exchange, until
from sqlalchemy import delete, select, update

from bourse.server.audit.seal import SEAL_FILE
from bourse.server.db.schema import AuditHead, AuditRecord
from bourse.server.files.keys import KEY_FILE
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
    ids = {**TRACKING_IDS, "job_id": job["id"], "node_id": node_id, "sha256": "a" * 64,
           "token_id": token,
           "name": "SOME_SECRET", "run_id": "r-audit", "project": "default",
           "grant_id": "u" + "0" * 20}
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
    assert verdict == {"ok": True, "checked": 3, "problems": [], "sealed": 3}


async def test_concurrent_calls_share_commits_and_keep_one_chain(exchange: Exchange) -> None:
    submitted = await asyncio.gather(*(exchange.submit(name=f"burst-{n}") for n in range(40)))
    assert len({job["id"] for job in submitted}) == 40
    assert await _verdict(exchange) == {"ok": True, "checked": 40, "problems": [],
                                        "sealed": 40}
    recorded = [r for r in await _records(exchange) if r["action"] == "POST /api/v1/jobs"]
    assert sorted(r["params"]["body"]["name"] for r in recorded) == sorted(
        f"burst-{n}" for n in range(40))


async def _tamper(exchange: Exchange, how: str) -> None:
    if how == "cut-tail":
        await _cut(exchange, keep=2)
        return
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


async def _cut(exchange: Exchange, keep: int) -> None:
    """What a database writer without the server key can do unseen by the chain: delete
    the newest rows and move the head row back onto the last one kept."""
    async with exchange.state.db.write() as session:
        await session.execute(delete(AuditRecord).where(AuditRecord.id > keep))
        last = await session.scalar(select(AuditRecord.hash).where(AuditRecord.id == keep))
        await session.execute(update(AuditHead).values(count=keep, hash=last))


@pytest.mark.parametrize("how, problem", [
    ("edit", "row 2 was changed"), ("delete-middle", "rows 2..2 are missing"),
    ("delete-last", "rows were deleted"), ("forge", "row 2 was changed"),
    ("cut-tail", "rows 3..4 are missing from the end: the chain ends at row 2, but the "
                 "coordinator sealed it at row 4")])
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


async def test_records_after_a_cut_do_not_cover_it(exchange: Exchange) -> None:
    """The seal stays at the cut: new records, however many, do not make the chain whole."""
    for _ in range(4):
        await exchange.submit()
    await _cut(exchange, keep=1)
    for n in range(5):  # rows 2..6 again, past the sealed row 4
        await exchange.submit(name=f"after-the-cut-{n}")
    verdict = await _verdict(exchange)
    assert not verdict["ok"] and verdict["sealed"] == 4
    assert verdict["problems"] == ["row 4 is not the row the coordinator sealed: the chain "
                                   "was rewritten up to it"]


async def test_a_cut_made_while_the_coordinator_was_down_is_found(
        database_url: str, tmp_path: Path) -> None:
    async with open_exchange(tmp_path, database_url) as first:
        for _ in range(3):
            await first.submit()
        assert (await _verdict(first))["ok"]
    async with open_exchange(tmp_path, database_url) as second:
        await _cut(second, keep=1)
    async with open_exchange(tmp_path, database_url) as third:
        verdict = await _verdict(third)
    assert not verdict["ok"], verdict
    assert verdict["problems"][0].startswith("rows 2..3 are missing from the end")


async def test_a_restarted_coordinator_keeps_an_untouched_chain_intact(
        database_url: str, tmp_path: Path) -> None:
    for _ in range(2):
        async with open_exchange(tmp_path, database_url) as exchange:
            await exchange.submit()
    async with open_exchange(tmp_path, database_url) as exchange:
        assert await _verdict(exchange) == {"ok": True, "checked": 2, "problems": [],
                                            "sealed": 2}


@pytest.mark.parametrize("damage, problem", [
    ("remove", "the audit seal .* is missing"), ("edit", "not made with this server key"),
    ("garble", "the audit seal is damaged")])
async def test_a_missing_or_edited_seal_is_reported(exchange: Exchange, damage: str,
                                                    problem: str) -> None:
    await exchange.submit()
    path = exchange.config.data_dir / SEAL_FILE
    if damage == "remove":
        path.unlink()
    elif damage == "edit":
        path.write_bytes(path.read_bytes().replace(b'"seq": 1', b'"seq": 9'))
    else:
        path.write_bytes(b"\0" * 256)
    verdict = await _verdict(exchange)
    assert not verdict["ok"] and verdict["sealed"] is None
    assert any(re.search(problem, p) for p in verdict["problems"]), verdict


async def test_the_seal_is_the_coordinators_alone(exchange: Exchange) -> None:
    await exchange.submit()
    assert (exchange.config.data_dir / SEAL_FILE).stat().st_mode & 0o777 == 0o600


async def test_replicas_on_one_database_each_seal_what_they_wrote(
        database_url: str, tmp_path: Path) -> None:
    """Two coordinators sharing the server key, each with a data dir of its own: each seal
    moves over the other's records, and each verify holds the chain against its own seal."""
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    a_dir.mkdir()
    (b_dir / "data").mkdir(parents=True)
    async with contextlib.AsyncExitStack() as stack:
        a = await stack.enter_async_context(open_exchange(a_dir, database_url))
        shutil.copy2(a_dir / "data" / KEY_FILE, b_dir / "data" / KEY_FILE)
        b = await stack.enter_async_context(open_exchange(
            b_dir, database_url, credentials_path=a_dir / "cred.json"))
        await a.submit(name="a-1")
        await b.submit(name="b-1")
        await b.submit(name="b-2")
        await a.submit(name="a-2")
        assert await _verdict(a) == {"ok": True, "checked": 4, "problems": [], "sealed": 4}
        assert await _verdict(b) == {"ok": True, "checked": 4, "problems": [], "sealed": 3}
        await _cut(b, keep=2)
        assert "rows 3..4 are missing" in (await _verdict(a))["problems"][0]
        assert "row 3 is missing" in (await _verdict(b))["problems"][0]


async def test_a_seal_removed_while_the_coordinator_was_down_is_made_again_and_logged(
        database_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """What the seal cannot cover (docs/security.md): whoever holds the data dir can start
    it again; the coordinator says so."""
    async with open_exchange(tmp_path, database_url) as exchange:
        await exchange.submit()
        await exchange.submit()
        seal = exchange.config.data_dir / SEAL_FILE
    seal.unlink()
    with caplog.at_level(logging.WARNING):
        async with open_exchange(tmp_path, database_url) as exchange:
            assert (await _verdict(exchange))["sealed"] == 2
    assert any("no audit seal" in r.message and "at row 2" in r.message
               for r in caplog.records if r.levelno == logging.WARNING)
