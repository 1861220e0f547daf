"""A Lightning script written without bourse in mind — its own checkpoints and TensorBoard
logs in lightning_logs/, which the node keeps as an output of the job — and the one line
(with its import) that makes it resume after a preemption (docs/spot.md)."""

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
        self.net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))

    def training_step(self, batch: Any, index: int) -> torch.Tensor:
        time.sleep(self.step_sleep_s)  # stands for a bigger model
        x, y = batch
        loss = nn.functional.mse_loss(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def on_train_epoch_start(self) -> None:
        print(f"epoch {self.current_epoch} (step {self.global_step})")

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.05)


def main() -> None:
    epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    step_sleep_s = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
    L.seed_everything(0, verbose=False)
    x = torch.randn(256, 8, generator=torch.Generator().manual_seed(1))
    data = DataLoader(TensorDataset(x, x.sum(dim=1, keepdim=True)), batch_size=64)
    trainer = L.Trainer(max_epochs=epochs, enable_progress_bar=False, log_every_n_steps=1,
                        callbacks=[BourseCheckpoint()])  # the one line bourse adds
    trainer.fit(Regressor(step_sleep_s), data)
    print(f"done: {trainer.global_step} steps")


if __name__ == "__main__":
    main()
