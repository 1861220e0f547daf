"""The digits training of tests/spot/digits_job.py on any number of nodes: one CPU process per
node, DDP across a gang (``NNODES`` > 1), the global batch kept whatever the world size
(what ``per_device_batch`` computes), checkpointed with ``BourseCheckpoint`` so that a burst
from one process to a gang (or back) resumes. Prints ``RESULT {json}`` on rank 0 at the end.

Usage: python digits_elastic.py EPOCHS STEP_SLEEP_S [track]

``track``: log ``train_loss`` every step (and the validation) with Lightning's
``MLFlowLogger`` to the run bourse gives the job (``MLFLOW_RUN_ID``), when there is one.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import warnings
from typing import Any

import lightning as L
import torch
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from bourse.lightning import BourseCheckpoint

logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
warnings.filterwarnings("ignore")
GLOBAL_BATCH = 100


class Digits(L.LightningModule):
    def __init__(self, step_sleep: float) -> None:
        super().__init__()
        self.step_sleep = step_sleep
        self.net = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))

    def training_step(self, batch: Any, _index: int) -> torch.Tensor:
        time.sleep(self.step_sleep)  # stands for a bigger model
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)  # every step: the run's curve across moves
        return loss

    def validation_step(self, batch: Any, _index: int) -> None:
        x, y = batch
        logits = self.net(x)
        self.log("val_acc", (logits.argmax(1) == y).float().mean(), sync_dist=True)

    def on_train_epoch_start(self) -> None:
        if self.trainer.is_global_zero:
            print(f"epoch {self.current_epoch} step {self.global_step} "
                  f"world {self.trainer.world_size}", flush=True)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.05)


def tracking() -> Any:
    """Lightning's MLFlowLogger on the job's run, when asked and there is one (rank 0
    logs; a local run before its hand-over has no run)."""
    if sys.argv[3:] != ["track"] or not os.environ.get("MLFLOW_RUN_ID"):
        return False
    from lightning.pytorch.loggers import MLFlowLogger

    return MLFlowLogger(run_id=os.environ["MLFLOW_RUN_ID"])


def main() -> None:
    epochs, step_sleep = int(sys.argv[1]), float(sys.argv[2])
    nodes = int(os.environ.get("NNODES", "1"))
    L.seed_everything(7, verbose=False)
    digits = load_digits()
    x = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    y = torch.tensor(digits.target)
    batch = GLOBAL_BATCH // nodes  # the global batch kept (bourse.lightning.per_device_batch)
    train = DataLoader(TensorDataset(x[:1400], y[:1400]), batch_size=batch)
    val = DataLoader(TensorDataset(x[1400:], y[1400:]), batch_size=500)
    trainer = L.Trainer(accelerator="cpu", devices=1, num_nodes=nodes,
                        strategy="ddp" if nodes > 1 else "auto", max_epochs=epochs,
                        logger=tracking(), log_every_n_steps=1,
                        enable_progress_bar=False, enable_model_summary=False,
                        enable_checkpointing=False, callbacks=[BourseCheckpoint(every_n_epochs=1)])
    trainer.fit(Digits(step_sleep), train, val)
    metrics = trainer.callback_metrics  # the last epoch's validation
    if trainer.is_global_zero:
        print("RESULT " + json.dumps({"val_acc": float(metrics["val_acc"]),
                                      "steps": trainer.global_step, "world": nodes}),
              flush=True)


if __name__ == "__main__":
    main()
