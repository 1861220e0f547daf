"""Native tracking: ``bourse.track.log(metrics=..., step=..., params=..., tags=...)``.

Inside a bourse job the records go through the agent's spool into the job's run (nothing is
lost across disconnects or coordinator restarts); elsewhere to MLflow when
``MLFLOW_TRACKING_URI`` is set, else to ``./bourse-runs/`` (see :mod:`bourse.track.writer`).
Writes are buffered: :func:`flush` sends what waits (it is also sent every 2 s and at exit).
PyTorch helpers: :func:`grad_norms` (per-layer gradient norms, ``grad_norm/<layer>``) and
:func:`log_model_graph` (the module tree, the run's ``bourse.model_graph`` tag).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from bourse.track.torchviews import grad_norms, model_graph, module_tree
from bourse.track.writer import Buffer

if TYPE_CHECKING:
    from torch import nn

GRAPH_TAG = "bourse.model_graph"
_buffer = Buffer()


def log(metrics: Mapping[str, float] | None = None, step: int = 0, *,
        params: Mapping[str, Any] | None = None, tags: Mapping[str, Any] | None = None) -> None:
    """Metrics at ``step`` (MLflow's default: 0), params (written once) and tags."""
    _buffer.add(metrics or {}, step, params or {}, tags or {})


def log_metric(key: str, value: float, step: int = 0) -> None:
    log({key: value}, step)


def log_param(key: str, value: Any) -> None:
    log(params={key: value})


def set_tag(key: str, value: Any) -> None:
    log(tags={key: value})


def log_grad_norms(model: nn.Module, step: int) -> dict[str, float]:
    """Log :func:`grad_norms` of ``model`` at ``step`` (call it after ``backward``)."""
    norms = grad_norms(model)
    log(norms, step)
    return norms


def log_model_graph(model: nn.Module) -> None:
    set_tag(GRAPH_TAG, model_graph(model))


def flush() -> None:
    _buffer.flush()


__all__ = ["flush", "grad_norms", "log", "log_grad_norms", "log_metric", "log_model_graph",
           "log_param", "model_graph", "module_tree", "set_tag"]
