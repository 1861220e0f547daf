"""``BourseElastic``'s rule, ETA and world-size helpers (pure), and the callback in a real
Lightning trainer: it fires from a slow step rate, not from a fast one, and only once."""

from __future__ import annotations

from typing import Any

import pytest

from bourse.core.compute import Compute
from bourse.core.errors import InvalidInput
from bourse.lightning.elastic import (
    BourseElastic,
    StepRate,
    parse_rule,
    per_device_batch,
    scaled_lr,
)

pytestmark = pytest.mark.filterwarnings("ignore:.*LeafSpec.*")  # lightning 2.6 on torch 2.13


@pytest.mark.parametrize(("text", "op", "seconds"), [
    ("eta > 6h", ">", 21600.0), ("ETA<30m", "<", 1800.0), ("eta > 1.5h", ">", 5400.0),
    (" eta < 90 s ", "<", 90.0)])
def test_rules_as_written(text: str, op: str, seconds: float) -> None:
    rule = parse_rule(text)
    assert (rule.op, rule.seconds) == (op, seconds)


@pytest.mark.parametrize(("text", "says"), [
    ("", "cannot read"), ("eta >= 6h", "cannot read"), ("loss > 6h", "only eta"),
    ("eta > 6", "needs a unit"), ("eta > 6d", "not d"), ("eta > -1h", "cannot read")])
def test_bad_rules_say_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(InvalidInput, match=says) as caught:
        parse_rule(text)
    assert caught.value.field == "when" and "eta > 6h" in (caught.value.hint or "")


def test_the_eta_is_the_runs_own_pace_since_it_started_watching() -> None:
    rate = StepRate(first_step=100, first_time=10.0)  # resumed at step 100
    assert rate.eta_s(100, 1000, 10.0) is None  # nothing timed yet
    assert rate.eta_s(150, 1000, 20.0) == pytest.approx(850 * 10 / 50)
    assert rate.eta_s(150, float("inf"), 20.0) is None  # an endless run has no ETA
    assert rate.eta_s(1200, 1000, 20.0) == 0.0
    assert parse_rule("eta > 2m").holds(170.0) and not parse_rule("eta < 2m").holds(170.0)


def test_world_size_rules() -> None:
    assert per_device_batch(256, 1) == 256 and per_device_batch(256, 8) == 32
    with pytest.raises(InvalidInput, match="does not split over 3"):
        per_device_batch(256, 3)
    assert scaled_lr(0.1, 256, 2048) == pytest.approx(0.8)  # linear: 8x batch, 8x lr


def _fit(seconds_per_step: float, max_steps: int = 100) -> tuple[BourseElastic, list[int]]:
    import lightning as L
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    now = [0.0]
    fired: list[int] = []

    class Line(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.line = nn.Linear(2, 1)

        def training_step(self, batch: Any, _index: int) -> torch.Tensor:
            now[0] += seconds_per_step  # the step's time, on the callback's clock
            x, y = batch
            return nn.functional.mse_loss(self.line(x), y)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    elastic = BourseElastic(to=Compute(cpus=8, nodes=2), when="eta > 6h", warmup_steps=20,
                            check_every_n_steps=10, clock=lambda: now[0],
                            burst=lambda cb, trainer: fired.append(trainer.global_step))
    data = TensorDataset(torch.randn(40, 2), torch.randn(40, 1))
    trainer = L.Trainer(max_steps=max_steps, logger=False, enable_progress_bar=False,
                        enable_model_summary=False, enable_checkpointing=False,
                        callbacks=[elastic])
    trainer.fit(Line(), DataLoader(data, batch_size=4))
    return elastic, fired


def test_fires_once_from_a_slow_step_rate_and_never_from_a_fast_one() -> None:
    slow, fired = _fit(seconds_per_step=600.0)  # 80 steps left at 10 min: 13 h
    assert fired == [20] and slow.fired_at_step == 20
    assert slow.eta_s == pytest.approx(80 * 600.0)
    fast, none = _fit(seconds_per_step=1.0)  # 80 s left
    assert none == [] and fast.fired_at_step is None
    assert fast.eta_s is not None and fast.eta_s < 100
