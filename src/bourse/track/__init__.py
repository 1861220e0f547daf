"""Native tracking: ``bourse.track.log(metrics=..., step=..., params=..., tags=...)``.

Inside a bourse job the records go through the agent's spool into the job's run (nothing is
lost across disconnects or coordinator restarts); elsewhere to MLflow when
``MLFLOW_TRACKING_URI`` is set, else to ``./bourse-runs/`` (see :mod:`bourse.track.writer`).
Writes are buffered: :func:`flush` sends what waits (it is also sent every 2 s and at exit).
PyTorch helpers: :func:`grad_norms` (per-layer gradient norms, ``grad_norm/<layer>``) and
:func:`log_model_graph` (the module tree, the run's ``bourse.model_graph`` tag);
:func:`import_tensorboard` logs the scalars of TensorBoard event files.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bourse.core.tfevents import event_files, scalars
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


__all__ = ["flush", "grad_norms", "import_tensorboard", "log", "log_grad_norms", "log_metric",
           "log_model_graph", "log_param", "model_graph", "module_tree", "set_tag"]


def import_tensorboard(logdir: str | os.PathLike[str], *, prefix: str = "") -> int:
    """Log the scalars of the TensorBoard event files under ``logdir`` (e.g. Lightning's
    ``lightning_logs/``) as metrics — tag as key (after ``prefix``), at their step and time;
    returns how many. Sub-directories of ``logdir`` become key prefixes (``version_0/``
    excepted), as TensorBoard names runs."""
    root, count = Path(logdir), 0
    for path in event_files(root):
        sub = path.parent.relative_to(root).as_posix()
        scope = "" if sub == "." or sub.startswith("version_") else sub + "/"
        for s in scalars(path.read_bytes()):
            _buffer.add({f"{prefix}{scope}{s.tag}": s.value}, s.step, {}, {},
                        timestamp=int(s.wall_time * 1000))
            count += 1
    flush()
    return count
