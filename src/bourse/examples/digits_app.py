"""The demo: a three-stage app on scikit-learn's handwritten digits (ships offline).

    prepare (CPU)   split and normalise the data, write shards          -> output "shards"
    train           a PyTorch Lightning MLP, checkpoints every epoch     -> output "model"
    evaluate        load the model, measure test accuracy, write a report -> output "report"

Each stage declares its own compute; the data flows by value (``prepare``'s output is
``train``'s input). Run it with ``bourse run examples/digits_app.py`` (on an exchange) or
``bourse run --local examples/digits_app.py`` (every stage a local process).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bourse import App, Compute, Flow, Work


class Prepare(Work):
    """Split the 1,797 8x8 digit images 60/20/20, scale pixels to [0, 1], write .npz shards."""

    outputs = ("shards",)

    def run(self, seed: int = 0) -> dict[str, Any]:
        import hashlib

        import numpy as np
        from sklearn.datasets import load_digits

        digits = load_digits()
        x = (digits.data / 16.0).astype("float32")
        y = digits.target.astype("int64")
        order = np.random.default_rng(seed).permutation(len(y))
        cut = [int(len(y) * 0.6), int(len(y) * 0.8)]
        sizes, digest = {}, hashlib.sha256()
        for name, part in zip(("train", "val", "test"), np.split(order, cut), strict=True):
            np.savez(self.outputs["shards"] / f"{name}.npz", x=x[part], y=y[part])
            sizes[name] = len(part)
            digest.update(x[part].tobytes() + y[part].tobytes())
        print(f"wrote shards: {sizes}, sha256 {digest.hexdigest()[:16]}")
        return {"sizes": sizes, "sha256": digest.hexdigest()}


class Train(Work):
    """A small MLP trained with PyTorch Lightning; a checkpoint per epoch to the job's
    checkpoint URI, the final weights to the "model" output."""

    outputs = ("model",)

    def run(self, shards: Path, epochs: int = 8, lr: float = 3e-3, seed: int = 0) -> dict[str, Any]:
        import lightning as L
        from digits_model import DigitsData, DigitsMLP

        from bourse.lightning import BourseCheckpoint

        L.seed_everything(seed, workers=True)
        model, data = DigitsMLP(lr=lr), DigitsData(shards)
        trainer = L.Trainer(max_epochs=epochs, accelerator="cpu", logger=False,
                            enable_progress_bar=False, enable_model_summary=False,
                            callbacks=[BourseCheckpoint(self.checkpoint)],
                            default_root_dir=self.outputs["model"] / "lightning")
        trainer.fit(model, datamodule=data)
        trainer.save_checkpoint(self.outputs["model"] / "model.ckpt")
        metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
        print(f"trained {epochs} epochs: {json.dumps(metrics)}")
        return metrics


class Evaluate(Work):
    """Test accuracy of the trained model, written as a JSON report."""

    outputs = ("report",)

    def run(self, shards: Path, model: Path) -> dict[str, Any]:
        import lightning as L
        from digits_model import DigitsData, DigitsMLP

        trained = DigitsMLP.load_from_checkpoint(model / "model.ckpt")
        trainer = L.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False,
                            enable_model_summary=False)
        [scores] = trainer.test(trained, datamodule=DigitsData(shards), verbose=False)
        report = {"test_accuracy": float(scores["test_acc"]), "test_loss":
                  float(scores["test_loss"]), "samples": len(DigitsData(shards).part("test"))}
        (self.outputs["report"] / "report.json").write_text(json.dumps(report, indent=2))
        print(f"test accuracy: {report['test_accuracy']:.4f}")
        return report


class DigitsFlow(Flow):
    def __init__(self) -> None:
        self.prepare = Prepare(compute=Compute("cpu"))
        self.train = Train(compute=Compute("cpu", cpus=1))  # on a GPU exchange: Compute("t4")
        self.evaluate = Evaluate(compute=Compute("cpu"))

    def run(self, epochs: int | str = 8) -> dict[str, Any]:  # bourse run digits_app.py -- 3
        prepared = self.prepare.run(seed=0)
        trained = self.train.run(shards=prepared.outputs["shards"], epochs=int(epochs))
        report = self.evaluate.run(shards=prepared.outputs["shards"],
                                   model=trained.outputs["model"])
        return {**report.value, "shards_sha256": prepared.value["sha256"]}


app = App(DigitsFlow())
