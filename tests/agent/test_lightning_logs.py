"""Real, tiny Lightning runs (CPU, a few steps) as jobs of the runtime with the data plane's
hooks over a ``file://`` store: the ``lightning_logs/`` a script that knows nothing of bourse
leaves is kept however the attempt ends, and the next attempt resumes — with the one line of
docs/spot.md (``examples/plain_lightning.py``: the ``BourseCheckpoint`` callback, after a
preemption's SIGTERM), or with ``ckpt_path=resume_path()`` from Lightning's own checkpoint
(after a failure)."""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from agent_harness import Agent

from bourse.agent.data import NodeData
from bourse.lightning.logs import newest
from bourse.protocol.agent import DataPlan, StoreAccess
from bourse.storage.store import ObjectInfo

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "plain_lightning.py"
DOC = ROOT / "docs" / "spot.md"
WAIT_S = 120.0  # a Lightning process on a loaded 2-core machine
RETRIED = """\
import sys
sys.path.insert(0, sys.argv[3])
from plain_lightning import DataLoader, L, Regressor, TensorDataset, torch
from bourse.lightning import resume_path

L.seed_everything(0, verbose=False)
x = torch.randn(256, 8)
data = DataLoader(TensorDataset(x, x.sum(dim=1, keepdim=True)), batch_size=64)
trainer = L.Trainer(max_epochs=int(sys.argv[1]), enable_progress_bar=False)
trainer.fit(Regressor(), data, ckpt_path=resume_path())  # None on a first attempt
print(f"done: {trainer.global_step} steps")
sys.exit(int(sys.argv[2]))  # say, the evaluation after training failed
"""


def test_the_page_shows_the_example_as_it_is() -> None:
    text = EXAMPLE.read_text()
    code = text[text.index('"""', 3) + 3:].lstrip("\n")
    assert f"```python\n# examples/plain_lightning.py\n{code}```\n" in DOC.read_text()


@pytest.mark.parametrize(("key", "rank"), [
    ("2/version_0/checkpoints/epoch=0-step=4.ckpt", 3),  # the latest attempt wins
    ("1/version_0/checkpoints/epoch=9-step=40.ckpt", 1),
    ("1/version_0/checkpoints/last.ckpt", 2),  # save_last: newer than any named one
    ("1/version_0/checkpoints/epoch=1-step=8.ckpt", 0),
    ("2/version_0/events.out.tfevents.1", None),  # not a checkpoint
])
def test_the_newest_checkpoint_lightning_saved(key: str, rank: int | None) -> None:
    prefix = "jobs/j/lightning_logs/"
    objects = [ObjectInfo(prefix + k, 1, "") for k in (
        "2/version_0/checkpoints/epoch=0-step=4.ckpt",
        "1/version_0/checkpoints/epoch=9-step=40.ckpt", "1/version_0/checkpoints/last.ckpt",
        "1/version_0/checkpoints/epoch=1-step=8.ckpt", "2/version_0/events.out.tfevents.1")]
    ordered = []
    while (found := newest(prefix, objects)) is not None:
        ordered.append(found.key.removeprefix(prefix))
        objects.remove(found)
    assert (len(ordered) - 1 - ordered.index(key) if key in ordered else None) == rank


def plan(store: Path) -> DataPlan:
    access = StoreAccess(access_key_id="AKTEST", secret_access_key="not-a-secret",
                         expires_at=time.time() + 3600)
    return DataPlan(store=access, checkpoint=f"{store.as_uri()}/jobs/j/checkpoints/",
                    lightning_logs=f"{store.as_uri()}/jobs/j/lightning_logs/")


@pytest.fixture
def agent(agent_factory: Callable[..., Agent], tmp_path: Path) -> Agent:
    return agent_factory(hooks=NodeData(tmp_path / "cache", 1 << 30))


def stdout(agent: Agent, attempt: int) -> str:
    return agent.coordinator.stream("j", "stdout", attempt).decode()


def kept(store: Path, attempt: int, pattern: str) -> list[str]:
    top = store / "jobs" / "j" / "lightning_logs" / str(attempt)
    return sorted(str(p.relative_to(top)) for p in top.rglob(pattern))


async def run(agent: Agent, attempt: int, command: list[str], store: Path) -> dict[str, object]:
    await agent.start("j", command, attempt=attempt, data=plan(store))
    await agent.coordinator.until(agent.coordinator.exited("j", attempt), WAIT_S)
    exited = agent.coordinator.event("j", "exited", attempt)
    assert exited is not None
    return dict(exited["data"])


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:.*LeafSpec.*")
async def test_a_preempted_plain_lightning_script_resumes_with_the_one_line(
        agent: Agent, tmp_path: Path) -> None:
    store, c = tmp_path / "store", agent.coordinator
    await agent.start("j", [sys.executable, str(EXAMPLE), "6", "0.05"], data=plan(store))
    await c.until(lambda: "epoch 1 " in stdout(agent, 1), WAIT_S)  # printed as it happened
    await agent.runtime.cancel("j", 1, grace_s=WAIT_S, reason="preempted: node reclaimed")
    await c.until(c.exited("j"), WAIT_S)
    first = c.event("j", "exited")
    assert first is not None and first["data"]["exit_code"] == 143, stdout(agent, 1)
    assert first["data"]["kept"] == {"lightning_logs": plan(store).lightning_logs}
    assert kept(store, 1, "events.out.tfevents.*") and kept(store, 1, "hparams.yaml")
    assert kept(store, 1, "*.ckpt")  # Lightning's own, from the epochs it finished
    imported = {m[0] for batch in c.tracks for m in batch.metrics}  # agent.tensorboard
    assert imported and all(batch.attempt == 1 for batch in c.tracks), imported

    second = await run(agent, 2, [sys.executable, str(EXAMPLE), "3"], store)
    assert second["exit_code"] == 0, stdout(agent, 2)
    assert "bourse: resuming from the newest complete checkpoint" in stdout(agent, 2)
    assert "epoch 0 " not in stdout(agent, 2)  # not from scratch
    assert "done: 12 steps" in stdout(agent, 2)  # 3 epochs of 4 batches, none repeated
    assert kept(store, 2, "*.ckpt") == ["version_0/checkpoints/epoch=2-step=12.ckpt"]


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:.*LeafSpec.*")
async def test_a_failed_attempt_s_own_checkpoint_is_resumed_by_resume_path(
        agent: Agent, tmp_path: Path) -> None:
    store = tmp_path / "store"
    command = [sys.executable, "-c", RETRIED]
    first = await run(agent, 1, [*command, "2", "1", str(EXAMPLE.parent)], store)
    assert first["exit_code"] == 1, stdout(agent, 1)
    assert "done: 8 steps" in stdout(agent, 1)
    assert kept(store, 1, "*.ckpt") == ["version_0/checkpoints/epoch=1-step=8.ckpt"]

    second = await run(agent, 2, [*command, "4", "0", str(EXAMPLE.parent)], store)
    assert second["exit_code"] == 0, stdout(agent, 2)
    epochs = re.findall(r"^epoch (\d+) \(step (\d+)\)$", stdout(agent, 2), re.MULTILINE)
    assert epochs == [("2", "8"), ("3", "12")]  # on from attempt 1's last checkpoint
    assert "done: 16 steps" in stdout(agent, 2)
