"""The spool on a real SQLite file: seqs, order, acks, durability, crash safety, attempts."""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from bourse.agent.spool import AttemptRecord, AttemptStatus, Spool, check_transition
from bourse.core.states import IllegalTransition
from bourse.protocol.agent import JobEvent, LogChunk
from bourse.protocol.common import AttemptRef


@pytest.fixture
def spool(tmp_path: Path) -> Spool:
    return Spool(tmp_path / "spool.db")


def log_file(tmp_path: Path, content: bytes = b"hello\nworld\n") -> str:
    path = tmp_path / "stdout"
    path.write_bytes(content)
    return str(path)


def test_seqs_are_per_attempt_and_shared_by_events_and_chunks(spool: Spool, tmp_path: Path) -> None:
    path = log_file(tmp_path)
    spool.append_event("j", 1, "accepted", {}, 1.0)
    spool.append_log("j", 1, stream="stdout", path=path, offset=0, length=6, time=2.0)
    spool.append_event("j", 2, "accepted", {}, 3.0)
    spool.append_event("k", 1, "accepted", {}, 4.0)
    spool.append_event("j", 1, "started", {"pid": 7}, 5.0)
    seqs = [(r.job_id, r.attempt, r.seq) for r in spool.pending()]
    assert seqs == [("j", 1, 0), ("j", 1, 1), ("j", 2, 0), ("k", 1, 0), ("j", 1, 2)]


def test_bodies_are_the_wire_messages(spool: Spool, tmp_path: Path) -> None:
    path = log_file(tmp_path, b"0123456789")
    spool.append_event("j", 1, "started", {"pid": 42}, 1.5)
    spool.append_log("j", 1, stream="stderr", path=path, offset=3, length=4, time=2.5)
    event, chunk = (r.body() for r in spool.pending())
    assert JobEvent.model_validate(event).data == {"pid": 42}
    assert event == {"job_id": "j", "attempt": 1, "seq": 0, "time": 1.5, "kind": "started",
                     "data": {"pid": 42}}
    assert LogChunk.model_validate(chunk).offset == 3
    assert chunk["stream"] == "stderr"
    assert base64.b64decode(chunk["data"]) == b"3456"


def test_log_rows_reference_the_file_and_survive_its_removal(spool: Spool,
                                                            tmp_path: Path) -> None:
    path = log_file(tmp_path, b"abc")
    spool.append_log("j", 1, stream="stdout", path=path, offset=0, length=3, time=1.0)
    os.unlink(path)
    assert spool.pending()[0].body()["data"] == ""


def test_pending_pages_in_order_and_ack_deletes(spool: Spool) -> None:
    ids = [spool.append_event("j", 1, "info", {"n": n}, float(n)) for n in range(5)]
    assert ids == sorted(ids)
    assert [r.id for r in spool.pending(0, 2)] == ids[:2]
    assert [r.id for r in spool.pending(ids[1], 10)] == ids[2:]
    spool.ack(ids[:3])
    assert [r.id for r in spool.pending()] == ids[3:]
    assert spool.pending_count() == 2
    spool.ack([ids[0], 999])  # acking twice or unknown ids is harmless
    assert spool.pending_count() == 2


def test_ids_are_not_reused_after_ack(spool: Spool) -> None:
    first = spool.append_event("j", 1, "info", {}, 1.0)
    spool.ack([first])
    assert spool.append_event("j", 1, "info", {}, 2.0) > first


def test_pending_log_bytes_counts_unacked_chunks_of_one_attempt(spool: Spool,
                                                               tmp_path: Path) -> None:
    path = log_file(tmp_path)
    a = spool.append_log("j", 1, stream="stdout", path=path, offset=0, length=6, time=1.0)
    spool.append_log("j", 1, stream="stderr", path=path, offset=0, length=3, time=1.0)
    spool.append_log("j", 2, stream="stdout", path=path, offset=0, length=100, time=1.0)
    spool.append_event("j", 1, "info", {}, 1.0)
    assert spool.pending_log_bytes("j", 1) == 9
    spool.ack([a])
    assert spool.pending_log_bytes("j", 1) == 3
    assert spool.pending_log_bytes("x", 1) == 0


def test_everything_survives_reopening(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool.db")
    spool.append_event("j", 1, "accepted", {}, 1.0)
    spool.append_event("j", 1, "started", {"pid": 1}, 2.0)
    spool.ack([spool.pending()[0].id])
    spool.close()
    spool = Spool(tmp_path / "spool.db")
    assert [r.body()["kind"] for r in spool.pending()] == ["started"]
    spool.append_event("j", 1, "exited", {}, 3.0)
    assert [r.seq for r in spool.pending()] == [1, 2]


def test_atomic_groups_calls_and_rolls_back(spool: Spool) -> None:
    spool.changed.clear()
    with pytest.raises(RuntimeError), spool.atomic():
        spool.append_event("j", 1, "info", {}, 1.0)
        raise RuntimeError("boom")
    assert spool.pending_count() == 0
    assert not spool.changed.is_set()
    with spool.atomic():
        spool.append_event("j", 1, "info", {}, 1.0)
        assert not spool.changed.is_set()  # only once the transaction commits
    assert spool.changed.is_set()
    assert spool.pending()[0].seq == 0  # the rolled-back seq was not consumed


def test_append_sets_changed(spool: Spool) -> None:
    spool.changed.clear()
    spool.append_event("j", 1, "info", {}, 1.0)
    assert spool.changed.is_set()


WRITER = textwrap.dedent("""
    import sys, pathlib
    from bourse.agent.spool import Spool
    spool = Spool(pathlib.Path(sys.argv[1]))
    path = sys.argv[2]
    n = 0
    while True:
        spool.append_event("j", 1, "info", {"n": n}, 1.0)
        spool.append_log("j", 1, stream="stdout", path=path, offset=n, length=1, time=1.0)
        n += 1
        if n == 50:
            print("ready", flush=True)
""")


def test_kill_9_loses_and_repeats_no_seq(tmp_path: Path) -> None:
    db = tmp_path / "spool.db"
    path = log_file(tmp_path, b"x" * 100_000)
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(db), path],
                            stdout=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"ready\n"
    time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    spool = Spool(db)
    seqs = [r.seq for r in spool.pending(0, 10**6)]
    assert len(seqs) >= 100
    assert seqs == list(range(len(seqs)))
    spool.append_event("j", 1, "info", {}, 2.0)
    assert spool.pending(0, 10**6)[-1].seq == len(seqs)


def record(job_id: str = "j", attempt: int = 1, **changes: object) -> AttemptRecord:
    values: dict[str, object] = {"spec": "{}", "dir": "/d", "state": AttemptStatus.STARTING,
                                 "created": time.time(), **changes}
    return AttemptRecord(job_id, attempt, **values)  # type: ignore[arg-type]


def test_attempt_records_round_trip_and_update(spool: Spool) -> None:
    original = record(stdout_offset=5, cancel_reason="why")
    spool.put_attempt(original)
    assert spool.get_attempt("j", 1) == original
    updated = spool.update_attempt("j", 1, state=AttemptStatus.RUNNING, pid=12, proc_start=99)
    assert (updated.state, updated.pid, updated.proc_start) == (AttemptStatus.RUNNING, 12, 99)
    assert spool.get_attempt("j", 1) == updated  # what it returns is what is stored
    ended = spool.update_attempt("j", 1, state="EXITED", exit_code=0, kill_at=2.5,
                                 final_row=3, final_acked=True, reason=None)
    assert ended.state is AttemptStatus.EXITED and ended.final_acked is True
    assert spool.get_attempt("j", 1) == ended
    assert spool.get_attempt("j", 2) is None
    with pytest.raises(ValueError, match="not attempt columns"):
        spool.update_attempt("j", 1, colour="red")
    with pytest.raises(KeyError):
        spool.update_attempt("nope", 1, pid=1)


def test_log_chunks_advance_the_attempts_offsets(spool: Spool, tmp_path: Path) -> None:
    path = log_file(tmp_path)
    spool.put_attempt(record())
    spool.append_log("j", 1, stream="stdout", path=path, offset=0, length=6, time=1.0)
    spool.append_log("j", 1, stream="stderr", path=path, offset=0, length=2, time=1.0)
    spool.append_log("j", 1, stream="stdout", path=path, offset=6, length=6, time=1.0)
    got = spool.get_attempt("j", 1)
    assert got is not None
    assert (got.stdout_offset, got.stderr_offset) == (12, 2)


@pytest.mark.parametrize(("old", "new", "legal"), [
    (AttemptStatus.STARTING, AttemptStatus.RUNNING, True),
    (AttemptStatus.STARTING, AttemptStatus.START_FAILED, True),
    (AttemptStatus.RUNNING, AttemptStatus.EXITED, True),
    (AttemptStatus.RUNNING, AttemptStatus.STALE, True),
    (AttemptStatus.EXITED, AttemptStatus.STALE, True),
    (AttemptStatus.RUNNING, AttemptStatus.RUNNING, True),
    (AttemptStatus.EXITED, AttemptStatus.RUNNING, False),
    (AttemptStatus.RUNNING, AttemptStatus.START_FAILED, False),
    (AttemptStatus.STALE, AttemptStatus.EXITED, False),
])
def test_transitions(old: AttemptStatus, new: AttemptStatus, legal: bool) -> None:
    if legal:
        check_transition(old, new)
    else:
        with pytest.raises(IllegalTransition):
            check_transition(old, new)


def test_update_attempt_refuses_an_illegal_transition(spool: Spool) -> None:
    spool.put_attempt(record(state=AttemptStatus.EXITED))
    with pytest.raises(IllegalTransition):
        spool.update_attempt("j", 1, state=AttemptStatus.RUNNING)
    assert spool.get_attempt("j", 1).state is AttemptStatus.EXITED  # type: ignore[union-attr]


def test_reportable_keeps_an_attempt_until_its_final_event_is_acked(spool: Spool) -> None:
    spool.put_attempt(record("run", state=AttemptStatus.RUNNING))
    spool.put_attempt(record("stale", state=AttemptStatus.STALE))
    spool.put_attempt(record("done", state=AttemptStatus.RUNNING))
    with spool.atomic():
        row = spool.append_event("done", 1, "exited", {}, 1.0)
        spool.update_attempt("done", 1, state=AttemptStatus.EXITED, final_row=row)
    assert spool.reportable() == [AttemptRef(job_id="run", attempt=1),
                                  AttemptRef(job_id="done", attempt=1)]
    spool.ack([row])
    assert spool.reportable() == [AttemptRef(job_id="run", attempt=1)]
    assert spool.get_attempt("done", 1).final_acked  # type: ignore[union-attr]


def test_drop_pending_forgets_one_attempt(spool: Spool) -> None:
    spool.append_event("j", 1, "info", {}, 1.0)
    spool.append_event("j", 2, "info", {}, 1.0)
    spool.drop_pending("j", 1)
    assert [(r.job_id, r.attempt) for r in spool.pending()] == [("j", 2)]
