"""``agent.tensorboard``: the TensorBoard event files a job left in its working directory, as
track records appended to its track file once, without following links."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bourse.agent import tensorboard
from bourse.agent.track import parse_line
from bourse.core.tfevents import Scalar

SummaryWriter = pytest.importorskip("torch.utils.tensorboard").SummaryWriter


def write(logdir: Path, tag: str, steps: int) -> None:
    writer = SummaryWriter(str(logdir))
    for step in range(steps):
        writer.add_scalar(tag, float(step), step)
    writer.close()


def points(track: Path) -> list[tuple[str, float | None, int]]:
    lines = [parse_line(line) for line in track.read_bytes().splitlines() if line.strip()]
    assert all(r is not None for r in lines)  # the tailer takes every line
    return [(k, v, s) for r in lines if r is not None for k, v, s, _ in r.metrics]


def test_every_scalar_is_appended_once(tmp_path: Path) -> None:
    work, track = tmp_path / "work", tmp_path / "tmp" / "bourse-track.jsonl"
    track.parent.mkdir()
    track.write_bytes(b'{"metrics": []}')  # the job's own last line, without its newline
    write(work / "runs" / "Dec04_host", "loss", 1500)  # more than one record's points
    write(work / "lightning_logs" / "version_0", "val_acc", 3)
    done = tensorboard.import_once(work, track)
    assert done is not None and (done.files, done.points, done.truncated) == (2, 1503, False)
    got = points(track)
    assert [p for p in got if p[0] == "loss"] == [("loss", float(s), s) for s in range(1500)]
    assert [p[2] for p in got if p[0] == "val_acc"] == [0, 1, 2]
    size = track.stat().st_size
    assert tensorboard.import_once(work, track) is None  # once per attempt
    assert track.stat().st_size == size


def test_links_are_not_followed_and_nothing_is_marked_without_files(tmp_path: Path) -> None:
    work, track, outside = tmp_path / "work", tmp_path / "track.jsonl", tmp_path / "outside"
    write(outside, "secret", 2)
    work.mkdir()
    (work / "linked").symlink_to(outside, target_is_directory=True)
    [event] = outside.iterdir()
    (work / event.name).symlink_to(event)
    assert tensorboard.import_once(work, track) is None
    assert not track.exists() and not (tmp_path / ("track.jsonl" + tensorboard.MARKER)).exists()


def test_the_walk_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    deep = tmp_path / "a" / "b" / "c" / "d" / "e"
    write(deep, "deep", 1)
    assert tensorboard.event_files(tmp_path) == ([], False)  # past MAX_DEPTH
    write(tmp_path / "near", "near", 1)
    monkeypatch.setattr(tensorboard, "MAX_ENTRIES", 2)
    assert tensorboard.event_files(tmp_path)[1] is True


def test_values_are_what_the_tracking_api_takes() -> None:
    records = list(tensorboard.records([
        Scalar("nan", 0, 1.5, math.nan), Scalar("inf", 1, 1.5, math.inf),
        Scalar("x" * 251, 2, 1.5, 1.0), Scalar("ok", 3, -1.0, 2.0)]))
    [record] = records
    assert [(k, v, s, t) for k, v, s, t in record.metrics] == [
        ("nan", None, 0, 1500), ("inf", 1.7976931348623157e308, 1, 1500), ("ok", 2.0, 3, 0)]


def test_a_marker_the_job_linked_elsewhere_is_not_written_through(tmp_path: Path) -> None:
    work, track, target = tmp_path / "work", tmp_path / "track.jsonl", tmp_path / "precious"
    write(work / "runs", "loss", 2)
    target.write_text("keep me")
    (tmp_path / ("track.jsonl" + tensorboard.MARKER)).symlink_to(target)
    assert tensorboard.import_once(work, track) is None
    assert target.read_text() == "keep me" and not track.exists()


def test_fifos_and_garbage_are_skipped_never_waited_on(tmp_path: Path) -> None:
    import os

    work, track = tmp_path / "work", tmp_path / "track.jsonl"
    write(work / "runs", "loss", 3)
    os.mkfifo(work / "runs" / (tensorboard.EVENTS + "fifo"))  # an open would block for ever
    (work / (tensorboard.EVENTS + "junk")).write_bytes(b"\xff" * 64)  # no record in it
    done = tensorboard.import_once(work, track)
    assert done is not None and done.points == 3
    blocked = tmp_path / "fifo-track.jsonl"
    os.mkfifo(blocked)  # the job left a FIFO where its track file goes
    with pytest.raises(OSError):  # refused at once (ENXIO, or not a regular file)
        tensorboard.import_once(work, blocked)
