"""Progress of packing and uploading code: plain lines off a terminal, nothing when quick."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_exchange import FakeExchange, job_view
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


def test_a_waiting_job_turns_a_spinner_on_a_terminal_until_it_runs(
        capsys: pytest.CaptureFixture[str]) -> None:
    import io

    from rich.console import Console

    from bourse.cli.run import StatusLine
    from bourse.core.states import JobState
    from bourse.protocol.api import JobView

    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120)
    clock = Clock()
    waiting = progress.Waiting(enabled=True, console=console, clock=clock)
    line = StatusLine(client=None, waiting=waiting)  # type: ignore[arg-type]
    job = JobView.model_validate(job_view("j1", "PENDING",
                                          pending_reason="launching p4d.24xlarge on aws"))
    line(job)
    assert waiting._live is not None  # turning, with the reason
    clock.now += 125  # no new view of the job: the time waited moves on by itself
    assert waiting.label() == "PENDING: launching p4d.24xlarge on aws (2 min 05 s)"
    line(job)  # the same reason: no second line
    rendered = io.StringIO()
    Console(file=rendered, force_terminal=True, width=120).print(waiting)
    assert "(2 min 05 s)" in rendered.getvalue()
    line(job.model_copy(update={"state": JobState.SUCCEEDED}))  # ended: gone
    assert waiting._live is None
    line(job)  # waiting again (a retry): its time counts from now
    assert waiting.label().endswith("(0 s)")
    waiting.stop()
    said = "bourse: PENDING: launching p4d.24xlarge on aws"
    assert capsys.readouterr().err.count(said) == 1  # said once, before the spinner turned
    assert "PENDING: launching p4d.24xlarge on aws" in out.getvalue()


def test_off_a_terminal_waiting_shows_no_spinner(capsys: pytest.CaptureFixture[str]) -> None:
    waiting = progress.Waiting(enabled=False)
    waiting.show("PENDING")
    waiting.say("bourse: PENDING")
    assert waiting._live is None and capsys.readouterr().err == "bourse: PENDING\n"
    assert progress.waited(8.9) == "8 s" and progress.waited(3605) == "60 min 05 s"


def test_fleets_say_each_host_as_it_is_done(capsys: pytest.CaptureFixture[str]) -> None:
    from bourse.cli.fleets import _each
    from bourse.fleets.join import Report

    def work(host: str) -> Report:
        return Report(host=host, ok=host != "u@b", step="verify" if host == "u@b" else "joined",
                      detail="")

    reports = _each(["u@a", "u@b"], work, say="installing the agent on")
    assert [r.host for r in reports] == ["u@a", "u@b"]  # the hosts' order
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "bourse: installing the agent on 2 host(s), 2 at once"
    assert sorted(err[1:]) == ["bourse: u@a: ok at joined (1 of 2 done)",
                               "bourse: u@b: failed at verify (2 of 2 done)"] or sorted(
        err[1:]) == ["bourse: u@a: ok at joined (2 of 2 done)",
                     "bourse: u@b: failed at verify (1 of 2 done)"]
    assert _each(["u@a"], work, say=None) and capsys.readouterr().err == ""
