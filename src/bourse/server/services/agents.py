"""What the coordinator does with agent messages: hello, heartbeat, job events, log chunks.

Every handler is idempotent. Job events and log chunks are de-duplicated by
(job, attempt, seq); a message about an attempt that is no longer the job's current one (the
attempt number is the fencing token) never changes the job, and the agent is told to kill it.
"""

from __future__ import annotations

import binascii
import logging
import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any, cast

from sqlalchemy import Table, bindparam, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.states import AttemptState, JobState, NodeState, exit_outcome, late_success
from bourse.core.uri import parse_uri
from bourse.protocol.agent import RETRY_ELSEWHERE, CancelJob, Heartbeat, Hello, JobEvent, LogChunk
from bourse.protocol.common import AttemptRef
from bourse.server.commands import Command
from bourse.server.db.schema import Attempt, Event, Job, Node
from bourse.server.logs.meter import LogMeter
from bourse.server.services import gangs, launches, logs, reliability, verification
from bourse.server.services.jobs import CANCEL_GRACE_S, active_attempt_states
from bourse.server.services.lifecycle import (
    add_event,
    note_checkpoint,
    set_attempt_state,
    set_job_state,
    succeed_late,
)
from bourse.server.services.starts import start_command
from bourse.storage.errors import InvalidURI
from bourse.storage.jobenv import LIGHTNING_LOGS

log = logging.getLogger(__name__)


async def node_hello(session: AsyncSession, node_id: str, hello: Hello, connection: str,
                     now: float, *, lease_s: float = 30.0) -> list[Command]:
    """A node (re)connected: record what it is, then reconcile what it runs with what we
    think it runs — re-send unacknowledged starts (their leases run from now) and pending
    cancels, kill stale attempts."""
    node = await _node(session, node_id)
    verification.on_hello(node, hello.capabilities, hello.declared)
    node.capabilities = hello.capabilities.model_dump(mode="json")
    node.keep_alive_s, node.session = hello.keep_alive_s, connection
    node.state, node.last_seen, node.updated_at = NodeState.ONLINE, now, now
    reliability.opened(node, now)
    node.reclaimed_at = None  # a node that says hello again is a new instance, or is back
    await launches.on_enrolled(session, node, now)
    commands = await reconcile_nodes(session, {node_id: (hello.running, ())}, now)
    await session.execute(update(Attempt).where(
        Attempt.node_id == node_id, Attempt.state == AttemptState.SCHEDULED.value,
    ).values(start_deadline=now + lease_s))
    return commands + await _resend(session, node_id)


async def node_heartbeat(session: AsyncSession, node_id: str, beat: Heartbeat, now: float,
                         spared: Collection[tuple[str, int]] = ()) -> list[Command]:
    """``spared``: attempts the node sent events about after this heartbeat, which it has even
    if the heartbeat, older, does not list them."""
    node = await _node(session, node_id)
    node.last_seen = now
    if node.state not in (NodeState.ONLINE, NodeState.RECLAIMED, NodeState.TERMINATED):
        node.state, node.updated_at = NodeState.ONLINE, now
    return await reconcile_nodes(session, {node_id: (beat.running, spared)}, now)


Beats = Mapping[str, tuple[Heartbeat, Collection[tuple[str, int]]]]
# statements on the table: no ORM bookkeeping for thousands of rows
_NODES = cast(Table, Node.__table__)
_SEEN = update(_NODES).where(_NODES.c.id.in_(bindparam("nodes", expanding=True))).values(
    last_seen=bindparam("now"))
_BACK_ONLINE = update(_NODES).where(
    _NODES.c.id.in_(bindparam("nodes", expanding=True)),
    _NODES.c.state.not_in([NodeState.ONLINE, NodeState.RECLAIMED, NodeState.TERMINATED]),
).values(state=NodeState.ONLINE, updated_at=bindparam("now"))


async def nodes_heartbeat(session: AsyncSession, beats: Beats, now: float) -> list[Command]:
    """The heartbeats of many nodes (each with its ``spared``, as ``node_heartbeat``) in a few
    statements, whatever their number: what the intake does with a batch of them. A node that
    is not enrolled (any more) is skipped."""
    if not beats:
        return []
    nodes = sorted(beats)
    await session.execute(_SEEN, {"nodes": nodes, "now": now})
    await session.execute(_BACK_ONLINE, {"nodes": nodes, "now": now})
    return await reconcile_nodes(session, {n: (beats[n][0].running, beats[n][1])
                                           for n in nodes}, now)


async def node_disconnected(session: AsyncSession, node_id: str, connection: str,
                            now: float) -> None:
    """Forget the connection, unless a newer one has replaced it (compare-and-set, so a late
    goodbye never clears the session of the connection that followed)."""
    await session.execute(update(Node).where(Node.id == node_id, Node.session == connection)
                          .values(session=None, updated_at=now,
                                  **reliability.closed_values(now)))


async def _node(session: AsyncSession, node_id: str) -> Node:
    node = await session.get(Node, node_id)
    if node is None:
        raise LookupError(f"node {node_id} is not enrolled")
    return node


Reports = Mapping[str, tuple[Sequence[AttemptRef], Collection[tuple[str, int]]]]
_RUNS_ON = select(Attempt).where(
    Attempt.node_id.in_(bindparam("nodes", expanding=True)),
    Attempt.state.in_([AttemptState.STARTING.value, AttemptState.RUNNING.value]))
_ATTEMPTS_OF = select(Attempt.job_id, Attempt.number, Attempt.node_id, Attempt.state,
                      Job.attempt).join(Job, Job.id == Attempt.job_id).where(
    Attempt.job_id.in_(bindparam("jobs", expanding=True)))


async def reconcile_nodes(session: AsyncSession, reports: Reports,
                          now: float) -> list[Command]:
    """What nodes say they run (``running``, with the attempts ``spared``) against what the
    exchange thinks they run: a stale attempt a node reports is killed; an attempt the
    exchange has as started there that the node does not report is LOST. Three statements
    for any number of nodes."""
    reported = {node: {(r.job_id, r.attempt) for r in running}
                for node, (running, _) in reports.items()}
    current = await _current(session, reported)
    commands = [Command(node, CancelJob(job_id=job, attempt=number, grace_s=0,
                                        reason="stale attempt", stale=True))
                for node, keys in reported.items() for job, number in sorted(keys)
                if (job, number, node) not in current]
    ours = (await session.scalars(_RUNS_ON, {"nodes": sorted(reports)})).all()
    for attempt in ours:
        key, spared = (attempt.job_id, attempt.number), reports[attempt.node_id or ""][1]
        if key not in reported[attempt.node_id or ""] and key not in spared:
            job = await session.get(Job, attempt.job_id, with_for_update=True)
            assert job is not None
            await gangs.end(session, job, attempt, AttemptState.LOST, now=now,
                            reason="the agent no longer has it")
    return commands


async def _current(session: AsyncSession,
                   reported: Mapping[str, set[tuple[str, int]]]) -> set[tuple[str, int, str]]:
    """(job, attempt, node) of the reported attempts that are their job's current one, on
    that node, and active."""
    jobs = sorted({job for keys in reported.values() for job, _ in keys})
    if not jobs:
        return set()
    rows = (await session.execute(_ATTEMPTS_OF, {"jobs": jobs})).all()
    return {(job, number, node) for job, number, node, state, current in rows
            if node is not None and number == current and AttemptState(state).active
            and (job, number) in reported.get(node, ())}


async def _resend(session: AsyncSession, node_id: str) -> list[Command]:
    """Starts not yet acknowledged and cancels not yet carried out, for a reconnected node."""
    attempts = (await session.scalars(select(Attempt).where(
        Attempt.node_id == node_id, Attempt.state.in_(active_attempt_states())))).all()
    commands: list[Command] = []
    for attempt in attempts:
        job = await session.get(Job, attempt.job_id)
        if job is None or job.attempt != attempt.number:
            continue
        if attempt.state == AttemptState.SCHEDULED.value:
            commands += (await gangs.resend(session, job, attempt) if gangs.is_gang(job)
                         else [start_command(job, attempt)])
        if job.cancel_requested:
            commands.append(Command(node_id, CancelJob(
                job_id=job.id, attempt=attempt.number, grace_s=CANCEL_GRACE_S,
                reason="cancelled")))
    return commands


async def record_job_events(session: AsyncSession, node_id: str, events: Sequence[JobEvent],
                            now: float) -> list[Command]:
    """Apply a batch of job events in a few statements: attempts, jobs and the sequence
    numbers already stored are read up front, then each new event is applied in order."""
    unique = list({(e.job_id, e.attempt, e.seq): e for e in events}.values())
    attempts, jobs = await load_attempts_and_jobs(
        session, {(e.job_id, e.attempt) for e in unique}, node_id)
    ours = [e for e in unique if (e.job_id, e.attempt) in attempts]
    seen = await _stored_seqs(session, ours)
    fresh = [e for e in ours
             if (e.job_id, e.attempt, attempts[(e.job_id, e.attempt)].rank, e.seq) not in seen]
    commands: list[Command] = []
    for event in fresh:
        attempt, job = attempts[(event.job_id, event.attempt)], jobs[event.job_id]
        data = without_nul(event.data)
        add_event(session, event.job_id, event.attempt, event.kind, event.time,
                  message=str(data.get("reason") or data.get("text") or ""), data=data,
                  agent_seq=event.seq, rank=attempt.rank)
        if job.attempt == event.attempt and AttemptState(attempt.state).active:
            if event.kind == "rendezvous":
                commands += await gangs.rendezvous(session, job, attempt, data, now)
            else:
                await _apply(session, job, attempt, event, now)
        elif event.kind == "exited" and not gangs.is_gang(job) and _succeeded(data) and \
                late_success(AttemptState(attempt.state), JobState(job.state),
                             job.cancel_requested):
            commands += await _late_success(session, job, attempt, data, now)
        elif event.kind in ("accepted", "started"):
            commands.append(Command(node_id, CancelJob(
                job_id=job.id, attempt=event.attempt, grace_s=0, reason="stale attempt",
                stale=True)))
    return commands


def _succeeded(data: dict[str, Any]) -> bool:
    """Whether an ``exited`` event says the job's work is done: exit 0, outputs up, and not
    stopped by its own fence."""
    return (_exit_code(data.get("exit_code")) == 0 and not data.get("outputs_error")
            and not data.get("fenced"))


async def _late_success(session: AsyncSession, job: Job, late: Attempt, data: dict[str, Any],
                        now: float) -> list[Command]:
    """Take the success of an attempt given up earlier; cancel the one placed since."""
    current = (await session.get(Attempt, (job.id, job.attempt, 0))
               if job.attempt != late.number else None)
    outputs = data.get("outputs")
    succeed_late(session, job, late, current, now=now, outputs={
        str(k): str(v) for k, v in outputs.items()} if isinstance(outputs, dict) else None)
    if current is None or current.state != AttemptState.CANCELLED.value:
        return []
    return [Command(current.node_id, CancelJob(
        job_id=job.id, attempt=current.number, grace_s=0, reason=current.reason or "",
        stale=True))]


def without_nul(value: Any) -> Any:
    """The same JSON value with NUL characters replaced (PostgreSQL's JSON refuses them)."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {without_nul(k): without_nul(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_nul(v) for v in value]
    return value


async def load_attempts(session: AsyncSession, keys: set[tuple[str, int]],
                        node_id: str) -> dict[tuple[str, int], Attempt]:
    """The attempts of ``keys`` that ran on the node (a node holds one member of a gang)."""
    if not keys:
        return {}
    # by job id, then filtered here: SQLite does not use an index for row-value IN lists
    rows = (await session.scalars(select(Attempt).where(
        Attempt.job_id.in_({job for job, _ in keys})))).all()
    return {(a.job_id, a.number): a for a in rows
            if (a.job_id, a.number) in keys and a.node_id == node_id}


# Statements the hub runs at every batch of agent messages, built once: building one costs
# more than SQLite takes to run it. Lists are bound at execution (expanding parameters).
_ATTEMPTS_AND_JOBS = (
    select(Attempt, Job).join(Job, Job.id == Attempt.job_id)
    .where(Attempt.job_id.in_(bindparam("jobs", expanding=True))).with_for_update(of=Job))
_STORED_SEQS = select(Event.job_id, Event.attempt, Event.rank, Event.agent_seq).where(
    Event.job_id.in_(bindparam("jobs", expanding=True)),
    Event.agent_seq.in_(bindparam("seqs", expanding=True)))


async def load_attempts_and_jobs(
        session: AsyncSession, keys: set[tuple[str, int]], node_id: str,
) -> tuple[dict[tuple[str, int], Attempt], dict[str, Job]]:
    """``load_attempts`` and their jobs (locked for update, as ``load_jobs``) in one
    statement."""
    if not keys:
        return {}, {}
    rows = (await session.execute(_ATTEMPTS_AND_JOBS,
                                  {"jobs": sorted({job for job, _ in keys})})).all()
    ours = [(a, j) for a, j in rows if (a.job_id, a.number) in keys and a.node_id == node_id]
    return {(a.job_id, a.number): a for a, _ in ours}, {j.id: j for _, j in ours}


async def load_jobs(session: AsyncSession, ids: set[str]) -> dict[str, Job]:
    """Jobs by id, locked for update (a no-op on SQLite, whose writers are serialised)."""
    if not ids:
        return {}
    rows = (await session.scalars(
        select(Job).where(Job.id.in_(list(ids))).with_for_update())).all()
    return {j.id: j for j in rows}


async def _stored_seqs(session: AsyncSession,
                       events: Sequence[JobEvent]) -> set[tuple[str, int, int, int]]:
    if not events:
        return set()
    rows = await session.execute(_STORED_SEQS, {"jobs": sorted({e.job_id for e in events}),
                                                "seqs": sorted({e.seq for e in events})})
    return {(job, attempt, rank, seq) for job, attempt, rank, seq in rows.all()
            if seq is not None}


async def _apply(session: AsyncSession, job: Job, attempt: Attempt, event: JobEvent,
                 now: float) -> None:
    data = event.data
    if event.kind == "accepted" and attempt.state == AttemptState.SCHEDULED.value:
        attempt.start_acked_at = now
        set_attempt_state(attempt, AttemptState.STARTING, now)
        if job.state == JobState.SCHEDULED.value:  # a gang's first member to accept moves it
            set_job_state(session, job, JobState.STARTING, now,
                          _member(attempt, job, "the node accepted the job"))
    elif event.kind == "started" and attempt.state in (AttemptState.SCHEDULED,
                                                       AttemptState.STARTING):
        attempt.started_at = event.time
        attempt.start_acked_at = attempt.start_acked_at or now
        job.progress = None
        set_attempt_state(attempt, AttemptState.RUNNING, now)
        if job.state != JobState.RUNNING.value:
            set_job_state(session, job, JobState.RUNNING, now,
                          _member(attempt, job, f"process {data.get('pid')} started"))
    elif event.kind == "exited":
        await _exited(session, job, attempt, data, now)
    elif event.kind in ("preparing", "info") and isinstance(data.get("text"), str):
        job.progress = data["text"][:500]  # inputs arriving, outputs leaving
    elif event.kind == "start_failed":
        reason = f"could not start: {data.get('reason', 'unknown error')}"
        outcome = start_failure(data, job.cancel_requested)
        await gangs.end(session, job, attempt, outcome, now=now, reason=reason)


def start_failure(data: dict[str, Any], cancel_requested: bool) -> AttemptState:
    """How an attempt that could not start ended: LOST when its node says the node is why
    (``retry_elsewhere``: the job is retried on another node, as its node-loss retries
    allow, and the node is avoided), else FAILED."""
    if cancel_requested:
        return AttemptState.CANCELLED
    return AttemptState.LOST if data.get(RETRY_ELSEWHERE) is True else AttemptState.FAILED


def _member(attempt: Attempt, job: Job, text: str) -> str:
    return f"rank {attempt.rank}: {text}" if gangs.is_gang(job) else text


async def _exited(session: AsyncSession, job: Job, attempt: Attempt, data: dict[str, Any],
                  now: float) -> None:
    """The process ended and the node uploaded its outputs, or says why it could not: a job
    whose outputs are not durable has not succeeded, whatever its exit code."""
    attempt.checkpoint_at = checkpoint_time(data.get("checkpoint")) or attempt.checkpoint_at
    note_checkpoint(job, attempt, data.get("checkpoint"))
    code = _exit_code(data.get("exit_code"))
    outcome = exit_outcome(code, job.cancel_requested)
    reason = str(data.get("reason") or _exit_reason(code, data.get("signal")))
    error = data.get("outputs_error")
    if data.get("fenced") and outcome is not AttemptState.CANCELLED:
        # it stopped itself, cut off from the coordinator for nearly its loss window: as if
        # its node had been lost (its work resumes elsewhere), whatever its exit code
        outcome = AttemptState.LOST
    elif error and outcome is AttemptState.SUCCEEDED:
        outcome, reason = AttemptState.FAILED, f"outputs could not be uploaded: {error}"
    outputs = data.get("outputs")
    found = kept_outputs(job.id, data.get("kept"))
    if outcome is AttemptState.SUCCEEDED and isinstance(outputs, dict) and outputs:
        found |= {str(k): str(v) for k, v in outputs.items()}
    if found:
        job.outputs = {**(job.outputs or {}), **found}
    await gangs.end(session, job, attempt, outcome, now=now, reason=reason, exit_code=code,
                    stopped_at=_stopped_at(data.get("exited_at"), attempt.started_at, now),
                    signalled=data.get("signalled") is True)


def kept_outputs(job_id: str, kept: Any) -> dict[str, str]:
    """What the node kept of the job however the attempt ended (its ``lightning_logs/``),
    as outputs: only that name, only at the job's own prefix (a node names no other)."""
    uri = kept.get(LIGHTNING_LOGS) if isinstance(kept, dict) else None
    if not isinstance(uri, str):
        return {}
    try:
        parsed = parse_uri(uri)
    except InvalidURI:
        return {}
    own = parsed.scheme == "s3" and parsed.key == f"jobs/{job_id}/{LIGHTNING_LOGS}/"
    return {LIGHTNING_LOGS: uri} if own else {}


def _stopped_at(value: Any, started_at: float | None, now: float) -> float | None:
    """When the node saw the process exit, within the attempt's run; None when unknown."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value):
        return None
    return min(max(float(value), started_at or value), now)


def _exit_code(value: object) -> int | None:
    """An exit status as the database stores it; anything else is no code at all."""
    if isinstance(value, int) and not isinstance(value, bool) and -(2**31) <= value < 2**31:
        return value
    return None


def _exit_reason(code: object, signal: object) -> str:
    if isinstance(signal, int) and signal:
        return f"killed by signal {signal}"
    return f"exited with code {code}"


def checkpoint_time(value: Any) -> float | None:
    """When the checkpoint an ``exited`` event names was completed (its marker's time)."""
    if not isinstance(value, dict):
        return None
    created = value.get("created_at")
    if isinstance(created, bool) or not isinstance(created, (int, float)):
        return None
    return float(created) if math.isfinite(created) else None


def _decode(chunk: LogChunk) -> bytes | None:
    try:
        return binascii.a2b_base64(chunk.data, strict_mode=True)
    except ValueError:  # binascii.Error, or a str that is not ASCII
        log.warning("log chunk %s/%s/%s is not valid base64; dropped", chunk.job_id,
                    chunk.attempt, chunk.seq)
        return None


async def record_log_chunks(session: AsyncSession, node_id: str, chunks: Sequence[LogChunk],
                            *, patterns: Mapping[str, tuple[bytes, ...]] | None = None,
                            meter: LogMeter | None = None, now: float = 0.0) -> int:
    """Store chunks from attempts of this node; duplicates are dropped. Returns how many new.

    ``patterns``: what to redact from each job's output (``services.logs``); ``meter``: the
    coordinator's log rate limit."""
    attempts = await load_attempts(session, {(c.job_id, c.attempt) for c in chunks}, node_id)
    rows = [{"job_id": c.job_id, "attempt": c.attempt,
             "rank": attempts[(c.job_id, c.attempt)].rank, "seq": c.seq, "stream": c.stream,
             "offset": c.offset, "data": data, "time": c.time}
            for c in chunks
            if (c.job_id, c.attempt) in attempts and (data := _decode(c)) is not None]
    if meter is not None:
        rows = logs.metered(rows, attempts, meter, now)
        logs.note_limited(session, meter, now)
    return await logs.store_rows(session, rows, patterns or {})
