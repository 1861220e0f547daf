"""The agent protocol's service functions, called directly on a session (no socket): what
each message does to the database and which commands it asks the hub to send."""

from __future__ import annotations

import base64

import pytest
from server_harness import Exchange, capabilities

from bourse.core.errors import Unauthorized
from bourse.protocol.agent import (
    CancelJob,
    Heartbeat,
    Hello,
    JobEvent,
    LogChunk,
    StartJob,
    envelope,
)
from bourse.protocol.common import AttemptRef
from bourse.server.access import ALL
from bourse.server.agents.frames import Batch, add_frame
from bourse.server.commands import Command
from bourse.server.services import agents, jobs, placement, tokens

pytestmark = pytest.mark.anyio


def _hello(*running: tuple[str, int]) -> Hello:
    return Hello(name="n", capabilities=capabilities(cpus=4), keep_alive_s=20,
                 running=[AttemptRef(job_id=j, attempt=a) for j, a in running])


def _event(job_id: str, kind: str, seq: int, attempt: int = 1) -> JobEvent:
    return JobEvent(job_id=job_id, attempt=attempt, seq=seq, kind=kind,  # type: ignore[arg-type]
                    time=0.0, data={"pid": 1} if kind == "started" else {})


def _chunk(job_id: str, seq: int, data: bytes = b"x\n") -> LogChunk:
    return LogChunk(job_id=job_id, attempt=1, seq=seq, stream="stdout", offset=0,
                    data=base64.b64encode(data).decode(), time=0.0)


def _kinds(commands: list[Command]) -> list[tuple[str, str, bool]]:
    return sorted((type(c.message).__name__, c.message.job_id,  # type: ignore[attr-defined]
                   getattr(c.message, "stale", False)) for c in commands)


async def _online(exchange: Exchange, name: str, connection: str) -> str:
    node_id, _ = await exchange.enroll(name)
    async with exchange.state.db.write() as session:
        assert await agents.node_hello(session, node_id, _hello(), connection,
                                       exchange.clock()) == []
    return node_id


async def _placed(exchange: Exchange, count: int) -> list[str]:
    ids = []
    for _ in range(count):
        ids.append((await exchange.submit())["id"])
        exchange.clock.advance(1)
    async with exchange.state.db.write() as session:
        report = await placement.place_pending(session, exchange.clock(), 30.0,
                                               allow_unverified=True)
    assert report.placed == count
    assert all(isinstance(c.message, StartJob) for c in report.commands)
    return ids


async def test_hello_resends_unacknowledged_starts_and_pending_cancels(
        exchange: Exchange) -> None:
    node_id = await _online(exchange, "n", "s-1")
    first, second = await _placed(exchange, 2)
    async with exchange.state.db.write() as session:
        _, commands = await jobs.cancel_job(session, second, ALL, exchange.clock())
    assert _kinds(commands) == [("CancelJob", second, False)]
    async with exchange.state.db.write() as session:
        commands = await agents.node_hello(session, node_id, _hello(), "s-2", exchange.clock())
    assert _kinds(commands) == sorted([("CancelJob", second, False), ("StartJob", first, False),
                                       ("StartJob", second, False)])
    assert {c.node_id for c in commands} == {node_id}


async def test_hello_and_heartbeat_reconcile_what_the_node_runs(exchange: Exchange) -> None:
    node_id = await _online(exchange, "n", "s-1")
    [job_id] = await _placed(exchange, 1)
    async with exchange.state.db.write() as session:
        assert await agents.record_job_events(session, node_id, [_event(job_id, "started", 0)],
                                              exchange.clock()) == []
    async with exchange.state.db.write() as session:
        commands = await agents.node_heartbeat(
            session, node_id, Heartbeat(running=[AttemptRef(job_id=job_id, attempt=1),
                                                 AttemptRef(job_id="j-gone", attempt=4)],
                                        time=0.0), exchange.clock())
    assert _kinds(commands) == [("CancelJob", "j-gone", True)]
    assert (await exchange.job_row(job_id)).state == "RUNNING"
    async with exchange.state.db.write() as session:
        commands = await agents.node_hello(session, node_id, _hello(), "s-2", exchange.clock())
    assert commands == []
    job = await exchange.job_row(job_id)
    assert (job.state, job.avoid_nodes) == ("PENDING", [node_id])


def _batch(*messages: Heartbeat | JobEvent) -> Batch:
    """Messages as the hub groups them when they arrive during another transaction."""
    batch = Batch()
    for number, message in enumerate(messages):
        add_frame(batch, envelope(f"a:{number}", message), message)
    return batch


async def _recorded(exchange: Exchange, node_id: str, batch: Batch) -> list[Command]:
    async with exchange.state.db.write() as session:
        return await exchange.state.hub.intake.record(session, node_id, batch,
                                                      exchange.clock())


async def test_a_heartbeat_older_than_a_starts_acceptance_does_not_lose_it(
        exchange: Exchange) -> None:
    """The hub records a batch's events before its heartbeat; a heartbeat sent before the node
    accepted a start does not list that attempt, which is no evidence it was lost."""
    node_id = await _online(exchange, "n", "s-1")
    [job_id] = await _placed(exchange, 1)
    older = _batch(Heartbeat(time=0.0), _event(job_id, "accepted", 0))
    assert older.after_beat == {(job_id, 1)}

    assert await _recorded(exchange, node_id, older) == []
    assert (await exchange.job_row(job_id)).state == "STARTING"

    newer = _batch(_event(job_id, "preparing", 1), Heartbeat(time=1.0))  # it would list it
    assert newer.after_beat == set()
    await _recorded(exchange, node_id, newer)
    assert (await exchange.job_row(job_id)).state == "PENDING"  # lost: retried elsewhere


async def test_events_are_deduplicated_within_a_batch_and_across_batches(
        exchange: Exchange) -> None:
    node_id = await _online(exchange, "n", "s-1")
    [job_id] = await _placed(exchange, 1)
    accepted = _event(job_id, "accepted", 0)
    async with exchange.state.db.write() as session:
        await agents.record_job_events(session, node_id, [accepted, accepted, accepted],
                                       exchange.clock())
    async with exchange.state.db.write() as session:
        await agents.record_job_events(session, node_id, [accepted, _event(job_id, "started", 1)],
                                       exchange.clock())
    kinds = [e["kind"] for e in await exchange.events(job_id) if e["kind"] != "state"]
    assert kinds == ["accepted", "started"]
    assert (await exchange.job_row(job_id)).state == "RUNNING"


async def test_a_stale_start_is_answered_with_a_stale_cancel(exchange: Exchange) -> None:
    node_id = await _online(exchange, "n", "s-1")
    [job_id] = await _placed(exchange, 1)
    async with exchange.state.db.write() as session:
        await agents.record_job_events(session, node_id, [_event(job_id, "started", 0)],
                                       exchange.clock())
    async with exchange.state.db.write() as session:  # lost: the job waits for attempt 2
        await agents.node_heartbeat(session, node_id, Heartbeat(time=0.0), exchange.clock())
    async with exchange.state.db.write() as session:
        commands = await agents.record_job_events(
            session, node_id, [_event(job_id, "started", 1), _event(job_id, "exited", 2)],
            exchange.clock())
    assert [(type(c.message), c.message.stale) for c in commands] == [  # type: ignore[attr-defined]
        (CancelJob, True)]
    assert (await exchange.job_row(job_id)).state == "PENDING"


async def test_log_chunks_count_what_is_new_and_ours(exchange: Exchange) -> None:
    node_id = await _online(exchange, "n", "s-1")
    other = await _online(exchange, "other", "s-9")
    [job_id] = await _placed(exchange, 1)
    if (await exchange.job_row(job_id)).node_id == other:
        node_id, other = other, node_id
    chunks = [_chunk(job_id, 0), _chunk(job_id, 1), _chunk(job_id, 1)]
    async with exchange.state.db.write() as session:
        assert await agents.record_log_chunks(session, node_id, chunks) == 2
        assert await agents.record_log_chunks(session, node_id, chunks[:1]) == 0
        assert await agents.record_log_chunks(session, other, [_chunk(job_id, 5)]) == 0
        assert await agents.record_log_chunks(session, node_id, [_chunk("j-none", 0)]) == 0


async def test_only_the_current_connection_can_mark_a_node_disconnected(
        exchange: Exchange) -> None:
    node_id = await _online(exchange, "n", "s-1")
    async with exchange.state.db.write() as session:
        await agents.node_hello(session, node_id, _hello(), "s-2", exchange.clock())
    async with exchange.state.db.write() as session:
        await agents.node_disconnected(session, node_id, "s-1", exchange.clock())
    assert (await exchange.node_row(node_id)).session == "s-2"
    async with exchange.state.db.write() as session:
        await agents.node_disconnected(session, node_id, "s-2", exchange.clock())
    assert (await exchange.node_row(node_id)).session is None


async def test_messages_from_an_unenrolled_node_are_refused(exchange: Exchange) -> None:
    with pytest.raises(LookupError):
        async with exchange.state.db.write() as session:
            await agents.node_heartbeat(session, "n-ghost", Heartbeat(time=0.0), 0.0)


async def test_an_enrolment_token_is_spent_once(exchange: Exchange) -> None:
    async with exchange.state.db.write() as session:
        secret = await tokens.create_token(session, "enroll", exchange.clock(),
                                           expires_at=exchange.clock() + 60)
    async with exchange.state.db.write() as session:
        node_id, credential = await tokens.enroll_node(session, secret, "n1", 20.0,
                                                       exchange.clock())
    with pytest.raises(Unauthorized, match="already been used"):
        async with exchange.state.db.write() as session:
            await tokens.enroll_node(session, secret, "n2", 20.0, exchange.clock())
    async with exchange.state.db.read() as session:
        principal = await tokens.authenticate(session, credential, "node", exchange.clock())
        assert (principal.kind, principal.node_id, principal.admin) == ("node", node_id, False)
        with pytest.raises(Unauthorized):
            await tokens.authenticate(session, credential, "user", exchange.clock())
        admin = await tokens.authenticate(session, exchange.admin_token, "user",
                                          exchange.clock())
        assert admin.admin
