"""One training script, run as one stage: the seed documents' single-script app.

The seed documents describe an app as one class that says where the data is, which script
trains and what hardware it needs (a ``PythonScript`` with a ``CloudCompute("a100-40gb")``).
In bourse this file is all three:

- a plain Lightning training script: ``python examples/train_single.py --epochs 5`` trains
  here, with no bourse involved;
- the app: ``TrainFlow`` runs this same file as a ``PythonScript`` stage with its Compute, so
  ``bourse run --local examples/train_single.py`` runs it as a local process and
  ``bourse run examples/train_single.py`` as a job on the exchange.

Arguments after the app file reach ``TrainFlow.run`` (as strings)::

    bourse run --local examples/train_single.py 8                  # 8 epochs
    bourse run --local examples/train_single.py 8 file:///data/pts/  # your points.npz

The data: two interleaved half-moons, generated, or ``points.npz`` (``x`` float32 (n, 2),
``y`` int64 (n,)) from a ``Data`` URI. The script writes ``model.ckpt`` and ``metrics.json`` to
its ``model`` output, checkpoints every epoch to ``BOURSE_CHECKPOINT_URI`` and, when run again
after a failure, resumes from the newest complete checkpoint.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from bourse import App, Compute, Data, Flow, PythonScript

# The stage runs this file from the project root (the directory `bourse run` was started in).
SCRIPT = os.path.relpath(__file__)


class TrainFlow(Flow):
    def __init__(self) -> None:
        # On a GPU exchange: Compute("a100-40gb", disk="100GB"). CPU here, so it runs anywhere.
        self.train = PythonScript(SCRIPT, compute=Compute("cpu"), outputs=["model"])

    def run(self, epochs: str = "5", data: str | None = None) -> dict[str, Any]:
        inputs = {"data": Data(data)} if data else {}
        trained = self.train.run(epochs=int(epochs), lr=0.05, **inputs)
        return {"model": trained.outputs["model"].uri, "checkpoints": trained.checkpoint}


app = App(TrainFlow())


# ---- the training script: what the stage runs ---------------------------------------------


def half_moons(n: int, seed: int) -> tuple[Any, Any]:
    import numpy as np

    rng = np.random.default_rng(seed)
    angle = rng.uniform(0, np.pi, n)
    label = rng.integers(0, 2, n)
    x = np.where(label[:, None] == 0,
                 np.stack([np.cos(angle), np.sin(angle)], axis=1),
                 np.stack([1 - np.cos(angle), 0.5 - np.sin(angle)], axis=1))
    x += rng.normal(0, 0.15, x.shape)
    return x.astype("float32"), label.astype("int64")


def load_points(seed: int) -> tuple[Any, Any]:
    """``points.npz`` from the ``data`` input when the stage was given one, else generated."""
    import numpy as np

    folder = os.environ.get("BOURSE_INPUT_DATA")
    if not folder:
        return half_moons(1000, seed)
    with np.load(Path(folder) / "points.npz") as points:
        return points["x"], points["y"]


def classifier(lr: float) -> Any:
    import lightning as L
    import torch
    from torch import nn

    class Classifier(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.save_hyperparameters({"lr": lr})
            self.net = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 2))

        def step(self, batch: Any, stage: str) -> torch.Tensor:
            x, y = batch
            logits = self.net(x)
            loss = nn.functional.cross_entropy(logits, y)
            self.log(f"{stage}_acc", (logits.argmax(1) == y).float().mean())
            return loss

        def training_step(self, batch: Any, _index: int) -> torch.Tensor:
            return self.step(batch, "train")

        def validation_step(self, batch: Any, _index: int) -> torch.Tensor:
            return self.step(batch, "val")

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.Adam(self.parameters(), lr=lr)

    return Classifier()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import logging
    import warnings

    import lightning as L
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from bourse.lightning import BourseCheckpoint, resume_path

    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=r".*(LeafSpec|num_workers|weights_only).*")
    L.seed_everything(args.seed, verbose=False)
    x, y = load_points(args.seed)
    cut = len(y) * 4 // 5
    train = TensorDataset(torch.from_numpy(x[:cut]), torch.from_numpy(y[:cut]))
    val = TensorDataset(torch.from_numpy(x[cut:]), torch.from_numpy(y[cut:]))
    out = Path(os.environ.get("BOURSE_OUTPUT_MODEL", "model"))
    out.mkdir(parents=True, exist_ok=True)
    trainer = L.Trainer(max_epochs=args.epochs, accelerator="auto", devices=1, logger=False,
                        enable_progress_bar=False, enable_model_summary=False,
                        enable_checkpointing=False, callbacks=[BourseCheckpoint()])
    trainer.fit(classifier(args.lr), DataLoader(train, batch_size=64, shuffle=True),
                DataLoader(val, batch_size=256), ckpt_path=resume_path())
    trainer.save_checkpoint(out / "model.ckpt")
    metrics = {k: round(float(v), 4) for k, v in trainer.callback_metrics.items()}
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2))
    print(f"trained {args.epochs} epochs on {len(train)} points: {json.dumps(metrics)}")


if __name__ == "__main__":
    main()
