"""A Lightning DDP run across a gang that checkpoints every epoch with ``BourseCheckpoint``
and resumes with ``ckpt_path=resume_path()`` — the only bourse lines. Every rank prints
``resume=<where from>`` first; rank 0 prints ``epoch N step S`` as each epoch starts; at the
end every rank prints ``RESULT rank=<r> world=<w> steps=<global step> <parameter sha256>``.

Usage: python resume_ddp.py EPOCHS STEP_SLEEP_S
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import time
import warnings
from typing import Any

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from bourse.lightning import BourseCheckpoint, resume_path

logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
warnings.filterwarnings("ignore")


class Regressor(L.LightningModule):
    def __init__(self, step_sleep: float) -> None:
        super().__init__()
        self.step_sleep = step_sleep
        self.net = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))

    def training_step(self, batch: Any, _index: int) -> torch.Tensor:
        time.sleep(self.step_sleep)  # stands for a bigger model
        x, y = batch
        return nn.functional.mse_loss(self.net(x), y)

    def on_train_epoch_start(self) -> None:
        if self.trainer.is_global_zero:
            print(f"epoch {self.current_epoch} step {self.global_step}", flush=True)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.05)


def data() -> DataLoader[Any]:
    x = torch.randn(256, 8, generator=torch.Generator().manual_seed(1))
    return DataLoader(TensorDataset(x, torch.sin(x).sum(dim=1, keepdim=True)), batch_size=16)


def main() -> None:
    epochs, step_sleep = int(sys.argv[1]), float(sys.argv[2])
    L.seed_everything(0, verbose=False)
    trainer = L.Trainer(accelerator="cpu", devices=1, num_nodes=int(os.environ["NNODES"]),
                        strategy="ddp", max_epochs=epochs, logger=False,
                        enable_progress_bar=False, enable_model_summary=False,
                        enable_checkpointing=False, callbacks=[BourseCheckpoint()])
    ckpt = resume_path()
    print(f"resume={ckpt or 'none'}", flush=True)
    model = Regressor(step_sleep)
    trainer.fit(model, data(), ckpt_path=ckpt)
    digest = hashlib.sha256(b"".join(t.detach().numpy().tobytes()
                                     for t in model.state_dict().values())).hexdigest()
    print(f"RESULT rank={trainer.global_rank} world={trainer.world_size} "
          f"steps={trainer.global_step} {digest}", flush=True)


if __name__ == "__main__":
    main()
