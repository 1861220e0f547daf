"""When the agent probes again: at start, when its schedule is due, and when the hardware's
fingerprint changed (the coordinator then sends the node back through verification)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bourse.agent import daemon
from bourse.agent.daemon import Agent, AgentConfig
from bourse.agent.probe.report import ProbeOptions
from bourse.protocol.common import ProbeReport

pytestmark = pytest.mark.anyio
HARDWARE = ["f1"]  # the fingerprint the next probe measures


@pytest.fixture
def probes(monkeypatch: pytest.MonkeyPatch) -> list[ProbeReport]:
    """Every report the agent measured; each carries the fingerprint ``HARDWARE[0]``."""
    made: list[ProbeReport] = []

    def run_probe(options: ProbeOptions) -> ProbeReport:
        made.append(ProbeReport(fingerprint=HARDWARE[0], probed_at=time.time()))
        return made[-1]

    monkeypatch.setattr(daemon, "run_probe", run_probe)
    HARDWARE[0] = "f1"
    return made


def agent(tmp_path: Path, verify_every_s: float = 3600.0) -> Agent:
    return Agent(AgentConfig(server="http://127.0.0.1:9", work_dir=tmp_path / "agent",
                             name="box", verify_every_s=verify_every_s, job_users="off",
                             metrics_interval_s=0))


async def test_a_report_is_measured_at_start_and_reused_until_due(
        tmp_path: Path, probes: list[ProbeReport]) -> None:
    box = agent(tmp_path)
    first = await box.current_report()
    assert await box.current_report() is first and len(probes) == 1
    assert 3590 < box.report_due_in() <= 3600


async def test_the_schedule_measures_again(tmp_path: Path, probes: list[ProbeReport]) -> None:
    box = agent(tmp_path, verify_every_s=3600.0)
    first = await box.current_report()
    box.report = first.model_copy(update={"probed_at": time.time() - 3601})
    assert box.report_due_in() <= 0
    again = await box.current_report()
    assert again is not first and len(probes) == 2 and box.report_due_in() > 3590


async def test_a_changed_fingerprint_measures_again(tmp_path: Path,
                                                   probes: list[ProbeReport]) -> None:
    box = agent(tmp_path)
    box.fingerprint = "f1"  # what the hello said
    await box.current_report()
    HARDWARE[0] = box.fingerprint = "f2"  # a GPU was swapped; the next hello says so
    changed = await box.current_report()
    assert changed.fingerprint == "f2" and len(probes) == 2


async def test_a_restarted_agent_measures_again(tmp_path: Path,
                                                probes: list[ProbeReport]) -> None:
    await agent(tmp_path).current_report()
    await agent(tmp_path).current_report()  # the same work dir, a new process
    assert len(probes) == 2
