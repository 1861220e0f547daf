"""``BourseElastic``: burst a run to bigger (or smaller) compute when a rule on its own ETA holds.

``BourseElastic(to=Compute("a100:8", nodes=2), when="eta > 6h")`` estimates the time left
from the run's own step rate — steps done since the callback started watching (a restored
run's earlier steps do not count), over the wall time they took — and the steps the trainer
will take in all (``trainer.estimated_stepping_batches``: ``max_steps``, or ``max_epochs``
times the batches of an epoch). After ``warmup_steps`` it judges the rule every
``check_every_n_steps`` steps; when it holds, it fires once and bursts:

- in an exchange job (``BOURSE_JOB_ID`` set), by asking the coordinator to move its own job
  (``Client.burst`` with ``BOURSE_URL`` and ``BOURSE_BURST_TOKEN``, which every job is given:
  a token that may burst only its own job, ``server.services.burst_tokens``): the
  coordinator SIGTERMs it, ``BourseCheckpoint`` saves, and the job continues on ``to`` from
  that checkpoint;
- in a local run, by writing the hand-over request ``bourse burst --here`` writes
  (``sdk.handover``) and submitting the job itself once ``BourseCheckpoint`` has answered
  (``on_exception``; the run's folder becomes the job's code bundle).

``burst=`` replaces what firing does (a function of the callback and the trainer), for tests
and for scripts that decide otherwise.

The rules of a world-size change (docs/burst.md) are helpers here: ``per_device_batch``
keeps the global batch, ``scaled_lr`` scales a learning rate by the linear rule.
"""

from __future__ import annotations

import math
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import lightning as L

from bourse.core.compute import Compute
from bourse.core.errors import InvalidInput
from bourse.sdk import handover

UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}
_RULE = re.compile(r"^\s*(?P<what>[a-z_]+)\s*(?P<op>[<>])\s*(?P<value>\d+(?:\.\d+)?)"
                   r"\s*(?P<unit>[a-z]*)\s*$")


@dataclass(frozen=True)
class Rule:
    """``eta > 6h``: fire when the estimated time left is above (``>``) or below (``<``) it."""

    op: Literal[">", "<"]
    seconds: float

    def holds(self, eta_s: float) -> bool:
        return eta_s > self.seconds if self.op == ">" else eta_s < self.seconds

    def __str__(self) -> str:
        return f"eta {self.op} {self.seconds:g}s"


def parse_rule(text: str) -> Rule:
    """A rule as written: ``eta``, ``>`` or ``<``, a number and a unit (s, m, h)."""
    found = _RULE.match(text.lower())
    if found is None:
        raise InvalidInput(f"cannot read the rule {text!r}", field="when",
                           hint="write it as eta > 6h or eta < 30m (units s, m, h)")
    if found["what"] != "eta":
        raise InvalidInput(f"the rule {text!r} judges {found['what']!r}; only eta is known",
                           field="when", hint="write it as eta > 6h")
    unit = found["unit"]
    if unit not in UNITS:
        raise InvalidInput(f"the rule {text!r} needs a unit: s, m or h, not {unit or 'none'}",
                           field="when", hint="write it as eta > 6h")
    op: Literal[">", "<"] = ">" if found["op"] == ">" else "<"
    return Rule(op, float(found["value"]) * UNITS[unit])


@dataclass
class StepRate:
    """The run's own pace: steps since it started watching, over the time they took."""

    first_step: int
    first_time: float

    def eta_s(self, step: int, total: float, now: float) -> float | None:
        """Seconds left at this pace; None while no step was timed (or the total is
        unknown: an endless run has no ETA)."""
        done, elapsed = step - self.first_step, now - self.first_time
        if done <= 0 or elapsed <= 0 or not math.isfinite(total):
            return None
        return max(total - step, 0) * elapsed / done


Burst = Callable[["BourseElastic", L.Trainer], None]


class BourseElastic(L.Callback):
    """Burst the run to ``to`` once, when ``when`` holds of its ETA (module docstring)."""

    def __init__(self, to: Compute, when: str = "eta > 6h", *, warmup_steps: int = 20,
                 check_every_n_steps: int = 10, notice_s: float = 120.0,
                 burst: Burst | None = None, clock: Callable[[], float] = time.monotonic
                 ) -> None:
        super().__init__()
        if warmup_steps < 1 or check_every_n_steps < 1:
            raise InvalidInput("warmup_steps and check_every_n_steps must be at least 1",
                               field="warmup_steps")
        self.to, self.rule = to, parse_rule(when)
        self.warmup_steps, self.every = warmup_steps, check_every_n_steps
        self.notice_s, self.clock = notice_s, clock
        self.action: Burst = burst or burst_self
        self.fired_at_step: int | None = None
        self.eta_s: float | None = None
        self._rate: StepRate | None = None

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._rate = StepRate(trainer.global_step, self.clock())

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule,
                           outputs: Any, batch: Any, batch_idx: int) -> None:
        rate, step = self._rate, trainer.global_step
        if rate is None or self.fired_at_step is not None:
            return
        if step - rate.first_step < self.warmup_steps or step % self.every:
            return
        self.eta_s = rate.eta_s(step, float(trainer.estimated_stepping_batches), self.clock())
        if self.eta_s is not None and self.rule.holds(self.eta_s):
            self.fired_at_step = step
            print(f"bourse: {self.rule} holds (eta {self.eta_s / 3600:.2f} h at step {step}): "
                  f"bursting to {self.to.describe()}", flush=True)
            self.action(self, trainer)

    def state_dict(self) -> dict[str, Any]:
        return {"fired_at_step": self.fired_at_step}  # a resumed run does not fire again

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.fired_at_step = state_dict.get("fired_at_step")


def burst_self(callback: BourseElastic, trainer: L.Trainer) -> None:
    """Move this run to ``callback.to``: its own job through the coordinator, or a local run
    through the hand-over (``BourseCheckpoint`` saves, answers and exits)."""
    from bourse.sdk.client import Client  # the client only when firing

    job_id = os.environ.get("BOURSE_JOB_ID")
    reason = f"{callback.rule} (eta {(callback.eta_s or 0) / 3600:.2f} h)"
    if job_id:
        if trainer.is_global_zero:
            # the job's own burst token (``BOURSE_BURST_TOKEN``), else a token it was given
            with Client(token=os.environ.get("BOURSE_BURST_TOKEN") or None) as client:
                client.burst(job_id, callback.to, notice_s=callback.notice_s, reason=reason)
        return
    folder = handover.control_dir()
    handover.request(folder, callback.to, reason)
    callback_submits[str(folder)] = callback.to


# local runs whose BourseElastic fired: their folder -> the Compute the job is submitted with
# once BourseCheckpoint has answered (``submit_handed``)
callback_submits: dict[str, Compute] = {}


def submit_handed(folder: Path, handed: handover.Handed) -> None:
    """After a local run's checkpoint is saved: submit the job that goes on from it, when
    this process's own BourseElastic asked (``bourse burst --here`` submits otherwise)."""
    target = callback_submits.pop(str(folder), None)
    if target is None:
        return
    from bourse.sdk.bundle import pack
    from bourse.sdk.client import Client

    root = Path(handed.cwd)
    with Client() as client:
        bundle = pack(root, out=folder / "code.tar.gz")
        client.ensure_bundle(bundle.path, bundle.sha256)
        job = client.submit(handover.job_spec(handed, target, bundle.sha256))
    print(f"bourse: handed over to job {job.id} on {target.describe()}", file=sys.stderr,
          flush=True)


def per_device_batch(global_batch: int, world_size: int) -> int:
    """The batch each process loads so that the global batch stays ``global_batch`` on
    ``world_size`` processes (the default rule across a burst)."""
    if global_batch < 1 or world_size < 1:
        raise InvalidInput(f"global batch {global_batch} and world size {world_size} must be "
                           "positive", field="global_batch")
    if global_batch % world_size:
        raise InvalidInput(f"a global batch of {global_batch} does not split over "
                           f"{world_size} processes", field="global_batch",
                           hint=f"choose a multiple of {world_size}, or scale the learning "
                                "rate with scaled_lr and keep the per-device batch")
    return global_batch // world_size


def scaled_lr(base_lr: float, base_batch: int, batch: int) -> float:
    """The linear scaling rule (Goyal et al., 2017): a global batch k times larger takes a
    learning rate k times larger — for runs that keep the per-device batch instead."""
    if base_batch < 1 or batch < 1:
        raise InvalidInput("batch sizes must be positive", field="batch")
    return base_lr * batch / base_batch


__all__ = ["BourseElastic", "Rule", "StepRate", "parse_rule", "per_device_batch",
           "scaled_lr"]
