"""The job's track file into the spool: whole valid lines only, once, resumed after a
restart of the agent (the offset is the spool's), bad lines skipped with one info event."""

from __future__ import annotations

import json
from pathlib import Path

from bourse.agent.spool import Spool
from bourse.agent.tailer import LogTailer
from bourse.agent.track import TrackTailer
from bourse.protocol.track import TrackBatch
from bourse.track.writer import Buffer, FileSink


def rows(spool: Spool) -> list[TrackBatch]:
    """The spooled records, validated as the coordinator will."""
    return [TrackBatch.model_validate(r.body()) for r in spool.pending(0, 1000)
            if r.type == "track"]


def test_whole_lines_are_spooled_once_and_resumed_after_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "track.jsonl"
    spool = Spool(tmp_path / "spool.db")
    tailer = TrackTailer(spool, "j", 1, path)
    assert tailer.step(0.0)  # no file yet: nothing to do
    buffer = Buffer(FileSink(path), flush_s=0)
    buffer.add({"loss": 0.5, "nan": float("nan")}, 3, {"lr": 0.1}, {})
    buffer.flush()
    with path.open("a") as f:
        f.write('{"metrics": [["half", 1.0, 4,')  # a line still being written
    assert not tailer.step(1.0)
    spool.append_event("j", 1, "started", {}, 1.0)  # seqs are shared with events
    with path.open("a") as f:
        f.write(' 5]]}\nnot json\n{"metrics": [["k", 1, 1, -1]]}\n')
    assert tailer.step(2.0)
    got = rows(spool)
    assert [b.seq for b in got] == [0, 2]
    assert got[0].metrics[0][:3] == ("loss", 0.5, 3) and got[0].metrics[1][1] is None
    assert got[0].params == {"lr": "0.1"} and got[1].metrics == [("half", 1.0, 4, 5)]
    info = [r.message() for r in spool.pending(0, 100) if r.type == "job_event"]
    assert len(info) == 2 and "not a tracking record" in str(info[1])  # once for two bad lines
    spool.close()

    spool = Spool(tmp_path / "spool.db")  # the agent restarts: where it stopped
    again = TrackTailer(spool, "j", 1, path)
    assert again.offset == path.stat().st_size  # the bad lines are not read again
    buffer.add({"loss": 0.25}, 4, {}, {"t": "x"})
    buffer.flush()
    again.step(3.0)
    assert [b.seq for b in rows(spool)] == [0, 2, 4]
    assert rows(spool)[-1].tags == {"t": "x"}


def test_the_log_tailer_drains_the_track_file_at_the_end(tmp_path: Path) -> None:
    out, err, track = tmp_path / "out", tmp_path / "err", tmp_path / "track.jsonl"
    spool = Spool(tmp_path / "spool.db")
    tailer = LogTailer(spool, "j", 1, paths=(out, err), offsets=(0, 0), chunk_bytes=64,
                       max_pending=1000, track=TrackTailer(spool, "j", 1, track))
    track.write_text(json.dumps({"metrics": [["a", 1.0, 0, 0]]}))  # no newline: the job died
    assert not tailer.step(0.0)
    assert tailer.step(1.0, final=True)
    assert [b.metrics for b in rows(spool)] == [[("a", 1.0, 0, 0)]]
