"""A task file through the real `bourse` command on the real local exchange (the app tests'
session exchange, shared rather than started again): setup's export and its ~/.bashrc line
reach run, a flag overrides the file, the workdir is the code; and a dry run names a live
node's offer and submits nothing."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from exchange_harness import ExchangeUnderTest

pytestmark = pytest.mark.slow
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tasks"

TASK = """\
name: task-file-e2e
resources: {cpus: 1}
setup: |
  export FROM_SETUP=1
  echo 'export FROM_BASHRC=2' >> ~/.bashrc
run: |
  echo "epochs=$EPOCHS setup=$FROM_SETUP bashrc=$FROM_BASHRC rank=$NODE_RANK of $NNODES"
  cat data.txt
env: {EPOCHS: 3}
workdir: code
max_retries: 0
"""


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "code").mkdir(parents=True)
    (root / "code" / "data.txt").write_text("from the bundle\n")
    (root / "task.yaml").write_text(textwrap.dedent(TASK))
    return root


@pytest.fixture
def bashrc() -> Iterator[Path]:
    """The ~/.bashrc the local agents' jobs see (they run as this user, with its home), put
    back as it was after the test: the task's setup appends to it."""
    path = Path.home() / ".bashrc"
    before = path.read_bytes() if path.exists() else None
    try:
        yield path
    finally:
        if before is None:
            path.unlink(missing_ok=True)
        else:
            path.write_bytes(before)


def test_a_task_file_runs_as_its_job(exchange: ExchangeUnderTest, tmp_path: Path,
                                     bashrc: Path) -> None:
    root = _project(tmp_path)
    done = exchange.cli("run", "task.yaml", "--env", "EPOCHS=7", cwd=root)
    assert done.returncode == 0, done.stderr
    assert "epochs=7 setup=1 bashrc=2 rank=0 of 1\nfrom the bundle\n" in done.stdout
    assert "code: 1 files" in done.stderr


def test_a_dry_run_names_a_live_offer_and_submits_nothing(
        exchange: ExchangeUnderTest, tmp_path: Path) -> None:
    root = _project(tmp_path)
    before = len(exchange.jobs())
    done = exchange.cli("run", "--dry-run", "--json", "task.yaml", cwd=root)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert (plan["source"], plan["submitted"]) == ("exchange", False)
    assert plan["would_take"]["node_id"] and plan["would_take"]["price_per_hour"] >= 0
    assert plan["code"]["files"] == 1
    assert len(exchange.jobs()) == before


def test_a_real_dstack_task_runs_as_it_is(exchange: ExchangeUnderTest, tmp_path: Path) -> None:
    """dstack's own example (tests/fixtures/tasks/dstack/airflow-task.dstack.yml), unchanged:
    its commands run one after the other, as dstack runs them."""
    fixture = FIXTURES / "dstack" / "airflow-task.dstack.yml"
    (tmp_path / fixture.name).write_bytes(fixture.read_bytes())
    done = exchange.cli("run", fixture.name, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-2:] == ["Running dstack task via Airflow", "Finished"]
