"""What the pages compute from the API's views: tables of cases, no server."""

from __future__ import annotations

from typing import Any

import pytest

from bourse.core.reliability import MIN_OBSERVED_S
from bourse.protocol.api import AttemptView, EventView, JobView, ReliabilityView
from bourse.protocol.common import Capabilities, GpuInfo, JobSpec
from bourse.server.ui import views

T0 = 1_700_000_000.0


def job(job_id: str = "j-1", name: str | None = None, state: str = "PENDING",
        created_at: float = T0, **extra: Any) -> JobView:
    spec = JobSpec(command=["true"], name=name, **extra.pop("spec", {}))
    return JobView(id=job_id, name=name, state=state, spec=spec, created_at=created_at,
                   updated_at=created_at, attempt=extra.pop("attempt", 0), **extra)


def event(event_id: int, attempt: int, kind: str, time: float, state: str | None = None, *,
          message: str = "") -> EventView:
    return EventView(id=event_id, job_id="j-1", attempt=attempt, time=T0 + time, kind=kind,
                     state=state, message=message)


@pytest.mark.parametrize(("seconds", "text"), [
    (-3, "0s"), (0, "0s"), (59.9, "59s"), (60, "1m"), (3599, "59m"), (3600, "1h"),
    (86399, "23h"), (86400, "1d"), (10 * 86400, "10d"),
])
def test_ago(seconds: float, text: str) -> None:
    assert views.ago(seconds) == text


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0.00 s"), (0.254, "0.25 s"), (9.99, "9.99 s"), (12.4, "12 s"), (61, "1 min 1 s"),
    (3725, "1 h 2 min"),
])
def test_span(seconds: float, text: str) -> None:
    assert views.span(seconds) == text


@pytest.mark.parametrize(("view", "note"), [
    (job(state="PENDING", pending_reason="no node is connected\nmore"), "no node is connected"),
    (job(state="PENDING", reason="old"), ""),
    (job(state="FAILED", reason="exited with code 3", pending_reason="stale"),
     "exited with code 3"),
    (job(state="RUNNING"), ""),
])
def test_a_job_row_notes_why_it_waits_or_how_it_ended(view: JobView, note: str) -> None:
    assert views.job_row(view, {}, T0).note == note


@pytest.mark.parametrize(("state", "shown"), [
    ("PENDING", "no node is connected"), ("SCHEDULED", None), ("RUNNING", None),
    ("FAILED", None),
])
def test_only_a_pending_job_shows_why_it_waits(state: str, shown: str | None) -> None:
    view = job(state=state, pending_reason="no node is connected")  # stale once placed
    assert views.waiting_reason(view) == shown


def test_a_job_row_names_its_node_and_summarises_its_compute() -> None:
    view = job(state="RUNNING", node_id="n-1", spec={"compute": {"cpus": "2+"}})
    row = views.job_row(view, {"n-1": "gpu-box"}, T0 + 125)
    assert (row.node, row.age, row.compute, row.cost) == ("gpu-box", "2m", "no GPU, cpus 2+",
                                                          None)
    assert views.job_row(view, {}, T0).node == "n-1"  # a node since removed: its id


def test_the_timeline_groups_events_by_attempt_with_the_time_between_them() -> None:
    events = [
        event(1, 0, "state", 0, "PENDING", message="submitted"),
        event(2, 1, "state", 1, "SCHEDULED", message="placed on a"),
        event(3, 1, "state", 1.5, "RUNNING"),
        event(4, 1, "node_lost", 30, message="silent for 3 s"),
        event(5, 1, "state", 30, "PENDING", message="attempt 1 lost; retrying (1/3)"),
        event(7, 2, "state", 95, "SUCCEEDED"),
        event(6, 2, "state", 31, "SCHEDULED", message="placed on b"),  # out of order: sorted by id
    ]
    attempts = [
        AttemptView(number=1, node_id="n-a", node_name="a", state="LOST", placed_at=T0 + 1,
                    reason="node lost", placement="a: cheapest"),
        AttemptView(number=2, node_id="n-b", state="SUCCEEDED", placed_at=T0 + 31,
                    exit_code=0),
    ]
    phases = views.timeline(events, attempts)
    assert [(p.title, p.node, p.outcome) for p in phases] == [
        ("Submitted", "", None), ("Attempt 1", "a", "LOST"), ("Attempt 2", "n-b", "SUCCEEDED")]
    assert [(s.label, s.is_state, s.after) for s in phases[1].steps] == [
        ("SCHEDULED", True, "+1.00 s"), ("RUNNING", True, "+0.50 s"),
        ("node_lost", False, "+28 s"), ("PENDING", True, "+0.00 s")]
    assert phases[0].steps[0].after == ""
    assert [s.label for s in phases[2].steps] == ["SCHEDULED", "SUCCEEDED"]
    assert (phases[1].placement, phases[1].reason, phases[2].exit_code) == (
        "a: cheapest", "node lost", 0)


@pytest.mark.parametrize(("outcome", "why"), [
    (None, ""), ("SCHEDULED", ""), ("RUNNING", ""), ("SUCCEEDED", ""),
    ("FAILED", "it broke"), ("CANCELLED", "it broke"), ("LOST", "it broke"),
    ("PREEMPTED", "it broke"),
])
def test_a_phase_says_why_only_when_its_attempt_did_not_succeed(outcome: str | None,
                                                                why: str) -> None:
    attempt = None if outcome is None else AttemptView(
        number=1, node_id="n-a", state=outcome, placed_at=T0, reason="it broke")
    phase = views.timeline([event(1, 1, "state", 0, "SCHEDULED")], [attempt] if attempt else [])
    assert phase[0].why == why


def test_an_empty_timeline() -> None:
    assert views.timeline([], []) == []


def test_data_items_list_inputs_outputs_and_the_checkpoint() -> None:
    view = job(spec={"inputs": {"mnist": "s3://bkt/mnist/"},
                     "outputs": {"model": "s3://bkt/out/model/", "report": "s3://bkt/out/r/"},
                     "checkpoint": "s3://bkt/ckpt/"},
               outputs={"model": "s3://bkt/out/model/"})
    assert [(i.role, i.name, i.stored) for i in views.data_items(view)] == [
        ("input", "mnist", None), ("output", "model", True), ("output", "report", False),
        ("checkpoint", "checkpoint", None)]
    assert views.data_items(job()) == []


def test_data_items_list_what_the_node_kept() -> None:
    kept = "s3://bourse/jobs/j/lightning_logs/"
    view = job(outputs={"lightning_logs": kept})
    assert [(i.role, i.name, i.uri, i.stored) for i in views.data_items(view)] == [
        ("output", "lightning_logs", kept, True)]


@pytest.mark.parametrize(("states", "expected"), [
    ([], "PENDING"), (["SUCCEEDED", "SUCCEEDED"], "SUCCEEDED"),
    (["SUCCEEDED", "RUNNING"], "RUNNING"), (["SUCCEEDED", "PENDING"], "PENDING"),
    (["SUCCEEDED", "FAILED", "RUNNING"], "FAILED"), (["CANCELLED", "SUCCEEDED"], "CANCELLED"),
    (["STARTING"], "RUNNING"),
])
def test_run_state(states: list[str], expected: str) -> None:
    assert views.run_state(states) == expected


def stage_job(job_id: str, run: str | None, stage: str | None, state: str, created_at: float,
              *, app: str = "app.py") -> JobView:
    """A job as the app API submits it: named ``<run>/<stage>``, its run and stage in its
    spec; the flow driver of a detached run has no stage (and is named ``<run>/driver``)."""
    name = f"{run}/{stage or 'driver'}"
    return job(job_id, name, state, created_at, spec={"run": run, "stage": stage, "app": app})


def test_runs_group_stages_in_submission_order_newest_run_first() -> None:
    jobs = [
        stage_job("j-3", "r-a", "evaluate", "PENDING", T0 + 3),
        stage_job("j-1", "r-a", "prepare", "SUCCEEDED", T0 + 1),
        stage_job("j-2", "r-a", "train", "FAILED", T0 + 2),
        stage_job("j-5", "r-a", "train", "RUNNING", T0 + 5),  # the retry replaces the failed
        stage_job("j-4", "r-b", "prepare", "RUNNING", T0 + 4),
        job("j-6", "plain", "RUNNING", T0 + 6),
        job("j-7", "r-c/looks-like-a-stage", "RUNNING", T0 + 7),  # named so, but of no run
        job("j-8", None, "RUNNING", T0 + 8),
    ]
    runs = views.group_runs(jobs)
    assert [r.id for r in runs] == ["r-b", "r-a"]
    assert [(s.name, s.job_id) for s in runs[1].stages] == [
        ("prepare", "j-1"), ("evaluate", "j-3"), ("train", "j-5")]
    assert runs[1].state == "RUNNING"
    assert (runs[1].driver, runs[1].app) == (None, "app.py")


def test_a_detached_runs_driver_is_the_run_not_a_stage() -> None:
    jobs = [stage_job("j-d", "r-d", None, "RUNNING", T0, app="digits.py"),
            stage_job("j-p", "r-d", "prepare", "SUCCEEDED", T0 + 1, app="digits.py"),
            stage_job("j-t", "r-d", "train", "FAILED", T0 + 2, app="digits.py")]
    [run] = views.group_runs(jobs)
    assert [s.name for s in run.stages] == ["prepare", "train"]
    assert run.driver is not None and run.driver.job_id == "j-d"
    assert (run.app, run.started_at) == ("digits.py", T0)
    assert run.state == "RUNNING"  # the driver's: it may still retry or handle the failure
    [ended] = views.group_runs([*jobs[1:], stage_job("j-d", "r-d", None, "FAILED", T0)])
    assert ended.state == "FAILED"
    [waiting] = views.group_runs([stage_job("j-d", "r-d", None, "PENDING", T0)])
    assert (waiting.stages, waiting.state, waiting.started_at) == ((), "PENDING", T0)


def test_gpu_summary() -> None:
    a100 = GpuInfo(name="NVIDIA A100-SXM4-80GB", memory_mib=81920)
    t4 = GpuInfo(name="Tesla T4")
    caps = Capabilities(cpus=8, memory_gib=64, disk_free_gib=100, gpus=[a100, a100, t4])
    assert views.gpu_summary(caps) == "2 x NVIDIA A100-SXM4-80GB (80 GiB), 1 x Tesla T4"
    assert views.gpu_summary(None) == "none"
    assert views.gpu_summary(caps.model_copy(update={"gpus": []})) == "none"


def reliability(*, observed_s: float = 3 * 86400, availability: float = 0.992, ended: int = 40,
                interrupted: int = 1, work_h: float = 50.0,
                score: float | None = 0.967) -> ReliabilityView:
    return ReliabilityView(observed_s=observed_s, availability=availability,
                           attempts_ended=ended, attempts_interrupted=interrupted, work_h=work_h,
                           interruptions_per_hour=interrupted / work_h if work_h >= 1 else None,
                           score=score)


@pytest.mark.parametrize(("share", "text"), [
    (None, "-"), (0.0, "0.0%"), (0.9923, "99.2%"), (1.0, "100.0%"),
])
def test_percent(share: float | None, text: str) -> None:
    assert views.percent(share) == text


def test_a_measured_nodes_cell_is_its_score_and_says_what_it_is_made_of() -> None:
    cell = views.reliability_cell(reliability())
    assert (cell.text, cell.measured) == ("96.7%", True)
    assert cell.title == ("99.2% available over 3.0 d; 1 of 40 attempts interrupted "
                          "(0.02/h of work); score 0.967")  # bourse nodes show's words


def test_an_unmeasured_nodes_cell_says_so() -> None:
    young = views.reliability_cell(reliability(observed_s=1200, ended=0, interrupted=0,
                                               work_h=0, score=None))
    assert (young.text, young.measured) == ("not measured yet", False)
    assert young.title == "not measured yet: watched 20 min of the 1.0 h it takes"
    none = views.reliability_cell(None)
    assert (none.text, none.title, none.measured) == ("-", "not measured yet", False)


def test_a_measured_nodes_section_lists_the_figures_since_its_enrolment() -> None:
    section = views.reliability_section(reliability(), enrolled_at=T0)
    assert (section.since, section.pending) == (T0, "")
    assert dict(section.facts) == {
        "Score": "96.7% (availability × share of attempts not interrupted)",
        "Availability": "99.2% of 3.0 d connected",
        "Attempts": "40 ended, 1 interrupted (lost with the node, or preempted)",
        "Work": "50.0 h, 0.02 interruptions per hour of it",
    }
    short = views.reliability_section(reliability(work_h=0.5), enrolled_at=T0)
    assert dict(short.facts)["Work"] == "0.5 h"  # no rate before an hour of work
    promised = reliability()
    below = promised.model_copy(update={"declared": 0.995, "meets_declared": False})
    assert dict(views.reliability_section(below, T0).facts)["Declared"] == (
        "99.5% by its provider: below it")
    assert "Declared" not in dict(views.reliability_section(promised, T0).facts)


def test_an_unmeasured_nodes_section_says_when_it_will_be(
        monkeypatch: pytest.MonkeyPatch) -> None:
    section = views.reliability_section(reliability(observed_s=1200, score=None), T0)
    assert (section.facts, section.since) == ((), None)
    assert section.pending == ("Not measured yet: the exchange measures a node's reliability "
                               "once it has watched it for an hour (watched 20 min so far).")
    assert views.reliability_section(None, T0).pending.endswith("watched it for an hour.")
    monkeypatch.setattr(views, "MIN_OBSERVED_S", 2 * MIN_OBSERVED_S)
    assert "for 2 hours" in views.reliability_section(None, T0).pending
