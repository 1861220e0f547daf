"""A tiny Lightning model trained with DDP across the nodes of a gang, one CPU process each.

Run the same command on every node; it reads only what bourse sets: NNODES (and, through
Lightning, MASTER_ADDR, MASTER_PORT and NODE_RANK; GLOO_SOCKET_IFNAME through gloo). Each rank
trains on its own shard of the data (Lightning adds a DistributedSampler), so the ranks end with
the same parameters only if DDP really averaged their gradients. At the end every rank prints

    CHECKSUM rank=<global rank> world=<world size> <sha256 of its parameters>

and, given a folder as its first argument, writes that line to <folder>/checksum-<rank>.txt.
A second argument sets the number of steps (60 by default: a second or two; more leaves time to
cut a link in the middle of training).
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path
from typing import Any

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

STEPS = 60
SAMPLES, BATCH = 512, 16


class Regressor(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))

    def training_step(self, batch: Any, _index: int) -> torch.Tensor:
        x, y = batch
        return nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.05)


def dataset() -> TensorDataset:
    x = torch.randn(SAMPLES, 8, generator=torch.Generator().manual_seed(1))
    return TensorDataset(x, torch.sin(x).sum(dim=1, keepdim=True))


def checksum(model: nn.Module) -> str:
    digest = hashlib.sha256()
    for tensor in model.state_dict().values():
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def report(trainer: L.Trainer, model: nn.Module, folder: str | None) -> None:
    line = f"CHECKSUM rank={trainer.global_rank} world={trainer.world_size} {checksum(model)}"
    print(line, flush=True)
    if folder is not None:
        Path(folder, f"checksum-{trainer.global_rank}.txt").write_text(line + "\n")


def main() -> None:
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else STEPS
    L.seed_everything(0, verbose=False)
    trainer = L.Trainer(accelerator="cpu", devices=1, num_nodes=int(os.environ["NNODES"]),
                        strategy="ddp", max_steps=steps, logger=False,
                        enable_progress_bar=False, enable_model_summary=False,
                        enable_checkpointing=False)
    model = Regressor()
    trainer.fit(model, DataLoader(dataset(), batch_size=BATCH, shuffle=True))
    report(trainer, model, sys.argv[1] if len(sys.argv) > 1 else None)


if __name__ == "__main__":
    main()
