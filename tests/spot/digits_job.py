"""A plain Lightning training script (sklearn digits, CPU) as a job: the only bourse lines are
the callback and ``ckpt_path=resume_path()``. Prints ``RESULT {json}`` at the end.

Usage: python digits_job.py EPOCHS STEP_SLEEP_S [track]

``track``: log the losses with Lightning's MLFlowLogger to the run bourse gives the job
(``MLFLOW_RUN_ID``, ``MLFLOW_TRACKING_URI``, ``MLFLOW_TRACKING_TOKEN``), every step.
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

from bourse.lightning import BourseCheckpoint, resume_path

logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
warnings.filterwarnings("ignore")


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
        self.log("val_loss", nn.functional.cross_entropy(logits, y))
        self.log("val_acc", (logits.argmax(1) == y).float().mean())

    def on_train_epoch_start(self) -> None:
        print(f"epoch {self.current_epoch} step {self.global_step}", flush=True)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.05)


def loaders() -> tuple[DataLoader[Any], DataLoader[Any]]:
    digits = load_digits()
    x = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    y = torch.tensor(digits.target)
    train, val = TensorDataset(x[:1400], y[:1400]), TensorDataset(x[1400:], y[1400:])
    return DataLoader(train, batch_size=100), DataLoader(val, batch_size=500)


def tracking() -> Any:
    """Lightning's MLFlowLogger on the job's run (``MLFLOW_RUN_ID``)."""
    from lightning.pytorch.loggers import MLFlowLogger

    return MLFlowLogger(run_id=os.environ["MLFLOW_RUN_ID"])


def main() -> None:
    epochs, step_sleep = int(sys.argv[1]), float(sys.argv[2])
    started = time.time()
    L.seed_everything(7, verbose=False)
    model = Digits(step_sleep)
    train, val = loaders()
    track = sys.argv[3:] == ["track"] and bool(os.environ.get("MLFLOW_RUN_ID"))
    trainer = L.Trainer(max_epochs=epochs, logger=tracking() if track else False,
                        log_every_n_steps=1,
                        enable_progress_bar=False,
                        enable_model_summary=False, enable_checkpointing=False,
                        callbacks=[BourseCheckpoint(every_n_epochs=1)])
    ckpt = resume_path()
    print(f"attempt {os.environ.get('BOURSE_ATTEMPT')} resume={os.environ.get('BOURSE_RESUME')}"
          f" from {ckpt}", flush=True)
    trainer.fit(model, train, val, ckpt_path=ckpt)
    metrics = trainer.validate(model, val, verbose=False)[0]
    print("RESULT " + json.dumps({"val_acc": metrics["val_acc"], "val_loss": metrics["val_loss"],
                                  "steps": trainer.global_step,
                                  "seconds": time.time() - started}), flush=True)


if __name__ == "__main__":
    main()
