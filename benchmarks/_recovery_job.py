"""The job benchmarks/recovery.py preempts: a small real PyTorch (CPU) training loop that
follows the checkpoint contract (docs/spot.md, plain PyTorch) and prints the time of each of
its phases as ``PHASE <name> <unix time>``:

- ``started``: the first line the interpreter runs (before any import);
- ``imported``: torch and bourse imported;
- ``setup``: model and optimizer built (torch's own first-use costs: the first optimizer
  imports ``torch._dynamo``, about 1.3 s here);
- ``found``: the newest complete checkpoint's marker read (store client made, markers listed,
  the newest marker read; a resumed attempt only);
- ``downloaded``: its file fetched (a resumed attempt only);
- ``restored``: model and optimizer state loaded (a resumed attempt only);
- ``loop``: the first training step of this attempt done: the loop runs (again);
- ``saved``: a checkpoint complete (files, then marker), every SAVE_EVERY steps and on SIGTERM;
- ``sigterm``: the notice arrived. After its last checkpoint the job leaves with
  ``os._exit(143)``, as docs/spot.md advises: the interpreter's teardown of torch would hold
  the attempt open for another second.

Usage: python _recovery_job.py  (BOURSE_CHECKPOINT_URI set by the exchange)
"""

from __future__ import annotations

import time

print(f"PHASE started {time.time():.6f}", flush=True)

import asyncio  # noqa: E402
import io  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402
from torch import nn  # noqa: E402

from bourse.storage.checkpoint import latest_complete, save_checkpoint  # noqa: E402
from bourse.storage.remote import Stores  # noqa: E402
from bourse.storage.settings import StoreSettings  # noqa: E402

WIDTH = 1024  # two 256x1024 layers and SGD momentum: a checkpoint of about 4 MB
SAVE_EVERY = 40  # steps (about 2 s)
STEP_SLEEP_S = 0.05  # stands for a bigger model
MAX_STEPS = 100_000  # runs until stopped


def phase(name: str, extra: str = "", at: float | None = None) -> None:
    print(f"PHASE {name} {time.time() if at is None else at:.6f} {extra}".rstrip(), flush=True)


class Trainer:
    def __init__(self) -> None:
        torch.manual_seed(7)
        self.model = nn.Sequential(nn.Linear(256, WIDTH), nn.ReLU(), nn.Linear(WIDTH, 256))
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        self.x, self.y = torch.randn(64, 256), torch.randn(64, 256)
        phase("setup")
        self.uri = os.environ["BOURSE_CHECKPOINT_URI"]
        self.stores = Stores(StoreSettings.from_env(os.environ))
        self.step = 0

    def train_step(self) -> None:
        self.opt.zero_grad()
        nn.functional.mse_loss(self.model(self.x), self.y).backward()
        self.opt.step()
        self.step += 1
        time.sleep(STEP_SLEEP_S)

    def save(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "state.pt"
            torch.save({"model": self.model.state_dict(), "opt": self.opt.state_dict(),
                        "step": self.step}, path)
            asyncio.run(save_checkpoint(self.stores, Path(tmp), self.uri, step=self.step))
            phase("saved", f"step={self.step} bytes={path.stat().st_size}")

    def restore(self) -> None:
        latest = asyncio.run(latest_complete(self.stores, self.uri))
        if latest is None:
            return
        phase("found", f"step={latest.step}")
        data = bytes(asyncio.run(self.stores(latest.uri).get(latest.uri.join("state.pt").key)))
        phase("downloaded", f"bytes={len(data)}")
        state = torch.load(io.BytesIO(data))
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["opt"])
        self.step = int(state["step"])
        phase("restored", f"step={self.step}")


def main() -> None:
    stop: list[float] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(time.time()))
    phase("imported")
    trainer = Trainer()
    trainer.restore()
    trainer.train_step()
    phase("loop", f"step={trainer.step}")
    while trainer.step < MAX_STEPS:
        if stop:
            phase("sigterm", at=stop[0])
            trainer.save()
            os._exit(143)  # saved: no teardown (stdout is flushed line by line)
        if trainer.step % SAVE_EVERY == 0:
            trainer.save()
        trainer.train_step()


if __name__ == "__main__":
    main()
