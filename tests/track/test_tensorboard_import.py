"""TensorBoard scalars read by bourse's own reader, from event files written by
torch.utils.tensorboard's SummaryWriter; a torn tail ends the file, a corrupt record too."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from bourse import track
from bourse.core.tfevents import crc32c, event_files, masked, records, scalars
from bourse.track.writer import Buffer, FileSink


def test_crc32c_and_the_framing() -> None:
    assert crc32c(b"123456789") == 0xE3069283  # the standard check value
    body = b"hello"
    header = struct.pack("<Q", len(body))
    record = header + struct.pack("<I", masked(header)) + body + struct.pack("<I", masked(body))
    assert list(records(record * 2)) == [body, body]
    assert list(records(record + record[:-3])) == [body]  # a torn tail
    corrupt = record[:12] + b"jello" + record[17:]
    assert list(records(corrupt + record)) == []


def test_summary_writer_scalars_are_imported(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    tensorboard = pytest.importorskip("torch.utils.tensorboard")
    logs = tmp_path / "lightning_logs"
    writer = tensorboard.SummaryWriter(str(logs / "version_0"))
    for step in range(5):
        writer.add_scalar("train/loss", 1.0 / (step + 1), step)
    writer.add_scalar("val_acc", 0.75, 4)
    writer.add_histogram("weights", torch.arange(3.0), 0)  # not a scalar: skipped
    writer.close()
    files = event_files(logs)
    assert len(files) == 1
    got = list(scalars(files[0].read_bytes()))
    assert [(s.tag, s.step) for s in got] == [*[("train/loss", i) for i in range(5)],
                                              ("val_acc", 4)]
    assert got[1].value == pytest.approx(0.5) and got[0].wall_time > 1e9

    path = tmp_path / "track.jsonl"
    monkeypatch.setattr(track, "_buffer", Buffer(FileSink(path), flush_s=0))
    assert track.import_tensorboard(logs) == 6
    points = [p for line in path.read_text().splitlines() for p in json.loads(line)["metrics"]]
    assert [(k, s) for k, _, s, _ in points][-1] == ("val_acc", 4)
