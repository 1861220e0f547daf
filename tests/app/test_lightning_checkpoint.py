"""``bourse.lightning.BourseCheckpoint``: a complete checkpoint per epoch under the job's
checkpoint URI, and ``resume_path`` downloading the newest one — with a real Lightning trainer
on a ``file://`` prefix, as a local-mode stage has."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.slow,
              # lightning 2.6 on torch 2.13: not ours to fix
              pytest.mark.filterwarnings("ignore:.*LeafSpec.*")]

EPOCHS, BATCHES = 3, 2


def fit(uri: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *,
        epochs: int = EPOCHS, ckpt_path: str | None = None, resume: bool = True) -> Any:
    import lightning as L
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    from bourse.lightning import BourseCheckpoint

    class Line(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.line = nn.Linear(2, 1)

        def training_step(self, batch: Any, _index: int) -> torch.Tensor:
            x, y = batch
            return nn.functional.mse_loss(self.line(x), y)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    monkeypatch.chdir(tmp_path)
    callback = BourseCheckpoint(uri, resume=resume)
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(8, 2), torch.randn(8, 1))
    trainer = L.Trainer(max_epochs=epochs, logger=False, enable_progress_bar=False,
                        enable_model_summary=False, enable_checkpointing=False,
                        callbacks=[callback])
    trainer.fit(Line(), DataLoader(data, batch_size=8 // BATCHES), ckpt_path=ckpt_path)
    return callback


def test_a_complete_checkpoint_per_epoch_and_resume_finds_the_last(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bourse.lightning import resume_path

    prefix = tmp_path / "checkpoints"
    monkeypatch.setenv("BOURSE_CHECKPOINT_URI", prefix.as_uri() + "/")

    fit(None, tmp_path, monkeypatch)  # the URI comes from the job's environment

    markers = sorted((prefix / ".complete").glob("*.json"))
    steps = [json.loads(m.read_text())["step"] for m in markers]
    assert steps == [BATCHES * (epoch + 1) for epoch in range(EPOCHS)]
    resumed = resume_path(into=tmp_path)
    assert resumed == str(tmp_path / "last.ckpt")
    import torch

    state = torch.load(resumed, weights_only=False)
    assert state["global_step"] == BATCHES * EPOCHS


def test_without_a_checkpoint_uri_nothing_is_saved(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from bourse.lightning import resume_path

    monkeypatch.delenv("BOURSE_CHECKPOINT_URI", raising=False)

    assert fit(None, tmp_path, monkeypatch).saved == []
    assert resume_path() is None


def test_the_last_checkpoint_is_uploaded_once(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    callback = fit((tmp_path / "ck").as_uri() + "/", tmp_path, monkeypatch)

    assert len(callback.saved) == len(set(callback.saved)) == EPOCHS


def test_fit_resumes_from_the_newest_checkpoint_without_ckpt_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """A second ``trainer.fit(model, data)`` — no ``ckpt_path`` — continues where the first
    stopped: the callback hands Lightning the newest complete checkpoint."""
    prefix = tmp_path / "checkpoints"
    monkeypatch.setenv("BOURSE_CHECKPOINT_URI", prefix.as_uri() + "/")
    first = fit(None, tmp_path, monkeypatch)
    assert first.resumed_from is None  # nothing to resume the first time
    capsys.readouterr()

    second = fit(None, tmp_path, monkeypatch, epochs=EPOCHS + 2)

    assert second.resumed_from is not None
    assert "bourse: resuming from the newest complete checkpoint" in capsys.readouterr().out
    # it went on from step BATCHES * EPOCHS: two more epochs, not five from zero
    assert second.saved == [f"step-{BATCHES * (EPOCHS + 1):012d}",
                            f"step-{BATCHES * (EPOCHS + 2):012d}"]


def test_resume_false_starts_over_and_a_ckpt_path_given_to_fit_wins(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bourse.lightning import resume_path

    prefix = tmp_path / "checkpoints"
    monkeypatch.setenv("BOURSE_CHECKPOINT_URI", prefix.as_uri() + "/")
    fit(None, tmp_path, monkeypatch)  # steps 2, 4, 6

    fresh = fit(None, tmp_path, monkeypatch, resume=False)
    assert fresh.resumed_from is None
    assert fresh.saved[0].endswith(f"{BATCHES:012d}")  # from step 0 again

    explicit = resume_path(into=tmp_path)  # the script fetches it itself
    again = fit(None, tmp_path, monkeypatch, epochs=EPOCHS + 1, ckpt_path=explicit)
    assert again.resumed_from is None  # left to the script
    assert again.saved == [f"step-{BATCHES * (EPOCHS + 1):012d}"]
