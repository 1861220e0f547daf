"""A stage that fails stops the flow with StageFailed (its job id — None locally — and the tail
of its log); later stages never run; ``retries`` runs a failed stage again."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys

import pytest
from app_harness import Project, summary_rows

from bourse import StageFailed
from bourse.app.call import encode_work_call

THREE = """
    from pathlib import Path

    from bourse import App, Compute, Flow, Work


    class First(Work):
        outputs = ("data",)

        def run(self) -> int:
            (self.outputs["data"] / "n.txt").write_text("30")
            return 30


    class Middle(Work):
        def run(self, data) -> None:
            for i in range(int((data / "n.txt").read_text())):
                print(f"line {i:02d}")
            raise ValueError("boom in the middle")


    class Last(Work):
        def run(self) -> None:
            Path("last-ran").touch()


    class Three(Flow):
        def __init__(self):
            self.first = First(compute=Compute("cpu"))
            self.middle = Middle(compute=Compute("cpu"))
            self.last = Last(compute=Compute("cpu"))

        def run(self):
            data = self.first.run().outputs["data"]
            self.middle.run(data=data)
            self.last.run()


    app = App(Three())
"""


def test_a_failing_middle_stage_stops_the_flow(project: Project) -> None:
    project.write("app.py", THREE)

    with pytest.raises(StageFailed) as failed:
        project.run()

    result = failed.value.result
    assert (result.work, result.status, result.exit_code) == ("Middle", "FAILED", 1)
    assert result.job_id is None  # local mode has no jobs
    assert result.outputs == {}
    assert str(failed.value).startswith("stage 'Middle' failed (local run, exit code 1)")
    tail = failed.value.log_tail.splitlines()
    assert tail[-1] == "ValueError: boom in the middle"
    assert "line 29" in tail and "line 00" not in tail  # the last 20 lines only
    assert len(tail) == 20
    assert failed.value.log_tail in str(failed.value)  # shown to the user too
    assert not (project.root / "last-ran").exists()
    assert [d.split("/")[1] for d in project.stage_dirs()] == ["First", "Middle"]


def test_the_cli_reports_the_failed_stage_and_exits_1(project: Project) -> None:
    done = project.write("app.py", THREE).cli("--local", "app.py")

    assert done.returncode == 1
    assert summary_rows(done.stderr) == [("First", "SUCCEEDED"), ("Middle", "FAILED")]
    assert "error: stage 'Middle' failed (local run, exit code 1)" in done.stderr
    assert "ValueError: boom in the middle" in done.stderr
    assert "[Middle] line 29" in done.stdout  # the stage's output, prefixed by its name
    assert not (project.root / "last-ran").exists()


def test_wait_lets_every_stage_end_then_raises_the_first_failure(project: Project) -> None:
    project.write("app.py", """
        import time
        from pathlib import Path

        import bourse
        from bourse import App, Compute, Flow, Work


        class Fail(Work):
            def run(self) -> None:
                raise SystemExit("fails at once")


        class Slow(Work):
            def run(self) -> None:
                time.sleep(0.5)
                Path("slow-ended").touch()


        class Both(Flow):
            def __init__(self):
                self.fail = Fail(compute=Compute("cpu"))
                self.slow = Slow(compute=Compute("cpu"))

            def run(self):
                bourse.wait(self.fail.submit(), self.slow.submit())


        app = App(Both())
    """)

    with pytest.raises(StageFailed) as failed:
        project.run()

    assert failed.value.result.work == "Fail"
    assert failed.value.log_tail == "fails at once"
    assert (project.root / "slow-ended").exists()


FLAKY = """
    from pathlib import Path

    from bourse import App, Compute, Work


    class Flaky(Work):
        def run(self) -> str:
            Path("attempts.log").open("a").write("attempt\\n")
            if len(Path("attempts.log").read_text().splitlines()) == 1:
                raise SystemExit("the first attempt fails")
            return "second attempt"


    app = App(Flaky(compute=Compute("cpu"), retries=1))
"""


def test_a_stage_without_retries_runs_once(project: Project) -> None:
    project.write("app.py", FLAKY.replace("retries=1", "retries=0"))

    with pytest.raises(StageFailed):
        project.run()

    assert project.lines("attempts.log") == ["attempt"]


def test_retries_runs_a_failed_stage_again_locally(project: Project) -> None:
    result = project.write("app.py", FLAKY).run()

    assert result.value == "second attempt"
    assert project.lines("attempts.log") == ["attempt", "attempt"]


def test_a_works_prints_come_before_its_traceback(project: Project) -> None:
    """Line-buffered: a job's log (a file, not a terminal) gets each line when printed, so the
    tail of a failed stage's log ends with its error, whatever the environment says."""
    project.write("loud.py", """
        from bourse import Work


        class Loud(Work):
            def run(self) -> None:
                for i in range(30):
                    print(f"line {i:02d}")
                raise ValueError("boom")
    """)
    sys.path.insert(0, str(project.root))
    try:
        loud = importlib.import_module("loud")
    finally:
        sys.path.remove(str(project.root))
    call = encode_work_call(loud.Loud(), (), {}, project.root, python=sys.executable)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"} | call.env
    out = subprocess.run(call.command, cwd=project.root, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, check=False).stdout
    assert out.index("line 29") < out.index("Traceback") < out.index("ValueError: boom")
