"""Progress of packing and uploading code: plain lines off a terminal, nothing when quick."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_exchange import FakeExchange
from click.testing import CliRunner

from bourse.cli import progress
from bourse.cli.main import cli
from bourse.cli.progress import BarStep, PlainStep

MiB = 1024 * 1024


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_plain_step_writes_a_line_after_a_pause_then_every_few_seconds(
        capsys: pytest.CaptureFixture[str]) -> None:
    clock = Clock()
    step = PlainStep("uploading code", clock, every_s=5.0)
    for at, done in ((100.1, 1), (100.6, 10), (101.0, 20), (105.7, 40), (106.0, 50)):
        clock.now = at
        step(done * MiB, 100 * MiB)
    clock.now = 107.0
    step(100 * MiB, 100 * MiB)
    step.close()
    assert capsys.readouterr().err.splitlines() == [
        "uploading code: 10.0 MiB / 100.0 MiB (10 %), 16.7 MiB/s",
        "uploading code: 40.0 MiB / 100.0 MiB (40 %), 7.0 MiB/s",
        "uploading code: 100.0 MiB / 100.0 MiB (100 %), 14.3 MiB/s",
    ]


@pytest.mark.parametrize("kind", [PlainStep, BarStep])
def test_a_quick_step_shows_nothing(kind: type[PlainStep] | type[BarStep],
                                    capsys: pytest.CaptureFixture[str]) -> None:
    clock = Clock()
    step = kind("packing code", clock)
    step(5, 10)
    clock.now += 0.2
    step(10, 10)
    step.close()
    assert capsys.readouterr() == ("", "")


def test_a_disabled_step_shows_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    with progress.step("packing code", enabled=False) as report:
        report(1, 2)
    assert capsys.readouterr() == ("", "")


def test_bourse_run_shows_packing_and_upload_off_a_terminal(
        exchange: FakeExchange, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(progress, "QUIET_S", 0.0)  # as if the steps took long
    (tmp_path / "weights.bin").write_bytes(os.urandom(3 * MiB))  # gzip cannot shrink it
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["run", "-d", "python", "t.py"])
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    packing = [line for line in lines if line.startswith("packing code: ")]
    uploading = [line for line in lines if line.startswith("uploading code: ")]
    assert packing and packing[-1].startswith("packing code: 3.0 MiB / 3.0 MiB (100 %)")
    assert uploading[0].startswith("uploading code: 1.0 MiB / 3.0 MiB (33 %)")
    assert uploading[-1].startswith("uploading code: 3.0 MiB / 3.0 MiB (100 %)")
    assert result.stdout == "j1\n"  # stdout stays the job id alone


def test_a_long_step_on_a_terminal_draws_a_bar_to_the_end() -> None:
    clock = Clock()
    step = BarStep("uploading code", clock)
    clock.now += 1.0
    step(MiB, 4 * MiB)
    step(4 * MiB, 4 * MiB)
    assert step._bar is not None
    [task] = step._bar.tasks
    assert (task.completed, task.total, task.description) == (4 * MiB, 4 * MiB,
                                                              "uploading code")
    step.close()
