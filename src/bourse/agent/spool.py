"""The agent's durable spool: an outbox of messages for the coordinator and a table of attempts.

One SQLite file (WAL, ``synchronous=NORMAL``), used through one connection from one thread —
the daemon's event loop thread. Calls are synchronous; each is a short local transaction.

Outbox. Every job event and log chunk is written here *before* it is sent and deleted only when
the coordinator acknowledges it, so a reconnect or an agent restart re-sends, in order, all that
was not acknowledged:

- ``append_event(job_id, attempt, kind, data, time) -> id`` and
  ``append_log(job_id, attempt, *, stream, path, offset, length, time) -> id`` assign the attempt's
  next ``seq`` (one persisted counter per (job_id, attempt), shared by events and chunks) and
  store the row in the same transaction, so a kill -9 can neither lose nor repeat a seq. A log row
  *references* bytes of the job's log file; they are read (and base64-encoded) only by
  :meth:`OutboxRow.body`, so the spool stays small however much a job prints. ``append_log``
  also advances the attempt's spooled offset for that stream, in the same transaction.
  ``append_note`` spools a log chunk of the agent's own text instead (the rate limit's marker).
  ``append_track`` spools a tracking record the job wrote (``agent.track``) and moves the
  attempt's ``track_offset`` in its file, in the same transaction.
- ``pending(after_id, limit)`` returns rows in id order (ids are never reused, so they serve as
  message ids); ``ack(ids)`` deletes them; ``pending_count()``; ``pending_log_bytes(job_id,
  attempt)`` is what the runtime's backpressure reads.
- ``changed`` is an :class:`asyncio.Event` set after every commit that adds rows. The daemon
  clears it, reads ``pending``, and awaits it when there is nothing new. It binds to the loop that
  first awaits it, so a Spool belongs to one event loop.
- ``atomic()`` groups several calls into one transaction (e.g. the ``exited`` event and the
  attempt's new state), and ``changed`` is set once it commits.

Attempts. A durable record of every attempt the agent runs (:class:`AttemptRecord`: spec, work
dir, pid and process start time, :class:`AttemptStatus`, spooled offsets per stream, exit info,
the outbox row of its final event and whether that row was acknowledged), so that a restarted
agent can re-adopt its jobs: ``put_attempt``, ``get_attempt``, ``update_attempt`` (which checks
state transitions), ``attempts(*states)`` and ``reportable()``.

Durability: with ``synchronous=NORMAL`` a commit survives the agent being killed at any point
(the WAL is in the OS page cache); a power loss may roll back the last commits.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, cast

from bourse.core.states import IllegalTransition  # on the node, a bug in the runtime
from bourse.protocol.agent import EventKind, JobEvent, LogChunk
from bourse.protocol.common import AttemptRef
from bourse.protocol.track import TrackBatch

Stream = Literal["stdout", "stderr"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    type TEXT NOT NULL, job_id TEXT NOT NULL, attempt INTEGER NOT NULL,
    seq INTEGER NOT NULL, time REAL NOT NULL,
    kind TEXT, data TEXT,
    stream TEXT, path TEXT, offset INTEGER, length INTEGER
);
CREATE INDEX IF NOT EXISTS outbox_attempt ON outbox (job_id, attempt);
CREATE TABLE IF NOT EXISTS seqs (
    job_id TEXT NOT NULL, attempt INTEGER NOT NULL, next INTEGER NOT NULL,
    PRIMARY KEY (job_id, attempt)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS attempts (
    job_id TEXT NOT NULL, attempt INTEGER NOT NULL,
    spec TEXT NOT NULL, dir TEXT NOT NULL, state TEXT NOT NULL, created REAL NOT NULL,
    pid INTEGER, proc_start INTEGER,
    stdout_offset INTEGER NOT NULL DEFAULT 0, stderr_offset INTEGER NOT NULL DEFAULT 0,
    exit_code INTEGER, exit_signal INTEGER, reason TEXT,
    cancel_reason TEXT, kill_at REAL,
    final_row INTEGER, final_acked INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (job_id, attempt)
);
CREATE TABLE IF NOT EXISTS track_offsets (
    job_id TEXT NOT NULL, attempt INTEGER NOT NULL, offset INTEGER NOT NULL,
    PRIMARY KEY (job_id, attempt)
) WITHOUT ROWID;
PRAGMA user_version = 1;
"""


class AttemptStatus(StrEnum):
    """Where an attempt stands on this node (the coordinator keeps its own, richer state)."""

    STARTING = "STARTING"  # recorded, directory being prepared, no process yet
    RUNNING = "RUNNING"  # process spawned; its exit not yet spooled
    EXITED = "EXITED"  # ``exited`` spooled
    START_FAILED = "START_FAILED"  # ``start_failed`` spooled
    STALE = "STALE"  # given up by the coordinator: killed, nothing more is spooled

    @property
    def active(self) -> bool:
        return self in (AttemptStatus.STARTING, AttemptStatus.RUNNING)


TRANSITIONS: dict[AttemptStatus, frozenset[AttemptStatus]] = {
    AttemptStatus.STARTING: frozenset({AttemptStatus.RUNNING, AttemptStatus.START_FAILED,
                                       AttemptStatus.EXITED, AttemptStatus.STALE}),
    AttemptStatus.RUNNING: frozenset({AttemptStatus.EXITED, AttemptStatus.STALE}),
    AttemptStatus.EXITED: frozenset({AttemptStatus.STALE}),
    AttemptStatus.START_FAILED: frozenset({AttemptStatus.STALE}),
    AttemptStatus.STALE: frozenset(),
}


def check_transition(old: AttemptStatus, new: AttemptStatus) -> None:
    if new != old and new not in TRANSITIONS[old]:
        raise IllegalTransition(f"attempt cannot go from {old} to {new}")


@dataclass(frozen=True)
class AttemptRecord:
    job_id: str
    attempt: int
    spec: str  # the StartJob message, as JSON
    dir: str
    state: AttemptStatus
    created: float
    pid: int | None = None
    proc_start: int | None = None  # start time in clock ticks since boot (/proc/<pid>/stat)
    stdout_offset: int = 0
    stderr_offset: int = 0
    exit_code: int | None = None
    exit_signal: int | None = None
    reason: str | None = None
    cancel_reason: str | None = None
    kill_at: float | None = None  # wall time at which to SIGKILL a cancelled attempt
    final_row: int | None = None  # outbox id of its ``exited``/``start_failed`` event
    final_acked: bool = False

    @property
    def ref(self) -> AttemptRef:
        return AttemptRef(job_id=self.job_id, attempt=self.attempt)


_COLUMNS = tuple(f.name for f in fields(AttemptRecord))
_UPDATABLE = frozenset(_COLUMNS) - {"job_id", "attempt"}


@dataclass(frozen=True)
class OutboxRow:
    id: int
    type: Literal["job_event", "log_chunk", "track"]
    job_id: str
    attempt: int
    seq: int
    time: float
    kind: str | None = None
    data: str | None = None  # JSON of the event's data
    stream: str | None = None
    path: str | None = None
    offset: int | None = None
    length: int | None = None

    def message(self) -> JobEvent | LogChunk | TrackBatch:
        """The wire message. A log chunk whose file was removed or truncated carries the bytes
        still there; a note (no path) carries its own text.

        Built without validating again (``model_construct``): the spool wrote these fields
        itself, and validating a chunk would check up to 350 kB of base64 a character at a
        time on the agent's loop; the coordinator validates every frame it reads."""
        if self.type == "job_event":
            return JobEvent.model_construct(
                job_id=self.job_id, attempt=self.attempt, seq=self.seq,
                kind=cast(EventKind, self.kind), time=self.time,
                data=json.loads(self.data or "{}"))
        if self.type == "track":  # validated by the agent's track tailer before it was spooled
            record = json.loads(self.data or "{}")
            return TrackBatch.model_construct(
                job_id=self.job_id, attempt=self.attempt, seq=self.seq, time=self.time,
                metrics=[tuple(p) for p in record["metrics"]], params=record["params"],
                tags=record["tags"])
        chunk = ((self.data or "").encode() if self.path is None
                 else _read_range(self.path, self.offset or 0, self.length or 0))
        return LogChunk.model_construct(
            job_id=self.job_id, attempt=self.attempt, seq=self.seq,
            stream=cast(Stream, self.stream), offset=self.offset or 0,
            data=base64.b64encode(chunk).decode("ascii"), time=self.time)

    def body(self) -> dict[str, Any]:
        """The wire body of ``message``."""
        return self.message().model_dump(mode="json")


def _read_range(path: str, offset: int, length: int) -> bytes:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read(length)
    except OSError:
        return b""


class Spool:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        self._depth = 0
        self._added = False
        self.changed = asyncio.Event()

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """One transaction around the calls made inside; nests."""
        if self._depth > 0:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        self._db.execute("BEGIN IMMEDIATE")
        self._depth = 1
        try:
            yield
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            self._added = False
            raise
        finally:
            self._depth = 0
        if self._added:
            self._added = False
            self.changed.set()

    # --- outbox ------------------------------------------------------------------------------

    def append_event(self, job_id: str, attempt: int, kind: str, data: dict[str, Any],
                     time: float) -> int:
        with self.atomic():
            seq = self._next_seq(job_id, attempt)
            return self._insert(
                "INSERT INTO outbox (type, job_id, attempt, seq, time, kind, data) "
                "VALUES ('job_event', ?, ?, ?, ?, ?, ?)",
                (job_id, attempt, seq, time, kind, json.dumps(data)))

    def append_log(self, job_id: str, attempt: int, *, stream: Stream, path: str, offset: int,
                   length: int, time: float) -> int:
        return self._append_chunk(job_id, attempt, stream, source="path", value=path,
                                  offset=offset, length=length, time=time,
                                  resume=offset + length)

    def append_note(self, job_id: str, attempt: int, *, stream: Stream, offset: int,
                    resume: int, text: str, time: float) -> int:
        """A log chunk of the agent's own ``text`` at ``offset`` (what the job wrote from
        there to ``resume`` is not sent: see the tailer's rate limit)."""
        return self._append_chunk(job_id, attempt, stream, source="data", value=text,
                                  offset=offset, length=len(text.encode()), time=time,
                                  resume=resume)

    def _append_chunk(self, job_id: str, attempt: int, stream: Stream, *,
                      source: Literal["path", "data"],
                      value: str, offset: int, length: int, time: float, resume: int) -> int:
        """A log chunk whose bytes are read from a file (``source`` "path") or carried
        (``source`` "data"); the stream's spooled offset moves to ``resume``."""
        column = _offset_column(stream)
        with self.atomic():
            seq = self._next_seq(job_id, attempt)
            row = self._insert(
                f"INSERT INTO outbox (type, job_id, attempt, seq, time, stream, {source}, "
                "offset, length) VALUES ('log_chunk', ?, ?, ?, ?, ?, ?, ?, ?)",
                (job_id, attempt, seq, time, stream, value, offset, length))
            self._db.execute(f"UPDATE attempts SET {column} = ? WHERE job_id = ? AND attempt = ?",
                             (resume, job_id, attempt))
            return row

    def append_track(self, job_id: str, attempt: int, *, data: str, resume: int,
                     time: float) -> int:
        """A tracking record (``data``: a TrackRecord's JSON); the attempt's track offset
        moves to ``resume``."""
        with self.atomic():
            seq = self._next_seq(job_id, attempt)
            row = self._insert(
                "INSERT INTO outbox (type, job_id, attempt, seq, time, data) "
                "VALUES ('track', ?, ?, ?, ?, ?)", (job_id, attempt, seq, time, data))
            self.set_track_offset(job_id, attempt, resume)
            return row

    def set_track_offset(self, job_id: str, attempt: int, offset: int) -> None:
        self._db.execute(
            "INSERT INTO track_offsets (job_id, attempt, offset) VALUES (?, ?, ?) "
            "ON CONFLICT (job_id, attempt) DO UPDATE SET offset = excluded.offset",
            (job_id, attempt, offset))

    def track_offset(self, job_id: str, attempt: int) -> int:
        """How far the attempt's track file is spooled."""
        row = self._db.execute("SELECT offset FROM track_offsets WHERE job_id = ? AND "
                               "attempt = ?", (job_id, attempt)).fetchone()
        return int(row[0]) if row else 0

    def pending(self, after_id: int = 0, limit: int = 100) -> list[OutboxRow]:
        cur = self._db.execute(
            "SELECT id, type, job_id, attempt, seq, time, kind, data, stream, path, offset, "
            "length FROM outbox WHERE id > ? ORDER BY id LIMIT ?", (after_id, limit))
        return [OutboxRow(*r) for r in cur.fetchall()]

    def ack(self, ids: Iterable[int]) -> None:
        params = [(i,) for i in ids]
        with self.atomic():
            self._db.executemany("DELETE FROM outbox WHERE id = ?", params)
            self._db.executemany("UPDATE attempts SET final_acked = 1 WHERE final_row = ?",
                                 params)

    def pending_count(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM outbox").fetchone()[0])

    def pending_log_bytes(self, job_id: str, attempt: int) -> int:
        row = self._db.execute(
            "SELECT COALESCE(SUM(length), 0) FROM outbox "
            "WHERE job_id = ? AND attempt = ? AND type = 'log_chunk'", (job_id, attempt))
        return int(row.fetchone()[0])

    def drop_pending(self, job_id: str, attempt: int) -> None:
        """Forget an attempt's unsent rows (the coordinator gave it up)."""
        with self.atomic():
            self._db.execute("DELETE FROM outbox WHERE job_id = ? AND attempt = ?",
                             (job_id, attempt))

    def _next_seq(self, job_id: str, attempt: int) -> int:
        row = self._db.execute(
            "INSERT INTO seqs (job_id, attempt, next) VALUES (?, ?, 1) "
            "ON CONFLICT (job_id, attempt) DO UPDATE SET next = next + 1 RETURNING next - 1",
            (job_id, attempt)).fetchone()
        return int(row[0])

    def _insert(self, sql: str, params: tuple[Any, ...]) -> int:
        cur = self._db.execute(sql, params)
        self._added = True
        assert cur.lastrowid is not None
        return cur.lastrowid

    # --- attempts ----------------------------------------------------------------------------

    def put_attempt(self, record: AttemptRecord) -> None:
        marks = ", ".join("?" * len(_COLUMNS))
        with self.atomic():
            self._db.execute(f"INSERT INTO attempts ({', '.join(_COLUMNS)}) VALUES ({marks})",
                             tuple(getattr(record, c) for c in _COLUMNS))

    def get_attempt(self, job_id: str, attempt: int) -> AttemptRecord | None:
        rows = self._select("WHERE job_id = ? AND attempt = ?", (job_id, attempt))
        return rows[0] if rows else None

    def update_attempt(self, job_id: str, attempt: int, **changes: Any) -> AttemptRecord:
        """Set columns of a recorded attempt; a new ``state`` must be a legal transition."""
        unknown = set(changes) - _UPDATABLE
        if unknown:
            raise ValueError(f"not attempt columns: {sorted(unknown)}")
        with self.atomic():
            current = self.get_attempt(job_id, attempt)
            if current is None:
                raise KeyError(f"no attempt {job_id}/{attempt} in the spool")
            if "state" in changes:
                check_transition(current.state, AttemptStatus(changes["state"]))
            sets = ", ".join(f"{c} = ?" for c in changes)
            self._db.execute(f"UPDATE attempts SET {sets} WHERE job_id = ? AND attempt = ?",
                             (*changes.values(), job_id, attempt))
        # what was written, as a read would give it back (without reading it again)
        return _record(tuple(changes.get(c, getattr(current, c)) for c in _COLUMNS))

    def attempts(self, *states: AttemptStatus) -> list[AttemptRecord]:
        """Attempts in any of ``states`` (all when none is given), oldest first."""
        if not states:
            return self._select("ORDER BY created", ())
        marks = ", ".join("?" * len(states))
        return self._select(f"WHERE state IN ({marks}) ORDER BY created", tuple(states))

    def reportable(self) -> list[AttemptRef]:
        """Attempts the coordinator must still hear about: active, or whose final event (exited
        or start_failed) is not yet acknowledged. Stale attempts are not reported."""
        cur = self._db.execute(
            "SELECT job_id, attempt FROM attempts WHERE state IN ('STARTING', 'RUNNING') "
            "OR (state IN ('EXITED', 'START_FAILED') AND final_acked = 0) ORDER BY created")
        return [AttemptRef(job_id=j, attempt=a) for j, a in cur.fetchall()]

    def _select(self, where: str, params: tuple[Any, ...]) -> list[AttemptRecord]:
        cur = self._db.execute(f"SELECT {', '.join(_COLUMNS)} FROM attempts {where}", params)
        return [_record(row) for row in cur.fetchall()]


def _record(row: tuple[Any, ...]) -> AttemptRecord:
    values = dict(zip(_COLUMNS, row, strict=True))
    values["state"] = AttemptStatus(values["state"])
    values["final_acked"] = bool(values["final_acked"])
    return AttemptRecord(**values)


def _offset_column(stream: str) -> str:
    if stream not in ("stdout", "stderr"):
        raise ValueError(f"unknown stream {stream!r}")
    return f"{stream}_offset"
