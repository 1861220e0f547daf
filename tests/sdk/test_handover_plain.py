"""A plain PyTorch-style loop (no Lightning) handing itself over with ``handover.Watch``: asked
by ``bourse burst --here``'s request, it saves a complete checkpoint, says where and at which
step, and exits 143; inside an exchange job the watch is inert."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import bourse
from bourse.core.compute import Compute
from bourse.core.errors import InvalidInput
from bourse.sdk import handover

SRC = str(Path(bourse.__file__).parent.parent)
LOOP = f"""\
import asyncio, os, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, {SRC!r})
from bourse.sdk.handover import Watch
from bourse.storage.checkpoint import save_checkpoint
from bourse.storage.remote import Stores
from bourse.storage.settings import StoreSettings

URI = os.environ["BOURSE_CHECKPOINT_URI"]
stores, watch = Stores(StoreSettings.from_env(os.environ)), Watch()
for step in range(1, 100000):
    time.sleep(0.01)  # one training step
    if watch.asked():
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "state").write_text(str(step))
            asyncio.run(save_checkpoint(stores, Path(tmp), URI, step=step))
        watch.handed(URI, step)
        sys.exit(143)
"""


def test_a_plain_loop_saves_says_where_and_exits(tmp_path: Path) -> None:
    control, ckpt = tmp_path / "control", (tmp_path / "ckpt").as_uri() + "/"
    env = {**os.environ, "BOURSE_BURST_DIR": str(control), "BOURSE_CHECKPOINT_URI": ckpt}
    env.pop("BOURSE_JOB_ID", None)
    script = tmp_path / "train.py"
    script.write_text(LOOP)
    run = subprocess.Popen([sys.executable, str(script), "--lr", "0.1"], env=env,
                           cwd=tmp_path)
    try:
        handover.request(control, Compute(cpus=2), "test")
        handed = handover.wait_handed(control, 30)
        assert run.wait(timeout=30) == 143
    finally:
        run.kill()
    assert handed.checkpoint == ckpt and handed.step > 0
    assert handed.argv == [str(script), "--lr", "0.1"] and handed.cwd == str(tmp_path)
    assert handover.requested(control) is None  # answered: the request is done with
    saved = tmp_path / "ckpt" / f"step-{handed.step:012d}" / "state"
    assert saved.read_text() == str(handed.step)
    with pytest.raises(InvalidInput, match="which a node cannot read"):
        handover.job_spec(handed, Compute(cpus=2), None)  # file://: not for a node


def test_in_an_exchange_job_the_watch_is_inert(tmp_path: Path) -> None:
    handover.request(tmp_path / ".bourse" / "burst", None, "test")
    assert handover.Watch({}, tmp_path).asked()
    inert = handover.Watch({"BOURSE_JOB_ID": "j-1"}, tmp_path)
    assert not inert.asked()
    with pytest.raises(InvalidInput, match="through its notice"):
        inert.handed("s3://b/p/", 1)
