"""The digits model and data module used by ``digits_app.py`` (plain Lightning code)."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

# Lightning's banners and tips would drown the demo's own output.
logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
warnings.filterwarnings("ignore", message=r".*(LeafSpec|weights_only|num_workers).*")


class DigitsMLP(L.LightningModule):
    def __init__(self, lr: float = 3e-3, hidden: int = 128) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Dropout(0.1),
                                 nn.Linear(hidden, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def _step(self, batch: Any, stage: str) -> torch.Tensor:
        x, y = batch
        logits = self(x)
        loss = nn.functional.cross_entropy(logits, y)
        acc = (logits.argmax(dim=1) == y).float().mean()
        self.log(f"{stage}_loss", loss, prog_bar=False)
        self.log(f"{stage}_acc", acc, prog_bar=False)
        return loss

    def training_step(self, batch: Any, _index: int) -> torch.Tensor:
        return self._step(batch, "train")

    def validation_step(self, batch: Any, _index: int) -> torch.Tensor:
        return self._step(batch, "val")

    def test_step(self, batch: Any, _index: int) -> torch.Tensor:
        return self._step(batch, "test")

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.hparams["lr"])


class DigitsData(L.LightningDataModule):
    def __init__(self, shards: Path, batch_size: int = 64) -> None:
        super().__init__()
        self.shards, self.batch_size = Path(shards), batch_size

    def part(self, name: str) -> TensorDataset:
        with np.load(self.shards / f"{name}.npz") as arrays:
            return TensorDataset(torch.from_numpy(arrays["x"]), torch.from_numpy(arrays["y"]))

    def train_dataloader(self) -> DataLoader[Any]:
        return DataLoader(self.part("train"), batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader[Any]:
        return DataLoader(self.part("val"), batch_size=256)

    def test_dataloader(self) -> DataLoader[Any]:
        return DataLoader(self.part("test"), batch_size=256)
