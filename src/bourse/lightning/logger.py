"""``BourseLogger``: a Lightning ``Logger`` that writes through :mod:`bourse.track`.

Hyper-parameters become params (nested ones flattened, ``a/b``), metrics are logged at the
trainer's step, the model's module tree becomes the run's ``bourse.model_graph`` tag when the
trainer starts (``log_graph``), and with ``log_grad_norms=True`` each layer's gradient norm is
logged every ``every_n_steps`` optimizer steps (``grad_norm/<layer>``), read just after the
step: Lightning runs the backward inside ``optimizer.step`` (the closure), so that is where this
step's gradients are (clipped, as the optimizer used them).
"""

from __future__ import annotations

import weakref
from argparse import Namespace
from collections.abc import Mapping
from typing import Any

from lightning.pytorch.loggers.logger import Logger
from lightning.pytorch.utilities import rank_zero_only
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook

from bourse import track
from bourse.track.torchviews import grad_norms


def flat(params: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flat(value, name + "/"))
        else:
            out[name] = value
    return out


class BourseLogger(Logger):
    def __init__(self, *, log_grad_norms: bool = False, every_n_steps: int = 50,
                 log_model_graph: bool = True) -> None:
        super().__init__()
        if every_n_steps < 1:
            raise ValueError(f"every_n_steps must be at least 1, not {every_n_steps}")
        self._grads, self._every, self._graph = log_grad_norms, every_n_steps, log_model_graph
        self._hook: Any = None
        self._steps = 0

    @property
    def name(self) -> str:
        return "bourse"

    @property
    def version(self) -> str:
        return "0"

    @rank_zero_only
    def log_hyperparams(self, params: dict[str, Any] | Namespace, *args: Any,
                        **kwargs: Any) -> None:
        values = vars(params) if isinstance(params, Namespace) else dict(params)
        track.log(params=flat(values))

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        track.log({k: float(v) for k, v in metrics.items()}, step or 0)

    @rank_zero_only
    def log_graph(self, model: nn.Module, input_array: Any = None) -> None:
        if self._graph:
            track.log_model_graph(model)
        if self._grads and self._hook is None:
            self._watch(model)

    def _watch(self, model: nn.Module) -> None:
        ref = weakref.ref(model)

        def after_step(optimizer: Any, args: Any, kwargs: Any) -> None:
            watched = ref()
            if watched is not None and self._steps % self._every == 0:
                track.log(grad_norms(watched), self._steps)
            self._steps += 1

        self._hook = register_optimizer_step_post_hook(after_step)

    @rank_zero_only
    def finalize(self, status: str) -> None:
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        track.flush()
