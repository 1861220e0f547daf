"""``bourse runs show``: a run's jobs, each with the stages its stage reads from."""

from __future__ import annotations

from bourse.cli.runs import describe_run
from bourse.protocol.api import JobView, RunDetail, RunEdge
from bourse.protocol.common import JobSpec

T0 = 1_700_000_000.0


def job(job_id: str, stage: str | None) -> JobView:
    return JobView(id=job_id, state="SUCCEEDED", created_at=T0, updated_at=T0 + 3, attempt=1,
                   spec=JobSpec(command=["x"], run="r-1", stage=stage))


def test_each_job_names_the_stages_it_runs_after() -> None:
    run = RunDetail(id="r-1", state="SUCCEEDED", stages=4, started_at=T0, driver="j-0",
                    jobs=[job("j-0", None), job("j-1", "prepare"), job("j-2", "left"),
                          job("j-3", "right"), job("j-4", "merge")],
                    edges=[RunEdge(source="prepare", target="left", inputs=["data"]),
                           RunEdge(source="prepare", target="right", inputs=["data"]),
                           RunEdge(source="left", target="merge", inputs=["a"]),
                           RunEdge(source="right", target="merge", inputs=["b"])])

    lines = "\n".join(describe_run(run, T0 + 10)).splitlines()

    header = next(line for line in lines if line.startswith("STAGE"))
    assert header.split() == ["STAGE", "JOB", "STATE", "NODE", "DURATION", "COST", "AFTER"]
    rows = {line.split()[1]: line.rstrip() for line in lines if line.split()[1:2]
            and line.split()[1].startswith("j-")}
    assert rows["j-0"].endswith(" -") and rows["j-1"].endswith(" -")
    assert rows["j-2"].endswith(" prepare") and rows["j-3"].endswith(" prepare")
    assert rows["j-4"].endswith(" left, right")
