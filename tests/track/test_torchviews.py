"""Per-layer gradient norms and the module tree, from a real (tiny) model; and BourseLogger in
a real Lightning run on CPU writing its track file."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from bourse.track.torchviews import grad_norms, model_graph  # noqa: E402


class Branchy(nn.Module):  # control flow on a value: torch.fx cannot trace it
    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x) if x.sum() > 0 else -self.inner(x)


def test_grad_norms_are_per_layer_l2_norms() -> None:
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    assert grad_norms(model) == {}  # no backward yet
    model(torch.randn(5, 3)).sum().backward()
    norms = grad_norms(model)
    first = model[0]
    expected = math.sqrt(float(first.weight.grad.norm()) ** 2 + float(first.bias.grad.norm()) ** 2)
    assert set(norms) == {"grad_norm/0", "grad_norm/2"}
    assert norms["grad_norm/0"] == pytest.approx(expected)


def test_the_graph_has_counts_shapes_and_ops_and_is_cut_to_fit() -> None:
    graph = json.loads(model_graph(nn.Sequential(nn.Linear(3, 4), nn.ReLU())))
    tree = graph["tree"]
    assert (tree["type"], tree["total"], graph["cut"]) == ("Sequential", 16, False)
    assert tree["children"][0]["shapes"] == {"weight": [4, 3], "bias": [4]}
    assert graph["ops"] == ["placeholder:input", "call_module:0", "call_module:1",
                            "output:output"]
    assert json.loads(model_graph(Branchy()))["ops"] is None  # does not trace: the tree only
    big = nn.Sequential(*[nn.Sequential(*[nn.Linear(2, 2) for _ in range(30)])
                          for _ in range(10)])
    text = model_graph(big)
    cut = json.loads(text)
    assert len(text) <= 8000 and cut["cut"] and cut["tree"]["total"] == 10 * 30 * 6


@pytest.mark.slow  # a real Lightning run: importing Lightning is most of it
def test_bourse_logger_in_a_lightning_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("lightning")
    from lightning.pytorch import LightningModule, Trainer

    from bourse import track
    from bourse.lightning import BourseLogger
    from bourse.protocol.track import TrackRecord
    from bourse.track.writer import Buffer, FileSink

    path = tmp_path / "track.jsonl"
    monkeypatch.setattr(track, "_buffer", Buffer(FileSink(path), flush_s=0))

    class Tiny(LightningModule):
        def __init__(self, lr: float = 0.1) -> None:
            super().__init__()
            self.save_hyperparameters()
            self.layer = nn.Linear(4, 1)

        def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], _: int) -> torch.Tensor:
            loss = nn.functional.mse_loss(self.layer(batch[0]), batch[1])
            self.log("train_loss", loss)
            return loss

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)

    data = torch.utils.data.TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
    Trainer(max_steps=6, logger=BourseLogger(log_grad_norms=True, every_n_steps=2),
            log_every_n_steps=1, enable_checkpointing=False, enable_progress_bar=False,
            enable_model_summary=False).fit(Tiny(), torch.utils.data.DataLoader(data, 4))
    lines = [TrackRecord.model_validate_json(line) for line in path.read_text().splitlines()]
    points = [p for r in lines for p in r.metrics]
    assert {k: v for r in lines for k, v in r.params.items()} == {"lr": "0.1"}
    assert sorted(s for k, _, s, _ in points if k == "train_loss") == list(range(6))
    assert sorted(s for k, _, s, _ in points if k == "grad_norm/layer") == [0, 2, 4]
    graph = json.loads(next(r.tags["bourse.model_graph"] for r in lines if r.tags))
    assert graph["tree"]["type"] == "Tiny" and graph["tree"]["total"] == 5
