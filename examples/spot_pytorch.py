"""A plain PyTorch training script that follows the checkpoint contract (docs/spot.md): it
saves to ``BOURSE_CHECKPOINT_URI`` every ``SAVE_EVERY`` steps and when told to stop
(SIGTERM), exits 143 then, and resumes from the newest complete checkpoint when it runs again.
Runs anywhere torch does (CPU is enough); without the exchange, point
``BOURSE_CHECKPOINT_URI`` at a folder::

    BOURSE_CHECKPOINT_URI=file:///tmp/ckpt/ python examples/spot_pytorch.py 2000

On the exchange: ``bourse run --spot only python examples/spot_pytorch.py 2000``.
"""

from __future__ import annotations

import asyncio
import io
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

from bourse.storage.checkpoint import latest_complete, save_checkpoint
from bourse.storage.remote import Stores
from bourse.storage.settings import StoreSettings

SAVE_EVERY = 50  # steps
URI = os.environ["BOURSE_CHECKPOINT_URI"]  # the same for every attempt of the job
stores = Stores(StoreSettings.from_env(os.environ))  # the job's scoped key, from AWS_*
stop: list[int] = []
signal.signal(signal.SIGTERM, lambda signum, frame: stop.append(signum))

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x = torch.randn(512, 8)
y = x.sum(dim=1, keepdim=True)


def save(step: int) -> None:
    """Files first, then the marker: a checkpoint cut short is never the newest."""
    with tempfile.TemporaryDirectory() as tmp:
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step},
                   Path(tmp) / "state.pt")
        asyncio.run(save_checkpoint(stores, Path(tmp), URI, step=step))
    print(f"saved step {step}", flush=True)


def restore() -> int:
    """The step to go on from: the newest complete checkpoint's, or 0 on a first attempt."""
    latest = asyncio.run(latest_complete(stores, URI))
    if latest is None:
        return 0
    data = asyncio.run(stores(latest.uri).get(latest.uri.join("state.pt").key))
    state = torch.load(io.BytesIO(bytes(data)))
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    return int(state["step"])


def train_one_step() -> float:
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    time.sleep(float(os.environ.get("STEP_SLEEP_S", "0")))  # stands for a bigger model
    return float(loss)


def main() -> None:
    total_steps = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    step = restore()
    print(f"attempt {os.environ.get('BOURSE_ATTEMPT', '1')} starts at step {step}", flush=True)
    loss = float("nan")
    while step < total_steps:
        loss = train_one_step()
        step += 1
        if stop:  # the node is being reclaimed: save, then leave at once
            save(step)
            os._exit(143)  # not sys.exit: skips the interpreter's teardown (about 1 s with torch)
        if step % SAVE_EVERY == 0:
            save(step)
    print(f"done at step {step}, loss {loss:.4f}", flush=True)


if __name__ == "__main__":
    main()
