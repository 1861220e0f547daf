"""Where `bourse agent` keeps its state when not told: a root agent in a system directory job
users can reach, unless it already enrolled in the old default."""

from __future__ import annotations

from pathlib import Path

from bourse.agent.isolation import unreachable
from bourse.cli.agent import ROOT_WORK_DIR, default_work_dir


def test_an_unprivileged_agent_works_in_its_home(tmp_path: Path) -> None:
    assert default_work_dir(1000, tmp_path) == tmp_path / ".bourse" / "agent"


def test_a_root_agent_works_where_job_users_can_reach(tmp_path: Path) -> None:
    assert default_work_dir(0, tmp_path) == ROOT_WORK_DIR == Path("/var/lib/bourse/agent")
    assert unreachable(ROOT_WORK_DIR.parent.parent) is None  # /var/lib: others may enter


def test_a_root_agent_already_enrolled_in_its_home_stays_there(tmp_path: Path) -> None:
    personal = tmp_path / ".bourse" / "agent"
    personal.mkdir(parents=True)
    (personal / "node.json").write_text("{}")

    assert default_work_dir(0, tmp_path) == personal
