"""A complete PyTorch Lightning script for spot capacity (docs/spot.md): the only bourse
line is the ``BourseCheckpoint`` callback. It checkpoints to
``BOURSE_CHECKPOINT_URI`` every epoch and when told to stop (SIGTERM, through Lightning's own
signal handling; it exits 143 then), and a new attempt resumes from the newest complete
checkpoint. CPU is enough; without the exchange, point ``BOURSE_CHECKPOINT_URI`` at a folder::

    BOURSE_CHECKPOINT_URI=file:///tmp/ckpt/ python examples/spot_lightning.py 10

On the exchange: ``bourse run --spot only python examples/spot_lightning.py 10``.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from bourse.lightning import BourseCheckpoint


class Regressor(L.LightningModule):
    def __init__(self, step_sleep_s: float = 0.0) -> None:
        super().__init__()
        self.step_sleep_s = step_sleep_s
        self.net = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 1))

    def training_step(self, batch: Any, index: int) -> torch.Tensor:
        time.sleep(self.step_sleep_s)  # stands for a bigger model
        x, y = batch
        return nn.functional.mse_loss(self.net(x), y)

    def validation_step(self, batch: Any, index: int) -> None:
        x, y = batch
        self.log("val_loss", nn.functional.mse_loss(self.net(x), y))

    def on_train_epoch_start(self) -> None:
        print(f"epoch {self.current_epoch} (step {self.global_step})", flush=True)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.05)


def data(seed: int) -> DataLoader[Any]:
    x = torch.randn(1024, 8, generator=torch.Generator().manual_seed(seed))
    return DataLoader(TensorDataset(x, x.sum(dim=1, keepdim=True)), batch_size=64)


def main() -> None:
    epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    step_sleep_s = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
    L.seed_everything(0, verbose=False)
    trainer = L.Trainer(max_epochs=epochs, logger=False, enable_progress_bar=False,
                        enable_checkpointing=False,  # BourseCheckpoint does it, to the store
                        callbacks=[BourseCheckpoint(every_n_epochs=1)])
    # a new attempt resumes: the callback hands fit the newest complete checkpoint
    trainer.fit(Regressor(step_sleep_s), data(1), data(2))
    print(f"done: {trainer.global_step} steps, val_loss "
          f"{float(trainer.callback_metrics['val_loss']):.4f}", flush=True)


if __name__ == "__main__":
    main()
